"""Maximal end components (MECs) of a sparse MDP, by iterated SCC decomposition.

An end component is a set of states with, for each of them, a non-empty set of choices whose
successors all stay in the set, such that the set is strongly connected under those choices. The
standard algorithm (de Alfaro 1997): take the SCCs of the graph of the allowed choices, drop every
choice with a successor outside its state's SCC, drop states left without choices (and the choices
entering them, and so on, at once), repeat until nothing changes. What remains, split into SCCs,
are the MECs.

This module is deliberately independent of the iterative kernel's preprocessing: the LP oracle uses
it to check that kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from mopmc.model.sparse_mdp import SparseMDP


class EndComponents(NamedTuple):
    """A MEC decomposition.

    ``component[s]`` is the MEC of state ``s`` (``0..count-1``) or ``-1`` when ``s`` is in none;
    ``choices`` marks the choices that stay inside their state's MEC (the MEC's own choices).
    """

    count: int
    component: np.ndarray
    choices: np.ndarray

    def states(self, k: int) -> np.ndarray:
        """The states of MEC ``k``, ascending."""
        return np.flatnonzero(self.component == k)


def _drop(dead: np.ndarray, choice_ok: np.ndarray, count: np.ndarray, owner: np.ndarray, into) -> None:
    """States ``dead`` have no choice left: drop, in place, every choice entering them, and so on
    for the states that leaves without choices (a worklist, so that a chain is dropped in one
    round of the SCC loop instead of a round per state)."""
    stack = [int(t) for t in dead]
    ptr, entering = into.indptr, into.indices
    while stack:
        t = stack.pop()
        for c in entering[ptr[t]:ptr[t + 1]]:
            if choice_ok[c]:
                choice_ok[c] = False
                s = owner[c]
                count[s] -= 1
                if count[s] == 0:
                    stack.append(int(s))


def maximal_end_components(model: SparseMDP, allowed: np.ndarray | None = None) -> EndComponents:
    """The MECs of ``model`` restricted to the ``allowed`` choices (default: all).

    With ``allowed`` = the choices without reward, the result is the maximal zero-reward end
    components: the places where a scheduler may stay forever collecting nothing.

    >>> m = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1.0, 1.0, 1.0])
    >>> ec = maximal_end_components(m)
    >>> ec.count, ec.component.tolist(), ec.choices.tolist()
    (2, [0, 1], [True, False, True])
    """
    n = model.n_states
    owner = model.state_of_choice()
    t_choice = model.choice_of_transition()
    t_src = owner[t_choice]
    positive = model.probs > 0
    choice_ok = np.ones(model.n_choices, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool).copy()
    # the choices entering each state (positive transitions): a dropped state drops them at once
    into = csr_matrix((np.ones(int(positive.sum()), np.int8), (model.targets[positive], t_choice[positive])),
                      shape=(n, model.n_choices))
    count = np.bincount(owner[choice_ok], minlength=n)
    _drop(np.flatnonzero(count == 0), choice_ok, count, owner, into)
    while True:
        edge = choice_ok[t_choice] & positive
        graph = csr_matrix((np.ones(int(edge.sum())), (t_src[edge], model.targets[edge])), shape=(n, n))
        _, comp = connected_components(graph, directed=True, connection="strong")
        leaves = edge & (comp[model.targets] != comp[t_src])
        # zero-probability transitions never leave; only positive ones count
        bad = np.zeros(model.n_choices, dtype=bool)
        bad[t_choice[leaves]] = True
        bad &= choice_ok
        if not bad.any():
            break
        choice_ok &= ~bad
        lost = np.bincount(owner[bad], minlength=n)
        count -= lost
        _drop(np.flatnonzero((count == 0) & (lost > 0)), choice_ok, count, owner, into)
    state_ok = count > 0
    component = np.full(n, -1, dtype=np.int64)
    if state_ok.any():
        _, dense = np.unique(comp[state_ok], return_inverse=True)
        component[state_ok] = dense
    count = int(component.max()) + 1 if state_ok.any() else 0
    return EndComponents(count, component, choice_ok)
