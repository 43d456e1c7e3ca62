import numpy as np
import pytest

from mopmc.errors import InvalidModelError, UnknownNameError
from mopmc.model import SparseMDP, validate


def chain(**kw):
    # state 0: two choices (to 1, or 50/50 to 1 and 2); states 1 and 2 absorbing
    return SparseMDP.from_arrays(
        [0, 2, 3, 4], [0, 1, 3, 4, 5], [1, 1, 2, 1, 2], [1.0, 0.5, 0.5, 1.0, 1.0], initial=0, **kw
    )


def test_sizes_and_views():
    m = chain(rewards={"r": [1.0, 2.0, 0.0, 0.0]}, labels={"g": [False, True, False]})
    assert (m.n_states, m.n_choices, m.n_transitions) == (3, 4, 5)
    assert m.state_of_choice().tolist() == [0, 0, 1, 2]
    assert m.choice_of_transition().tolist() == [0, 1, 1, 2, 3]
    assert m.matrix().toarray().tolist() == [[0, 1, 0], [0, 0.5, 0.5], [0, 1, 0], [0, 0, 1]]
    assert not m.is_dtmc
    assert m.summary()["reward_models"] == ["r"]


def test_immutable():
    m = chain()
    with pytest.raises(ValueError):
        m.probs[0] = 0.3
    with pytest.raises(Exception):
        m.initial = 1
    with pytest.raises(TypeError):
        m.rewards["x"] = np.zeros(4)


def test_unknown_names_list_the_known_ones():
    m = chain(rewards={"a": np.zeros(4)}, labels={"goal": np.zeros(3, bool)})
    with pytest.raises(UnknownNameError, match="it has: a"):
        m.reward("b")
    with pytest.raises(UnknownNameError, match="goal"):
        m.label("target")


def test_validate_accepts_negative_rewards():
    validate(chain(rewards={"r": [-1.0, 2.0, 0.0, 0.0]}))


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(probs=[1.0, 0.5, 0.6, 1.0, 1.0]), "state 0, choice 1 (local 1): probabilities sum to 1.1"),
        (dict(probs=[1.0, 1.5, -0.5, 1.0, 1.0]), "probability -0.5"),
        (dict(probs=[1.0, np.nan, 0.5, 1.0, 1.0]), "probability nan"),
        (dict(targets=[1, 1, 7, 1, 2]), "successor 7 out of range"),
        (dict(initial=5), "initial state 5"),
        (dict(rewards={"r": [0, np.inf, 0, 0]}), "reward model 'r' is inf at state 0, choice 1"),
        (dict(rewards={"r": [0, 0, np.nan, 0]}), "reward model 'r' is nan at state 1, choice 2"),
        (dict(rewards={"r": [0, 0]}), "2 entries for 4 choices"),
        (dict(labels={"g": [True]}), "label 'g' has 1 entries"),
    ],
)
def test_validate_names_the_problem(change, message):
    base = dict(row_groups=[0, 2, 3, 4], indptr=[0, 1, 3, 4, 5], targets=[1, 1, 2, 1, 2],
                probs=[1.0, 0.5, 0.5, 1.0, 1.0], initial=0)
    base.update(change)
    with pytest.raises(InvalidModelError) as err:
        validate(SparseMDP.from_arrays(**base))
    assert message in str(err.value)


def test_validate_structure():
    with pytest.raises(InvalidModelError, match="state 1 has no choice"):
        validate(SparseMDP.from_arrays([0, 1, 1], [0, 1], [0], [1.0]))
    with pytest.raises(InvalidModelError, match="no transition"):
        validate(SparseMDP.from_arrays([0, 2], [0, 1, 1], [0], [1.0]))
    # fewer probabilities than successors: the sums misaligned silently before
    with pytest.raises(InvalidModelError, match="1 probabilities for 2 transitions"):
        validate(SparseMDP.from_arrays([0, 1], [0, 2], [0, 0], [1.0]))


def test_validator_tolerance_is_1e9():
    ok = SparseMDP.from_arrays([0, 1], [0, 2], [0, 0], [0.5, 0.5 + 5e-10])
    validate(ok)
    bad = SparseMDP.from_arrays([0, 1], [0, 2], [0, 0], [0.5, 0.5 + 5e-9])
    with pytest.raises(InvalidModelError):
        validate(bad)


def test_writable_inputs_are_copied_sealed_arrays_adopted():
    import numpy as np

    from mopmc.model import SparseMDP

    targets = np.array([1, 1], dtype=np.int64)
    m = SparseMDP.from_arrays([0, 1, 2], [0, 1, 2], targets, [1.0, 1.0])
    targets[0] = 0  # the caller's array changes; the model's does not
    assert m.targets.tolist() == [1, 1] and not m.targets.flags.writeable
    sealed = np.array([1, 1], dtype=np.int64)
    sealed.setflags(write=False)
    again = SparseMDP.from_arrays(m.row_groups, m.indptr, sealed, m.probs)
    assert again.targets is sealed and again.indptr is m.indptr
    view = np.arange(4, dtype=np.int64)[1:3]
    view.setflags(write=False)  # read-only view of a writable base: copied
    assert SparseMDP.from_arrays([0, 1, 2], [0, 1, 2], [1, 1], [1.0, 1.0], actions=view).actions.base is None
