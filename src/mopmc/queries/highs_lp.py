"""The queries' small dense linear programs straight through HiGHS' own Python API (highspy).

The achievability, Pareto and convex queries solve LPs with a few dozen to a few hundred variables
(mixtures of vertices, separating directions, Farkas certificates). ``scipy.optimize.linprog``
solves them with the same solver, but importing ``scipy.optimize`` costs about 0.15 s of every
fresh ``mopmc check`` or ``mopmc convex`` run, more than all of its LPs together on most models;
highspy imports in 0.01 s.

:func:`linprog` takes ``scipy.optimize.linprog``'s arguments for the methods ``highs`` and
``highs-ipm`` and sets HiGHS up as scipy does (dual simplex strategy, presolve on, no output);
its status codes are scipy's (0 optimal, 1 limit, 2 infeasible, 3 unbounded, 4 other). It uses
highspy's bare solver binding ``highspy._Highs`` (in ``highspy.__all__`` since 1.7): the ``Highs``
class around it installs logging callbacks, which print HiGHS' banner on file descriptor 1 once per
process, and hiding that would take redirecting the descriptor, which is not safe while another
thread (the engine's warm-up solves LPs beside the main thread) writes the query's JSON.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

_SOLVERS = {"highs": "choose", "highs-ds": "simplex", "highs-ipm": "ipm"}


class LPResult(NamedTuple):
    """A solved LP: ``x`` and ``fun`` where HiGHS found an optimum (status 0), else None."""

    x: np.ndarray | None
    fun: float | None
    status: int
    message: str


def _scipy_status(model_status) -> int:
    import highspy

    s = highspy.HighsModelStatus
    return {s.kOptimal: 0, s.kTimeLimit: 1, s.kIterationLimit: 1, s.kInfeasible: 2, s.kModelError: 2,
            s.kUnbounded: 3}.get(model_status, 4)


def _bounds(bounds, n: int) -> tuple[np.ndarray, np.ndarray]:
    if bounds is None:
        bounds = [(0.0, None)] * n
    if len(bounds) != n:
        raise ValueError(f"{len(bounds)} bounds for {n} variables")
    lo = np.array([-np.inf if b[0] is None else float(b[0]) for b in bounds])
    hi = np.array([np.inf if b[1] is None else float(b[1]) for b in bounds])
    return lo, hi


def linprog(c, A_ub=None, b_ub=None, A_eq=None, b_eq=None, bounds: Sequence | None = None, *,
            method: str = "highs", options: dict | None = None) -> LPResult:
    """min ``c . x`` s.t. ``A_ub x <= b_ub``, ``A_eq x = b_eq``, ``lo <= x <= hi`` (``bounds``: one
    ``(lo, hi)`` pair per variable, None for no bound; default ``(0, None)``).

    >>> res = linprog([-1.0, -1.0], A_ub=[[1.0, 2.0], [3.0, 1.0]], b_ub=[4.0, 6.0])
    >>> res.status, round(res.fun, 9), res.x.round(9).tolist()
    (0, -2.8, [1.6, 1.2])
    """
    import highspy

    c = np.asarray(c, dtype=float)
    n = c.size
    lo, hi = _bounds(bounds, n)
    blocks, row_lo, row_hi = [], [], []
    if A_ub is not None:
        blocks.append(np.asarray(A_ub, dtype=float).reshape(-1, n))
        b = np.asarray(b_ub, dtype=float).ravel()
        row_lo.append(np.full(b.size, -np.inf))
        row_hi.append(b)
    if A_eq is not None:
        blocks.append(np.asarray(A_eq, dtype=float).reshape(-1, n))
        b = np.asarray(b_eq, dtype=float).ravel()
        row_lo.append(b)
        row_hi.append(b)
    A = np.vstack(blocks) if blocks else np.zeros((0, n))
    cols, rows = np.nonzero(A.T)  # column by column: HiGHS' column-wise (CSC) format
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, A.shape[0]
    inf = highspy.kHighsInf
    lp.col_cost_ = c
    lp.col_lower_, lp.col_upper_ = np.clip(lo, -inf, inf), np.clip(hi, -inf, inf)
    lp.row_lower_ = np.clip(np.concatenate(row_lo), -inf, inf) if row_lo else np.zeros(0)
    lp.row_upper_ = np.clip(np.concatenate(row_hi), -inf, inf) if row_hi else np.zeros(0)
    matrix = lp.a_matrix_
    matrix.format_ = highspy.MatrixFormat.kColwise
    matrix.num_col_, matrix.num_row_ = n, A.shape[0]
    matrix.start_ = np.concatenate(([0], np.cumsum(np.bincount(cols, minlength=n)))).astype(np.int32)
    matrix.index_ = rows.astype(np.int32)
    matrix.value_ = A[rows, cols]
    h = highspy._Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", _SOLVERS[method])
    h.setOptionValue("simplex_strategy", 1)  # dual simplex, as scipy's linprog sets it
    for name, value in (options or {}).items():
        h.setOptionValue(name, value)
    h.passModel(lp)
    h.run()
    model_status = h.getModelStatus()
    status = _scipy_status(model_status)
    message = f"HiGHS model status {int(model_status)}: {h.modelStatusToString(model_status)}"
    if status != 0:
        return LPResult(None, None, status, message)
    x = np.array(h.getSolution().col_value, dtype=float)
    return LPResult(x, float(h.getInfo().objective_function_value), 0, message)
