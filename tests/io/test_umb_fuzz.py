"""Corrupt or inconsistent UMB archives (the fuzzing report's item 12): refused in one line naming
the file, the inner file and the problem, never read into a silently wrong model."""

from __future__ import annotations

import io
import json
import re
import tarfile

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.errors import ModelFileError, UnsupportedModelError
from mopmc.examples import files
from mopmc.io.load import load_model
from mopmc.io.umb import read_umb, write_umb
from mopmc.model import SparseMDP, StateValuations

VALS = "valuations/states/valuations.bin"


def _members(path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _rewrite(src, dst, *, index=None, **members):
    """A copy of the UMB archive ``src``: ``index`` edits index.json (a function of its dict),
    ``members`` replace inner files (bytes; names with ``/`` given as ``__``)."""
    data = _members(src)
    if index is not None:
        doc = json.loads(data["index.json"])
        index(doc)
        data["index.json"] = json.dumps(doc).encode()
    data.update({k.replace("__", "/"): v for k, v in members.items()})
    with tarfile.open(dst, "w") as tar:
        for name, raw in data.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return dst


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    """The mini switch (47 states, 5 variables with declared bounds) as a UMB archive with valuations."""
    path = tmp_path_factory.mktemp("umb") / "switch.umb"
    return write_umb(load_model(files.mini_switch, valuations=True), path)


def test_the_base_archive_reads(switch):
    model = read_umb(switch, valuations=True)
    assert model.n_states == 47 and model.valuations.names == ("ts", "conf", "ctl", "cc", "phase")


@pytest.mark.parametrize("version, error, words", [
    (9, UnsupportedModelError, "UMB format version 9 is not supported (mopmc reads version 1)"),
    (0, UnsupportedModelError, "UMB format version 0 is not supported"),
    ("1", ModelFileError, "format-version must be an integer"),
    (None, ModelFileError, "index.json has no format-version"),
])
def test_another_format_version_is_refused(switch, tmp_path, version, error, words):
    edit = (lambda i: i.pop("format-version")) if version is None else (lambda i: i.__setitem__("format-version", version))
    bad = _rewrite(switch, tmp_path / "v.umb", index=edit)
    with pytest.raises(error, match=re.escape(words)):
        read_umb(bad)


def test_a_format_revision_is_not_a_version(switch, tmp_path):
    ok = _rewrite(switch, tmp_path / "r.umb", index=lambda i: i.__setitem__("format-revision", 7))
    assert read_umb(ok).n_states == 47


def test_initial_state_count_must_match_the_bits(switch, tmp_path):
    bad = _rewrite(switch, tmp_path / "i.umb", index=lambda i: i["transition-system"].__setitem__("#initial-states", 2))
    with pytest.raises(ModelFileError, match=r"#initial-states 2, but state-is-initial.bin marks 1 state\(s\) initial"):
        read_umb(bad)
    r = run_mopmc("check", bad, "--prop", 'Pmax=? [F "finished"]')
    assert_one_line_error(r, "i.umb", "#initial-states 2")


def test_valuations_outside_the_declared_bounds_are_refused(switch, tmp_path):
    n = 47
    garbage = _rewrite(switch, tmp_path / "g.umb", **{VALS.replace("/", "__"): b"\xff" * (2 * n)})
    with pytest.raises(ModelFileError, match=r"valuations.bin: state 0 has ts = 7, outside the bounds \[0..6\]"):
        read_umb(garbage, valuations=True)
    assert read_umb(garbage).n_states == n  # not read: check does not need them (it reads no valuations)
    r = run_mopmc("info", garbage)
    assert_one_line_error(r, "g.umb", "valuations.bin", "outside the bounds")


def test_states_sharing_a_valuation_are_refused(switch, tmp_path):
    zeros = _rewrite(switch, tmp_path / "z.umb", **{VALS.replace("/", "__"): bytes(2 * 47)})  # in bounds
    with pytest.raises(ModelFileError, match=r"states 0 and 1 have the same valuation \(ts=0, conf=0, ctl=0, cc=0, "
                                             r"phase=0\); 46 state\(s\) repeat"):
        read_umb(zeros, valuations=True)
    # one state's valuation copied onto another
    raw = bytearray(_members(switch)[VALS])
    raw[2 * 30 : 2 * 31] = raw[2 * 12 : 2 * 13]
    copied = _rewrite(switch, tmp_path / "c.umb", **{VALS.replace("/", "__"): bytes(raw)})
    with pytest.raises(ModelFileError, match=r"states 12 and 30 have the same valuation .*1 state\(s\) repeat"):
        read_umb(copied, valuations=True)
    assert_one_line_error(run_mopmc("info", copied), "c.umb", "states 12 and 30 have the same valuation")


def test_valuation_uniqueness_on_each_path(tmp_path):
    """The key table (a dense valuation space), the sort (a sparse one) and the column sort (keys
    wider than 62 bits, valuations wider than 8 bytes) all accept unique valuations and name a repeat."""
    def model(values, kinds=None):
        n = len(values)
        vals = StateValuations(tuple(f"v{j}" for j in range(values.shape[1])),
                               kinds or ("int",) * values.shape[1], np.asarray(values, np.int64))
        return SparseMDP.from_arrays(np.arange(n + 1), np.arange(n + 1), np.arange(n), np.ones(n), valuations=vals)

    rng = np.random.default_rng(1)
    dense = np.stack([np.arange(1000) % 10, np.arange(1000) // 10 - 50], axis=1)
    sparse = np.stack([np.arange(1000) * 7919, rng.permutation(1000)], axis=1)
    wide = np.stack([np.arange(300) * (1 << 40), np.arange(300) * -(1 << 39), np.arange(300) % 2], axis=1)
    for name, values, kinds in (("dense", dense, None), ("sparse", sparse, None), ("wide", wide, ("int", "int", "bool"))):
        path = write_umb(model(values, kinds), tmp_path / f"{name}.umb")
        np.testing.assert_array_equal(read_umb(path, valuations=True).valuations.values, values)
        twice = values.copy()
        twice[len(values) - 1] = values[3]
        path = write_umb(model(twice, kinds), tmp_path / f"{name}2.umb")
        with pytest.raises(ModelFileError, match=rf"states 3 and {len(values) - 1} have the same valuation"):
            read_umb(path, valuations=True)


def test_signed_int_valuations_decode(switch, tmp_path):
    """A two's complement "int" variable (no offset), as the UMB specification allows."""
    def signed(index):
        var = index["valuations"]["states"]["classes"][0]["variables"][0]  # ts: 3 bits
        var["type"]["type"] = "int"
        for key in ("offset", "lower", "upper"):
            var.pop(key, None)
    path = _rewrite(switch, tmp_path / "s.umb", index=signed)
    base = read_umb(switch, valuations=True).valuations.values
    got = read_umb(path, valuations=True).valuations.values
    np.testing.assert_array_equal(got[:, 0], np.where(base[:, 0] >= 4, base[:, 0] - 8, base[:, 0]))


def test_a_short_valuations_file_is_refused_whether_or_not_it_is_decoded(switch, tmp_path):
    short = _rewrite(switch, tmp_path / "short.umb", **{VALS.replace("/", "__"): bytes(2 * 47 - 1)})
    for valuations in (False, True):
        with pytest.raises(ModelFileError, match="valuations.bin has 93 bytes, too few for 47 states of 2 bytes each"):
            read_umb(short, valuations=valuations)
    r = run_mopmc("check", short, "--prop", 'Pmax=? [F "finished"]')
    assert_one_line_error(r, "short.umb", "valuations.bin has 93 bytes")


def test_a_valuation_layout_that_is_not_whole_bytes_is_refused(switch, tmp_path):
    bad = _rewrite(switch, tmp_path / "w.umb",
                   index=lambda i: i["valuations"]["states"]["classes"][0]["variables"].pop())  # the padding
    for valuations in (False, True):
        with pytest.raises(ModelFileError, match="take 9 bits, not a whole number of bytes"):
            read_umb(bad, valuations=valuations)


@pytest.mark.parametrize("inner, what", [("state-to-choices.bin", "state"), ("choice-to-branches.bin", "choice")])
def test_pointers_that_go_back_are_named_as_such(switch, tmp_path, inner, what):
    pointers = np.frombuffer(_members(switch)[inner], "<u8").copy()
    pointers[5] = pointers[7] + 3  # as the report's s2c_nonmono.umb
    bad = _rewrite(switch, tmp_path / "p.umb", **{inner: pointers.tobytes()})
    with pytest.raises(ModelFileError, match=rf"{inner}: the pointers are not non-decreasing: entry 6 \({pointers[6]}\) "
                                             rf"is below entry 5 \({pointers[5]}\), so {what} 5"):
        read_umb(bad)
    r = run_mopmc("check", bad, "--prop", 'Pmax=? [F "finished"]')
    assert_one_line_error(r, "p.umb", inner, "not non-decreasing")
    assert "deadlock" not in r.stderr


def test_storm_jani_valuations_with_transient_doubles_decode(tmp_path):
    """Storm exports a JANI model's transient reward variables as "double" entries without a size
    (the UMB default, 64 bits): the sizes are known without decoding (the size check of every
    load), and mopmc's valuations keep the discrete variables."""
    stormpy = pytest.importorskip("stormpy")
    from mopmc.io.load import load

    jani, _ = stormpy.parse_prism_program(str(files.tradeoff)).to_jani([])
    path = tmp_path / "tradeoff.jani"
    stormpy.io.export_jani_to_file(str(path), jani)
    assert load(path).model.n_states == 4
    vals = load(path, valuations=True).model.valuations
    assert vals.names == ("_loc_job", "s", "finished")
    assert sorted(map(tuple, vals.values.tolist())) == [(0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 1)]


def test_a_pointer_beyond_int64_is_named_as_such(switch, tmp_path):
    """(the report's flip30.umb: a flipped high byte) the uint64 value, not its int64 view."""
    pointers = np.frombuffer(_members(switch)["choice-to-branches.bin"], "<u8").copy()
    pointers[10] |= np.uint64(0xFF << 56)
    bad = _rewrite(switch, tmp_path / "h.umb", **{"choice-to-branches.bin": pointers.tobytes()})
    with pytest.raises(ModelFileError, match=rf"choice-to-branches.bin: entry 10 \({int(pointers[10])}\) is larger than any index"):
        read_umb(bad)
