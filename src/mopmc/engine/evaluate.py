"""Evaluate a fixed scheduler on a model: the induced Markov chain and one sparse solve.

This shares nothing with the kernel on purpose (it checks the kernel's and the queries' answers).
A scheduler is a :class:`Policy`: per product state ``(s, b)`` a distribution over the model
choices of ``s``; ``b`` is goal memory as in :mod:`mopmc.engine.scheduler` (one bit per decision
set, set for every set some earlier state of the run belonged to). A :class:`Mixture` picks one
policy at the start with fixed probabilities.

The chain is explored from the initial state under the policy, on the product with the
scheduler's memory bits *and* one bit per decision set of the objectives (needed to count the
first visit of a target), in the same convention:

* ``R{"r"}[C]``: the choice reward ``r``, always;
* ``P[F psi]`` / ``P[phi U psi]``: 1 at ``(s, b)`` when ``s`` satisfies ``psi`` and the objective's
  bit (set by ``psi``, and for ``U`` by ``!phi``) is unset; ``P[G phi]`` is ``1 - P[F !phi]``;
* ``R{"r"}[F phi]`` (inside ``multi``): ``r`` while the bit of ``phi`` is unset and ``s`` is not
  in ``phi``.

Values: states in bottom strongly connected components (BSCCs) of the chain are recurrent; a
reachable BSCC that collects reward makes the value infinite (``inf``/``-inf``; ``nan`` when it
collects both signs); all other states are transient and ``(I - Q) v = r`` on them is nonsingular.

>>> from mopmc.engine.evaluate import evaluate            # doctest: +SKIP
>>> evaluate(model, kernel_scheduler, objectives).values  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
from scipy.sparse import csr_matrix, diags
from scipy.sparse.csgraph import connected_components

from mopmc.engine.banded import BAND_BUDGET, RESCUE_FLOPS, block_solver, conserving_split, sums_dd
from mopmc.engine.policy_iteration import hopeless
from mopmc.engine.refine import refine
from mopmc.engine.reductions.goal_memory import bit_for, decision_set
from mopmc.errors import SchedulerError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.model.unfold import require_unbounded
from mopmc.properties.objectives import Objective


@dataclass(frozen=True, eq=False)
class Policy:
    """Entry ``e`` is product state ``(state[e], memory[e])``; its rows ``indptr[e]:indptr[e+1]``
    give model ``choice`` and ``prob``. ``decided[j]`` is the state mask that sets memory bit ``j``."""

    state: np.ndarray
    memory: np.ndarray
    indptr: np.ndarray
    choice: np.ndarray
    prob: np.ndarray
    decided: np.ndarray  # (n_bits, n_model_states) bool

    @property
    def n_bits(self) -> int:
        return int(self.decided.shape[0])

    @property
    def deterministic(self) -> bool:
        return bool(np.all(np.diff(self.indptr) == 1))

    @classmethod
    def of(cls, scheduler) -> "Policy":
        """A :class:`Policy` from a kernel :class:`~mopmc.engine.scheduler.Scheduler`, a
        :class:`~mopmc.engine.kernel.KernelResult` or a :class:`Policy`."""
        if isinstance(scheduler, Policy):
            return scheduler
        inner = getattr(scheduler, "scheduler", None)
        if inner is not None and hasattr(inner, "choice"):
            scheduler = inner
        if hasattr(scheduler, "choice") and hasattr(scheduler, "decided") and hasattr(scheduler, "memory"):
            k = len(scheduler.state)
            return cls(np.asarray(scheduler.state, np.int64), np.asarray(scheduler.memory, np.int64),
                       np.arange(k + 1, dtype=np.int64), np.asarray(scheduler.choice, np.int64), np.ones(k),
                       np.asarray(scheduler.decided, bool).reshape(-1, scheduler.n_model_states))
        raise SchedulerError(f"cannot evaluate a {type(scheduler).__name__}: give a deterministic scheduler, "
                             "a Policy or a Mixture")

    def check(self, model: SparseMDP) -> None:
        """Every entry must list at least one choice, every row's choice must belong to its entry's
        state and every entry's probabilities must sum to 1."""
        counts = np.diff(self.indptr)
        empty = np.flatnonzero(counts == 0)
        if len(empty):
            e = int(empty[0])
            raise SchedulerError(f"scheduler entry {e} (state {int(self.state[e])}): no choices; "
                                 "an entry must give a distribution over its state's choices")
        owner = np.repeat(np.arange(len(self.state)), counts)
        s = self.state[owner]
        bad = np.flatnonzero((self.choice < model.row_groups[s]) | (self.choice >= model.row_groups[s + 1]))
        if len(bad):
            e = int(owner[bad[0]])
            raise SchedulerError(f"scheduler entry {e} (state {int(self.state[e])}): choice {int(self.choice[bad[0]])} "
                                 "is not a choice of that state; was the scheduler computed on another model?")
        # (not np.add.reduceat: it gives an empty segment the next element, not 0)
        sums = np.bincount(owner, weights=self.prob, minlength=len(self.state))
        off = np.flatnonzero(np.abs(sums - 1.0) > 1e-6)
        if len(off):
            raise SchedulerError(f"scheduler entry {int(off[0])} (state {int(self.state[off[0]])}): "
                                 f"probabilities sum to {sums[off[0]]:.9g}, not 1")


@dataclass(frozen=True, eq=False)
class Mixture:
    """Policy ``policies[i]`` is drawn once at the start with probability ``weights[i]``."""

    weights: np.ndarray
    policies: tuple[Policy, ...]


class Evaluation(NamedTuple):
    """``values`` in original units and objective order; ``states``: size of the induced chain;
    ``defaulted``: reachable product states without an entry that took their first choice."""

    values: np.ndarray
    states: int
    defaulted: int


class Chain(NamedTuple):
    """The induced chain: product keys ``memory * n + state``, substochastic ``q``, rewards
    ``(n_p, m)``, the initial index, and which keys are recurrent (in a BSCC)."""

    keys: np.ndarray
    q: csr_matrix
    rewards: np.ndarray
    initial: int
    recurrent: np.ndarray
    defaulted: int
    n_model_states: int


def _ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``concat(arange(starts[i], ends[i]))`` and the owner ``i`` of each element."""
    counts = ends - starts
    owner = np.repeat(np.arange(len(starts)), counts)
    if len(owner) == 0:
        return np.zeros(0, np.int64), owner
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return np.arange(len(owner)) - first[owner] + starts[owner], owner


_TABLE_LIMIT = 1 << 26  # keys: a bit table up to 64 MiB


class _Seen:
    """The set of explored (memory, state) keys: a bit table when the key space is small, else a
    hash set; adding a sorted unique batch returns its unseen keys (linear in the batch, not in the set)."""

    def __init__(self, key_space: int, first: np.ndarray):
        self.table = np.zeros(key_space, bool) if key_space <= _TABLE_LIMIT else None
        self.hashed: set[int] = set()
        self.batches: list[np.ndarray] = []
        self.add(first)

    def add(self, keys: np.ndarray) -> np.ndarray:
        if self.table is not None:
            new = keys[~self.table[keys]]
            self.table[new] = True
        else:
            new = np.array([k for k in keys.tolist() if k not in self.hashed], np.int64)
            self.hashed.update(new.tolist())
        self.batches.append(new)
        return new

    def keys(self) -> np.ndarray:
        return np.sort(np.concatenate(self.batches))


def induced_chain(model: SparseMDP, policy: Policy, objectives: Sequence[Objective] = (), *,
                  missing: str = "error") -> Chain:
    """Explore the chain of ``policy`` on ``model`` from the initial state; see the module docstring.

    ``missing``: what to do at a reachable state without an entry that has several choices:
    ``"error"`` (a :class:`SchedulerError` naming it) or ``"first"`` (take its first choice).
    A state with a single choice never needs an entry.
    """
    require_unbounded(objectives)
    n = model.n_states
    sets = [np.asarray(d, bool) for d in policy.decided]
    obj_bit = []
    for o in objectives:
        d = decision_set(model, o)
        obj_bit.append(-1 if d is None else bit_for(sets, d))
    if len(sets) > 40:
        raise SchedulerError(f"{len(sets)} memory bits are more than the evaluator supports (40)")
    dbits = np.zeros(n, np.int64)
    for j, d in enumerate(sets):
        dbits |= d.astype(np.int64) << j
    pmask = (1 << policy.n_bits) - 1
    pkeys = policy.memory * n + policy.state
    order = np.argsort(pkeys, kind="stable")
    sorted_keys = pkeys[order]
    if len(sorted_keys) > 1 and np.any(sorted_keys[1:] == sorted_keys[:-1]):
        raise SchedulerError("the scheduler has two entries for the same (state, memory)")
    counts = np.diff(model.row_groups)
    reach_only = len(objectives) > 0 and all(b >= 0 for b in obj_bit)
    obj_mask = 0
    for b in obj_bit:
        if b >= 0:
            obj_mask |= 1 << b

    frontier = np.array([model.initial], np.int64)
    seen = _Seen(n * (1 << len(sets)), frontier)
    edges_src, edges_dst, edges_p = [], [], []
    row_key, row_choice, row_prob = [], [], []
    defaulted = 0
    while len(frontier):
        s = frontier % n
        b = frontier // n
        pos = np.searchsorted(sorted_keys, (b & pmask) * n + s)
        pos_ok = np.minimum(pos, max(len(sorted_keys) - 1, 0))
        found = (pos < len(sorted_keys)) & (sorted_keys[pos_ok] == (b & pmask) * n + s) if len(sorted_keys) else np.zeros(len(s), bool)
        # nothing left to collect once every reachability objective is decided; a policy with goal
        # memory need not say what it does then (the kernel drops those product states)
        if reach_only:
            done = (b & obj_mask) == obj_mask
        elif not objectives and policy.n_bits:
            done = ((b & pmask) == pmask) & ~found
        else:
            done = np.zeros(len(s), bool)
        found &= ~done
        lost = np.flatnonzero(~found & ~done)
        if len(lost):
            several = lost[counts[s[lost]] > 1]
            if len(several) and missing != "first":
                st = int(s[several[0]])
                where = model.valuations.of(st) if model.valuations is not None else f"state {st}"
                raise SchedulerError(f"the scheduler has no entry for the reachable state {where} (memory "
                                     f"{int(b[several[0]] & pmask)}), which has {int(counts[st])} choices; "
                                     "export entries for every reachable state, or evaluate with missing='first'")
            defaulted += len(several)
        e = order[pos_ok[found]]
        rows, own = _ranges(policy.indptr[e], policy.indptr[e + 1])
        src = np.concatenate((frontier[found][own], frontier[lost]))
        ch = np.concatenate((policy.choice[rows], model.row_groups[s[lost]]))
        pr = np.concatenate((policy.prob[rows], np.ones(len(lost))))
        keep = pr > 0
        src, ch, pr = src[keep], ch[keep], pr[keep]
        row_key.append(src)
        row_choice.append(ch)
        row_prob.append(pr)
        trans, town = _ranges(model.indptr[ch], model.indptr[ch + 1])
        ssrc = src[town]
        nb = (ssrc // n) | dbits[ssrc % n]
        dst = nb * n + model.targets[trans]
        p = pr[town] * model.probs[trans]
        edges_src.append(ssrc)
        edges_dst.append(dst)
        edges_p.append(p)
        frontier = seen.add(np.unique(dst[p > 0]))

    keys = seen.keys()
    k = len(keys)
    src = np.searchsorted(keys, np.concatenate(edges_src))
    dst = np.searchsorted(keys, np.concatenate(edges_dst))
    q = csr_matrix((np.concatenate(edges_p), (src, dst)), shape=(k, k))
    rk = np.concatenate(row_key)
    rc = np.concatenate(row_choice)
    rp = np.concatenate(row_prob)
    ridx = np.searchsorted(keys, rk)
    rs, rb = rk % n, rk // n
    rewards = np.zeros((k, len(objectives)))
    for i, o in enumerate(objectives):
        if o.kind == "total_reward":
            col = model.reward(o.reward_model)[rc]
        else:
            unset = ((rb >> obj_bit[i]) & 1) == 0
            hit = o.target_mask(model)[rs]
            if o.kind == "probability":
                col = (unset & hit).astype(float)
            else:
                col = np.where(unset & ~hit, model.reward(o.reward_model)[rc], 0.0)
        rewards[:, i] = np.bincount(ridx, weights=rp * col, minlength=k)
    init = int(np.searchsorted(keys, model.initial))
    return Chain(keys, q, rewards, init, _recurrent(q), defaulted, n)


def _recurrent(q: csr_matrix) -> np.ndarray:
    """States in bottom strongly connected components of ``q``'s graph."""
    k = q.shape[0]
    if k == 0:
        return np.zeros(0, bool)
    _, comp = connected_components(q, directed=True, connection="strong")
    coo = q.tocoo()
    leaves = coo.data > 0
    cross = comp[coo.row[leaves]] != comp[coo.col[leaves]]
    open_comp = np.zeros(comp.max() + 1, bool)
    open_comp[comp[coo.row[leaves][cross]]] = True
    # substochastic rows (mass to nowhere) also leave their component
    lost = np.asarray(q.sum(axis=1)).ravel() < 1.0 - 1e-12
    open_comp[comp[lost]] = True
    return ~open_comp[comp]


class _Solved(NamedTuple):
    values: np.ndarray
    visits: np.ndarray  # expected visits per chain state (inf for recurrent ones)


def _band_solve(p_in, out_sum, exits, b, fallback):
    """The transient part's values by band elimination (:mod:`mopmc.engine.banded`) where its
    factors fit the engines' rescue budgets, else ``fallback`` (SuperLU's refined values)."""
    n = p_in.shape[0]
    solver, _ = block_solver(p_in, np.arange(n, dtype=np.int64), out_sum, exits, BAND_BUDGET, False, RESCUE_FLOPS)
    if solver is None:
        return fallback
    lu = solver.factor(np.arange(n, dtype=np.int64))
    return np.column_stack([lu.solve(np.ascontiguousarray(b[:, j])) for j in range(b.shape[1])])


def _solve(chain: Chain, want_visits: bool = False) -> _Solved:
    from scipy.sparse.linalg import splu

    rec = chain.recurrent
    m = chain.rewards.shape[1]
    values = np.zeros(m)
    for i in range(m):
        r = chain.rewards[rec, i]
        pos, neg = bool(np.any(r > 0)), bool(np.any(r < 0))
        if pos or neg:
            values[i] = np.nan if pos and neg else (np.inf if pos else -np.inf)
    trans = np.flatnonzero(~rec)
    visits = np.full(len(rec), np.inf)
    visits[trans] = 0.0
    if rec[chain.initial] or len(trans) == 0:
        return _Solved(values, visits)
    where = np.full(len(rec), -1, np.int64)
    where[trans] = np.arange(len(trans))
    # D - Q_off as the engines factor it (mopmc.engine.refine): the diagonal is what each state
    # sends elsewhere, summed (to other states, and to the terminal where a row misses mass)
    n_t = len(trans)
    rows_q = chain.q[trans].tocoo()
    inside = where[rows_q.col] >= 0
    p_in = csr_matrix((rows_q.data[inside], (rows_q.row[inside], where[rows_q.col[inside]])), shape=(n_t, n_t))
    out_sum, out_lo = sums_dd(rows_q.row[~inside], rows_q.data[~inside], n_t)
    exits = 1.0 - np.bincount(rows_q.row, weights=rows_q.data, minlength=n_t) > 1e-12
    q_off, diag, diag_lo = conserving_split(p_in, np.arange(n_t, dtype=np.int64), out_sum, exits, out_lo)
    try:
        lu = splu((diags(diag) - q_off).tocsc())
    except RuntimeError:  # a zero pivot by cancellation (the chain leaves its transient states surely)
        lu = None
    finite = np.isfinite(values)
    if finite.any():
        b = np.ascontiguousarray(chain.rewards[trans][:, finite])
        settled = False
        if lu is not None:
            v, settled = refine(lu.solve, q_off, (diag, diag_lo), b, np.asarray(lu.solve(b)).reshape(b.shape))
            settled = settled and not hopeless(lu.solve, n_t)  # (held too long for the LU's values)
        if not settled:  # too ill-conditioned for SuperLU: subtraction-free band elimination
            v = _band_solve(p_in, out_sum, exits, b, v if lu is not None else None)
        values[finite] = v[where[chain.initial]]
    if want_visits:
        if lu is None:
            from mopmc.errors import UnsupportedModelError

            raise UnsupportedModelError("the scheduler's expected visits: its chain is too ill-conditioned for a "
                                        "sparse LU (a zero pivot by cancellation)")
        e = np.zeros(len(trans))
        e[where[chain.initial]] = 1.0
        visits[trans] = np.maximum(lu.solve(e, trans="T"), 0.0)
    return _Solved(values, visits)


def evaluate(model: SparseMDP, scheduler, objectives: Sequence[Objective], *, missing: str = "error") -> Evaluation:
    """The objective values of ``scheduler`` (a :class:`Policy`, :class:`Mixture` or kernel scheduler).

    ``missing``: see :func:`induced_chain`.
    """
    objectives = tuple(objectives)
    if isinstance(scheduler, Mixture):
        total = np.zeros(len(objectives))
        states = defaulted = 0
        for w, p in zip(scheduler.weights, scheduler.policies):
            if w <= 0:
                continue
            ev = evaluate(model, p, objectives, missing=missing)
            total = total + w * ev.values
            states += ev.states
            defaulted += ev.defaulted
        return Evaluation(total, states, defaulted)
    policy = Policy.of(scheduler)
    policy.check(model)
    chain = induced_chain(model, policy, objectives, missing=missing)
    values = _solve(chain).values
    for i, o in enumerate(objectives):
        if o.kind == "probability" and o.negated:
            values[i] = 1.0 - values[i]
    return Evaluation(values, len(chain.keys), chain.defaulted)


class Occupation(NamedTuple):
    """Expected visits of each chain state ``keys`` (``inf`` for recurrent states) and the chain."""

    keys: np.ndarray
    visits: np.ndarray
    recurrent: np.ndarray


def occupation(model: SparseMDP, policy: Policy) -> Occupation:
    """Expected number of visits to each product state ``(s, b)`` reachable under ``policy``
    (keys ``b * n + s``, the policy's own memory only); ``inf`` in bottom components."""
    chain = induced_chain(model, policy)
    solved = _solve(chain, want_visits=True)
    return Occupation(chain.keys, solved.visits, chain.recurrent)
