"""The occupation LP's achievability program solved by Clarabel's interior-point method.

HiGHS' simplex needs tens of thousands of pivots (minutes) on occupation LPs of long layered models
with many objective rows, and its bases there are badly conditioned: dive-and-rise (15,051 states,
200 layers) with 30 objectives took 40-130 s, and the interior-point method's crossover left a basis
with primal infeasibility 2e5 that the simplex clean-up could not repair. The bases are bad because
a dual-feasible basis may cover a state's flow row by a predecessor's column, multiplying by
1/P(s'|s,a) once per layer. Clarabel factorises the KKT system directly (sparse LDL), needs 15-90
iterations independent of the model's depth, and takes seconds.

Only the LP data of :class:`~mopmc.engine.lp_product.OccupationLP` is used (nothing from the iterative
kernel). Clarabel is imported here only, lazily.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.sparse import csc_matrix, csr_matrix, identity, vstack

from mopmc.engine.lp_product import OccupationLP
from mopmc.errors import DependencyError

# Clarabel's defaults (1e-8) leave the margin ~5e-9 short on dive-and-rise; 1e-10 still ends "Solved"
# there, 1e-11 only "AlmostSolved".
_TOLERANCE = 1e-10


class InteriorMargin(NamedTuple):
    """``status``: ``"solved"``, ``"infeasible"`` (no scheduler with finite values) or Clarabel's
    own status name when it stopped early; ``margin``/``x`` are set only when solved."""

    status: str
    margin: float
    x: np.ndarray | None


def interior_margin(lp: OccupationLP, a_ub: csr_matrix, b_ub: np.ndarray, cap: float = 1.0) -> InteriorMargin:
    """Maximise ``t <= cap`` subject to ``a_ub @ (x, t) <= b_ub``, ``flow @ x = e_initial``, ``x >= 0``.

    Unusable variables (:attr:`OccupationLP.usable`) are left out of the program and are 0 in ``x``.
    """
    try:
        import clarabel
    except ImportError:  # pragma: no cover - clarabel is a declared dependency
        raise DependencyError("the LP engine's interior-point solver needs Clarabel: pip install clarabel") from None
    keep = np.flatnonzero(np.append(lp.usable, True))  # the usable x, then t
    n_x = len(keep) - 1
    flow = csr_matrix(lp.flow)[:, keep[:-1]]
    eq = csr_matrix((flow.data, flow.indices, flow.indptr), shape=(lp.n_states, n_x + 1))
    ub = csr_matrix(a_ub)[:, keep]
    cap_row = csr_matrix(([1.0], ([0], [n_x])), shape=(1, n_x + 1))
    nonneg = -identity(n_x + 1, format="csr")[:n_x]
    a = csc_matrix(vstack([eq, ub, cap_row, nonneg], format="csc"))
    b = np.concatenate((lp.rhs(), np.asarray(b_ub, dtype=float), [cap], np.zeros(n_x)))
    cones = [clarabel.ZeroConeT(lp.n_states), clarabel.NonnegativeConeT(ub.shape[0] + 1 + n_x)]
    q = np.zeros(n_x + 1)
    q[-1] = -1.0
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    # qdldl: faer's multithreaded factorisation was 5x slower on a loaded two-core machine
    settings.direct_solve_method = "qdldl"
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = _TOLERANCE
    solution = clarabel.DefaultSolver(csc_matrix((n_x + 1, n_x + 1)), q, a, b, cones, settings).solve()
    status = str(solution.status).rsplit(".", 1)[-1]
    if status == "PrimalInfeasible":
        return InteriorMargin("infeasible", float("nan"), None)
    if status != "Solved":
        return InteriorMargin(status, float("nan"), None)
    z = np.asarray(solution.x, dtype=float)
    x = np.zeros(lp.n_vars)
    x[keep[:-1]] = np.maximum(z[:-1], 0.0)
    return InteriorMargin("solved", float(z[-1]), x)
