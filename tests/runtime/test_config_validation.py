"""Nonsense scene values are rejected when the config or sweep setting is built, naming the field."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from mopmc.cli.rt import app
from mopmc.errors import ConfigError
from mopmc.runtime.config import EnvConfig, RuntimeConfig, parse_config
from mopmc.runtime.sweep import Setting

BAD_ENV = [
    ("vehicles", -1), ("vehicles", 2.5), ("vehicles", True),
    ("lanes", 0), ("lanes", -3), ("lanes", 1.5),
    ("duration", 0), ("duration", -40.0), ("duration", float("nan")), ("duration", float("inf")),
    ("simulation_frequency", 0), ("simulation_frequency", -15.0),
    ("policy_frequency", 0.0), ("policy_frequency", -1),
    ("max_substep", 0), ("max_substep", 2.0),
    ("vehicles_density", 0), ("vehicles_density", "dense"),
]


@pytest.mark.parametrize("key, value", BAD_ENV)
def test_env_config_rejects_bad_values_naming_the_field(key, value) -> None:
    with pytest.raises(ConfigError, match=rf"env\.{key}\b"):
        EnvConfig(**{key: value})
    with pytest.raises(ConfigError, match=rf"env\.{key}\b"):
        dataclasses.replace(EnvConfig(), **{key: value})


@pytest.mark.parametrize("key, value", BAD_ENV)
def test_config_file_errors_still_name_the_file(key, value) -> None:
    with pytest.raises(ConfigError, match=rf"^rt\.json: env\.{key}\b"):
        parse_config({"env": {key: value}}, "rt.json")


def test_sensible_edges_are_accepted() -> None:
    env = EnvConfig(lanes=1, vehicles=0, duration=0.5, simulation_frequency=1, policy_frequency=0.5,
                    max_substep=1.0, vehicles_density=0.1)
    assert (env.lanes, env.vehicles, env.max_substep) == (1, 0, 1.0)
    assert parse_config({"env": {"lanes": 1, "vehicles": 0}}).env == EnvConfig(lanes=1, vehicles=0)


def test_sweep_setting_cannot_hold_a_bad_scene() -> None:
    base = RuntimeConfig()
    with pytest.raises(ConfigError, match=r"env\.vehicles: expected an integer >= 0, got -1"):
        Setting("s", config=dataclasses.replace(base, env=dataclasses.replace(base.env, vehicles=-1)))


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
        ({"simulator": "turbo"}, "simulator must be 'stock' or 'fast', got 'turbo'"),
        ({"config": {"env": {"vehicles": 5}}}, "config must be a RuntimeConfig, got dict"),
    ],
)
def test_sweep_setting_rejects_bad_fields_at_construction(kwargs, fragment) -> None:
    with pytest.raises(ConfigError, match="^setting s: " + fragment.replace(".", r"\.").replace("(", r"\(")):
        Setting("s", **kwargs)


runner = CliRunner()


def _fails_with_one_line(args: list[str], fragment: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_cli_simulate_rejects_negative_vehicles() -> None:
    _fails_with_one_line(["simulate", "--vehicles", "-1", "--episodes", "1"], "--vehicles must be >= 0, got -1")


@pytest.mark.parametrize(
    "key, value", [("vehicles", -1), ("duration", 0), ("simulation_frequency", -15), ("policy_frequency", 0),
                   ("lanes", 0)],
)
def test_cli_simulate_rejects_bad_config_file_values(tmp_path, key, value) -> None:
    path = tmp_path / "rt.json"
    path.write_text(json.dumps({"env": {key: value}}))
    _fails_with_one_line(["simulate", "--config", str(path), "--episodes", "1"], f"rt.json: env.{key}:")


@pytest.mark.parametrize("experiment", ["table1", "table4"])
def test_cli_experiments_reject_negative_vehicles(tmp_path, experiment) -> None:
    _fails_with_one_line(["experiment", experiment, "--out", str(tmp_path / "run"), "--vehicles", "-1"],
                         "--vehicles must be >= 0, got -1")


# --- inputs audit: each case once gave a traceback, a hang or a silently wrong run -------------------
@pytest.mark.parametrize("text, fragment", [
    ("env:\n  1: 2\n", "env: unknown key(s) 1"),               # YAML number keys: a TypeError before
    ("1: 2\nfoo: 3\n", "top level: unknown key(s) 1, foo"),
    ("switch:\n  configurations:\n  - {name: C1, t: 0.1, controller: '1'}\n  - {name: C1, t: 0.2, controller: '2'}\n",
     "switch.configurations[1].name: configuration 'C1' is named twice"),
    ("switch:\n  configurations:\n  - {name: [1], t: 0.1, controller: '1'}\n", "switch.configurations[0].name"),
    # --switch none / uniform mean no switch / each configuration: a configuration so named could never be chosen
    ("switch:\n  configurations:\n  - {name: none, t: 0.1, controller: '1'}\n",
     "switch.configurations[0].name: 'none' is taken (--switch none means no switch)"),
    ("switch:\n  configurations:\n  - {name: uniform, t: 0.1, controller: '1'}\n", "'uniform' is taken"),
    ("env: {duration: 0.5, policy_frequency: 1}\n", "no decision step"),
])
def test_cli_simulate_rejects_yaml_config_defects(tmp_path, text, fragment) -> None:
    path = tmp_path / "rt.yaml"
    path.write_text(text)
    _fails_with_one_line(["simulate", "--config", str(path), "--episodes", "1", "--agent", "idm"], fragment)


def test_cli_simulate_rejects_a_binary_config_file(tmp_path) -> None:
    path = tmp_path / "rt.json"
    path.write_bytes(bytes(range(128, 256)))
    _fails_with_one_line(["simulate", "--config", str(path), "--episodes", "1"], "rt.json: not a text file")


@pytest.mark.parametrize("args, fragment", [
    (["--delay", "1e9"], "exceed the episode duration"),              # hung: a step lasts its delay
    (["--delay", "exp:1e9"], "exceed the episode duration"),
    (["--ttc-score", "nan"], "--ttc-score nan"),                       # was accepted silently
    (["--hw-score", "inf"], "--hw-score inf"),
    (["--switch", ""], "--switch: empty"),
])
def test_cli_simulate_rejects_bad_option_values(args, fragment) -> None:
    _fails_with_one_line(["simulate", "--episodes", "1", "--agent", "idm", *args], fragment)


@pytest.mark.parametrize("experiment, args, fragment", [
    ("table4", ["--ttc-score", "nan"], "--ttc-score nan"),             # an internal error when writing the JSON
    ("table4", ["--bootstrap", "-1"], "--bootstrap must be >= 0"),
    ("table4", ["--delays", "inf"], "--delays: need positive average delays"),  # failed mid-sweep, under the progress bar
    ("table4", ["--agent", "nosuch.zip"], "--agent: agent file 'nosuch.zip' does not exist"),
    ("table4", ["--agent", "foo:x.zip"], "--agent foo:x.zip: unknown algorithm 'foo'; known: ddpg, td3"),  # said: no file
    ("table4", ["--workers", "-2"], "--workers must be >= 0"),
    ("table1", ["--workers", "-1"], "--workers must be >= 0"),
    ("table1", ["--delays", "1e9"], "exceed the episode duration"),
])
def test_cli_experiments_reject_bad_options_before_running(tmp_path, experiment, args, fragment) -> None:
    _fails_with_one_line(["experiment", experiment, "--out", str(tmp_path / "run"), "--agent", "idm", *args], fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("experiment", ["table1", "table4"])
def test_cli_experiments_refuse_an_output_path_that_is_a_file(tmp_path, experiment) -> None:
    out = tmp_path / "afile"
    out.write_text("x")
    _fails_with_one_line(["experiment", experiment, "--out", str(out), "--agent", "idm"], "is a file, not an output folder")


def test_cli_estimate_rejects_bad_scores_logs_and_outputs(tmp_path) -> None:
    log = tmp_path / "log.csv"
    log.write_bytes(bytes(range(128, 256)))
    _fails_with_one_line(["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "5", "--hw-score", "2"],
                         "log.csv: cannot read the step log (not a text file)")
    fields = "episode,step,time,delay,hold,configuration,controller,cc,exit_condition,exit_allowed,exited,ttc,headway,lane_departure,cost"
    log.write_text(fields + "\n0,0,1.0,0.1,0.1,C1,primary,,,,,nan,inf,False,1\n")
    _fails_with_one_line(["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "5", "--hw-score", "2"],
                         "log.csv:2: bad step record (ttc is nan)")
    _fails_with_one_line(["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "nan", "--hw-score", "2"],
                         "--ttc-score nan")
    cfg = tmp_path / "rt.json"
    cfg.write_text(json.dumps({"env": {"duration": 2, "vehicles": 2, "max_substep": 0.0667}}))
    result = runner.invoke(app, ["simulate", "--episodes", "2", "--agent", "idm", "--config", str(cfg), "--switch", "C1",
                                 "--log", str(log)])
    assert result.exit_code == 0, result.output
    (tmp_path / "out.yaml").mkdir()
    _fails_with_one_line(["estimate", str(log), "--out", str(tmp_path / "out.yaml"), "--ttc-score", "5", "--hw-score", "2",
                          "--config", str(cfg)], "--out")
    assert not list(tmp_path.glob("*.tmp"))


def test_cli_estimate_names_a_bad_episode_length_as_the_option(tmp_path) -> None:
    """``--n 0`` was refused by the check of the written file, naming ``--out`` ("p.yaml: n = 0")."""
    cfg = tmp_path / "rt.json"
    cfg.write_text(json.dumps({"env": {"duration": 2, "vehicles": 2, "max_substep": 0.0667}}))
    log = tmp_path / "log.csv"
    result = runner.invoke(app, ["simulate", "--episodes", "2", "--agent", "idm", "--config", str(cfg), "--switch", "C1",
                                 "--log", str(log)])
    assert result.exit_code == 0, result.output
    args = ["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "5", "--hw-score", "2"]
    _fails_with_one_line([*args, "--config", str(cfg), "--n", "0"], "--n 0: the episode length must be between 1 and 10000")
    _fails_with_one_line([*args, "--config", str(cfg), "--n", "20000"], "--n 20000: the episode length")
    # n comes from the logs (the longest episode of a CSV log): an episode of 10,001 steps is too long
    lines = log.read_text().splitlines()
    row = lines[1].split(",")
    long = tmp_path / "long.csv"
    long.write_text("\n".join([lines[0]] + [",".join([row[0], str(i), *row[2:]]) for i in range(10_001)]) + "\n")
    _fails_with_one_line(["estimate", str(long), *args[2:], "--config", str(cfg)],
                         f"n (the episode length the logs record: {long} (its longest episode); give --n) = 10001")
    assert not (tmp_path / "p.yaml").exists()
    result = runner.invoke(app, [*args, "--config", str(cfg), "--n", "7"])
    assert result.exit_code == 0, result.output
    assert "n: 7\n" in (tmp_path / "p.yaml").read_text()


def test_config_files_refuse_repeated_keys_and_read_exponents_as_numbers(tmp_path) -> None:
    """YAML and JSON configs: a key given twice was silently overwritten by the last one; a number
    with an exponent (``5e-3``) was text in YAML and refused as 'not a number'."""
    from mopmc.runtime.config import load_config

    y = tmp_path / "rt.yaml"
    y.write_text("switch:\n  exit_headway: 1.2e+0\n  secondary_delay: 5e-3\n")
    cfg = load_config(y)
    assert (cfg.switch.secondary_delay, cfg.switch.exit_headway) == (0.005, 1.2)
    y.write_text("env:\n  vehicles: 3\n  vehicles: 4\n")
    with pytest.raises(ConfigError, match=r"rt\.yaml: line 3: key 'vehicles' is given twice"):
        load_config(y)
    j = tmp_path / "rt.json"
    j.write_text('{"env": {"vehicles": 3, "lanes": 2, "vehicles": 4}}')
    with pytest.raises(ConfigError, match=r"rt\.json: key 'vehicles' is given twice in one object"):
        load_config(j)
    _fails_with_one_line(["simulate", "--config", str(j), "--episodes", "1", "--agent", "idm"], "given twice")
