"""The switch parameter file (YAML): episode length, consecutive calls, configurations, probabilities.

Defined in ``docs/parameter-file.md``; shared with the runtime's estimator, which writes it. Loaded
into frozen dataclasses in one place; unknown keys are rejected by name. The built-in default
(``table3``) is the paper's Table 3 parameterisation, its numbers read off the authors' model.

>>> p = load_parameters("table3")
>>> p.n, p.k, [c.name for c in p.configurations]
(40, 4, ['t0.2-ctrl1', 't0.1-ctrl1', 't0.2-ctrl2', 't0.1-ctrl2'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from mopmc.errors import ConfigError

BUILTIN = {"table3": "table3.yaml"}


@dataclass(frozen=True)
class MetricProbability:
    """P(metric is bad) in a step, for the primary and the secondary controller."""

    primary: float
    secondary: float


@dataclass(frozen=True)
class Configuration:
    """One basic design choice conf(t, controller): switch to ``controller`` once the delay reaches ``t`` s."""

    name: str
    t: float
    controller: int
    exit: float
    metrics: Mapping[str, MetricProbability]
    enter: float | None = None
    paper_label: str | None = None


@dataclass(frozen=True)
class Metric:
    """A metric recorder: which steps are bad, the reward model that counts them, and provenance."""

    name: str
    reward: str
    meaning: str = ""
    statistic: str | None = None
    score: float | None = None
    unit: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """The delay distribution that gives P(delay >= t) for configurations without ``enter``."""

    distribution: str = "exponential"
    scale: float = 0.2
    truncate: float | None = None


@dataclass(frozen=True)
class SwitchParameters:
    """Everything that parameterises the paper's switch SW2."""

    n: int
    k: int
    configurations: tuple[Configuration, ...]
    metrics: tuple[Metric, ...]
    delay: Delay | None = None
    costs: Mapping[str, float] = field(default_factory=lambda: {"primary": 1.0, "secondary": 2.0})
    provenance: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<memory>"

    def with_n(self, n: int) -> "SwitchParameters":
        """The same parameters with episode length ``n``."""
        from dataclasses import replace

        if n < 1:
            raise ConfigError(f"n must be >= 1, not {n}")
        return replace(self, n=int(n))


_TOP = {"n", "k", "configurations", "metrics", "delay", "costs", "provenance", "format"}
_CONF = {"name", "t", "controller", "paper_label", "enter", "exit", "metrics"}
_METRIC = {"reward", "meaning", "statistic", "score", "unit", "provenance"}
_DELAY = {"distribution", "scale", "truncate"}


def _keys(data: Any, allowed: set[str], where: str) -> Mapping:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}")
    return data


def _prob(x: Any, where: str) -> float:
    try:
        p = float(x)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {x!r} is not a number") from None
    if not (0.0 <= p <= 1.0) or math.isnan(p):
        raise ConfigError(f"{where}: probability {p} is outside [0, 1]")
    return p


def _need(data: Mapping, key: str, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}: missing key {key!r}")
    return data[key]


def parse_parameters(data: Any, source: str = "<memory>") -> SwitchParameters:
    """Parameters from parsed YAML data; see ``docs/parameter-file.md``."""
    top = _keys(data, _TOP, source)
    n, k = int(_need(top, "n", source)), int(_need(top, "k", source))
    if n < 1 or k < 0:
        raise ConfigError(f"{source}: need n >= 1 and k >= 0, got n={n}, k={k}")
    metrics = []
    for name, m in (_need(top, "metrics", source) or {}).items():
        m = _keys(m or {}, _METRIC, f"{source}: metrics.{name}")
        metrics.append(Metric(str(name), str(m.get("reward", f"{name}_cost")), str(m.get("meaning", "")), m.get("statistic"),
                              None if m.get("score") is None else float(m["score"]), m.get("unit"), dict(m.get("provenance") or {})))
    names = [m.name for m in metrics]
    delay = None
    if top.get("delay") is not None:
        d = _keys(top["delay"], _DELAY, f"{source}: delay")
        delay = Delay(str(d.get("distribution", "exponential")), float(d.get("scale", 0.2)), None if d.get("truncate") is None else float(d["truncate"]))
    confs = []
    for i, c in enumerate(_need(top, "configurations", source) or []):
        where = f"{source}: configurations[{i}]"
        c = _keys(c, _CONF, where)
        t, ctrl = float(_need(c, "t", where)), int(_need(c, "controller", where))
        name = str(c.get("name", f"t{t:g}-ctrl{ctrl}"))
        enter = None if c.get("enter") is None else _prob(c["enter"], f"{where}.enter")
        if enter is None and delay is None:
            raise ConfigError(f"{where}: no 'enter' probability and no 'delay' distribution to compute it from")
        ms = _keys(_need(c, "metrics", where), set(names), f"{where}.metrics")
        probs = {}
        for m in names:
            v = _need(ms, m, f"{where}.metrics")
            if isinstance(v, Mapping):
                v = _keys(v, {"primary", "secondary"}, f"{where}.metrics.{m}")
                probs[m] = MetricProbability(_prob(_need(v, "primary", f"{where}.metrics.{m}"), f"{where}.metrics.{m}.primary"),
                                             _prob(_need(v, "secondary", f"{where}.metrics.{m}"), f"{where}.metrics.{m}.secondary"))
            else:
                p = _prob(v, f"{where}.metrics.{m}")
                probs[m] = MetricProbability(p, p)
        confs.append(Configuration(name, t, ctrl, _prob(_need(c, "exit", where), f"{where}.exit"), probs, enter, c.get("paper_label")))
    if not confs:
        raise ConfigError(f"{source}: no configurations")
    if len({c.name for c in confs}) != len(confs):
        raise ConfigError(f"{source}: configuration names must be unique")
    costs = dict(_keys(top.get("costs") or {"primary": 1.0, "secondary": 2.0}, {"primary", "secondary"}, f"{source}: costs"))
    costs = {"primary": float(costs.get("primary", 1.0)), "secondary": float(costs.get("secondary", 2.0))}
    return SwitchParameters(n, k, tuple(confs), tuple(metrics), delay, costs, dict(top.get("provenance") or {}), source)


def load_parameters(path_or_name: str | Path) -> SwitchParameters:
    """Load a parameter file, or a built-in set by name (``table3``)."""
    import yaml

    key = str(path_or_name)
    if key in BUILTIN:
        text = resources.files("mopmc.design").joinpath("data", BUILTIN[key]).read_text()
        source = f"built-in {key}"
    else:
        p = Path(key)
        if not p.is_file():
            raise ConfigError(f"parameter file {key} not found (built-in sets: {', '.join(BUILTIN)})")
        text, source = p.read_text(), str(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(e).split())}") from None
    return parse_parameters(data, source)
