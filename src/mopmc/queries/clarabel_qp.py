"""The convex query's quadratic programs straight through Clarabel's native API (no cvxpy).

For the quadratic losses (``mse``, ``wmse``, ``var``: ``loss(v) = |L'v - c|^2``) the three
programs of an iteration are QPs with at most a few hundred variables and constraints; building
them through cvxpy costs tens of milliseconds each, solving them directly a millisecond or so:

* :func:`lower`: ``min loss(z)`` over the outer polytope ``W z <= b`` and the box;
* :func:`upper`: ``min loss(V' lam)`` over ``lam >= 0``, ``sum lam = 1`` and the box on ``V' lam``;
* :func:`min_norm_point`: the point of ``conv(V)`` nearest to ``z`` (Wolfe's algorithm; the
  query's cutting direction, and the upper program when there is no box).

Same tolerances as the cvxpy path (tight first; the solver's defaults when it cannot reach them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.linalg import lstsq

#: tight tolerances (the cvxpy path of :mod:`mopmc.queries.convex` uses them too)
TIGHT = {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "tol_ktratio": 1e-9, "max_iter": 500}


class Quadratic(NamedTuple):
    """``loss(v) = |L'v - c|^2``: ``v'Pv/2 + q'v + r`` with ``P = 2 L L'``, ``q = -2 L c``, ``r = c'c``
    (kept in the residual form, whose value is never negative and keeps its digits near 0)."""

    L: np.ndarray  # (m, r)
    c: np.ndarray  # (r,)

    @property
    def P(self) -> np.ndarray:
        return 2.0 * self.L @ self.L.T

    @property
    def q(self) -> np.ndarray:
        return -2.0 * self.L @ self.c

    def value(self, x: np.ndarray) -> float:
        d = np.asarray(x, float) @ self.L - self.c
        return float(d @ d)


def mse(t: np.ndarray) -> Quadratic:
    m = len(t)
    return Quadratic(np.eye(m) / np.sqrt(m), np.asarray(t, float) / np.sqrt(m))


def wmse(t: np.ndarray, w: np.ndarray) -> Quadratic:
    s = np.sqrt(np.asarray(w, float) / len(t))
    return Quadratic(np.diag(s), s * np.asarray(t, float))


def var(m: int) -> Quadratic:
    return Quadratic((np.eye(m) - np.full((m, m), 1.0 / m)) / np.sqrt(m), np.zeros(m))


def _solve(P, q, A_eq, b_eq, A_ub, b_ub):
    """``(status, x)``: status ``optimal``, ``infeasible``, ``unbounded`` or ``failed``."""
    import clarabel

    n = len(q)
    blocks, rhs, cones = [], [], []
    if A_eq is not None and A_eq.shape[0]:
        blocks.append(sparse.csc_matrix(A_eq))
        rhs.append(b_eq)
        cones.append(clarabel.ZeroConeT(len(b_eq)))
    if A_ub is not None and A_ub.shape[0]:
        blocks.append(sparse.csc_matrix(A_ub))
        rhs.append(b_ub)
        cones.append(clarabel.NonnegativeConeT(len(b_ub)))
    A = sparse.vstack(blocks, format="csc") if blocks else sparse.csc_matrix((0, n))
    b = np.concatenate(rhs) if rhs else np.zeros(0)
    Pu = sparse.triu(sparse.csc_matrix(P), format="csc")
    S = clarabel.SolverStatus
    for tight in (True, False):
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if tight:
            for key, value in TIGHT.items():
                setattr(settings, key, value)
        sol = clarabel.DefaultSolver(Pu, np.asarray(q, float), A, b, cones, settings).solve()
        if sol.status == S.Solved:
            return "optimal", np.asarray(sol.x, float)
        if sol.status in (S.PrimalInfeasible, S.AlmostPrimalInfeasible):
            return "infeasible", None
        if sol.status in (S.DualInfeasible, S.AlmostDualInfeasible):
            return "unbounded", None
        if not tight and sol.status == S.AlmostSolved:
            return "optimal", np.asarray(sol.x, float)
    return "failed", None


def _box_rows(lo: np.ndarray, up: np.ndarray, M: np.ndarray):
    """Rows ``G x <= h`` for ``lo <= M x <= up`` (finite sides only)."""
    fl, fu = np.isfinite(lo), np.isfinite(up)
    G = np.vstack((-M[fl], M[fu]))
    h = np.concatenate((-lo[fl], up[fu]))
    return G, h


def lower(quad: Quadratic, W: np.ndarray, b: np.ndarray, lo: np.ndarray, up: np.ndarray):
    """``(status, z)`` minimising the loss over ``W z <= b`` and the box."""
    m = quad.L.shape[0]
    G, h = _box_rows(lo, up, np.eye(m))
    return _solve(quad.P, quad.q, None, None, np.vstack((W, G)), np.concatenate((b, h)))


def upper(quad: Quadratic, V: np.ndarray, lo: np.ndarray, up: np.ndarray, start=None):
    """``(status, lam)`` minimising the loss of ``V' lam`` over the simplex and the box: without a
    box by Wolfe's algorithm (:func:`unboxed_upper`), else a QP in ``lam`` (the Gram form ``V P V'``;
    lifting ``p = V' lam`` into the program was twice as slow in Clarabel)."""
    k = len(V)
    if not (np.isfinite(lo).any() or np.isfinite(up).any()):
        lam = unboxed_upper(quad, V, start)
        if lam is not None:
            return "optimal", lam
    G, h = _box_rows(lo, up, V.T)
    VL = V @ quad.L
    return _solve(2.0 * VL @ VL.T, -2.0 * VL @ quad.c, np.ones((1, k)), np.ones(1), np.vstack((-np.eye(k), G)),
                  np.concatenate((np.zeros(k), h)))


def min_norm_point(V: np.ndarray, z: np.ndarray, start=None, max_iter: int | None = None):
    """``(point, lam, converged)``: the point of ``conv(V)`` nearest to ``z`` and its convex weights, by Wolfe's
    algorithm (1976): exact in finitely many steps, a corral of at most ``m + 1`` affinely
    independent vertices, each minor step one small least-squares solve. ``start``: the support of
    an earlier answer (a corral of a nearby problem: the query's polytopes grow a vertex at a time),
    which saves most major steps. In floating point the distance may stop decreasing before the
    optimality test passes (nearly dependent vertices): then, or after ``max_iter`` major steps
    (default ``50 (m + 1) + 100``), the best point so far is returned with ``converged`` False: a
    point of ``conv(V)`` either way, never None."""
    P = np.asarray(V, float) - np.asarray(z, float)
    k, m = P.shape
    norms = np.einsum("ij,ij->i", P, P)
    scale = max(float(norms.max()), 1e-300)
    S = [int(i) for i in start if 0 <= i < k] if start is not None else []
    if len(S) > m + 1:
        # not a corral (an interior-point answer's support holds many tiny weights): the minor cycles
        # from it cost more than a cold start
        S = []
    if S:
        lam = np.full(len(S), 1.0 / len(S))
        minor = True  # from a feasible point of the old corral: a minor cycle first
    else:
        S, lam, minor = [int(np.argmin(norms))], np.ones(1), False
    best = None

    def answer(S, lam, converged=True):
        full = np.zeros(k)
        full[S] = lam
        return full @ P + z, full, converged

    for _ in range(max_iter if max_iter is not None else 50 * (m + 1) + 100):
        if not minor:
            x = lam @ P[S]
            xx = float(x @ x)
            if best is not None and xx >= best[0]:  # no progress: rounding has taken over
                return answer(best[1], best[2], False)
            best = (xx, list(S), lam.copy())
            g = P @ x
            j = int(np.argmin(g))
            if xx - g[j] <= 1e-13 * scale or j in S:
                return answer(S, lam)
            S.append(j)
            lam = np.append(lam, 0.0)
        minor = False
        while True:
            Q = P[S]
            # the affine minimiser of |alpha Q| with sum(alpha) = 1: Q[0] + beta (Q[1:] - Q[0]) with beta
            # the least-squares answer (conditioned as the differences, not as their Gram matrix)
            beta = lstsq((Q[1:] - Q[0]).T, -Q[0], lapack_driver="gelsy", check_finite=False)[0]  # QR, pivoted
            alpha = np.concatenate(([1.0 - beta.sum()], beta))
            if np.all(alpha > 1e-14):
                lam = alpha
                break
            neg = alpha <= 1e-14
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = lam[neg] / (lam[neg] - alpha[neg])
            ratios = ratios[np.isfinite(ratios)]
            theta = float(np.clip(ratios.min(), 0.0, 1.0)) if len(ratios) else 0.0
            lam = lam + theta * (alpha - lam)
            keep = lam > 1e-14
            keep[np.argmax(lam)] = True
            S = [s for s, kept in zip(S, keep) if kept]
            lam = lam[keep] / lam[keep].sum()
    return answer(best[1], best[2], False) if best is not None else answer(S, lam, False)


def unboxed_upper(quad: Quadratic, V: np.ndarray, start=None):
    """``lam`` minimising ``|L' V' lam - c|^2`` over the simplex (no box): the point of
    ``conv(V L)`` nearest to ``c``, by Wolfe's algorithm. None when it stalls short of optimality
    (then the caller solves the QP)."""
    _, lam, converged = min_norm_point(V @ quad.L, quad.c, start)
    return lam if converged else None
