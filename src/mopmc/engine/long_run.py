"""Long-run average objectives, single-objective: ``R{"r"}max=? [LRA]`` (the mean reward per step)
and ``LRAmax=? [phi]`` (the long-run fraction of steps spent in ``phi``), as Storm defines them.

Every path ends, almost surely, in an end component it never leaves, and there its mean reward is
at most (at least, for ``min``) the component's optimal gain. So (de Alfaro 1997):

1. The maximal end components (:mod:`mopmc.engine.mec`).
2. Each MEC's optimal gain ``g_M``: in closed form where the rewards of its own choices are all
   equal (a deadlock, a label the component lies in or out of), else by policy iteration for
   communicating models (:func:`_policy_iteration`), else (no fixpoint within
   :data:`GAIN_ROUNDS` rounds) by the linear program over its stationary frequencies (HiGHS),
   whose optimal vertex is one stationary policy with a single recurrent class. Either way the
   gain is computed again from the final policy's stationary distribution (one sparse LU), so the
   value is a policy's exact gain, not a solver's tolerance-bound objective.
3. The quotient: each MEC collapsed into one state, which keeps the choices of its states that
   leave it and gains a *stop* choice to a sink paying ``g_M``; every other choice pays nothing.
   The quotient has no end component left but the sink, so every scheduler stops somewhere, and
   its optimal expected total reward (the engine asked for: exact) is the optimal long-run
   average from the initial state.

Rewards are per choice, as everywhere in mopmc (a state reward is on every choice of its state):
the mean of the rewards of the choices taken, which is Storm's mean of state and action rewards.
"""

from __future__ import annotations

import warnings

import numpy as np

from mopmc.model.sparse_mdp import SparseMDP, ranges
from mopmc.properties.objectives import Objective

STOP = "__long_run_gain__"
"""The quotient's reward model: the gain of a MEC, paid by its stop choice."""


def choice_rewards(model: SparseMDP, o: Objective) -> np.ndarray:
    """The reward of each choice that ``o`` averages: its reward model's, or 1 on the choices of the
    states where its formula holds (``LRA [phi]``)."""
    if o.reward_model is not None:
        return np.asarray(model.reward(o.reward_model), np.float64)
    return o.target_mask(model)[model.state_of_choice()].astype(np.float64)


def mec_gains(model: SparseMDP, rewards: np.ndarray, maximise: bool):
    """``(ec, gains)``: the MEC decomposition and each MEC's optimal gain (max or min)."""
    from mopmc.engine.mec import maximal_end_components

    ec = maximal_end_components(model)
    owner = model.state_of_choice()
    gains = np.zeros(ec.count)
    if ec.count == 0:
        return ec, gains
    inside = np.flatnonzero(ec.choices)
    by_mec = ec.component[owner[inside]]
    order = np.argsort(by_mec, kind="stable")
    inside, by_mec = inside[order], by_mec[order]
    bounds = np.searchsorted(by_mec, np.arange(ec.count + 1))
    for m in range(ec.count):
        own = inside[bounds[m]:bounds[m + 1]]
        r = rewards[own]
        if r.min() == r.max():  # every way of staying pays the same each step
            gains[m] = r[0]
        else:
            gains[m] = _gain(model, own, r, maximise)
    return ec, gains


class _Mec:
    """One MEC's own choices in local numbering: ``local[j]`` the state of choice ``j`` (states
    ``0..k-1``, choices grouped by state), ``first`` the choices of each state, and per transition
    its choice ``col``, its local target ``to``, its probability ``p`` and its index ``trans`` in
    the model."""

    def __init__(self, model: SparseMDP, own: np.ndarray):
        owner = model.state_of_choice()[own]
        self.states, self.local = np.unique(owner, return_inverse=True)
        self.k, self.c = len(self.states), len(own)
        self.first = np.searchsorted(self.local, np.arange(self.k + 1))
        where = np.full(model.n_states, -1, np.int64)
        where[self.states] = np.arange(self.k)
        self.trans = ranges(model.indptr[own], model.indptr[own + 1])
        self.col = np.repeat(np.arange(self.c), model.indptr[own + 1] - model.indptr[own])
        self.to = where[model.targets[self.trans]]  # (a MEC's own choices stay inside it)
        self.p = model.probs[self.trans]

    def chain(self, pol: np.ndarray):
        """The Markov chain of the deterministic policy ``pol`` (a local choice per local state)."""
        from scipy.sparse import csr_matrix

        used = np.zeros(self.c, bool)
        used[pol] = True
        t = used[self.col]
        return csr_matrix((self.p[t], (self.local[self.col[t]], self.to[t])), shape=(self.k, self.k))


#: rounds of policy iteration before a MEC's gain goes to the linear program
GAIN_ROUNDS = 50
_IMPROVE = 1e-12  # relative margin for a strict improvement (as mopmc.engine.policy_iteration)


def _gain(model: SparseMDP, own: np.ndarray, r: np.ndarray, maximise: bool) -> float:
    """The optimal gain of one MEC (its own choices ``own``, their rewards ``r``): policy iteration,
    else (no fixpoint within :data:`GAIN_ROUNDS` rounds) the linear program."""
    mec = _Mec(model, own)
    sign = 1.0 if maximise else -1.0
    gain = _policy_iteration(mec, sign * r)
    if gain is not None:
        return sign * gain
    return _lp_gain(mec, r, maximise, model.source)


def _policy_iteration(mec: _Mec, rr: np.ndarray) -> float | None:
    """The maximal gain of the rewards ``rr`` in the MEC, or ``None``. Each round the policy's
    chain is made unichain (where it has several closed classes, the best class keeps its choices
    and every other state is routed to it: in a MEC every state can reach it, and the gain does not
    fall), then its gain ``g`` and bias ``h`` (``h = 0`` at a state of its class) solve
    ``g + h = r_pi + P_pi h`` (sparse LU), and every state switches to a choice strictly better in
    ``r + P h``. Without a switch ``(g, h)`` solves the optimality equation, so ``g`` is the optimal
    gain; it is then taken from the stationary distribution of the policy's class."""
    k = mec.k
    best = np.maximum.reduceat(rr, mec.first[:-1])
    pol = np.full(k, -1, np.int64)
    cand = np.flatnonzero(rr == best[mec.local])[::-1]
    pol[mec.local[cand]] = cand  # (the first best choice of each state)
    for _ in range(GAIN_ROUNDS):
        p = mec.chain(pol)
        closed = _closed_classes(p)
        if len(closed) > 1:
            gains = [_class_gain(p, cls, rr[pol[cls]]) for cls in closed]
            if any(g is None for g in gains):
                return None
            pol = _route(mec, pol, closed[int(np.argmax(gains))])
            p = mec.chain(pol)
            closed = _closed_classes(p)
            if len(closed) != 1:
                return None
        solved = _bias(p, rr[pol], int(closed[0][0]))
        if solved is None:
            return None
        g, h = solved
        q = rr.copy()
        np.add.at(q, mec.col, mec.p * h[mec.to])
        qbest = np.maximum.reduceat(q, mec.first[:-1])
        cur = q[pol]
        better = qbest > cur + _IMPROVE * np.maximum(1.0, np.abs(cur))
        if not better.any():
            exact = _class_gain(p, closed[0], rr[pol[closed[0]]])
            return exact if exact is not None else g
        cand = np.flatnonzero(better[mec.local] & (q == qbest[mec.local]))[::-1]
        pol[mec.local[cand]] = cand
    return None


def _closed_classes(p) -> list:
    """The closed (bottom) strongly connected classes of the chain ``p``, each as its states."""
    from scipy.sparse.csgraph import connected_components

    count, comp = connected_components(p, directed=True, connection="strong")
    coo = p.tocoo()
    leaving = np.zeros(count, bool)
    out = comp[coo.row] != comp[coo.col]
    leaving[comp[coo.row[out]]] = True
    order = np.argsort(comp, kind="stable")
    bounds = np.searchsorted(comp[order], np.arange(count + 1))
    return [order[bounds[i]:bounds[i + 1]] for i in range(count) if not leaving[i]]


def _class_gain(p, cls: np.ndarray, step: np.ndarray) -> float | None:
    """The gain of the closed class ``cls`` of the chain ``p`` with rewards ``step`` (per state of
    ``cls``, in its order): its stationary distribution (one sparse LU) dotted with the rewards."""
    if np.all(step == step[0]):
        return float(step[0])
    pi = _stationary(p[cls][:, cls])
    return None if pi is None else float(np.dot(pi, step))


def _stationary(p) -> np.ndarray | None:
    """The stationary distribution of the chain ``p`` (one closed class): ``pi (I - P) = 0`` with
    one equation replaced by ``sum(pi) = 1``, by sparse LU; ``None`` where that is singular."""
    from scipy.sparse.linalg import spsolve

    n = p.shape[0]
    if n == 1:
        return np.ones(1)
    a = _i_minus(p).T.tolil()
    a[n - 1, :] = np.ones(n)
    b = np.zeros(n)
    b[n - 1] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pi = spsolve(a.tocsc(), b)
    if not np.all(np.isfinite(pi)) or np.any(pi < -1e-12):
        return None
    return np.maximum(pi, 0.0)


def _i_minus(p):
    """``I - P`` of a chain closed on its states as ``D - P_off``: the diagonal summed from what
    each state sends to the others, never 1 minus a self-loop's double (a self-loop of
    ``1 - 1e-12`` left ``1 - fl(1 - 1e-12)``, 9e-5 off, and the gain 2/3 at 0.666647;
    :func:`mopmc.engine.banded.conserving_split` does the same for the engine's blocks)."""
    from scipy.sparse import csr_matrix, diags

    coo = p.tocoo()
    off = coo.row != coo.col
    n = p.shape[0]
    p_off = csr_matrix((coo.data[off], (coo.row[off], coo.col[off])), shape=p.shape)
    d = np.bincount(coo.row[off], weights=coo.data[off], minlength=n).astype(np.float64)  # (empty: int zeros)
    return (diags(d) - p_off).tocsr()


def _bias(p, step: np.ndarray, ref: int):
    """``(g, h)`` with ``g + h = step + p h`` and ``h[ref] = 0``, for a unichain ``p``."""
    from scipy.sparse import bmat, csr_matrix
    from scipy.sparse.linalg import spsolve

    k = p.shape[0]
    ones = csr_matrix(np.ones((k, 1)))
    pin = csr_matrix(([1.0], ([0], [ref])), shape=(1, k))
    a = bmat([[_i_minus(p), ones], [pin, None]], format="csc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = spsolve(a, np.r_[step, 0.0])
    if not np.all(np.isfinite(x)):
        return None
    return float(x[k]), x[:k]


def _route(mec: _Mec, pol: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``pol`` on the closed class ``target``; every other state takes a choice with a successor one
    step closer to it (breadth first, backwards over the MEC's choices), so that the class is the
    chain's only closed class."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    k = mec.k
    src = mec.local[mec.col]
    # backwards: from a state to the states with a choice reaching it; node k reaches the class
    rows = np.r_[mec.to, np.full(len(target), k)]
    cols = np.r_[src, target]
    back = csr_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(k + 1, k + 1))
    _, pred = breadth_first_order(back, k, directed=True, return_predecessors=True)
    out = pol.copy()
    inside = np.zeros(k, bool)
    inside[target] = True
    closer = (~inside[src]) & (pred[src] == mec.to)  # a transition to the state it was found from
    cand = np.flatnonzero(closer)[::-1]
    out[src[cand]] = mec.col[cand]
    return out


def _lp_gain(mec: _Mec, r: np.ndarray, maximise: bool, source: str) -> float:
    """The optimal gain of one MEC by the linear program over its stationary frequencies (HiGHS),
    then the exact gain of the policy at the LP's optimal vertex."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, csr_matrix, vstack

    k, c = mec.k, mec.c
    # flow: what leaves a state (its frequency) equals what enters it; frequencies sum to 1
    out = coo_matrix((np.ones(c), (mec.local, np.arange(c))), shape=(k, c))
    into = coo_matrix((mec.p, (mec.to, mec.col)), shape=(k, c))
    a_eq = vstack([(out - into).tocsr(), csr_matrix(np.ones((1, c)))]).tocsr()
    b_eq = np.r_[np.zeros(k), 1.0]
    sign = -1.0 if maximise else 1.0
    res = linprog(sign * r, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status != 0:  # a MEC always has a stationary policy: only a solver failure gets here
        from mopmc.errors import UnsupportedModelError

        raise UnsupportedModelError(f"{source}: the long-run gain of an end component of {k} states: "
                                    f"HiGHS failed ({res.message})")
    lp_value = float(r @ res.x)
    x = np.maximum(res.x, 0.0)
    x[x < 1e-12 * x.max()] = 0.0  # (a vertex's basic variables at rounding level: not part of the policy)
    exact = _policy_gain(mec, x, r)
    if exact is None or abs(exact - lp_value) > 1e-6 * max(1.0, abs(lp_value)):
        return lp_value
    return exact


def _policy_gain(mec: _Mec, x: np.ndarray, r: np.ndarray) -> float | None:
    """The exact gain of the stationary policy ``x`` induces (``pi(c|s) = x_c / sum``), from the
    stationary distribution of its chain on the states it visits; ``None`` where that chain is not
    closed or has more than one recurrent class (the LP's value then stands)."""
    from scipy.sparse import coo_matrix

    k, local, col, to = mec.k, mec.local, mec.col, mec.to
    visits = np.bincount(local, weights=x, minlength=k)
    support = visits > 0
    if not support.any():
        return None
    pol = np.where(support[local], x / np.where(support, visits, 1.0)[local], 0.0)
    used = pol[col] > 0
    if not np.all(support[to[used]]):  # the policy leaves the states it visits: not stationary
        return None
    idx = np.full(k, -1, np.int64)
    idx[support] = np.arange(int(support.sum()))
    n = int(support.sum())
    p = coo_matrix((mec.p[used] * pol[col[used]], (idx[local[col[used]]], idx[to[used]])),
                   shape=(n, n)).tocsr()
    pi = _stationary(p)
    if pi is None:
        return None
    step = np.bincount(local, weights=pol * r, minlength=k)[support]  # each state's expected reward a step
    return float(np.dot(pi, step))


def quotient(model: SparseMDP, ec, gains: np.ndarray) -> SparseMDP:
    """``model`` with every MEC collapsed into one state (its leaving choices and a stop choice
    paying its gain under :data:`STOP`), plus a sink; states outside MECs keep their choices.
    Transitions that fall on one state are merged, in target order."""
    n = model.n_states
    outside = ec.component < 0
    n_out = int(outside.sum())
    rep = np.empty(n, np.int64)
    rep[outside] = np.arange(n_out)
    rep[~outside] = n_out + ec.component[~outside]
    sink = n_out + ec.count
    owner = model.state_of_choice()
    kept = np.flatnonzero(~ec.choices)  # a MEC's own choices only move inside it: gone with it
    # choices grouped by their new state (stable: the original order within a state), stops last
    new_owner = np.r_[rep[owner[kept]], n_out + np.arange(ec.count), sink]
    src_choice = np.r_[kept, -np.ones(ec.count + 1, np.int64)]
    order = np.argsort(new_owner, kind="stable")
    new_owner, src_choice = new_owner[order], src_choice[order]
    n_new = sink + 1
    row_groups = np.searchsorted(new_owner, np.arange(n_new + 1))
    # transitions: an old choice's targets mapped through rep (merged); a stop goes to the sink
    old = src_choice >= 0
    sc = src_choice[old]
    lens = np.ones(len(src_choice), np.int64)
    lens[old] = model.indptr[sc + 1] - model.indptr[sc]
    c_of_t = np.repeat(np.arange(len(src_choice)), lens)
    trans = ranges(model.indptr[sc], model.indptr[sc + 1])  # (in the order of the old choices)
    tgt = np.full(len(c_of_t), sink, np.int64)
    prob = np.ones(len(c_of_t))
    from_old = old[c_of_t]
    tgt[from_old], prob[from_old] = rep[model.targets[trans]], model.probs[trans]
    key = np.lexsort((tgt, c_of_t))
    c_of_t, tgt, prob = c_of_t[key], tgt[key], prob[key]
    first = np.r_[True, (c_of_t[1:] != c_of_t[:-1]) | (tgt[1:] != tgt[:-1])]
    starts = np.flatnonzero(first)
    probs = np.add.reduceat(prob, starts) if len(starts) else prob
    targets, c_of_t = tgt[starts], c_of_t[starts]
    indptr = np.searchsorted(c_of_t, np.arange(len(src_choice) + 1))
    stop = np.zeros(len(src_choice))
    is_stop = ~old & (new_owner < sink)
    stop[is_stop] = gains[new_owner[is_stop] - n_out]
    return SparseMDP(row_groups, indptr, targets, probs, int(rep[model.initial]), rewards={STOP: stop},
                     source=model.source)
