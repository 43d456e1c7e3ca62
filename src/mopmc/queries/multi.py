"""Achievability, numerical and Pareto queries (Forejt, Kwiatkowska, Parker 2012) over an oracle.

Every answer is certified: lower bounds come from the inner polytope (convex combinations of
deterministic schedulers' vectors), upper bounds from the outer polytope (supporting halfspaces).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mopmc.queries.approximation import Approximation, start
from mopmc.queries.oracle import Oracle, Space, y_oracle

DEFAULT_PRECISION = 1e-4


@dataclass(frozen=True)
class Witness:
    """Vertices (original units) and convex weights whose mixture meets every threshold."""

    points: list
    weights: list
    schedulers: list = field(default_factory=list)


@dataclass(frozen=True)
class MultiResult:
    kind: str
    objectives: Sequence
    precision: float
    iterations: int
    achievable: bool | None = None
    margin: float | None = None
    margin_upper: float | None = None
    near_boundary: bool = False
    value: float | None = None
    lower: float | None = None
    upper: float | None = None
    status: str = "optimal"
    points: list = field(default_factory=list)
    halfspaces: list = field(default_factory=list)
    witness: Witness | None = None
    certificate: dict | None = None
    schedulers: list = field(default_factory=list)

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "kind": self.kind,
            "objectives": [o.to_json() for o in self.objectives],
            "precision": self.precision,
            "iterations": self.iterations,
            "status": self.status,
        }
        if self.kind == "achievability":
            out.update(achievable=self.achievable, margin=self.margin, margin_upper=self.margin_upper,
                       near_boundary=self.near_boundary)
        if self.kind == "numerical":
            out.update(value=self.value, lower=self.lower, upper=self.upper)
        if self.kind == "pareto":
            out.update(points=self.points, halfspaces=self.halfspaces)
        if self.witness is not None:
            out["witness"] = {"points": self.witness.points, "weights": self.witness.weights}
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return out


def _refine(approx: Approximation, call, c, d, a, lower, precision, max_iter):
    """Maximise c.y + d t over the achievable set with y_j - a_j t >= lower_j.

    Returns (inner, outer, iterations): inner = (value, lambdas, t) or None, outer likewise."""
    it = 0
    while True:
        outer = approx.outer_max(c, d, a, lower)
        inner = approx.inner_max(c, d, a, lower)
        if outer is None:
            return inner, outer, it
        if inner is not None and outer[0] - inner[0] <= precision:
            return inner, outer, it
        if it >= max_iter:
            return inner, outer, it
        w, gap = approx.separating_direction(outer[1])
        y, err, sched = call(w)
        new = approx.add(w, y, err, sched)
        it += 1
        if not new and w @ outer[1] <= w @ y + err + 1e-12:
            # the oracle confirms the outer point: nothing left to refine in this direction
            return approx.inner_max(c, d, a, lower), approx.outer_max(c, d, a, lower), it


def _certificate(approx: Approximation, space: Space) -> dict:
    """A direction w >= 0 whose optimum cannot reach the thresholds: w.q > max w.y."""
    W, b = approx.H
    q = np.where(np.isfinite(space.lower), space.lower, 0.0)
    from scipy.optimize import linprog

    k = len(b)
    # minimise sum mu_h b_h - (sum mu_h W_h).q over the simplex, restricted to constrained coordinates
    fin = np.isfinite(space.lower)
    cost = b - W[:, fin] @ q[fin]
    res = linprog(cost, A_eq=np.ones((1, k)), b_eq=[1.0], bounds=[(0, None)] * k, method="highs")
    mu = res.x
    w = mu @ W
    return {"direction": (w * space.sign).tolist(), "bound": float(mu @ b), "required": float(w[fin] @ q[fin])}


def achievability(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION, max_iter: int = 200) -> MultiResult:
    space = Space.of(objectives)
    call = y_oracle(oracle, space)
    m = len(objectives)
    approx = start(call, m)
    fin = np.isfinite(space.lower)
    inner, outer, it = _refine(approx, call, np.zeros(m), 1.0, fin.astype(float), space.lower, precision, max_iter)
    margin = inner[0] if inner is not None else -np.inf
    upper = outer[0] if outer is not None else -np.inf
    achievable = bool(margin >= -precision) if inner is not None else bool(upper >= -precision)
    witness = certificate = None
    if inner is not None and achievable:
        lam = inner[1]
        keep = np.flatnonzero(lam > 1e-12)
        witness = Witness([space.to_x(approx.V[i]).tolist() for i in keep], [float(lam[i]) for i in keep],
                          [approx.schedulers[i] for i in keep])
    if not achievable:
        certificate = _certificate(approx, space)
    return MultiResult(
        "achievability", tuple(objectives), precision, it + m, achievable=achievable,
        margin=float(margin), margin_upper=float(upper), near_boundary=bool(abs(margin) <= precision),
        witness=witness, certificate=certificate,
        points=[space.to_x(v).tolist() for v in approx.vertices],
    )


def numerical(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION, max_iter: int = 200) -> MultiResult:
    space = Space.of(objectives)
    call = y_oracle(oracle, space)
    m = len(objectives)
    k = int(np.flatnonzero(space.query)[0])
    approx = start(call, m)
    c = np.zeros(m)
    c[k] = 1.0
    lower = space.lower.copy()
    inner, outer, it = _refine(approx, call, c, 0.0, np.zeros(m), lower, precision, max_iter)
    if outer is None or inner is None and outer is None:
        return MultiResult("numerical", tuple(objectives), precision, it + m, status="infeasible",
                           certificate=_certificate(approx, space))
    if inner is None:
        # thresholds not met by the inner polytope yet and the gap could not be closed
        return MultiResult("numerical", tuple(objectives), precision, it + m, status="infeasible",
                           upper=float(space.sign[k] * outer[0]), certificate=_certificate(approx, space))
    lo_y, hi_y = inner[0], outer[0]
    s = space.sign[k]
    lo, hi = (lo_y, hi_y) if s > 0 else (-hi_y, -lo_y)
    lam = inner[1]
    keep = np.flatnonzero(lam > 1e-12)
    witness = Witness([space.to_x(approx.V[i]).tolist() for i in keep], [float(lam[i]) for i in keep],
                      [approx.schedulers[i] for i in keep])
    return MultiResult("numerical", tuple(objectives), precision, it + m, value=float(s * lo_y), lower=float(lo),
                       upper=float(hi), witness=witness, status="optimal" if hi - lo <= precision else "iteration_limit")


def pareto(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION, max_iter: int = 500,
           exhaustive: bool = False) -> MultiResult:
    """Vertices of the Pareto front until every outer vertex lies within ``precision`` of the inner
    polytope (``exhaustive``: until no direction yields a new vertex)."""
    from scipy.spatial import HalfspaceIntersection

    space = Space.of(objectives)
    call = y_oracle(oracle, space)
    m = len(objectives)
    approx = start(call, m)
    it = 0
    tol = 0.0 if exhaustive else precision
    while it < max_iter:
        V = approx.V
        W, b = approx.H
        lo = np.where(np.isfinite(space.lower), np.maximum(space.lower, V.min(axis=0) - 1.0), V.min(axis=0) - 1.0)
        halfspaces = np.vstack([np.hstack([W, -b[:, None]]), np.hstack([-np.eye(m), lo[:, None]])])
        interior = _chebyshev(halfspaces)
        if interior is None:
            break
        try:
            corners = HalfspaceIntersection(halfspaces, interior).intersections
        except Exception:
            break
        worst, worst_w = tol, None
        for corner in corners:
            w, gap = approx.separating_direction(corner)
            if gap > worst + 1e-12:
                worst, worst_w = gap, w
        if worst_w is None:
            break
        y, err, sched = call(worst_w)
        new = approx.add(worst_w, y, err, sched)
        it += 1
        if not new and exhaustive:
            # same vertex again: the facet is exact; stop once every corner is confirmed
            if all(approx.separating_direction(c)[1] <= 1e-9 or _confirmed(approx, c) for c in corners):
                break
    W, b = approx.H
    pts = _pareto_filter(approx.V)
    return MultiResult(
        "pareto", tuple(objectives), precision, it + m,
        points=[space.to_x(v).tolist() for v in pts],
        halfspaces=[{"normal": (w * space.sign).tolist(), "offset": float(o)} for w, o in zip(W, b)],
        schedulers=[approx.schedulers[i] for i in range(len(approx.vertices))],
    )


def _confirmed(approx: Approximation, corner: np.ndarray) -> bool:
    return False


def _chebyshev(halfspaces: np.ndarray):
    from scipy.optimize import linprog

    A, b = halfspaces[:, :-1], -halfspaces[:, -1]
    norm = np.linalg.norm(A, axis=1)
    m = A.shape[1]
    res = linprog(np.append(np.zeros(m), -1.0), A_ub=np.hstack([A, norm[:, None]]), b_ub=b,
                  bounds=[(None, None)] * m + [(0, None)], method="highs")
    if res.status != 0 or res.x[m] <= 1e-12:
        return None
    return res.x[:m]


def _pareto_filter(V: np.ndarray) -> np.ndarray:
    keep = []
    for i, v in enumerate(V):
        dominated = any(np.all(u >= v) and np.any(u > v + 1e-12) for j, u in enumerate(V) if j != i)
        if not dominated:
            keep.append(i)
    return V[keep]
