"""DDPG training: typed config, checkpoints, resuming (in-process and after kill -9), the shipped agent."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from mopmc.errors import ConfigError

pytest.importorskip("stable_baselines3")

from mopmc.cli.rt import app  # noqa: E402
from mopmc.runtime import sb3_adapter as sb  # noqa: E402
from mopmc.runtime.agents import AgentInterface, agent_policy_frequency, metadata_path, shipped_agent_path  # noqa: E402
from mopmc.runtime.train import TrainingInterrupted, parse_train_config, train  # noqa: E402

TINY = {
    "seed": 3, "total_steps": 40, "checkpoint_every": 10, "eval_every": 20, "eval_episodes": 2,
    "ddpg": {"actor": [8, 8], "critic": [8, 8], "learning_starts": 8, "batch_size": 8, "buffer_size": 500},
    "env": {"vehicles": 3, "duration": 6},
}


def params(path):
    return sb.policy_parameters(sb.load_agent(str(path)).model)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("straight")
    result = train(parse_train_config(TINY), out, progress=False)
    return out, result


def test_training_writes_models_checkpoints_and_evaluations(uninterrupted):
    out, result = uninterrupted
    assert result.steps == 40 and result.resumed_from == 0
    assert [e["steps"] for e in result.evaluations][0] >= 20
    assert all(0 <= e["collision_rate"] <= 1 and 0 <= e["prob_lane_departure"] <= 1 for e in result.evaluations)
    pointer = json.loads((out / "checkpoint.json").read_text())
    assert (out / pointer["folder"] / "replay.pkl").is_file()
    meta = json.loads((out / "final_model.json").read_text())
    assert AgentInterface.from_dict(meta["interface"], "meta") == parse_train_config(TINY).agent_interface()
    assert meta["seed"] == 3
    # the saved policy acts through its interface: a 1-d steering output becomes a 2-d env action
    agent = sb.load_agent(str(result.final_model))
    assert agent.act(np.zeros((5, 5))).shape == (2,)


def test_resume_after_interruption_equals_uninterrupted_run(uninterrupted, tmp_path):
    out, result = uninterrupted
    config = parse_train_config(TINY)
    with pytest.raises(TrainingInterrupted):
        train(config, tmp_path, progress=False, interrupt_at=27)
    resumed = train(config, tmp_path, progress=False)
    assert 10 <= resumed.resumed_from < 27
    assert np.array_equal(params(tmp_path / "final_model.zip"), params(result.final_model))
    assert resumed.evaluations == result.evaluations


def test_resume_after_kill_9_equals_uninterrupted_run(uninterrupted, tmp_path):
    out, result = uninterrupted
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "mopmc", "rt", "train", str(cfg), "--out", str(run_dir), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pointer = run_dir / "checkpoint.json"
    while proc.poll() is None and not pointer.is_file():
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (run_dir / "final_model.zip").exists()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["resumed_from"] >= 10
    assert np.array_equal(params(run_dir / "final_model.zip"), params(result.final_model))


def test_a_trained_agent_runs_at_the_frequency_it_was_trained_at(uninterrupted):
    from mopmc.runtime.config import EnvConfig, RuntimeConfig
    from mopmc.runtime.simulate import simulate

    out, result = uninterrupted
    assert agent_policy_frequency(str(result.final_model)) == 1.0 and agent_policy_frequency("idm") is None
    # the env config asks for 2 Hz; the agent was trained at 1 Hz and runs at 1 Hz (6 s -> 6 decisions)
    cfg = RuntimeConfig(env=EnvConfig(vehicles=3, duration=6, policy_frequency=2.0))
    run = simulate(episodes=1, delay="0", agent=str(result.final_model), seed=1, config=cfg)
    assert run.settings["policy_frequency"] == 1.0
    assert len(run.episodes[0].records) <= 6 and run.episodes[0].records[-1].time <= 6.0


def test_training_on_the_fast_simulator_writes_a_model(tmp_path):
    config = parse_train_config({**TINY, "total_steps": 20, "simulator": "fast", "env": {**TINY["env"], "policy_frequency": 5}})
    result = train(config, tmp_path, progress=False)
    assert result.steps == 20
    meta = json.loads((tmp_path / "final_model.json").read_text())
    assert meta["interface"]["policy_frequency"] == 5 and meta["config"]["simulator"] == "fast"


def test_resume_with_a_different_config_is_refused(uninterrupted):
    out, _ = uninterrupted
    gamma = parse_train_config(TINY).ddpg.gamma  # the default, resolved into the saved config
    with pytest.raises(ConfigError, match=rf"different config: ddpg.gamma \(folder {gamma}, now 0.5\); use another"):
        train(parse_train_config({**TINY, "ddpg": {**TINY["ddpg"], "gamma": 0.5}}), out, progress=False)
    with pytest.raises(ConfigError, match=r"config: ddpg.gamma \(folder [0-9.]+, now 0.5\), seed \(folder \d+, now 4\);"):
        train(parse_train_config({**TINY, "seed": 4, "ddpg": {**TINY["ddpg"], "gamma": 0.5}}), out, progress=False)


def test_rerunning_a_finished_run_trains_nothing(uninterrupted):
    """L14: a rerun retrained from the last checkpoint (step 30 of 40) instead of seeing the run is done."""
    out, result = uninterrupted
    files = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != "train_config.json"}
    again = train(parse_train_config(TINY), out, progress=False)
    assert again.already_complete and not result.already_complete
    assert (again.steps, again.resumed_from) == (40, 40)
    assert again.evaluations == result.evaluations and again.final_model == result.final_model
    assert {p: p.stat().st_mtime_ns for p in files} == files  # no model, checkpoint or evaluation rewritten
    cfg = out.parent / "tiny-done.json"
    cfg.write_text(json.dumps(TINY))
    cli = CliRunner().invoke(app, ["train", str(cfg), "--out", str(out), "--no-progress"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["already_complete"] is True and "already complete (40 steps)" in cli.stderr


def test_a_shorter_run_over_a_finished_one_is_refused(uninterrupted):
    """A rerun with total_steps below the folder's run trained from its last checkpoint over the
    finished run's models and evaluations (a walkthrough found it): refused, nothing rewritten."""
    out, result = uninterrupted
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match=r"holds a run trained to 40 steps, more than total_steps 30; .*total_steps >= 40"):
        train(parse_train_config({**TINY, "total_steps": 30}), out, progress=False)
    assert {p: p.read_bytes() for p in files} == files
    assert train(parse_train_config(TINY), out, progress=False).already_complete


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ({"total_step": 5}, "unknown key(s) total_step"),
        ({"ddpg": {"lr": 0.1}}, "ddpg: unknown key(s) lr"),
        ({"env": {"vehicle": 3}}, "env: unknown key(s) vehicle"),
        ({"reward": {"crash": -1}}, "reward: unknown key(s) crash"),
        ({"interface": {"control": "throttle"}}, "control must be one of"),
        ({"ddpg": {"actor": [0]}}, "ddpg.actor"),
        ({"ddpg": {"learning_rate": "fast"}}, "ddpg.learning_rate"),
        ({"total_steps": -1}, "total_steps"),
        # the actual limits (was "expected int like 20000"), and values SB3 failed on with a traceback
        ({"total_steps": -5}, "total_steps: expected an integer >= 1, got -5"),
        ({"eval_episodes": -1}, "eval_episodes: expected an integer >= 1, got -1"),
        ({"eval_episodes": 0}, "eval_episodes: expected an integer >= 1, got 0"),
        ({"seed": -1}, "seed: expected an integer >= 0, got -1"),
        ({"ddpg": {"learning_rate": -1}}, "ddpg.learning_rate: expected a number > 0, got -1"),
        ({"ddpg": {"learning_rate": 0}}, "ddpg.learning_rate: expected a number > 0, got 0"),
        ({"ddpg": {"action_noise": -0.1}}, "ddpg.action_noise: expected a number >= 0, got -0.1"),
        ({"ddpg": {"batch_size": 0}}, "ddpg.batch_size: expected an integer >= 1, got 0"),
        ({"interface": {"target_speed": -3}}, "interface.target_speed: expected a number > 0, got -3"),
        ({"eval_seed": 0}, "eval_seed"),
        ({"simulator": "turbo"}, "simulator: expected one of stock, fast"),
        ({"env": {"policy_frequency": 0}}, "env.policy_frequency"),
    ],
)
def test_bad_configs_are_rejected_by_name(raw, fragment):
    with pytest.raises(ConfigError) as info:
        parse_train_config(raw, "bad.yaml")
    assert fragment in str(info.value) and str(info.value).startswith("bad.yaml")


def test_cli_rejects_a_bad_config_in_one_line_with_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nddpg:\n  batch: 64\n")
    result = CliRunner().invoke(app, ["train", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "ddpg: unknown key(s) batch" in lines[0] and "bad.yaml" in lines[0]
    bad.write_text("ddpg: {learning_rate: -1}\n")  # SB3's ValueError, after train_config.json was written
    result = CliRunner().invoke(app, ["train", str(bad), "--out", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {bad}: ddpg.learning_rate: expected a number > 0, got -1"
    assert not (tmp_path / "out").exists()


def test_shipped_agent_is_package_data_with_its_metadata_and_meets_the_bar():
    path = shipped_agent_path()
    assert path.is_file() and path.stat().st_size < 5 * 2**20
    meta = json.loads(metadata_path(path).read_text())
    evaluation = meta["evaluation_50"]
    assert evaluation["episodes"] >= 50
    assert evaluation["collision_rate"] <= 0.10 and evaluation["prob_lane_departure"] <= 0.05
    agent = sb.load_agent(sb.SHIPPED)
    assert agent.interface == AgentInterface.from_dict(meta["interface"], "meta")
    assert np.all(np.abs(agent.act(np.zeros((5, 5)))) <= 1.0)


def test_a_corrupt_run_folder_is_one_error(tmp_path):
    from mopmc.runtime.train import TrainConfig, _prepare_output

    config = TrainConfig()
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not an output folder"):
        _prepare_output(config, afile)
    out = tmp_path / "run"
    out.mkdir()
    (out / "train_config.json").write_text("{x")
    with pytest.raises(ConfigError, match="train_config.json: unreadable .*; delete"):
        _prepare_output(config, out)
    (out / "train_config.json").unlink()
    (out / "checkpoint.json").write_text("[1]")
    with pytest.raises(ConfigError, match="checkpoint.json: expected a JSON object;"):
        _prepare_output(config, out)
    (out / "checkpoint.json").write_text('{"folder": 3}')
    with pytest.raises(ConfigError, match="names no checkpoint folder"):
        _prepare_output(config, out)
    with pytest.raises(ConfigError, match=r"top level: unknown key\(s\) 1, foo"):
        parse_train_config({1: 2, "foo": 3}, "t.yaml")
