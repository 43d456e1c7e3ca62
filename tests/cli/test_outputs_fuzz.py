"""Output paths and repeated options found by fuzzing: no output overwrites an input or another
output, a plot that cannot be written is one line, a repeated ``--prop`` is used or refused, and
``--target``/``--out`` values that mean nothing are refused (all before the model is built)."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.examples import files

PARETO = 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])'
CONVEX = 'multi(R{"time"}<=4 [C], R{"energy"}<=5 [C])'
SINGLE = 'R{"time"}min=? [C]'
#: a two-automaton design spec (YAML), small enough to build in a moment
TINY_SPEC = """name: tiny
actions: [obs, act]
automata:
  - name: S
    locations: [wait, go]
    edges:
      - {from: wait, to: go, action: obs}
      - {from: go, to: wait, action: act}
  - name: E
    locations: [e]
    edges: [{from: e, to: e, action: obs}, {from: e, to: e, action: act}]
rewards:
  steps: [{action: act, value: 1}]
"""


def _model(tmp_path: Path, name: str = "m.nm") -> Path:
    path = tmp_path / name
    shutil.copyfile(files.tradeoff, path)
    return path


# -- item 5: an output never overwrites an input or another output --------------------------------


def test_check_export_over_the_model_is_refused(tmp_path):
    model = _model(tmp_path)
    before = model.read_text()
    r = run_mopmc("check", model, "--export-scheduler", model, "--prop", SINGLE)
    assert_one_line_error(r, "--export-scheduler", "the model", "same file")
    assert model.read_text() == before


def test_check_export_over_the_model_through_another_name_is_refused(tmp_path):
    model = _model(tmp_path)
    (tmp_path / "sub").mkdir()
    os.link(model, tmp_path / "sub" / "hard.nm")
    r = run_mopmc("check", model, "--export-scheduler", tmp_path / "sub" / ".." / "sub" / "hard.nm", "--prop", SINGLE)
    assert_one_line_error(r, "--export-scheduler", "the model", "same file")


def test_check_export_over_the_props_file_is_refused(tmp_path):
    props = tmp_path / "p.props"
    props.write_text(SINGLE + "\n")
    r = run_mopmc("check", files.tradeoff, "--props", props, "--export-scheduler", props)
    assert_one_line_error(r, "--export-scheduler", "--props", "same file")
    assert props.read_text() == SINGLE + "\n"


@pytest.mark.parametrize("command,prop", [("check", PARETO), ("convex", CONVEX)])
def test_plot_and_export_on_one_file_are_refused(tmp_path, command, prop):
    same = tmp_path / "same.png"
    r = run_mopmc(command, files.tradeoff, "--plot", same, "--export-scheduler", same, "--prop", prop)
    assert_one_line_error(r, "--export-scheduler", "--plot", "same file")
    assert not same.exists()


def test_convex_plot_over_the_model_is_refused(tmp_path):
    model = _model(tmp_path, "m.png")  # (a model file may have any name: PRISM is read whatever its suffix)
    r = run_mopmc("convex", model, "--plot", model, "--prop", CONVEX)
    assert_one_line_error(r, "--plot", "the model", "same file")
    assert model.read_bytes() == files.tradeoff.read_bytes()


def test_design_build_binding_over_the_model_is_refused(tmp_path):
    out = tmp_path / "a.umb"
    r = run_mopmc("design", "build", "paper-switch", "--n", "2", "--out", out, "--binding", out)
    assert_one_line_error(r, "--binding", "--out", "same file")
    assert not out.exists()


def test_design_build_over_the_spec_is_refused(tmp_path):
    spec = tmp_path / "spec.prism"  # a YAML spec under a model's name
    spec.write_text(TINY_SPEC)
    r = run_mopmc("design", "build", spec, "--out", spec)
    assert_one_line_error(r, "--out", "the spec", "same file")
    assert spec.read_text() == TINY_SPEC
    ok = run_mopmc("design", "build", spec, "--out", tmp_path / "tiny.prism")  # the spec itself is fine
    assert ok.code == 0, ok.stderr


def test_design_show_over_the_spec_is_refused(tmp_path):
    spec = tmp_path / "spec.dot"
    spec.write_text(TINY_SPEC)
    r = run_mopmc("design", "show", spec, "--out", spec)
    assert_one_line_error(r, "--out", "the spec", "same file")
    assert spec.read_text() == TINY_SPEC


# -- item 6: a plot that cannot be written ---------------------------------------------------------


@contextmanager
def unwritable(path: Path):
    """``path`` (a folder or a file) made unwritable: by its mode, or for root by ``chattr +i``; a
    skip where neither works."""
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    flagged = False
    if os.access(path, os.W_OK) and shutil.which("chattr"):
        flagged = subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
    try:
        if os.access(path, os.W_OK):
            pytest.skip("cannot make a path unwritable here")
        yield path
    finally:
        if flagged:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


@pytest.mark.parametrize("command,prop", [("check", PARETO), ("convex", CONVEX)])
def test_plot_in_a_read_only_folder_is_refused_before_the_model(tmp_path, command, prop):
    ro = tmp_path / "ro"
    ro.mkdir()
    with unwritable(ro):  # (the model does not exist: the plot is refused first)
        r = run_mopmc(command, tmp_path / "missing.nm", "--plot", ro / "x.png", "--prop", prop)
    assert_one_line_error(r, "--plot", "cannot write")


def test_plot_over_a_read_only_file_is_refused(tmp_path):
    png = tmp_path / "ro.png"
    png.write_bytes(b"")
    with unwritable(png):
        r = run_mopmc("convex", tmp_path / "missing.nm", "--plot", png, "--prop", CONVEX)
    assert_one_line_error(r, "--plot", "cannot be written")


def test_export_in_a_read_only_folder_is_refused_before_the_model(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    with unwritable(ro):
        r = run_mopmc("convex", tmp_path / "missing.nm", "--export-scheduler", ro / "s.json", "--prop", CONVEX)
    assert_one_line_error(r, "--export-scheduler", "cannot write")


def test_a_failed_plot_write_is_a_mopmc_error(tmp_path):
    """The write itself (after the query) fails in one line, not as an internal error."""
    from mopmc.errors import MopmcError
    from mopmc.io.load import load
    from mopmc.queries.convex import convex_query
    from mopmc.queries.dispatch import multi_query
    from mopmc.queries.plot import plot_convex, plot_pareto

    pytest.importorskip("matplotlib")
    missing = tmp_path / "no" / "x.png"
    (p,) = load(files.tradeoff, properties=CONVEX).properties()
    res = convex_query(load(files.tradeoff).model, p.objectives, "mse")
    with pytest.raises(MopmcError, match="--plot .*cannot write"):
        plot_convex(res, missing)
    loaded = load(files.tradeoff, properties=PARETO)
    with pytest.raises(MopmcError, match="--plot .*cannot write"):
        plot_pareto(multi_query(loaded.model, loaded.properties()[0], engine="kernel", precision=1e-4), missing)


def test_a_plot_name_too_long_is_one_line(tmp_path):
    r = run_mopmc("check", files.tradeoff, "--plot", tmp_path / ("a" * 300 + ".png"), "--prop", PARETO)
    assert_one_line_error(r, "--plot", "not a usable file name")


# -- item 7: a repeated --prop ---------------------------------------------------------------------


def test_convex_refuses_a_repeated_prop():
    r = run_mopmc("convex", files.tradeoff, "--prop", CONVEX, "--prop", 'multi(R{"time"}<=2 [C], R{"energy"}<=6 [C])')
    assert_one_line_error(r, "--prop", "2 times", "one multi(...)")


def test_sensitivity_refuses_a_repeated_prop(tmp_path):
    r = run_mopmc("design", "sensitivity", "--out", tmp_path / "s", "--n", "2", "--prop", CONVEX, "--prop", CONVEX)
    assert_one_line_error(r, "--prop", "2 times")
    assert not (tmp_path / "s").exists()


def test_evaluate_uses_every_repeated_prop(tmp_path):
    sched = tmp_path / "s.json"
    ex = run_mopmc("check", files.tradeoff, "--prop", SINGLE, "--export-scheduler", sched)
    assert ex.code == 0, ex.stderr
    energy = 'R{"energy"}min=? [C]'
    r = run_mopmc("evaluate", files.tradeoff, "--scheduler", sched, "--prop", SINGLE, "--prop", energy, "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["objectives"] == [SINGLE, energy] and len(out["values"]) == 2


# -- item 8 and 14: values that mean nothing -------------------------------------------------------


def test_target_with_the_var_loss_is_refused():
    r = run_mopmc("convex", files.tradeoff, "--prop", CONVEX, "--loss", "var", "--target", "100,-100")
    assert_one_line_error(r, "--target", "var")


@pytest.mark.parametrize("option,value", [("--target", "1,2,"), ("--target", "1,,2"), ("--weights", ",1,2")])
def test_an_empty_vector_entry_is_refused(option, value):
    extra = ("--loss", "wmse") if option == "--weights" else ()
    r = run_mopmc("convex", files.tradeoff, "--prop", CONVEX, option, value, *extra)
    assert_one_line_error(r, option, "empty")


def test_design_build_out_with_a_trailing_slash_is_refused(tmp_path):
    r = run_mopmc("design", "build", "paper-switch", "--n", "2", "--out", f"{tmp_path}/sub.umb/")
    assert_one_line_error(r, "--out", "slash")
    assert list(tmp_path.iterdir()) == []


# -- item 13: an empty output path -----------------------------------------------------------------


@pytest.mark.parametrize("command,prop", [("check", SINGLE), ("convex", CONVEX)])
def test_an_empty_export_path_is_named_empty(command, prop):
    r = run_mopmc(command, files.tradeoff, "--export-scheduler", "", "--prop", prop)
    assert_one_line_error(r, "--export-scheduler", "empty")
