"""Inner and outer approximations of the achievable set (maximisation space, downward closed).

The inner polytope is the downward closure of the convex hull of the vertices found; the outer one
is the intersection of the supporting halfspaces ``w . y <= w . p + error`` (shifted by the oracle's
error bound, so it still contains the achievable set). Both are refined by querying the oracle in
the direction that separates the outer optimum from the inner polytope.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mopmc.errors import UnsupportedModelError
from mopmc.queries import highs_lp
from mopmc.queries.oracle import answers_at_once

_OPTS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
DUPLICATE = 1e-12


def solve_lp(what: str, c, **kw):
    """An LP through HiGHS (:func:`mopmc.queries.highs_lp.linprog`), tight tolerances first.

    On degenerate, badly scaled LPs (many objectives, vertex coordinates spanning dozens of orders
    of magnitude) HiGHS' dual simplex may not reach 1e-10 feasibility and stops with an unknown
    model status (HiGHS status 15) or a numerical-difficulty status. Then the same LP is solved
    again with HiGHS' default tolerances (1e-7), then with the interior-point method; the callers
    recompute every reported quantity from the returned primal solution, so a looser solve only
    costs optimality of the direction or mixture, not soundness. Returns the result with status
    0 (optimal) or 2 (infeasible); anything else raises."""
    res = None
    for method, options in (("highs", _OPTS), ("highs", {}), ("highs-ipm", {})):
        res = highs_lp.linprog(c, method=method, options=options, **kw)
        if res.status in (0, 2):
            return res
    parts = [np.abs(np.asarray(v, dtype=float)) for v in (c, kw.get("A_ub"), kw.get("b_ub"), kw.get("A_eq"),
                                                           kw.get("b_eq")) if v is not None and np.size(v)]
    size = max((float(np.max(np.where(np.isfinite(p), p, np.inf))) for p in parts), default=0.0)
    if size >= 1e19:  # (HiGHS reads numbers from 1e20 on as infinite; inf - inf made NaNs: infinite too)
        reach = f"reach {size:.3g}" if np.isfinite(size) else "overflow double precision"
        raise UnsupportedModelError(
            f"an objective's values {reach}, beyond what the multi-objective LPs can weigh (HiGHS reads "
            "numbers from 1e20 on as infinite); check the objectives one by one, or rescale the rewards")
    raise RuntimeError(f"{what} LP failed: {res.message}")


@dataclass
class Approximation:
    m: int
    vertices: list = field(default_factory=list)  # y points
    schedulers: list = field(default_factory=list)
    normals: list = field(default_factory=list)
    offsets: list = field(default_factory=list)
    directions: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # the oracle's error bound of each call
    calls: int = 0

    def add(self, w: np.ndarray, y: np.ndarray, error: float, scheduler) -> bool:
        """Record an oracle answer; returns True when the vertex is new."""
        self.calls += 1
        self.errors.append(max(float(error), 0.0))
        w = np.asarray(w, float)
        D = np.array(self.directions).reshape(-1, self.m)
        if not D.size or np.min(np.max(np.abs(D - w), axis=1)) > 1e-12:
            self.directions.append(w)
            self.normals.append(w)
            self.offsets.append(float(w @ y + max(error, 0.0)))
        for v in self.vertices:
            if np.max(np.abs(v - y)) <= DUPLICATE * max(1.0, np.max(np.abs(y))):
                return False
        self.vertices.append(np.asarray(y, float))
        self.schedulers.append(scheduler)
        return True

    @property
    def V(self) -> np.ndarray:
        return np.array(self.vertices).reshape(-1, self.m)

    @property
    def H(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.normals).reshape(-1, self.m), np.array(self.offsets)

    # --- linear programs over the two approximations -------------------------------------
    def outer_max(self, c: np.ndarray, d: float, a: np.ndarray, lower: np.ndarray, t_max: float | None = None):
        """max c.y + d t  s.t.  W y <= b,  y_j - a_j t >= lower_j (finite lower only), t <= t_max.

        Returns (value, y, t) or None when infeasible."""
        W, b = self.H
        m = self.m
        rows, rhs = [np.hstack([W, np.zeros((len(b), 1))])], [b]
        fin = np.isfinite(lower)
        if fin.any():
            A = np.zeros((fin.sum(), m + 1))
            A[np.arange(fin.sum()), np.flatnonzero(fin)] = -1.0
            A[:, m] = a[fin]
            rows.append(A)
            rhs.append(-lower[fin])
        res = solve_lp("outer", -np.append(c, d), A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                       bounds=[(None, None)] * m + [(None, t_max)])
        if res.status == 2:
            return None
        return -res.fun, res.x[:m], res.x[m]

    def inner_max(self, c: np.ndarray, d: float, a: np.ndarray, lower: np.ndarray):
        """max c.(V^T l) + d t  s.t.  l >= 0, sum l = 1, (V^T l)_j - a_j t >= lower_j.

        Returns (value, weights l, t) or None when infeasible."""
        V = self.V
        k, m = V.shape
        fin = np.isfinite(lower)
        A_ub = b_ub = None
        if fin.any():
            A_ub = np.hstack([-V[:, fin].T, a[fin][:, None]])
            b_ub = -lower[fin]
        res = solve_lp("inner", -np.append(V @ c, d), A_ub=A_ub, b_ub=b_ub,
                       A_eq=np.append(np.ones(k), 0.0)[None, :], b_eq=[1.0], bounds=[(0, None)] * k + [(None, None)])
        if res.status == 2:
            return None
        lam = np.clip(res.x[:k], 0.0, None)
        lam /= lam.sum()
        t = res.x[k]
        if fin.any() and d != 0.0:
            # the mixture's own t (exact for these weights, whatever tolerance the LP ran with)
            mix = lam @ V
            act = fin & (a != 0)
            if act.any():
                t = float(np.min((mix[act] - lower[act]) / a[act]))
        return float(lam @ V @ c + d * t), lam, t

    def separating_direction(self, y: np.ndarray) -> tuple[np.ndarray, float]:
        """w >= 0, sum w = 1, maximising w.y - max_v w.v; returns (w, gap)."""
        V = self.V
        k, m = V.shape
        # variables w (m), z; max w.y - z s.t. V w - z <= 0
        res = solve_lp("separation", -np.append(y, -1.0), A_ub=np.hstack([V, -np.ones((k, 1))]), b_ub=np.zeros(k),
                       A_eq=np.append(np.ones(m), 0.0)[None, :], b_eq=[1.0], bounds=[(0, None)] * m + [(None, None)])
        if res.status != 0:
            raise RuntimeError(f"separation LP failed: {res.message}")
        w = np.clip(res.x[:m], 0.0, None)
        w[w < 1e-12 * w.max()] = 0.0  # solver noise: keeps the direction (and the kernel's weights) clean
        w /= w.sum()
        return w, float(w @ y - np.max(V @ w))  # the gap of this w, recomputed


def unit_answers(call, m: int) -> list:
    """The oracle's answers ``(y, error, scheduler)`` in the unit directions (each objective
    alone); all at once where ``call`` can (``call.many``: the same answers in fewer passes)."""
    units = [e.copy() for e in np.eye(m)]
    answers = answers_at_once(call, units) if m > 1 else []
    return answers or [call(w) for w in units]


def start(call, m: int, answers: list | None = None) -> Approximation:
    """The approximation of the unit directions' answers (``answers``, else asked of ``call``),
    which bound the outer polytope."""
    approx = Approximation(m)
    for w, (y, err, sched) in zip(np.eye(m), answers or unit_answers(call, m)):
        approx.add(w.copy(), y, err, sched)
    return approx
