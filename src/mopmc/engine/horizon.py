"""Single objectives with an upper step bound by finite-horizon backward induction, as Storm does:
``k`` Bellman backups over the model (``O(k * transitions)`` time, ``O(states)`` memory) instead of
the step-counting product (:mod:`mopmc.model.unfold`, which multi-objective queries, lower-only
bounds and the LP engine use). Exact up to rounding: no iteration to convergence.

``P [phi U[l,u] psi]``: ``V_{u+1} = 0``; at step ``t``, ``V_t(s) = 1`` when ``l <= t`` and ``psi(s)``,
``0`` when ``!phi(s)`` (or ``!phi(s)`` and ``psi(s)`` before ``l``), else the optimal expectation of
``V_{t+1}``. ``R [C<=k]``: ``V_k = 0``, ``V_t(s) = opt_c (r(c) + E V_{t+1})``.
"""

from __future__ import annotations

import numpy as np

from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective


def applies(o: Objective) -> bool:
    """Whether ``o`` is answered here: a step bound with an upper end."""
    return o.steps is not None and o.steps[1] is not None


def horizon_value(model: SparseMDP, o: Objective) -> float:
    """The optimum (``o.sense``) of a step-bounded objective with an upper bound, at the initial state."""
    from mopmc.engine import numba_kernels as nk

    lo, hi = o.steps
    n = model.n_states
    if hi < lo or hi < 0:  # an empty window: nothing is ever collected
        return 0.0
    if o.kind == "total_reward":
        rewards = np.ascontiguousarray(model.reward(o.reward_model), np.float64)
        stop_one = stop_zero = np.zeros(n, np.bool_)
    else:
        rewards = np.zeros(model.n_choices)
        stop_one = np.ascontiguousarray(o.target_mask(model), np.bool_)
        stop_zero = np.ascontiguousarray(~o.hold_mask(model), np.bool_)  # (before the window a target goes on)
    return float(nk.horizon_backups(model.row_groups, model.indptr, model.targets, model.probs, rewards, hi + 1,
                                    lo, hi, o.sense == "max", stop_one, stop_zero, model.initial))
