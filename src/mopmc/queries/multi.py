"""Achievability, numerical and Pareto queries (Forejt, Kwiatkowska, Parker 2012) over an oracle.

Every answer is certified: lower bounds come from the inner polytope (convex combinations of
deterministic schedulers' vectors), upper bounds from the outer polytope (supporting halfspaces).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from mopmc.queries import highs_lp
from mopmc.queries.approximation import Approximation, start, unit_answers
from mopmc.queries.oracle import Oracle, Space, y_oracle

DEFAULT_PRECISION = 1e-4
PRECISION_TYPES = ("abs", "reldiff")
"""How a multi-objective ``precision`` is measured (Storm's names): ``abs``, in each objective's
units; ``reldiff``, in units of each objective's range (the largest minus the smallest value the
unit directions find): 1e-3 then asks every objective to 0.1% of its span, whatever its scale."""

MAX_ITER = {"achievability": 200, "numerical": 200, "pareto": 500}
"""Default ``max_iter`` (oracle calls after the first ones) of each query kind."""

Progress = Callable[[int, float], None]
"""``progress(calls, gap)``: oracle calls so far (after the first ones) and the gap still to close,
in the units of the precision (:func:`pareto`)."""


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
    # Pareto with thresholds: each point of ``points`` is a mixture of deterministic vertices
    mixtures: list = field(default_factory=list)  # per point: [(weight, index into vertices), ...]
    vertices: list = field(default_factory=list)  # the deterministic vertices found (original units)
    vertex_schedulers: list = field(default_factory=list)
    note: str | None = None  # e.g. answered by the exact LP instead of the engine asked for
    precision_type: str = "abs"
    # reldiff: the precision per objective in its own units (precision * its range); margins and
    # slacks are then in range units
    tolerances: list | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "kind": self.kind,
            "objectives": [o.to_json() for o in self.objectives],
            "precision": self.precision,
            "precision_type": self.precision_type,
            "iterations": self.iterations,
            "status": self.status,
        }
        if self.kind == "achievability":
            out.update(achievable=self.achievable, margin=self.margin, margin_upper=self.margin_upper,
                       near_boundary=self.near_boundary)
        if self.kind == "numerical":
            out.update(value=self.value, lower=self.lower, upper=self.upper)
            if self.value is not None:
                out["near_boundary"] = self.near_boundary
        if self.kind == "pareto":
            out.update(points=self.points, halfspaces=self.halfspaces)
            if self.mixtures:
                out["vertices"] = self.vertices
                out["mixtures"] = [{"vertices": [i for _, i in mix], "weights": [w for w, _ in mix]}
                                   for mix in self.mixtures]
        if self.witness is not None:
            out["witness"] = {"points": self.witness.points, "weights": self.witness.weights}
        if self.certificate is not None:
            out["certificate"] = self.certificate
        if self.tolerances is not None:
            out["tolerances"] = self.tolerances
        if self.note:
            out["note"] = self.note
        return out


def _begin(oracle: Oracle, objectives, precision_type: str, units: bool = True):
    """``(space, call, approx)`` of a query: its maximisation space, the oracle in it, and the
    approximation of the unit directions' answers (``units``; else ``None``). ``reldiff``
    measures the space in units of each objective's range over those answers (so it needs them)."""
    if precision_type not in PRECISION_TYPES:
        raise ValueError(f"precision_type {precision_type!r}: expected one of {', '.join(PRECISION_TYPES)}")
    space = Space.of(objectives)
    call = y_oracle(oracle, space)
    m = len(objectives)
    if precision_type == "abs":
        return space, call, start(call, m) if units else None
    answers = unit_answers(call, m)
    space = space.relative(np.array([y for y, _, _ in answers]))
    s = space.scale
    # the same answers in the new units: direction e_j's value y_j and error scale by s_j
    answers = [(y * s, err * s[j], sched) for j, (y, err, sched) in enumerate(answers)]
    call = y_oracle(oracle, space)
    return space, call, start(call, m, answers)


def _stamp(res: "MultiResult", space: Space, precision_type: str) -> "MultiResult":
    """``res`` with its precision type and, for ``reldiff``, its precision per objective."""
    if precision_type == "abs":
        return res
    return replace(res, precision_type=precision_type,
                   tolerances=(res.precision / space.scale).tolist())


def _to_x(w: np.ndarray, space: Space) -> tuple[np.ndarray, float]:
    """A direction ``w`` of the maximisation space in original units, scaled to sum 1 in absolute
    value (as it is already with the absolute precision), and the factor it was divided by (which
    divides the bounds that go with it)."""
    normal = w * space.factor
    norm = float(np.abs(normal).sum()) or 1.0
    return normal / norm, norm


def _halfspace(w: np.ndarray, offset: float, space: Space) -> dict:
    """``w . y <= offset`` (maximisation space) in original units (:func:`_to_x`)."""
    normal, norm = _to_x(w, space)
    return {"normal": normal.tolist(), "offset": float(offset) / norm}


def _refine(approx: Approximation, call, c, d, a, lower, precision, max_iter, decide=None, progress=None):
    """Maximise c.y + d t over the achievable set with y_j - a_j t >= lower_j.

    ``decide`` (a number): stop as soon as the inner value reaches it or the outer value falls
    below ``-decide`` (achievability: the verdict is then certain, the value need not be tight).
    ``progress``: called as ``progress(calls, gap)`` before each oracle call (see :func:`pareto`).
    Returns (inner, outer, iterations): inner = (value, lambdas, t) or None, outer likewise."""
    it = 0
    while True:
        inner = approx.inner_max(c, d, a, lower)
        if decide is not None and inner is not None and inner[0] >= decide:
            return inner, approx.outer_max(c, d, a, lower), it
        outer = approx.outer_max(c, d, a, lower)
        if outer is None:
            return inner, outer, it
        if decide is not None and outer[0] < -decide:
            return inner, outer, it
        if inner is not None and outer[0] - inner[0] <= precision:
            return inner, outer, it
        if it >= max_iter:
            return inner, outer, it
        if progress is not None:
            progress(it, outer[0] - inner[0] if inner is not None else np.inf)
        w, gap = approx.separating_direction(outer[1])
        y, err, sched = call(w)
        new = approx.add(w, y, err, sched)
        it += 1
        if not new and w @ outer[1] <= w @ y + err + 1e-12:
            # the oracle confirms the outer point: nothing left to refine in this direction
            return approx.inner_max(c, d, a, lower), approx.outer_max(c, d, a, lower), it


def _certificate(approx: Approximation, space: Space) -> dict | None:
    """A direction w >= 0 whose optimum cannot reach the thresholds: w.q > max w.y, with no
    weight on the objectives without a threshold (those are free in the threshold set, so a
    direction weighing them separates nothing). By Farkas' lemma such a w is a convex
    combination mu of the outer halfspaces whenever the outer polytope misses the thresholds:
    minimise mu.b - (mu W).q over the simplex with (mu W)_j = 0 for every free j. ``None`` when
    the halfspaces found hold no separating combination (the thresholds were missed only within
    the oracle's error)."""
    W, b = approx.H
    fin = np.isfinite(space.lower)
    q = np.where(fin, space.lower, 0.0)
    k = len(b)
    cost = b - W[:, fin] @ q[fin]
    A_eq = np.vstack([np.ones((1, k)), W[:, ~fin].T])
    b_eq = np.zeros(len(A_eq))
    b_eq[0] = 1.0
    res = highs_lp.linprog(cost, A_eq=A_eq, b_eq=b_eq, bounds=[(0, None)] * k)
    if res.status != 0 or res.fun >= 0:
        return None
    mu = res.x
    w = mu @ W
    w[~fin] = 0.0  # (zero up to the LP's tolerance: exactly, as the certificate claims)
    direction, norm = _to_x(w, space)
    return {"direction": direction.tolist(), "bound": float(mu @ b) / norm, "required": float(w[fin] @ q[fin]) / norm}


def _witness(approx: Approximation, space: Space, lam: np.ndarray) -> Witness:
    """The mixture of the inner polytope's vertices with weights ``lam`` (original units)."""
    keep = np.flatnonzero(lam > 1e-12)
    return Witness([space.to_x(approx.V[i]).tolist() for i in keep], [float(lam[i]) for i in keep],
                   [approx.schedulers[i] for i in keep])


def _unmet(approx: Approximation, space: Space, it: int, max_iter: int) -> tuple[str, dict | None]:
    """The status of a query whose thresholds no point found meets, and its certificate:
    ``infeasible`` where the halfspaces prove it, else ``iteration_limit`` or ``stalled`` (the
    outer polytope still meets them, within the oracle's error)."""
    certificate = _certificate(approx, space)
    status = "infeasible" if certificate is not None else "iteration_limit" if it >= max_iter else "stalled"
    return status, certificate


def achievability(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION,
                  max_iter: int = MAX_ITER["achievability"], tight: bool = False, precision_type: str = "abs",
                  progress: Progress | None = None) -> MultiResult:
    """Is there a scheduler meeting every threshold? ``margin`` and ``margin_upper`` bound the
    best smallest slack t* (maximisation space) from below and above.

    By default the search stops once the verdict is certain and clear of the boundary: the inner
    polytope meets the thresholds with slack >= ``precision`` (achievable) or the outer one misses
    them by more (not achievable); otherwise, and always with ``tight``, it refines until
    ``margin_upper - margin <= precision``. When every objective has a threshold the search starts
    from the single direction (1, ..., 1)/m, which already bounds t; otherwise (and with
    ``precision_type="reldiff"``, which measures slacks in units of each objective's range) from
    the unit directions. ``progress``: as in :func:`pareto` (the gap: between the bounds of the
    smallest slack)."""
    m = len(objectives)
    units = precision_type != "abs" or not np.isfinite(Space.of(objectives).lower).all()
    space, call, approx = _begin(oracle, objectives, precision_type, units=units)
    fin = np.isfinite(space.lower)
    if not units:
        approx = Approximation(m)
        w0 = np.full(m, 1.0 / m)
        y0, err0, sched0 = call(w0)
        approx.add(w0, y0, err0, sched0)
    decide = None if tight else precision
    inner, outer, it = _refine(approx, call, np.zeros(m), 1.0, fin.astype(float), space.lower, precision, max_iter,
                               decide=decide, progress=progress)
    it += m if units else 1
    margin = inner[0] if inner is not None else -np.inf
    upper = outer[0] if outer is not None else -np.inf
    # within the precision of the thresholds the verdict is "achievable" (Storm's approximate
    # semantics), unless the outer bound proves the thresholds missed: a certified negative
    # margin_upper is "not achievable" however small (a witness would miss the thresholds)
    achievable = bool(upper >= 0 and (inner is None or margin >= -precision))
    witness = certificate = None
    if inner is not None and achievable:
        witness = _witness(approx, space, inner[1])
    near = bool(abs(margin) <= precision)
    strict = _strict(objectives)
    if achievable and strict.any():  # ">" and "<": the strict thresholds need a positive slack
        t_in, lam, t_out = _strict_slack(approx, space, strict)
        tol = _numeric_tolerance(approx)
        if t_out is None or t_out <= tol:  # certified: no point meets them strictly
            achievable, witness, near = False, None, True
        elif t_in is not None and t_in > tol:  # a witness that meets them strictly
            witness = _witness(approx, space, lam)
        else:  # met strictly only within the precision (Storm's approximate semantics)
            near = True
    if not achievable:
        certificate = _certificate(approx, space)
    return _stamp(MultiResult(
        "achievability", tuple(objectives), precision, it, achievable=achievable,
        margin=float(margin), margin_upper=float(upper), near_boundary=near,
        witness=witness, certificate=certificate,
        points=[space.to_x(v).tolist() for v in approx.vertices],
    ), space, precision_type)


def numerical(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION,
              max_iter: int = MAX_ITER["numerical"], precision_type: str = "abs",
              progress: Progress | None = None) -> MultiResult:
    """The best value of the ``=?`` objective with the thresholds met, to ``precision`` (with
    ``precision_type="reldiff"``: in units of its range). ``progress``: as in :func:`pareto` (the
    gap: between the bounds of the value)."""
    space, call, approx = _begin(oracle, objectives, precision_type)
    return _stamp(_numerical(space, call, approx, objectives, precision, max_iter, progress), space, precision_type)


def _numerical(space: Space, call, approx: Approximation, objectives, precision: float, max_iter: int,
               progress: Progress | None = None) -> MultiResult:
    m = len(objectives)
    k = int(np.flatnonzero(space.query)[0])
    c = np.zeros(m)
    c[k] = 1.0
    lower = space.lower.copy()
    inner, outer, it = _refine(approx, call, c, 0.0, np.zeros(m), lower, precision, max_iter, progress=progress)
    if outer is None:  # the outer polytope misses the thresholds: certified by Farkas
        return MultiResult("numerical", tuple(objectives), precision, it + m, status="infeasible",
                           certificate=_certificate(approx, space))
    if inner is None:
        # the thresholds are met by the outer polytope but by no point found: infeasible where the
        # halfspaces prove it, else they are met at most within the oracle's error (stalled)
        status, certificate = _unmet(approx, space, it, max_iter)
        return MultiResult("numerical", tuple(objectives), precision, it + m, status=status,
                           upper=float(outer[0] / space.factor[k]), certificate=certificate)
    strict = _strict(objectives)
    if strict.any():
        t_out = _strict_slack(approx, space, strict, inner=False)[2]
        if t_out is None or t_out <= _numeric_tolerance(approx):
            # no point meets the strict thresholds (> and <) strictly: certified by the outer polytope
            return MultiResult("numerical", tuple(objectives), precision, it + m, status="infeasible")
    lo_y, hi_y = inner[0], max(outer[0], inner[0])  # (the outer bound can round a few ulp below the inner)
    f = space.factor[k]
    lo, hi = sorted((lo_y / f, hi_y / f))
    witness = _witness(approx, space, inner[1])
    # a threshold within the precision of its objective's best value (the unit directions queried
    # first found it): the feasible set is that thin, and Storm's approximate modes may call the
    # query infeasible. (A constraint tight at the answer is the rule, not a sign of this.)
    fin = np.isfinite(space.lower)
    best = np.max(np.asarray(approx.V), axis=0)  # (maximisation space)
    near = bool(fin.any() and np.min(best[fin] - space.lower[fin]) <= precision)
    return MultiResult("numerical", tuple(objectives), precision, it + m, value=float(lo_y / f), lower=float(lo),
                       upper=float(hi), witness=witness, near_boundary=near,
                       status="optimal" if hi_y - lo_y <= precision else "iteration_limit")


def pareto(oracle: Oracle, objectives, *, precision: float = DEFAULT_PRECISION, max_iter: int = MAX_ITER["pareto"],
           exhaustive: bool = False, precision_type: str = "abs",
           progress: Progress | None = None) -> MultiResult:
    """Vertices of the Pareto front until every corner of the outer polytope lies within
    ``precision`` (absolute, per coordinate) of the inner one.

    ``exhaustive``: continue until no direction yields a new vertex, i.e. until every outer corner
    lies in the inner polytope up to rounding (and the oracle's error bound). ``status`` is
    ``iteration_limit`` when ``max_iter`` oracle calls did not get within ``precision`` (an
    exhaustive search they stop within it is ``optimal``: every vertex is not found, but the front
    is as precise as asked). ``precision_type="reldiff"``:
    ``precision`` in units of each objective's range (the corners then lie within ``precision``
    times the range of each objective).

    ``progress``: called as ``progress(calls, gap)`` before each oracle call after the first ones
    (``calls`` of them so far, at most ``max_iter``): ``gap`` is what the search still has to close,
    in the units of ``precision`` (here: the largest distance of an outer corner from the inner
    polytope), for a progress display."""
    space, call, approx = _begin(oracle, objectives, precision_type)
    return _stamp(_pareto(space, call, approx, objectives, precision, max_iter, exhaustive, progress), space,
                  precision_type)


def _pareto(space: Space, call, approx: Approximation, objectives, precision: float, max_iter: int,
            exhaustive: bool, progress: Progress | None = None) -> MultiResult:
    m = len(objectives)
    it, status, confirmed = 0, "optimal", []
    fin = np.isfinite(space.lower)
    if fin.any():
        # thresholds are constraints: first decide whether any scheduler meets them
        inner, outer, it = _refine(approx, call, np.zeros(m), 1.0, fin.astype(float), space.lower, precision,
                                   max_iter, decide=precision, progress=progress)
        if inner is None or inner[0] < -precision:
            status, certificate = _unmet(approx, space, it, max_iter)
            return MultiResult("pareto", tuple(objectives), precision, it + m, status=status,
                               margin_upper=float(outer[0]) if outer is not None else -np.inf,
                               certificate=certificate)
    # corner -> (gap, w, vertices): the gap against the first ``vertices`` vertices, an upper bound of
    # it against more (a vertex added can only lower it): a corner's gap is recomputed only when it
    # may be the largest (lazy greedy; the same corner as recomputing them all, up to ties)
    gaps: dict = {}
    while True:
        numeric = _numeric_tolerance(approx)
        tol = numeric if exhaustive else max(precision, numeric)
        corners = _outer_corners(approx, space)
        n_v = len(approx.vertices)
        heap, known = [], {}
        done = np.zeros(len(corners), bool)
        if confirmed:
            C = np.array(confirmed)
            for a in range(0, len(corners), 256):
                block = corners[a : a + 256]
                done[a : a + 256] = (np.abs(block[:, None, :] - C[None]).max(axis=2) <= numeric).any(axis=1)
        rounded = np.round(corners, 12)
        for i, corner in enumerate(corners):
            if done[i]:
                continue
            key = tuple(rounded[i])
            if key not in gaps:
                w, gap = approx.separating_direction(corner)
                gaps[key] = (gap, w, n_v)
            known[key] = gaps[key]
            heap.append((-gaps[key][0], i, key))
        gaps = known  # (the corners cut off are gone)
        heapq.heapify(heap)
        best = None
        while heap and -heap[0][0] > tol:
            _, i, key = heapq.heappop(heap)
            gap, w, seen = gaps[key]
            if seen == n_v:
                best = (gap, w, corners[i])
                break
            w, gap = approx.separating_direction(corners[i])
            gaps[key] = (gap, w, n_v)
            heapq.heappush(heap, (-gap, i, key))
        if best is None:
            break
        if it >= max_iter:
            # an exhaustive search cut short may still be within the precision (best: the largest gap)
            status = "optimal" if exhaustive and best[0] <= max(precision, numeric) else "iteration_limit"
            break
        gap, w, corner = best
        if progress is not None:
            progress(it, gap)
        y, err, sched = call(w)
        new = approx.add(w, y, err, sched)
        it += 1
        if not new and w @ corner <= w @ y + err + numeric:
            # the oracle's optimum in this direction reaches the corner: nothing separates it
            confirmed.append(corner)
        elif not new and np.max(approx.H[0] @ corner - approx.H[1]) > numeric:
            # the corner lies outside a known halfspace: rounding of a degenerate intersection
            # (Qhull's joggle), which no oracle call can cut further (it was asked until max_iter)
            confirmed.append(corner)
    tol = _numeric_tolerance(approx)
    W, b = approx.H
    halfspaces = [_halfspace(w, o, space) for w, o in zip(W, b)]
    if not fin.any():
        keep = _extreme(approx.V, tol)
        return MultiResult(
            "pareto", tuple(objectives), precision, it + m, status=status,
            points=[space.to_x(approx.V[i]).tolist() for i in keep], halfspaces=halfspaces,
            schedulers=[approx.schedulers[i] for i in keep],
        )
    # The constrained front: vertices of conv(V) cut by the thresholds, each a mixture of vertices.
    # When the inner polytope meets the thresholds only within the precision, they are relaxed by
    # that shortfall (at most ``precision``) so that the front is not empty.
    lower = space.lower.copy()
    reach = approx.inner_max(np.zeros(m), 1.0, fin.astype(float), lower)
    if reach is not None and reach[2] < 0:
        lower[fin] += reach[2]
    for j in np.flatnonzero(fin):
        normal = np.zeros(m)
        normal[j] = -1.0
        halfspaces.append(_halfspace(normal, -space.lower[j], space))
    front = constrained_front(approx.V, lower, tol, space.query)
    used = sorted({i for mix in front for _, i in mix})
    index = {v: n for n, v in enumerate(used)}
    return MultiResult(
        "pareto", tuple(objectives), precision, it + m, status=status,
        points=[space.to_x(sum(w * approx.V[i] for w, i in mix)).tolist() for mix in front],
        halfspaces=halfspaces,
        schedulers=[[(w, approx.schedulers[i]) for w, i in mix] for mix in front],
        mixtures=[[(w, index[i]) for w, i in mix] for mix in front],
        vertices=[space.to_x(approx.V[i]).tolist() for i in used],
        vertex_schedulers=[approx.schedulers[i] for i in used],
    )


ENUMERATION_LIMIT = 200_000
"""Most candidate supports :func:`constrained_front` solves for before it falls back to LPs."""


def constrained_front(V: np.ndarray, lower: np.ndarray, tol: float,
                      query: np.ndarray | None = None) -> list[list[tuple[float, int]]]:
    """The Pareto vertices of ``Q = conv(V) ∩ {y >= lower}`` (maximisation space; ``-inf`` where
    unconstrained) over the ``query`` coordinates (default: all; thresholded objectives are
    constraints, not objectives), each as a mixture ``[(weight, vertex index), ...]``.

    Every vertex of Q is the image of a vertex of ``{l in simplex : V^T l >= lower}``, which has
    at most ``1 + #thresholds`` nonzero weights with as many thresholds tight: those supports
    are enumerated, solved as square linear systems, and the points kept that no other point of Q
    dominates by more than ``tol`` and that are not mixtures of the other kept points."""
    from itertools import combinations

    k, m = V.shape
    fin = np.flatnonzero(np.isfinite(lower))
    # the vertices of V's own front carry every vertex of Q's front; those meeting the thresholds
    # are kept too (a near-duplicate that _extreme dropped may be the one inside them)
    rows = sorted(set(_extreme(V, tol)) | {i for i in range(k) if np.all(V[i, fin] >= lower[fin] - tol)})
    candidates: list[tuple[tuple[int, ...], np.ndarray]] = []
    budget = ENUMERATION_LIMIT
    for size in range(1, min(len(rows), len(fin) + 1) + 1):
        for S in combinations(rows, size):
            for T in combinations(fin, size - 1):
                budget -= 1
                if budget < 0:
                    return _front_by_lp(V, lower, tol, query)
                A = np.vstack([np.ones(size), V[np.ix_(S, T)].T]) if T else np.ones((1, 1))
                rhs = np.concatenate([[1.0], lower[list(T)]])
                try:
                    lam = np.linalg.solve(A, rhs)
                except np.linalg.LinAlgError:
                    continue
                if lam.min() < -1e-12 or not np.all(np.isfinite(lam)):
                    continue
                lam = np.clip(lam, 0.0, None)
                lam /= lam.sum()
                y = lam @ V[list(S)]
                if np.all(y[fin] >= lower[fin] - tol):
                    candidates.append((S, lam))
    return _pareto_vertices(V, lower, tol, candidates, query)


def _front_by_lp(V: np.ndarray, lower: np.ndarray, tol: float, query=None) -> list[list[tuple[float, int]]]:
    """Fallback for many vertices and thresholds: the constrained optima in the unit directions of
    the queried objectives and in their uniform direction (a subset of the front's vertices)."""
    k, m = V.shape
    probe = Approximation(m, vertices=list(V))
    q = np.ones(m, bool) if query is None else np.asarray(query, bool)
    directions = [e for e, keep in zip(np.eye(m), q) if keep] + [q / q.sum()]
    candidates = []
    for c in directions:
        res = probe.inner_max(np.asarray(c, float), 0.0, np.zeros(m), lower)
        if res is not None:
            lam = res[1]
            S = tuple(int(i) for i in np.flatnonzero(lam > 1e-12))
            candidates.append((S, lam[list(S)] / lam[list(S)].sum()))
    return _pareto_vertices(V, lower, tol, candidates, query)


def _pareto_vertices(V, lower, tol, candidates, query=None) -> list[list[tuple[float, int]]]:
    m = V.shape[1]
    q = np.ones(m, bool) if query is None else np.asarray(query, bool)
    probe = Approximation(m, vertices=list(V))
    points, mixes = [], []
    for S, lam in candidates:
        y = lam @ V[list(S)]
        if any(np.max(np.abs(y[q] - p[q])) <= tol for p in points):
            continue
        # dominated when some point of Q is >= y in the queried coordinates and better by more
        # than tol in their sum
        best = probe.inner_max(q.astype(float), 0.0, np.zeros(m), np.where(q, np.maximum(y, lower), lower))
        if best is not None and best[0] - y[q].sum() > tol * q.sum():
            continue
        points.append(y)
        mixes.append([(float(w), int(i)) for w, i in zip(lam, S) if w > 1e-12])
    keep = _extreme(np.array(points)[:, q], tol) if points else []
    order = sorted(keep, key=lambda i: tuple(-points[i][q]))
    return [mixes[i] for i in order]


def _strict(objectives) -> np.ndarray:
    """Which objectives have a strict threshold (``>``, ``<``)."""
    return np.array([o.comparison in (">", "<") for o in objectives], bool)


def _strict_slack(approx: Approximation, space: Space, strict: np.ndarray, inner: bool = True):
    """The best smallest slack of the ``strict`` thresholds with the others met, in maximisation
    space and capped at 1: ``(inner t, its mixture weights, outer t)``; ``None`` where infeasible
    (``inner=False``: the outer bound only)."""
    a = strict.astype(float)
    zeros = np.zeros(approx.m)
    found = approx.inner_max(zeros, 1.0, a, space.lower) if inner else None
    bound = approx.outer_max(zeros, 1.0, a, space.lower, t_max=1.0)
    return (None if found is None else found[2], None if found is None else found[1],
            None if bound is None else float(bound[2]))


def _numeric_tolerance(approx: Approximation) -> float:
    """Rounding noise of the LPs and the oracle, plus the largest oracle error bound."""
    V = approx.V
    scale = max(1.0, float(np.max(np.abs(V)))) if V.size else 1.0
    return 1e-9 * scale + (max(approx.errors) if approx.errors else 0.0)


def _outer_corners(approx: Approximation, space: Space) -> np.ndarray:
    """Vertices of the outer polytope, cut below by the thresholds (or just below every vertex)."""
    from scipy.spatial import HalfspaceIntersection

    V = approx.V
    m = approx.m
    W, b = approx.H
    floor = V.min(axis=0) - 1.0
    lo = np.where(np.isfinite(space.lower), np.maximum(space.lower, floor), floor)
    halfspaces = np.vstack([np.hstack([W, -b[:, None]]), np.hstack([-np.eye(m), lo[:, None]])])
    interior = _chebyshev(halfspaces)
    fin = np.isfinite(space.lower)
    if interior is None and fin.any():
        # a threshold on the outer polytope's boundary (e.g. at the best value of its objective): the
        # cut has no volume and no corners, which ended the search with the front unexplored. Its
        # corners, lowered by a hair (the numeric tolerance) in the bounded coordinates, are those
        # of the cut up to that hair.
        halfspaces[len(b):, -1][fin] -= 0.5 * _numeric_tolerance(approx)
        interior = _chebyshev(halfspaces)
    if interior is None:
        return np.zeros((0, m))
    try:
        return HalfspaceIntersection(halfspaces, interior).intersections
    except Exception:  # scipy's QhullError on a degenerate intersection: joggle the input
        return HalfspaceIntersection(halfspaces, interior, qhull_options="QJ").intersections


def _extreme(V: np.ndarray, tol: float) -> list[int]:
    """Indices of the points that are vertices of the downward closure of their convex hull:
    dominated points and points within ``tol`` of the hull of the others are dropped (one at a
    time, so of two near-duplicates one stays)."""
    keep = list(range(len(V)))
    for i in range(len(V)):
        others = [j for j in keep if j != i]
        if not others:
            continue
        probe = Approximation(V.shape[1], vertices=[V[j] for j in others])
        if probe.separating_direction(V[i])[1] <= tol:
            keep.remove(i)
    return keep


def _chebyshev(halfspaces: np.ndarray):
    A, b = halfspaces[:, :-1], -halfspaces[:, -1]
    norm = np.linalg.norm(A, axis=1)
    m = A.shape[1]
    res = highs_lp.linprog(np.append(np.zeros(m), -1.0), A_ub=np.hstack([A, norm[:, None]]), b_ub=b,
                           bounds=[(None, None)] * m + [(0, None)])
    if res.status != 0 or res.x[m] <= 1e-12:
        return None
    return res.x[:m]
