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
