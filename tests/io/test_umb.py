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


def _rewrite(src, dst, **members):
    """A copy of the UMB archive ``src`` with members replaced (bytes) or removed (None)."""
    import io
    import tarfile

    with tarfile.open(src) as tar:
        data = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    data.update(members)
    with tarfile.open(dst, "w") as tar:
        for name, raw in data.items():
            if raw is not None:
                info = tarfile.TarInfo(name)
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))
    return dst


def _index(path, edit):
    import json
    import tarfile

    with tarfile.open(path) as tar:
        index = json.loads(tar.extractfile("index.json").read())
    edit(index)
    return json.dumps(index).encode()


@pytest.mark.parametrize("edit, words", [
    (lambda i: i.__setitem__("annotations", []), "annotations must be a JSON object"),
    (lambda i: i["transition-system"].__setitem__("#states", "many"), "#states must be a non-negative integer"),
    (lambda i: i["transition-system"].__setitem__("#states", 4.7), "#states must be a non-negative integer"),
    (lambda i: i["transition-system"].__setitem__("#states", 2), "state-to-choices.bin has 5 entries"),
    (lambda i: i["annotations"]["rewards"]["r0"].__setitem__("applies-to", None), "applies-to must be a list"),
    (lambda i: i["annotations"]["rewards"]["r0"].__setitem__("applies-to", ["observations"]), "applies to observations"),
    (lambda i: i["annotations"]["rewards"]["r1"].__setitem__("alias", "energy"), "two reward annotations are named 'energy'"),
    (lambda i: i["transition-system"].__setitem__("branch-probability-type", "double"), "a value type must be a JSON object"),
])
def test_malformed_index_json_is_a_typed_error(tmp_path, edit, words):
    from mopmc.errors import ModelFileError, UnsupportedModelError

    good = write_umb(load_model(files.tradeoff), tmp_path / "good.umb")
    bad = _rewrite(good, tmp_path / "bad.umb", **{"index.json": _index(good, edit)})
    with pytest.raises((ModelFileError, UnsupportedModelError), match=words):
        read_umb(bad)


def test_malformed_umb_arrays_are_model_file_errors(tmp_path):
    from mopmc.errors import ModelFileError

    good = write_umb(load_model(files.tradeoff), tmp_path / "good.umb")
    probs = load_model(files.tradeoff).probs
    cases = {
        # silently broadcast before: one branch reward for nine branches
        "branches": ({"index.json": _index(good, lambda i: i["annotations"]["rewards"]["r0"].__setitem__("applies-to", ["branches"])),
                      "annotations/rewards/r0/branches/values.bin": np.ones(1, "<f8").tobytes()}, "has 1 entries for 9 branches"),
        "states": ({"index.json": _index(good, lambda i: i["annotations"]["rewards"]["r0"].__setitem__("applies-to", ["states"])),
                    "annotations/rewards/r0/states/values.bin": np.ones(1, "<f8").tobytes()}, "has 1 entries for 4 states"),
        "probs": ({"branch-to-probability.bin": probs[:-1].astype("<f8").tobytes()}, "8 entries for 9 branches"),
        "actions": ({"actions/choices/values.bin": np.full(5, 99, "<u4").tobytes()}, "choice 0 has action 99"),
        "action names": ({"actions/choices/strings.bin": b"\xff" * 21}, "strings.bin is not UTF-8"),
        "mapping": ({"actions/choices/string-mapping.bin": np.array([0, 10**6], "<u8").tobytes()}, "string-mapping.bin does not cut"),
        "initial": ({"state-is-initial.bin": b""}, "state-is-initial.bin has 0 bytes, too few for 4 states"),
    }
    for name, (members, words) in cases.items():
        bad = _rewrite(good, tmp_path / f"{name}.umb", **members)
        with pytest.raises(ModelFileError, match=words):
            read_umb(bad)


def test_malformed_valuations_are_model_file_errors(tmp_path):
    from mopmc.errors import ModelFileError

    good = write_umb(load_model(files.tradeoff, valuations=True), tmp_path / "good.umb")
    bad = _rewrite(good, tmp_path / "spec.umb", **{"index.json": _index(good, lambda i: i["valuations"]["states"].__setitem__("classes", None))})
    with pytest.raises(ModelFileError, match="malformed state valuations"):
        read_umb(bad, valuations=True)
    short = _rewrite(good, tmp_path / "short.umb", **{"valuations/states/valuations.bin": b"\x00"})
    with pytest.raises(ModelFileError, match="too few for 4 states"):
        read_umb(short, valuations=True)


def test_truncated_archives_are_model_file_errors(tmp_path):
    import gzip

    from mopmc.errors import ModelFileError

    raw = write_umb(load_model(files.tradeoff), tmp_path / "good.umb").read_bytes()
    (tmp_path / "cut.umb").write_bytes(raw[:1024])
    with pytest.raises(ModelFileError, match="truncated or corrupt"):
        read_umb(tmp_path / "cut.umb")
    (tmp_path / "cut_gz.umb").write_bytes(gzip.compress(raw)[:400])  # EOFError, which click printed as "Aborted."
    with pytest.raises(ModelFileError, match="truncated or corrupt"):
        read_umb(tmp_path / "cut_gz.umb")


def test_cli_malformed_umb_is_one_line(tmp_path):
    from support import assert_one_line_error, run_mopmc

    good = write_umb(load_model(files.tradeoff), tmp_path / "good.umb")
    bad = _rewrite(good, tmp_path / "bad.umb", **{"index.json": b"[1, 2]"})
    assert_one_line_error(run_mopmc("info", bad), "bad.umb", "index.json: the top level must be a JSON object")
