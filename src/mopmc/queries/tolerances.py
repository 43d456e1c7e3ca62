"""The convex query's stopping settings, checked before anything is loaded (no heavy imports here:
the CLI checks its options with it before the model is built)."""

from __future__ import annotations

import math

from mopmc.errors import PropertyError


def check_tolerances(eps_rel: float, eps_abs: float, max_iter: int, names=("eps_rel", "eps_abs", "max_iter")) -> None:
    """A :class:`PropertyError` unless both tolerances are finite, >= 0 and not both 0, and
    ``max_iter >= 0``; ``names`` are how the message calls them (the CLI passes its options)."""
    check_eps_rel(eps_rel, names[0])
    check_eps_rel(eps_abs, names[1])
    if not (eps_rel > 0 or eps_abs > 0):
        raise PropertyError(f"{names[0]} and {names[1]} are both 0: give at least one positive tolerance")
    if max_iter < 0:
        raise PropertyError(f"{names[2]} must be >= 0, got {max_iter}")


def check_eps_rel(eps_rel: float, name: str = "--eps-rel") -> float:
    """One tolerance: finite and >= 0 (alone: the relative gap of ``mopmc table3`` and ``mopmc design
    sensitivity``, where the absolute one is the query's default)."""
    if not math.isfinite(eps_rel) or eps_rel < 0:
        raise PropertyError(f"{name} {eps_rel}: give a finite tolerance >= 0")
    return eps_rel
