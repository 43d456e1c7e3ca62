import numpy as np
import pytest

from mopmc.io.load import load, load_model
from mopmc.io.umb import read_umb, write_umb
from mopmc.examples import files
from mopmc.model import SparseMDP, StateValuations

stormpy = pytest.importorskip("stormpy")


@pytest.mark.parametrize("name", sorted(files.ALL))
def test_umb_round_trip_through_storm(name, tmp_path):
    model = load_model(files.ALL[name], valuations=True)
    path = write_umb(model, tmp_path / f"{name}.umb")
    sm = stormpy.build_model_from_umb(str(path))
    assert (sm.nr_states, sm.nr_choices, sm.nr_transitions) == (model.n_states, model.n_choices, model.n_transitions)
    assert set(sm.labeling.get_labels()) == set(model.labels)
    for label, mask in model.labels.items():
        assert sorted(sm.labeling.get_states(label)) == np.flatnonzero(mask).tolist()
    assert set(sm.reward_models) == set(model.rewards)
    for rname, vec in model.rewards.items():
        rm = sm.reward_models[rname]
        storm_vec = np.array(rm.state_action_rewards) if rm.has_state_action_rewards else np.zeros(sm.nr_choices)
        if rm.has_state_rewards:
            storm_vec = storm_vec + np.repeat(np.array(rm.state_rewards), np.diff(model.row_groups))
        np.testing.assert_array_equal(storm_vec, vec)
    # and back into mopmc, identical
    again = read_umb(path, valuations=True)
    for attr in ("row_groups", "indptr", "targets", "probs"):
        np.testing.assert_array_equal(getattr(again, attr), getattr(model, attr))
    assert again.action_names == model.action_names
    np.testing.assert_array_equal(again.valuations.values, model.valuations.values)


def test_written_model_has_same_values_in_storm(tmp_path):
    model = load_model(files.dice)
    path = write_umb(model, tmp_path / "dice.umb")
    sm = stormpy.build_model_from_umb(str(path))
    prop = stormpy.parse_properties('Pmax=? [F "six"]')[0]
    res = stormpy.model_checking(sm, prop)
    assert res.get_value(sm.initial_states[0]) == pytest.approx(1 / 6, abs=1e-6)  # Storm's default (unsound) value iteration


def test_valuations_with_negative_and_bool(tmp_path):
    vals = StateValuations(("b", "y"), ("bool", "int"), np.array([[0, -3], [1, 5]]))
    model = SparseMDP.from_arrays([0, 1, 2], [0, 1, 2], [1, 1], [1.0, 1.0], valuations=vals)
    again = read_umb(write_umb(model, tmp_path / "v.umb"), valuations=True)
    np.testing.assert_array_equal(again.valuations.values, vals.values)
    assert again.valuations.of(1) == {"b": True, "y": 5}


def test_storm_valuations_decode(tmp_path):
    src = tmp_path / "neg.nm"
    src.write_text(
        "mdp\nmodule m\n s:[0..2] init 0; y:[-3..4] init -2; b: bool init false;\n"
        " [] s=0 -> 0.5:(s'=1)&(y'=4) + 0.5:(s'=2)&(b'=true)&(y'=-3);\n [] s>0 -> true;\nendmodule\n"
    )
    model = load(src, valuations=True).model
    got = {tuple(model.valuations.of(s).items()) for s in range(model.n_states)}
    assert got == {
        (("b", False), ("s", 0), ("y", -2)),
        (("b", False), ("s", 1), ("y", 4)),
        (("b", True), ("s", 2), ("y", -3)),
    }


def test_mapped_read_equals_copied_read(tmp_path):
    model = load_model(files.mini_switch, valuations=True)
    path = write_umb(model, tmp_path / "m.umb")
    mapped, copied = read_umb(path, mapped=True, valuations=True), read_umb(path, valuations=True)
    for attr in ("row_groups", "indptr", "targets", "probs", "actions"):
        np.testing.assert_array_equal(getattr(mapped, attr), getattr(copied, attr))
        assert not getattr(mapped, attr).flags.writeable
    assert {k: v.tolist() for k, v in mapped.rewards.items()} == {k: v.tolist() for k, v in copied.rewards.items()}
    path.unlink()  # the mapping outlives the file
    assert float(mapped.probs.sum()) == float(copied.probs.sum())
