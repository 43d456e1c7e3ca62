"""What every command shares: constant parsing, JSON output, and turning errors into one line."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Callable

from mopmc.errors import ConstantError, MopmcError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_consts(specs: list[str] | None) -> dict[str, str]:
    """Parse repeated ``--const NAME=VALUE[,NAME=VALUE...]``; a name given twice is an error.

    >>> parse_consts(["N=3,p=0.5", "K=1"])
    {'N': '3', 'p': '0.5', 'K': '1'}
    """
    out: dict[str, str] = {}
    for spec in specs or []:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not _NAME.match(name) or not value:
                raise ConstantError(f"--const {part!r}: expected NAME=VALUE, e.g. --const N=3")
            if name in out:
                raise ConstantError(f"--const: constant {name!r} is given twice ({out[name]} and {value})")
            out[name] = value
    return out


def ray_option(value: str | None) -> str | None:
    """Typer callback of the ``--ray ADDRESS`` options: an address that does not parse, or where
    nothing listens, is refused while the arguments are parsed (one line, exit 2), before the
    command starts or creates its output folder (:func:`mopmc.runtime.ray_adapter.check_address`)."""
    if value is not None:
        from mopmc.runtime.ray_adapter import check_address

        check_address(value)
    return value


def _clean(obj: Any) -> Any:
    """Replace NaN by None and infinities by strings, so the JSON is strict."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _clean(obj.tolist())
    return obj


def load_timings(loaded) -> dict:
    """A loaded model's seconds for the JSON ``timings``: ``load`` (all of it), and within it
    ``build`` (the builder; not for UMB files)."""
    return {"load": loaded.seconds, **{k: loaded.timings[k] for k in ("build",) if k in loaded.timings}}


def print_json(obj: Any) -> None:
    """Print strict JSON (no NaN) on stdout."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 2) -> None:
    """Print one line on stderr and exit."""
    sys.stderr.write("error: " + " ".join(str(message).split()) + "\n")
    sys.stderr.flush()
    raise SystemExit(code)


def run_cli(fn: Callable[[], Any]) -> Any:
    """Run a command body; MopmcErrors become one stderr line and their exit code (2)."""
    try:
        return fn()
    except MopmcError as exc:
        fail(exc.one_line(), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)
