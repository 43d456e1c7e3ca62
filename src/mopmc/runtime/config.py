"""Runtime configuration: typed dataclasses loaded in one place, unknown keys rejected by name.

A config file (JSON, or YAML when PyYAML is installed) may set any subset::

    {"env": {"lanes": 4, "vehicles": 10, "duration": 40, "simulation_frequency": 15,
             "policy_frequency": 1, "max_substep": 0.01, "vehicles_density": 1.0},
     "switch": {"min_consecutive_calls": 4, "exit_headway": 1.2, "secondary_delay": 0.0,
                "configurations": [{"name": "C1", "t": 0.2, "controller": "1"}, ...]},
     "controllers": {"1": {"ttc_threshold": 4.5, "headway_threshold": 1.5}, "2": {...}},
     "metrics": {"ttc_scores": [14.4638], "headway_scores": [3.971], "bootstrap": 1000}}
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mopmc.errors import ConfigError
from mopmc.runtime.controllers import CONTROLLER_1, CONTROLLER_2, SecondaryController
from mopmc.runtime.switch import DEFAULT_CONFIGURATIONS, DEFAULT_MIN_CONSECUTIVE_CALLS, Configuration


def _positive(value: Any, where: str, src: str, *, integer: bool = False, zero: bool = False) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{src}: {where}: expected {kind} {'>=' if zero else '>'} 0, got {value!r}")
    return value


def _check_env(values: dict[str, Any], src: str) -> None:
    for k, v in values.items():
        _positive(v, f"env.{k}", src, integer=k in ("lanes", "vehicles"), zero=k == "vehicles")
    if "max_substep" in values and values["max_substep"] > 1.0:
        raise ConfigError(f"{src}: env.max_substep: at most 1 s, got {values['max_substep']}")


SIMULATORS = ("stock", "fast")
"""Roads a run can use: highway-env's own (``stock``) or :mod:`mopmc.runtime.fastsim` (``fast``, same trajectories)."""


@dataclass(frozen=True)
class EnvConfig:
    """The highway scene (highway-v0 defaults except the vehicle count, which tests keep small).

    ``max_substep`` [s] is the longest integration step; every step is also split exactly at the
    moment a delayed action is applied, so delays take effect to the float, not to a 15 Hz frame.
    """

    lanes: int = 4
    vehicles: int = 50
    duration: float = 40.0
    simulation_frequency: float = 15.0
    policy_frequency: float = 1.0
    max_substep: float = 0.01
    vehicles_density: float = 1.0

    def __post_init__(self) -> None:
        # Checked at construction, so dataclasses.replace and direct use (sweep settings) are covered too.
        _check_env({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "EnvConfig")

    @property
    def decision_steps(self) -> int:
        """Decisions per episode, ``duration x policy_frequency``: the switch model's ``n``."""
        return int(round(self.duration * self.policy_frequency))


@dataclass(frozen=True)
class SwitchConfig:
    min_consecutive_calls: int = DEFAULT_MIN_CONSECUTIVE_CALLS
    exit_headway: float = 1.2
    secondary_delay: float = 0.0
    configurations: tuple[Configuration, ...] = DEFAULT_CONFIGURATIONS


@dataclass(frozen=True)
class MetricsConfig:
    ttc_scores: tuple[float, ...] = ()
    headway_scores: tuple[float, ...] = ()
    bootstrap: int = 1000


@dataclass(frozen=True)
class RuntimeConfig:
    env: EnvConfig = EnvConfig()
    switch: SwitchConfig = SwitchConfig()
    controllers: dict[str, SecondaryController] = field(
        default_factory=lambda: {"1": CONTROLLER_1, "2": CONTROLLER_2}
    )
    metrics: MetricsConfig = MetricsConfig()


def _fields(cls: type, raw: Any, where: str, src: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: {where}: expected an object, got {type(raw).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(raw) - names)  # YAML keys may be numbers
    if unknown:
        raise ConfigError(
            f"{src}: {where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(names))}"
        )
    return dict(raw)


def _env(raw: Any, src: str) -> EnvConfig:
    d = _fields(EnvConfig, raw, "env", src)
    _check_env(d, src)
    env = EnvConfig(**d)
    if env.decision_steps < 1:
        raise ConfigError(f"{src}: env.duration x env.policy_frequency: an episode of {env.duration:g} s at "
                          f"{env.policy_frequency:g} decisions/s has no decision step; give at least one")
    return env


def _switch(raw: Any, src: str) -> SwitchConfig:
    d = _fields(SwitchConfig, raw, "switch", src)
    if "min_consecutive_calls" in d:
        _positive(d["min_consecutive_calls"], "switch.min_consecutive_calls", src, integer=True, zero=True)
    for k in ("exit_headway", "secondary_delay"):
        if k in d:
            _positive(d[k], f"switch.{k}", src, zero=True)
    if "configurations" in d:
        confs = d["configurations"]
        if not isinstance(confs, list) or not confs:
            raise ConfigError(f"{src}: switch.configurations: expected a non-empty list of {{name, t, controller}}")
        out = []
        for i, c in enumerate(confs):
            w = f"switch.configurations[{i}]"
            if not isinstance(c, dict) or set(c) != {"name", "t", "controller"}:
                raise ConfigError(f"{src}: {w}: expected exactly the keys name, t, controller, got {c!r}")
            if not isinstance(c["name"], str) or not c["name"]:
                raise ConfigError(f"{src}: {w}.name: expected a non-empty string, got {c['name']!r}")
            if isinstance(c["controller"], bool) or not isinstance(c["controller"], (str, int)):
                raise ConfigError(f"{src}: {w}.controller: expected a controller name, got {c['controller']!r}")
            if c["name"] in ("none", "uniform"):
                raise ConfigError(f"{src}: {w}.name: {c['name']!r} is taken (--switch {c['name']} means "
                                  f"{'no switch' if c['name'] == 'none' else 'each configuration alike'}); rename it")
            if c["name"] in [o.name for o in out]:
                raise ConfigError(f"{src}: {w}.name: configuration {c['name']!r} is named twice")
            out.append(Configuration(str(c["name"]), float(_positive(c["t"], f"{w}.t", src, zero=True)), str(c["controller"])))
        d["configurations"] = tuple(out)
    return SwitchConfig(**d)


def _controllers(raw: Any, src: str) -> dict[str, SecondaryController]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: controllers: expected an object {{name: parameters}}")
    out = {"1": CONTROLLER_1, "2": CONTROLLER_2}
    allowed = {f.name for f in dataclasses.fields(SecondaryController)} - {"name", "lane_keeper", "horizon"}
    for name, params in raw.items():
        if not isinstance(params, dict):
            raise ConfigError(f"{src}: controllers.{name}: expected an object of parameters")
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ConfigError(
                f"{src}: controllers.{name}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
            )
        for k, v in params.items():
            _positive(v, f"controllers.{name}.{k}", src)
        base = out.get(str(name), SecondaryController(name=str(name), ttc_threshold=4.5))
        out[str(name)] = dataclasses.replace(base, **params)
    return out


def _metrics(raw: Any, src: str) -> MetricsConfig:
    d = _fields(MetricsConfig, raw, "metrics", src)
    for k in ("ttc_scores", "headway_scores"):
        if k in d:
            if not isinstance(d[k], list):
                raise ConfigError(f"{src}: metrics.{k}: expected a list of seconds")
            d[k] = tuple(float(_positive(v, f"metrics.{k}", src, zero=True)) for v in d[k])
    if "bootstrap" in d:
        _positive(d["bootstrap"], "metrics.bootstrap", src, integer=True, zero=True)
    return MetricsConfig(**d)


def parse_config(raw: Any, source: str = "config") -> RuntimeConfig:
    """Build a :class:`RuntimeConfig` from parsed JSON/YAML, naming ``source`` in errors."""
    d = _fields(RuntimeConfig, raw, "top level", source)
    config = RuntimeConfig(
        env=_env(d.get("env", {}), source),
        switch=_switch(d.get("switch", {}), source),
        controllers=_controllers(d.get("controllers", {}), source),
        metrics=_metrics(d.get("metrics", {}), source),
    )
    missing = sorted({c.controller for c in config.switch.configurations} - set(config.controllers))
    if missing:
        raise ConfigError(f"{source}: switch.configurations name unknown controller(s) {', '.join(missing)}")
    return config


def _unique_keys(pairs: list[tuple[str, Any]], path: str | Path) -> dict[str, Any]:
    """A JSON object whose keys are all different (``json`` would keep the last of a repeated key)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ConfigError(f"{path}: key {k!r} is given twice in one object")
        out[k] = v
    return out


def read_config_file(path: str | Path) -> Any:
    """The raw contents of a JSON (``.json``) or YAML (``.yaml``/``.yml``) config file; errors name the file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8); expected a JSON or YAML config") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            import yaml  # noqa: F401
        except ImportError:
            raise ConfigError(f"{path}: YAML configs need PyYAML (pip install pyyaml); or use JSON") from None
        from mopmc.io.yaml_text import load_yaml

        return load_yaml(text, str(path))  # (a key given twice is an error; 1e-3 is a number)
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, path))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None


def load_config(path: str | Path) -> RuntimeConfig:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) runtime config file."""
    raw = read_config_file(path)
    return parse_config({} if raw is None else raw, str(path))
