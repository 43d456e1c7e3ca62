import json

import pytest
import typer
from typer.testing import CliRunner

from mopmc.cli.rt import app
from mopmc.errors import MopmcError

from runtime_support import choose_entry, scheduler_doc

runner = CliRunner()


def invoke(args):
    """Exit code and stdout, or stderr when the command failed."""
    result = runner.invoke(app, args)
    assert not isinstance(result.exception, MopmcError), "user errors must be turned into exit 2"
    if result.exit_code != 0:
        return result.exit_code, result.stderr.strip()
    return result.exit_code, result.stdout


@pytest.fixture
def small_config(tmp_path):
    path = tmp_path / "rt.json"
    path.write_text(json.dumps({"env": {"duration": 3, "max_substep": 0.0667}, "metrics": {"bootstrap": 50}}))
    return str(path)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--delay", "exp:-1"], "delay spec 'exp:-1'"),
        (["--delay", "gamma:2"], "unknown delay kind"),
        (["--switch", "C9"], "unknown switch 'C9'"),
        (["--switch", "missing.json"], "missing.json: cannot read"),
        (["--episodes", "0"], "--episodes must be >= 1"),
    ],
)
def test_bad_arguments_give_one_line(args, fragment, small_config):
    code, out = invoke(["simulate", "--config", small_config, *args])
    assert code == 2 and fragment in out and "\n" not in out


def test_bad_scheduler_and_config(tmp_path, write_json):
    doc = scheduler_doc([choose_entry(0, {1: 0.5})], kind="randomised")
    code, out = invoke(["simulate", "--switch", str(write_json(doc))])
    assert code == 2 and "sum to 0.5" in out
    doc = scheduler_doc([choose_entry(0, {1: 1.0})], k=-3)  # an internal error before: k must be >= 0
    code, out = invoke(["simulate", "--switch", str(write_json(doc)), "--json"])
    assert code == 2 and "binding.min_consecutive_calls: expected an integer >= 0, got -3" in out
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"env": {"lanes": 4, "speed": 3}}))
    code, out = invoke(["simulate", "--config", str(cfg)])
    assert code == 2 and "env: unknown key(s) speed" in out
    cfg.write_text(json.dumps({"controllers": {"1": {"ttc": 3}}}))
    code, out = invoke(["simulate", "--config", str(cfg)])
    assert code == 2 and "controllers.1: unknown key(s) ttc" in out


def test_json_output_is_reproducible(small_config, tmp_path):
    pytest.importorskip("highway_env")
    args = ["simulate", "--config", small_config, "--episodes", "2", "--vehicles", "3", "--switch", "uniform",
            "--seed", "5", "--json", "--ttc-score", "10", "--log", str(tmp_path / "log.csv")]
    code, first = invoke(args)
    assert code == 0, first
    code, second = invoke(args)
    assert first == second
    doc = json.loads(first)
    for key in ("episodes", "steps", "p10_ttc", "p50_headway", "prob_lane_departure", "controller_cost"):
        assert key in doc
    # the shipped agent decides at the frequency it was trained at (2 episodes of 3 s)
    assert doc["episodes"] == 2 and doc["steps"] <= 2 * 3 * doc["settings"]["policy_frequency"]
    assert 1.0 <= doc["controller_cost"] <= 2.0
    assert "NaN" not in first and "Infinity" not in first
    header = (tmp_path / "log.csv").read_text().splitlines()[0]
    assert header.startswith("episode,step,time,delay,hold,configuration,controller,cc,exit_condition")


def test_text_output(small_config):
    pytest.importorskip("highway_env")
    code, out = invoke(["simulate", "--config", small_config, "--episodes", "1", "--vehicles", "2"])
    assert code == 0 and "P10 TTC" in out and "controller cost" in out


def test_app_is_a_typer_group():
    assert isinstance(app, typer.Typer)
    parent = typer.Typer()
    parent.add_typer(app, name="rt")
    result = runner.invoke(parent, ["rt", "simulate", "--help"])
    assert result.exit_code == 0 and "--switch" in result.stdout
