import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc, shared_model
from mopmc.examples import files


def test_version():
    r = run_mopmc("--version")
    assert r.code == 0 and r.stdout.startswith("mopmc ")


def test_info_json_is_pure():
    r = run_mopmc("info", files.mini_switch, "--json")
    assert r.code == 0, r.stderr
    d = r.json()
    for key in ("states", "choices", "transitions", "reward_models", "labels", "initial_state", "load_seconds"):
        assert key in d
    assert d["states"] == 47 and "ctrl_cost" in d["reward_models"]
    assert d["builder"] == "storm"  # a small program: "auto" leaves it to Storm's builder


def test_builder_option():
    a = run_mopmc("--builder", "mopmc", "info", files.mini_switch, "--json")
    b = run_mopmc("--builder", "storm", "info", files.mini_switch, "--json")
    assert a.code == b.code == 0
    assert a.json()["builder"] == "mopmc" and b.json()["builder"] == "storm"
    assert {k: v for k, v in a.json().items() if k not in ("builder", "load_seconds")} == {
        k: v for k, v in b.json().items() if k not in ("builder", "load_seconds")}
    assert_one_line_error(run_mopmc("--builder", "fast", "info", files.mini_switch), "--builder fast", "auto, mopmc, storm")


def test_info_example_name_and_table():
    r = run_mopmc("info", "example:dice")
    assert r.code == 0 and "states" in r.stdout and "13" in r.stdout


def test_info_constants(tmp_path):
    src = tmp_path / "c.nm"
    src.write_text("mdp\nconst int N;\nconst double p;\nmodule m\n s:[0..N] init 0;\n [] s<N -> p:(s'=s+1) + 1-p:(s'=s);\n [] s=N -> true;\nendmodule\n")
    r = run_mopmc("info", src, "--const", "N=4", "--const", "p=0.5", "--json")
    assert r.code == 0 and r.json()["states"] == 5
    r = run_mopmc("info", src, "--const", "N=4,p=0.5", "--json")
    assert r.json()["states"] == 5
    assert_one_line_error(run_mopmc("info", src), "N, p", "--const N=VALUE,p=VALUE")
    assert_one_line_error(run_mopmc("info", src, "--const", "N=4", "--const", "N=5,p=1"), "given twice")
    assert_one_line_error(run_mopmc("info", src, "--const", "N"), "NAME=VALUE")
    assert_one_line_error(run_mopmc("info", src, "--const", "N=x,p=0.5"), "bad --const")


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "no such file"),
        ("", "empty"),
        ("\x00garbage\x01", "syntax"),
        ("mdp\nmodule m\n s:[0..1] init 0;\n [] s=0 -> (s'=1)\nendmodule\n", ":5:"),
        ("mdp\nmodule m\n s:[0..2] init 0;\n [a] s=0 -> 0.5:(s'=1) + 0.6:(s'=2);\n [] s>0 -> true;\nendmodule\n", "sum to 1.1"),
        ("ctmc\nmodule m\n s:[0..1] init 0;\n [] s=0 -> 2:(s'=1);\n [] s=1 -> 1:(s'=0);\nendmodule\n", "CTMC"),
    ],
)
def test_info_errors(tmp_path, content, fragment):
    path = tmp_path / "m.nm"
    if content is not None:
        path.write_text(content)
    assert_one_line_error(run_mopmc("info", path, "--json"), fragment)


def test_info_directory(tmp_path):
    assert_one_line_error(run_mopmc("info", tmp_path), "directory")


def test_bad_option():
    r = run_mopmc("info")
    assert r.code == 2 and "Traceback" not in r.stderr


def test_storm_output_stays_off_stdout(tmp_path):
    # Storm prints a warning for this model (a deadlock fixed by a self-loop) on fd 1; stdout must stay JSON
    path = tmp_path / "d.nm"
    path.write_text("mdp\nmodule m\n s:[0..1] init 0;\n [] s=0 -> (s'=1);\nendmodule\n")
    r = run_mopmc("info", path, "--json")
    assert r.code == 0, r.stderr
    r.json()


def test_table3_model_counts():
    path = shared_model("switch-table3/switch_model.prism")
    d = run_mopmc("info", path, "--json").json()
    assert (d["states"], d["choices"], d["transitions"]) == (92017, 152089, 263489)


def test_check_answers_do_not_depend_on_the_builder():
    prop = 'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}min=? [C])'
    out = {}
    for builder in ("mopmc", "storm"):
        r = run_mopmc("--builder", builder, "check", files.mini_switch, "--prop", prop, "--json")
        assert r.code == 0, r.stderr
        out[builder] = r.json()[0]["points"]
    assert np.allclose(out["mopmc"], out["storm"], rtol=0, atol=1e-12)


def test_info_names_variables_and_no_builder_for_a_umb(tmp_path):
    """The JSON said variables null for every model (valuations were not loaded), builder storm for a
    UMB file (read, not built) and actions [""] for a model without action names."""
    d = run_mopmc("info", "example:dice", "--json").json()
    assert d["variables"] == ["s", "d"] and d["actions"] == [] and d["builder"] == "storm"
    umb = tmp_path / "mini.umb"
    assert run_mopmc("design", "build", "paper-switch", "--n", "2", "--out", umb).code == 0
    d = run_mopmc("info", umb, "--json").json()
    assert d["builder"] is None and "conf" in d["variables"] and "conf" in d["actions"]
    r = run_mopmc("info", umb)
    assert r.code == 0 and "variables" in r.stdout and "builder" not in r.stdout
