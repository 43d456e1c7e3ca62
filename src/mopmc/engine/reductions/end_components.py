"""Maximal end components and the quotient that collapses zero-reward end components.

In an end component where no objective collects reward, a scheduler may stay forever (all values
0) or leave through any exit of any member state at no cost. Policy iteration needs these collapsed:
otherwise a policy staying there makes ``I - P`` singular, and value iteration has many fixed
points. :func:`collapse` replaces each such component by one state whose choices are the members'
exits plus, when staying is allowed, a "stay" choice (no transitions, reward 0).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from mopmc.engine.problem import Problem, exit_mass, gather_rows, restrict, take_rows


SUBPROBLEM_FRACTION = 0.25
"""With fewer candidate states than this fraction, MECs are computed on the candidates' sub-problem."""


class EndComponents(NamedTuple):
    """``component[s]`` in ``0..count-1`` or -1; ``inside[c]``: choice ``c`` stays in its state's MEC."""

    count: int
    component: np.ndarray
    inside: np.ndarray


def maximal_end_components(p: Problem, allowed: np.ndarray, candidates: np.ndarray | None = None) -> EndComponents:
    """MECs of ``p`` restricted to the ``allowed`` choices (choices with exits never belong to one).

    ``candidates`` (optional) is a superset of the states that may lie in an end component; it only
    saves work.
    """
    n = p.n_states
    soc = p.state_of_choice()
    if candidates is not None and int(candidates.sum()) < SUBPROBLEM_FRACTION * n:
        return _on_candidates(p, allowed & ~p.exits & candidates[soc], candidates)
    from mopmc.engine import numba_kernels as nk

    allowed = allowed & ~p.exits
    alive = np.ones(n, bool) if candidates is None else candidates.copy()
    allowed &= alive[soc]
    rev_ptr, rev_choice = nk.reverse_index_csr(n, p.indptr, p.targets)
    # (one compiled fixpoint: repeating SCC decompositions in numpy took a global pass per peeled
    # layer, 67 of them per call on the shared-coin protocol at K=16, 0.87 s for two calls)
    label = nk.mec_fixpoint(p.row_groups, p.indptr, p.targets, p.choice_of_transition(), soc, rev_ptr, rev_choice,
                            allowed, alive, nk.MEC_SEARCH_BUDGET)
    comp = np.full(n, -1, np.int64)
    if alive.any():
        _, dense = np.unique(label[alive], return_inverse=True)
        comp[alive] = dense
    return EndComponents(int(comp.max()) + 1 if alive.any() else 0, comp, allowed)


def _on_candidates(p: Problem, allowed: np.ndarray, candidates: np.ndarray) -> EndComponents:
    """The same MECs, computed on the sub-problem of the few candidate states: a transition to a
    non-candidate becomes an exit there, which excludes its choice exactly as the full loop does."""
    soc = p.state_of_choice()
    keep = candidates & (np.bincount(soc[allowed], minlength=p.n_states) > 0)
    comp = np.full(p.n_states, -1, np.int64)
    inside = np.zeros(p.n_choices, bool)
    if not keep.any():
        return EndComponents(0, comp, inside)
    r = restrict(p, keep, allowed)
    sub = maximal_end_components(r.problem, np.ones(r.problem.n_choices, bool))
    kept = r.state_map >= 0
    comp[kept] = sub.component[r.state_map[kept]]
    inside[r.choice_origin] = sub.inside
    return EndComponents(sub.count, comp, inside)


def cyclic_candidates(p: Problem, label: np.ndarray, n_labels: int | None = None) -> np.ndarray:
    """States in a non-trivial SCC or with a self-loop: the only ones that can be in an end component
    (``n_labels``: how many SCCs, when known; as many as states: every SCC is one state)."""
    from mopmc.engine import numba_kernels as nk

    loops = nk.self_loop_states(p.row_groups, p.indptr, p.targets)
    if n_labels == p.n_states:
        return loops
    sizes = np.bincount(label)
    return (sizes[label] > 1) | loops


class Quotient(NamedTuple):
    """``node[s]``: the quotient state of ``s``; ``origin[c]``: the source choice of quotient choice
    ``c`` (-1: stay); ``ecs``: the collapsed components (``component``/``inside`` as in the source)."""

    problem: Problem
    node: np.ndarray
    origin: np.ndarray
    ecs: EndComponents


def collapse(p: Problem, ecs: EndComponents, stay: bool) -> Quotient:
    """Merge each component of ``ecs`` (all its internal choices must have zero reward) into one state."""
    n = p.n_states
    if ecs.count == 0:
        return Quotient(p, np.arange(n, dtype=np.int64), np.arange(p.n_choices, dtype=np.int64), ecs)
    in_ec = ecs.component >= 0
    # quotient states: each non-member keeps its place, each component sits at its first member
    first = np.full(ecs.count, n, np.int64)
    np.minimum.at(first, ecs.component[in_ec], np.flatnonzero(in_ec))
    rep = np.where(in_ec, first[np.maximum(ecs.component, 0)], np.arange(n))
    is_rep = rep == np.arange(n)
    node_of_rep = np.cumsum(is_rep) - 1
    node = node_of_rep[rep]
    soc = p.state_of_choice()
    kept = np.flatnonzero(~ecs.inside)
    keys = node[soc[kept]]
    if stay:
        kept = np.concatenate((kept, np.full(ecs.count, -1, np.int64)))
        keys = np.concatenate((keys, node[first]))
    order = np.argsort(keys, kind="stable")
    origin, keys = kept[order], keys[order]
    n_q = int(is_rep.sum())
    rg = np.zeros(n_q + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n_q), out=rg[1:])
    ip, idx = gather_rows(p.indptr, origin)
    real = origin >= 0
    R = np.zeros((len(origin), p.rewards.shape[1]))
    R[real] = take_rows(p.rewards, origin[real])
    exits = np.ones(len(origin), bool)
    exits[real] = p.exits[origin[real]]
    mass = np.ones(len(origin))  # (a stay choice: the terminal surely)
    mass[real] = exit_mass(p)[origin[real]]
    init = int(node[p.initial]) if p.initial >= 0 else -1
    q = Problem(rg, ip, node[p.targets[idx]], p.probs[idx], R, exits, init, mass)
    return Quotient(q, node, origin, ecs)
