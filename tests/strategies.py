"""Hypothesis strategies shared by the engine tests: random sparse MDPs.

``random_mdps()`` draws MDPs with cycles, zero-reward end components (rewards are mostly zero),
unreachable states (successors are drawn at random, so some states are never targets), several
reward models (optionally with negative values) and labels ``"a"``/``"b"``. Probabilities are small
rationals (integer weights over their sum), so exact tools agree with floating point ones.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from mopmc.model.sparse_mdp import SparseMDP

REWARD_VALUES = (0, 0, 0, 0, 1, 2, 5)


@st.composite
def random_mdps(
    draw,
    max_states: int = 50,
    max_choices: int = 3,
    max_successors: int = 3,
    reward_models: int = 2,
    negative: bool = True,
    labels: tuple[str, ...] = ("a", "b"),
) -> SparseMDP:
    """A random :class:`SparseMDP` with initial state 0.

    Args:
        max_states: at most this many states (at least 1).
        max_choices: choices per state, 1 to this.
        max_successors: successors per choice, 1 to this (duplicates merge).
        reward_models: reward models ``r0, r1, ...`` per choice, mostly zero.
        negative: allow negative rewards.
        labels: label names, each a random state mask.
    """
    n = draw(st.integers(1, max_states))
    values = list(REWARD_VALUES) + ([-1, -3] if negative else [])
    row_groups, indptr, targets, probs = [0], [0], [], []
    for _ in range(n):
        k = draw(st.integers(1, max_choices))
        for _ in range(k):
            succ = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=max_successors, unique=True))
            weights = draw(st.lists(st.integers(1, 4), min_size=len(succ), max_size=len(succ)))
            total = sum(weights)
            order = np.argsort(succ)
            targets += [succ[i] for i in order]
            probs += [weights[i] / total for i in order]
            indptr.append(len(targets))
        row_groups.append(len(indptr) - 1)
    n_choices = len(indptr) - 1
    rewards = {
        f"r{j}": np.array(draw(st.lists(st.sampled_from(values), min_size=n_choices, max_size=n_choices)), float)
        for j in range(reward_models)
    }
    masks = {name: np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool) for name in labels}
    return SparseMDP.from_arrays(row_groups, indptr, targets, probs, initial=0, rewards=rewards, labels=masks,
                                 source="<hypothesis>")
