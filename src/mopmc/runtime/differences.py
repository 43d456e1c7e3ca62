"""Name what differs between two JSON documents: the settings of a resumed sweep or training run
against the ones its folder was started with.

>>> differences({"env": {"duration": 6.0}, "seed": 1}, {"env": {"duration": 8.0}, "seed": 1})
'env.duration (folder 6.0, now 8.0)'
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _paths(before: Any, now: Any, prefix: str) -> list[tuple[str, Any, Any]]:
    """Dotted key paths where two JSON values differ, with both values (missing: None)."""
    if isinstance(before, dict) and isinstance(now, dict):
        out = []
        for key in sorted(set(before) | set(now)):
            out += _paths(before.get(key), now.get(key), f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(before, list) and isinstance(now, list) and len(before) == len(now):
        out = []
        for i, (a, b) in enumerate(zip(before, now)):
            out += _paths(a, b, f"{prefix}[{i}]")
        return out
    return [] if before == now else [(prefix, before, now)]


def differences(before: Any, now: Any, *, ignore: Collection[str] = (), limit: int = 4) -> str:
    """``env.duration (folder 6.0, now 8.0), ...``: the key paths where ``before`` (the folder's)
    and ``now`` differ, at most ``limit`` of them and how many more; top-level keys in ``ignore``
    are left out. Empty when nothing differs."""
    found = [f for f in _paths(before, now, "") if f[0].split(".")[0].split("[")[0] not in ignore]
    shown = [f"{path} (folder {_short(a)}, now {_short(b)})" for path, a, b in found[:limit]]
    if len(found) > limit:
        shown.append(f"{len(found) - limit} more")
    return ", ".join(shown)
