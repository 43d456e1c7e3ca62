"""``Policy.check`` with entries that list no choice (empty row segments): ``np.add.reduceat`` gave
such an entry the next entry's first probability (or an IndexError for the last entry), so an
empty entry passed the check and the evaluation went on with a state that has no successor."""

import numpy as np
import pytest

from mopmc.engine.evaluate import Policy, evaluate
from mopmc.errors import SchedulerError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective

# state 0: choices 0 (-> 1, reward 1) and 1 (-> 1, reward 2); state 1: choice 2 (-> 1, no reward)
MODEL = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [1, 1, 1], [1.0, 1.0, 1.0], rewards={"r": [1.0, 2.0, 0.0]})
OBJ = (Objective(0, 'R{"r"}min=? [C]', "total_reward", "min", "r"),)


def _policy(states, indptr, choice, prob):
    return Policy(np.array(states, np.int64), np.zeros(len(states), np.int64), np.array(indptr, np.int64),
                  np.array(choice, np.int64), np.array(prob, float), np.zeros((0, 2), bool))


@pytest.mark.parametrize("states, indptr, choice, prob, entry, state", [
    ([0, 1], [0, 0, 1], [2], [1.0], 0, 0),            # empty entry before a full one
    ([1, 0], [0, 1, 1], [2], [1.0], 1, 0),            # empty last entry (reduceat: IndexError)
    ([0], [0, 0], [], [], 0, 0),                      # the only entry empty (no rows at all)
    ([0, 1], [0, 2, 2], [0, 1], [0.5, 0.5], 1, 1),    # randomised entry, then an empty one
])
def test_an_entry_without_choices_is_rejected(states, indptr, choice, prob, entry, state):
    pol = _policy(states, indptr, choice, prob)
    with pytest.raises(SchedulerError, match=rf"^scheduler entry {entry} \(state {state}\): no choices"):
        pol.check(MODEL)
    with pytest.raises(SchedulerError, match="no choices"):
        evaluate(MODEL, pol, OBJ)


def test_sums_are_per_entry():
    good = _policy([0, 1], [0, 2, 3], [0, 1, 2], [0.25, 0.75, 1.0])
    good.check(MODEL)
    # exact: 0.25 * 1 + 0.75 * 2
    assert evaluate(MODEL, good, OBJ).values[0] == pytest.approx(1.75, abs=1e-12)
    bad = _policy([0, 1], [0, 2, 3], [0, 1, 2], [0.25, 0.5, 1.0])
    with pytest.raises(SchedulerError, match=r"entry 0 \(state 0\): probabilities sum to 0.75, not 1"):
        bad.check(MODEL)
    bad = _policy([0, 1], [0, 1, 3], [0, 2, 2], [1.0, 0.5, 0.25])
    with pytest.raises(SchedulerError, match=r"entry 1 \(state 1\): probabilities sum to 0.75, not 1"):
        bad.check(MODEL)
    _policy([], [0], [], []).check(MODEL)  # no entries: nothing to check
