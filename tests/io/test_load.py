import numpy as np
import pytest

from mopmc.errors import (
    InvalidModelError,
    ModelFileError,
    ModelSyntaxError,
    UndefinedConstantsError,
    UnsupportedModelError,
)
from mopmc.examples import files
from mopmc.io.load import load, load_model
from mopmc.io.umb import write_umb

stormpy = pytest.importorskip("stormpy")


def test_prism_dtmc_loads_as_mdp_with_one_choice_per_state():
    loaded = load(files.dice)
    assert loaded.kind == "dtmc"
    assert loaded.model.is_dtmc
    assert loaded.model.n_states == 13


def test_rewards_state_and_action_are_per_choice(tmp_path):
    src = tmp_path / "r.nm"
    src.write_text(
        "mdp\nmodule m\n s:[0..1] init 0;\n [a] s=0 -> (s'=1);\n [b] s=0 -> (s'=1);\n [] s=1 -> true;\nendmodule\n"
        'rewards "r"\n s=0 : 2;\n [a] true : 1;\nendrewards\n'
    )
    m = load_model(src)
    # state reward 2 on both choices of state 0, action reward 1 on [a] only
    assert sorted(m.rewards["r"][m.row_groups[m.initial] : m.row_groups[m.initial + 1]].tolist()) == [2.0, 3.0]


def test_constants(tmp_path):
    with pytest.raises(UndefinedConstantsError, match="'slip' is already defined"):
        load_model(files.robot, {"slip": "0.2"})
    with pytest.raises(UndefinedConstantsError, match="no constant 'nope'"):
        load_model(files.robot, {"nope": "1"})
    src = tmp_path / "c.nm"
    src.write_text("mdp\nconst int N;\nconst double p;\nmodule m\n s:[0..N] init 0;\n [] s<N -> p:(s'=s+1) + 1-p:(s'=s);\n [] s=N -> true;\nendmodule\n")
    with pytest.raises(UndefinedConstantsError, match=r"N, p; define them with --const N=VALUE,p=VALUE"):
        load_model(src)
    m = load_model(src, {"N": "3", "p": "0.25"})
    assert m.n_states == 4 and 0.25 in m.probs
    with pytest.raises(UndefinedConstantsError, match="N=VALUE"):
        load_model(src, {"p": "0.5"})
    with pytest.raises(UndefinedConstantsError, match="bad --const"):
        load_model(src, {"N": "three", "p": "0.5"})


def test_jani(tmp_path):
    prog = stormpy.parse_prism_program(str(files.tradeoff))
    jani, _ = prog.to_jani([])
    path = tmp_path / "tradeoff.jani"
    stormpy.io.export_jani_to_file(str(path), jani)
    a, b = load_model(files.tradeoff), load_model(path)
    assert (a.n_states, a.n_choices, a.n_transitions) == (b.n_states, b.n_choices, b.n_transitions)
    assert sorted(a.rewards) == sorted(b.rewards)
    for name in a.rewards:
        assert sorted(a.rewards[name]) == sorted(b.rewards[name])


def test_umb_input(tmp_path):
    m = load_model(files.mini_switch)
    path = write_umb(m, tmp_path / "m.umb")
    again = load_model(path)
    np.testing.assert_array_equal(again.probs, m.probs)
    with pytest.raises(ModelFileError, match="no constants"):
        load_model(path, {"N": "3"})


def test_storm_exported_umb_input(tmp_path):
    prog = stormpy.parse_prism_program(str(files.mini_switch))
    sm = stormpy.build_model(prog)
    path = tmp_path / "storm.umb"
    stormpy.io.export_to_umb(sm, str(path))  # Storm's default (compressed) archive
    m = load_model(path)
    assert (m.n_states, m.n_choices, m.n_transitions) == (sm.nr_states, sm.nr_choices, sm.nr_transitions)


def test_probabilities_must_sum_to_one(tmp_path):
    src = tmp_path / "bad.nm"
    src.write_text("mdp\nmodule m\n s:[0..2] init 0;\n [go] s=0 -> 0.5:(s'=1) + 0.6:(s'=2);\n [] s>0 -> true;\nendmodule\n")
    with pytest.raises(InvalidModelError) as err:
        load_model(src)
    text = str(err.value)
    assert "state 0" in text and "choice 0" in text and "1.1" in text and "[go]" in text
    assert "command" in text


def test_errors(tmp_path):
    with pytest.raises(ModelFileError, match="no such file"):
        load_model(tmp_path / "missing.nm")
    with pytest.raises(ModelFileError, match="is a directory"):
        load_model(tmp_path)
    empty = tmp_path / "empty.nm"
    empty.write_text("")
    with pytest.raises(ModelFileError, match="empty"):
        load_model(empty)
    garbage = tmp_path / "garbage.nm"
    garbage.write_bytes(b"\x00\x01 this is not prism")
    with pytest.raises(ModelSyntaxError):
        load_model(garbage)
    syntax = tmp_path / "syntax.nm"
    syntax.write_text("mdp\nmodule m\n s:[0..1] init 0;\n [] s=0 -> (s'=1)\nendmodule\n")
    with pytest.raises(ModelSyntaxError, match=r"syntax.nm:\d+:\d+"):
        load_model(syntax)
    bad_umb = tmp_path / "x.umb"
    bad_umb.write_text("not a tar")
    with pytest.raises(ModelFileError, match="not a UMB archive"):
        load_model(bad_umb)


def test_unsupported_model_type(tmp_path):
    src = tmp_path / "c.sm"
    src.write_text("ctmc\nmodule m\n s:[0..1] init 0;\n [] s=0 -> 2:(s'=1);\n [] s=1 -> 1:(s'=0);\nendmodule\n")
    with pytest.raises(UnsupportedModelError, match="CTMC"):
        load_model(src)


def test_several_initial_states(tmp_path):
    src = tmp_path / "i.nm"
    src.write_text("mdp\nmodule m\n s:[0..2];\n [] true -> true;\nendmodule\ninit s<2 endinit\n")
    with pytest.raises(UnsupportedModelError, match=r"2 initial states \(0, 1\)"):
        load_model(src)


@pytest.mark.parametrize("text, line, builder", [
    ("mdp\nconst int Z = 0;\nmodule m\n s:[0..2] init 0;\n [] s=0 -> 1/Z:(s'=1) + 1:(s'=2);\n [] s>0 -> true;\nendmodule\n", 5, "storm"),
    ("mdp\nconst int Z = 0;\nmodule m\n s:[0..2] init 0;\n [] s=0 -> 1/Z:(s'=1) + 1:(s'=2);\n [] s>0 -> true;\nendmodule\n", 5, "mopmc"),
    ("mdp\nmodule m\n s:[0..2] init 0;\n [] s=0 -> (s'=mod(2,0));\n [] s>0 -> true;\nendmodule\n", 4, "auto"),
    ("mdp\nmodule m\n s:[0..2] init 0;\n [] s=0 -> 1:(s'=1);\n [] s>0 -> true;\nendmodule\nlabel \"x\" = 1/0 > 1;\n", 7, "auto"),
])
def test_division_by_zero_in_a_constant_expression_is_an_error(tmp_path, text, line, builder):
    # Storm's exact arithmetic raises SIGFPE here: the process died with no message (exit 136), so
    # these run in a subprocess (a regression fails the test, not the test run)
    from support import assert_one_line_error, run_mopmc

    src = tmp_path / "z.nm"
    src.write_text(text)
    assert_one_line_error(run_mopmc("--builder", builder, "info", src), "z.nm: Storm aborts parsing the model",
                          "division or modulo by zero", f"line {line}")


def test_constant_set_to_zero_divisor_is_an_error(tmp_path):
    from support import assert_one_line_error, run_mopmc

    src = tmp_path / "d.nm"
    src.write_text("mdp\nconst int Z;\nmodule m\n s:[0..2] init 0;\n [] s=0 -> 1/Z:(s'=1) + 1:(s'=2);\n [] s>0 -> true;\nendmodule\n")
    assert_one_line_error(run_mopmc("info", src, "--const", "Z=0"), "d.nm: --const Z=0: Storm aborts substituting the constants")


def test_infinite_reward_from_division_by_zero(tmp_path):
    # mopmc's builder turned the reward into a command probability, which crashed Storm's parser
    from support import assert_one_line_error, run_mopmc

    src = tmp_path / "r.nm"
    src.write_text("mdp\nconst double Z = 0;\nmodule m\n s:[0..1] init 0;\n [a] s=0 -> (s'=1);\n [] s=1 -> true;\nendmodule\n"
                   'rewards "r"\n [a] true : 1/Z;\nendrewards\n')
    assert_one_line_error(run_mopmc("info", src), "r.nm: reward model 'r' is inf")
    assert_one_line_error(run_mopmc("--builder", "mopmc", "info", src), "r.nm: mopmc's builder does not cover this model",
                          "rewrites its reward items")


def test_unbounded_integer_goes_to_storms_builder(tmp_path):
    # `s : int` segfaulted mopmc's builder (and so the default builder) on reading its bounds: in a subprocess
    from support import assert_one_line_error, run_mopmc

    src = tmp_path / "u.nm"
    src.write_text("mdp\nmodule m\n s:int init 0;\n [] s<3 -> (s'=s+1);\n [] s=3 -> true;\nendmodule\n")
    result = run_mopmc("info", src, "--json")
    assert result.code == 0 and result.json()["states"] == 4, result.stderr
    assert_one_line_error(run_mopmc("--builder", "mopmc", "info", src), "u.nm", "unbounded integer variable s")


@pytest.mark.parametrize("text, reason", [
    ("dtmc\nmodule m\n s:[0..1] init 0;\n [] s=0 -> (s'=1);\n [] s=0 -> (s'=0);\n [] s=1 -> true;\nendmodule\n",
     "overlapping guards in a DTMC"),
    ("mdp\nmodule m\n s:[0..1] init 0;\n [] s=0 -> 0.5:(s'=1)+0.6:(s'=0);\n [] s=1 -> true;\nendmodule\n",
     "probabilities that do not sum to 1"),
    ("mdp\nmodule m\n s:[0..1];\n [] s=0 -> (s'=1);\n [] s=1 -> true;\nendmodule\ninit s=0 | s=1 endinit\n",
     "several initial states"),
    ("mdp\nmodule m\n s:[0..1] init 0;\n [a] s=0 -> (s'=1);\n [] s=1 -> true;\nendmodule\n"
     'rewards "r"\n [a] s=0 -> true : 1;\nendrewards\n', "transition rewards"),
])
def test_the_own_builder_names_why_it_does_not_cover_a_model(tmp_path, text, reason):
    """``--builder mopmc`` names the one thing it does not cover (it listed every possible cause)."""
    from mopmc.io.load import load

    src = tmp_path / "x.nm"
    src.write_text(text)
    with pytest.raises(UnsupportedModelError, match=reason) as info:
        load(src, builder="mopmc")
    assert "mopmc's builder does not cover this model" in str(info.value)


def test_cli_file_errors_are_one_line(tmp_path):
    from support import assert_one_line_error, run_mopmc

    assert_one_line_error(run_mopmc("info", ""), "the model path is empty")
    ctmc = tmp_path / "c.sm"
    ctmc.write_text("ctmc\nmodule m\n s:[0..1] init 0;\n [] s=0 -> 2:(s'=1);\n [] s=1 -> 1:(s'=0);\nendmodule\n")
    assert_one_line_error(run_mopmc("info", ctmc), "c.sm: unsupported model type CTMC")
    binary = tmp_path / "b.nm"
    binary.write_bytes(b"\xff\xfe\xfd not prism")  # Storm quotes the bytes; the quote did not decode
    assert_one_line_error(run_mopmc("info", binary), "b.nm: not a PRISM file", "not UTF-8")
    assert_one_line_error(run_mopmc("info", "/dev/null"), "not a regular file")
