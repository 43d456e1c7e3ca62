"""The oracle every multi-objective query calls: maximise ``w . x`` over achievable vectors ``x``.

Queries work in a *maximisation space*: ``y = sign * x`` with ``sign[i] = +1`` for objectives to
maximise and ``-1`` for objectives to minimise, so larger is better everywhere, every threshold is a
lower bound ``y_i >= q_i``, and the achievable set may be replaced by its downward closure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from mopmc.errors import InfiniteValueError, PropertyError

RANGE_FLOOR = 1e-6
"""Smallest range :meth:`Space.relative` measures an objective in, relative to the largest one."""


@dataclass(frozen=True)
class Vertex:
    """One oracle answer: ``point`` in original units; ``error`` bounds ``w . point`` below the
    true optimum (0 for exact engines); ``scheduler`` is whatever the engine returns."""

    point: np.ndarray
    error: float = 0.0
    scheduler: Any = None


class Oracle(Protocol):
    def __call__(self, weights: np.ndarray) -> Vertex:  # weights in original units: maximise weights . x
        ...


@dataclass(frozen=True)
class Space:
    """Signs and thresholds of a ``multi(...)`` property in maximisation space."""

    sign: np.ndarray  # +1 max, -1 min
    lower: np.ndarray  # y_i >= lower_i; -inf where unconstrained
    query: np.ndarray  # boolean: objectives asked with =?
    # y = sign * scale * x; ``None``: 1. A relative precision (``reldiff``) measures each objective
    # in units of its range: scale = 1 / range (:meth:`relative`)
    scale: np.ndarray | None = None

    @classmethod
    def of(cls, objectives: Sequence) -> "Space":
        sign = np.array([1.0 if o.sense == "max" else -1.0 for o in objectives])
        lower = np.full(len(objectives), -np.inf)
        for i, o in enumerate(objectives):
            if o.threshold is None:
                continue
            upper_bound = o.comparison.startswith("<")
            if upper_bound != (o.sense == "min"):
                raise PropertyError(
                    f"{o.text}: a {o.comparison} bound on a {o.sense}imised objective is not supported in multi(...)"
                )
            value = o.threshold
            if getattr(o, "negated", False):
                pass  # thresholds of G are on the G value itself; the oracle reports G values
            lower[i] = sign[i] * value
        return cls(sign, lower, np.array([o.is_query for o in objectives]))

    @property
    def factor(self) -> np.ndarray:
        """``y = factor * x``; also the original-units weights of a direction ``w`` are ``w * factor``."""
        return self.sign if self.scale is None else self.sign * self.scale

    def to_y(self, x: np.ndarray) -> np.ndarray:
        return self.factor * np.asarray(x, dtype=float)

    def to_x(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=float) / self.factor

    def relative(self, Y: np.ndarray) -> "Space":
        """This space measured in units of each objective's range over the points ``Y`` (rows, in
        this space's units): Storm's ``reldiff`` precision (relative to the difference between the
        largest and the smallest value). A range below ``RANGE_FLOOR`` times the largest one counts
        as that much (a constant objective, or one that varies by rounding only); all ranges 0 (a
        single point): 1."""
        r = np.ptp(np.asarray(Y, dtype=float).reshape(-1, len(self.sign)), axis=0)
        big = float(r.max()) if r.size else 0.0
        r = np.maximum(r, RANGE_FLOOR * big) if big > 0 else np.ones_like(self.sign)
        base = np.ones_like(self.sign) if self.scale is None else self.scale
        return replace(self, scale=base / r, lower=self.lower / r)


def y_oracle(oracle: Oracle, space: Space) -> Callable[[np.ndarray], tuple[np.ndarray, float, Any]]:
    """The oracle in maximisation space: ``w_y -> (y, error, scheduler)``."""

    def call(w: np.ndarray):
        v = oracle(np.asarray(w, dtype=float) * space.factor)
        return space.to_y(v.point), float(v.error), v.scheduler

    many = getattr(oracle, "many", None)
    if many is not None:  # (several directions at once, the same answers: the CPU engine)
        call.many = lambda W: [(space.to_y(v.point), float(v.error), v.scheduler)
                               for v in many(np.asarray(W, dtype=float) * space.factor)]
    return call


def answers_at_once(call, W) -> list:
    """``[call(w) for w in W]`` in one batch where ``call`` has ``many`` (the CPU engine's oracle,
    or :func:`y_oracle` over it: the same answers in fewer passes), else ``[]``; also ``[]`` when
    some direction is infinite, so that the caller's calls one by one raise the error naming it."""
    many = getattr(call, "many", None)
    if many is None:
        return []
    try:
        return many(np.array(W))
    except InfiniteValueError:
        return []


def lp_oracle(model, objectives) -> Oracle:
    """The exact LP engine as an oracle (occupation polytope built once)."""
    from mopmc.engine.lp import lp_optimise
    from mopmc.engine.lp_product import occupation_polytope

    poly = occupation_polytope(model, objectives)

    def call(weights: np.ndarray) -> Vertex:
        res = lp_optimise(model, objectives, weights, polytope=poly)
        return Vertex(np.asarray(res.point, dtype=float), 0.0, res.x)

    return call
