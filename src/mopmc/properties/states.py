"""State formulas (``"goal" & !(x = 3)``) evaluated to boolean state masks.

stormpy does not expose the operands of Boolean state formulas, so we read Storm's printed form:
quoted labels, ``true``/``false``, ``!``, ``&``, ``|`` and parentheses. Atomic expressions such as
``(x = 3)`` are labels that Storm's builder adds, named by their printed text, when the model is
built together with the properties (as :func:`mopmc.io.load.load` does).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

import numpy as np

from mopmc.errors import UnknownNameError


def _split_top(s: str, op: str) -> list[str] | None:
    depth, quoted, parts, last = 0, False, [], 0
    for i, ch in enumerate(s):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == op and depth == 0:
            parts.append(s[last:i])
            last = i + 1
    if not parts:
        return None
    parts.append(s[last:])
    return parts


def _closing(s: str, start: int) -> int:
    depth, quoted = 0, False
    for i in range(start, len(s)):
        ch = s[i]
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _eval(s: str, lookup: Callable[[str], np.ndarray | None], n: int) -> np.ndarray:
    s = s.strip()
    direct = lookup(s)
    if direct is not None:
        return direct
    if s == "true":
        return np.ones(n, dtype=bool)
    if s == "false":
        return np.zeros(n, dtype=bool)
    for op, combine in (("|", np.logical_or), ("&", np.logical_and)):
        parts = _split_top(s, op)
        if parts:
            out = _eval(parts[0], lookup, n)
            for p in parts[1:]:
                out = combine(out, _eval(p, lookup, n))
            return out
    if s.startswith("!"):
        return ~_eval(s[1:], lookup, n)
    if s.startswith("(") and _closing(s, 0) == len(s) - 1:
        return _eval(s[1:-1], lookup, n)
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"' and '"' not in s[1:-1]:
        name = s[1:-1]
        found = lookup(name)
        if found is None:
            raise UnknownNameError(f"unknown label {name!r}")
        return found
    raise UnknownNameError(f"unknown label or expression {s!r}")


def state_mask(formula, labels: Mapping[str, np.ndarray], n_states: int) -> np.ndarray:
    """Evaluate a state formula (Storm formula object or its printed text) to a boolean mask.

    >>> import numpy as np
    >>> state_mask('"a" & !"b"', {"a": np.array([1, 1, 0], bool), "b": np.array([0, 1, 0], bool)}, 3)
    array([ True, False, False])
    """
    text = formula if isinstance(formula, str) else str(formula)

    def lookup(name: str):
        mask = labels.get(name)
        return None if mask is None else np.asarray(mask, dtype=bool)

    try:
        return _eval(text, lookup, n_states)
    except UnknownNameError as exc:
        known = ", ".join(sorted(f'"{k}"' for k in labels)) or "(none)"
        raise UnknownNameError(f"{exc} in state formula {text}; the model has labels: {known}") from None


def label_names(formula) -> list[str]:
    """The quoted label names a state formula refers to (atomic expressions excluded)."""
    text = formula if isinstance(formula, str) else str(formula)
    text = re.sub(r'\{"[^"]*"\}', "", text)  # reward-model names (R{"r"}, Urew{"r"}) are not labels
    names, i = [], 0
    while True:
        i = text.find('"', i)
        if i < 0:
            return names
        j = text.find('"', i + 1)
        if j < 0:
            return names
        names.append(text[i + 1 : j])
        i = j + 1


def atomic_expressions(formula) -> list[str]:
    """The atomic expressions of a state formula as :func:`state_mask` meets them: the maximal parts
    without quoted labels (``(x = 4)`` of ``"goal" & (x = 4)``), which a model built together with
    the properties has as labels named by that text.

    >>> atomic_expressions('("goal" & (x = 4)) | !(y < 2)')
    ['(x = 4)', '!(y < 2)']
    """
    out: list[str] = []

    def walk(s: str) -> None:
        s = s.strip()
        if not s or s in ("true", "false"):
            return
        if '"' not in s:
            out.append(s)
            return
        for op in ("|", "&"):
            parts = _split_top(s, op)
            if parts:
                for part in parts:
                    walk(part)
                return
        if s.startswith("!"):
            walk(s[1:])
        elif s.startswith("(") and _closing(s, 0) == len(s) - 1:
            walk(s[1:-1])

    walk(formula if isinstance(formula, str) else str(formula))
    return out
