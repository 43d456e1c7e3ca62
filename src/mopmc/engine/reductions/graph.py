"""Graph analysis without numbers: reachability, probability-0/1 sets, states worth nothing.

All functions take the CSR arrays (``row_groups``, ``indptr``, ``targets``) and work in O(transitions)
with the compiled breadth-first searches of :mod:`mopmc.engine.numba_kernels`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mopmc.engine.problem import Problem, Restriction, owners, permute, restrict
from mopmc.engine.scc import Plan, Sccs, in_processing_order, nearly_sequential, plan, processing_order, split_sccs, state_sccs


class Csr(NamedTuple):
    row_groups: np.ndarray
    indptr: np.ndarray
    targets: np.ndarray

    @property
    def n_states(self) -> int:
        return len(self.row_groups) - 1

    @property
    def n_choices(self) -> int:
        return len(self.indptr) - 1


class Reverse(NamedTuple):
    ptr: np.ndarray
    choice: np.ndarray
    state_of_choice: np.ndarray


def reverse(g: Csr) -> Reverse:
    """Transitions grouped by target: the predecessor choices of each state."""
    from mopmc.engine import numba_kernels as nk

    ptr, ch = nk.reverse_index_csr(g.n_states, g.indptr, g.targets)
    return Reverse(ptr, ch, owners(g.row_groups))


def any_per_state(flag: np.ndarray, g: Csr, rev: Reverse) -> np.ndarray:
    """Per state: some of its choices has ``flag``."""
    return np.bincount(rev.state_of_choice[flag], minlength=g.n_states) > 0


def can_reach(g: Csr, seed: np.ndarray, rev: Reverse | None = None, allowed: np.ndarray | None = None):
    """States with a path to ``seed`` (optionally through ``allowed`` choices only)."""
    from mopmc.engine import numba_kernels as nk

    rev = rev or reverse(g)
    allowed = np.ones(g.n_choices, bool) if allowed is None else allowed
    mark, _ = nk.backward_reach(seed.copy(), rev.ptr, rev.choice, rev.state_of_choice, allowed, np.ones(g.n_states, bool))
    return mark


def almost_sure_max(g: Csr, target: np.ndarray, exits: np.ndarray | None = None, rev: Reverse | None = None,
                    max_rounds: int | None = None):
    """States where some scheduler reaches ``target`` (or the terminal, via ``exits``) with probability 1.

    Returns ``(mask, choice)``: ``choice[s]`` is a choice of a scheduler achieving it (a proper
    scheduler: it moves closer to the target with positive probability and never leaves the set).
    ``choice`` is -1 on target states that have no exit choice of their own. ``max_rounds``: give up
    (return None) after that many rounds of the outer fixpoint (each a pass over the transitions;
    a model may need a round per layer of states it peels).
    """
    from mopmc.engine import numba_kernels as nk

    rev = rev or reverse(g)
    inside = np.ones(g.n_states, bool)
    exits = np.zeros(g.n_choices, bool) if exits is None else exits
    target = np.asarray(target, bool)
    valid = np.ones(g.n_choices, bool)
    rounds = 0
    while True:
        rounds += 1
        if max_rounds is not None and rounds > max_rounds:
            return None
        # drop choices that may leave ``inside``, and the states (not targets) left without choices,
        # to the fixpoint at once (a worklist): a round per state peeled made a walk with a trap at
        # one end (gambler's ruin) quadratic
        nk.prune_closed(rev.ptr, rev.choice, rev.state_of_choice, valid, inside, target)
        seed_choice = valid & exits & inside[rev.state_of_choice]
        seed = inside & (target | any_per_state(seed_choice, g, rev))
        mark, via = nk.backward_reach(seed, rev.ptr, rev.choice, rev.state_of_choice, valid, inside)
        if np.array_equal(mark, inside):
            break
        inside = mark
    # seeds reached through an exit choice: record it
    cs = np.flatnonzero(seed_choice)
    first = np.full(g.n_states, -1, np.int64)
    first[rev.state_of_choice[cs[::-1]]] = cs[::-1]
    via = np.where(via < 0, first, via)
    return inside, via


def almost_sure_exit_acyclic(p: Problem, order: np.ndarray):
    """:func:`almost_sure_max` towards the terminal alone (no target states) where every SCC of
    ``p`` is one state (self-loops allowed), in one compiled pass over ``order`` (every state,
    each after its successors: a processing order of :func:`~mopmc.engine.scc.plan`) instead of
    its fixpoint of reverse breadth-first searches. Returns ``(mask, choice)`` as it does (the
    choice may differ: any proper one)."""
    from mopmc.engine import numba_kernels as nk

    return nk.leave_surely_in_order(np.ascontiguousarray(order, np.int64), p.row_groups, p.indptr, p.targets, p.exits)


def avoid_positive(g: Csr, target: np.ndarray, rev: Reverse | None = None) -> np.ndarray:
    """States where some scheduler avoids ``target`` forever with probability 1 (``Pmin[F target] = 0``)."""
    rev = rev or reverse(g)
    # the largest set outside target closed under the choices whose successors all lie in it (the
    # complement of Pmin > 0), by a worklist: linear, where a round per one-step rule peels a chain
    # one state per round
    from mopmc.engine import numba_kernels as nk

    inside = ~np.asarray(target, bool)
    nk.prune_closed(rev.ptr, rev.choice, rev.state_of_choice, np.ones(g.n_choices, bool), inside, np.zeros(g.n_states, bool))
    return inside


def almost_sure_all(g: Csr, target: np.ndarray, rev: Reverse | None = None) -> np.ndarray:
    """States where every scheduler reaches ``target`` with probability 1 (``Pmin[F target] = 1``)."""
    rev = rev or reverse(g)
    zero = avoid_positive(g, target, rev)
    allowed = ~target[rev.state_of_choice]
    bad = can_reach(g, zero, rev, allowed)
    return ~bad


def drop_worthless(p: Problem, numbering: str = "keep") -> tuple[Restriction, Sccs, Plan | None]:
    """Remove the states from which no scheduler can collect any reward (all values 0 there).

    Returns ``(restriction, sccs, plan)``: the SCCs of the kept problem come for free, since
    reaching a paying state is decided SCC by SCC in the condensation
    (:func:`mopmc.engine.scc.state_sccs`) and no removed state shares an SCC with a kept one; the
    kept problem's :func:`~mopmc.engine.scc.plan` follows from them (None when the initial state is
    removed: nothing to plan).

    ``numbering`` of the kept states when some are removed (a copy of the problem either way):
    ``"keep"`` their order in ``p``; ``"plan"`` the processing order of their plan, so that every
    plan step is a contiguous range and the engine need not copy the problem a second time to
    renumber it (at Model A n=200 a copy of 7M transitions); ``"auto"`` that order only where
    ``p``'s is far from it (:func:`~mopmc.engine.scc.nearly_sequential`)."""
    if numbering not in ("keep", "plan", "auto"):
        raise ValueError(f"numbering {numbering!r}: use keep, plan or auto")
    from mopmc.engine import numba_kernels as nk

    paying = nk.nonzero_rows(p.rewards)
    seed = np.bincount(p.state_of_choice()[paying], minlength=p.n_states) > 0
    sccs = state_sccs(p, seed)
    keep, kept_sccs = split_sccs(sccs, sccs.reach)
    if p.initial < 0 or not keep[p.initial]:
        return restrict(p, keep), kept_sccs, None
    first = plan(None, kept_sccs)
    if numbering == "keep" or keep.all():
        return restrict(p, keep), kept_sccs, first
    order = processing_order(first)  # over the kept states, numbered in their order in p
    if numbering == "auto" and nearly_sequential(order):
        return restrict(p, keep), kept_sccs, first
    r = permute(p, np.flatnonzero(keep)[order])
    return r, kept_sccs._replace(label=kept_sccs.label[order]), in_processing_order(first)
