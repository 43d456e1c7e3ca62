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
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from mopmc.errors import ConfigError
from mopmc.io.yaml_text import load_yaml  # noqa: F401 (design.spec reads specs with it too)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

BUILTIN = {"table3": "table3.yaml"}
FORMAT = "mopmc-switch-parameters/1"
#: the largest episode length: SW2 has about 2,400 n states (n = 2000: 4.8 million states, 3 GB, 15 s);
#: beyond this the build would run for many minutes and exhaust memory
MAX_N = 10_000


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

        return replace(self, n=episode_length(n, "n"))


_TOP = {"n", "k", "configurations", "metrics", "delay", "costs", "provenance", "format"}
_CONF = {"name", "t", "controller", "paper_label", "enter", "exit", "metrics"}
_METRIC = {"reward", "meaning", "statistic", "score", "unit", "provenance"}
_DELAY = {"distribution", "scale", "truncate"}


def _keys(data: Any, allowed: set[str], where: str) -> Mapping:
    if data is None:
        raise ConfigError(f"{where}: empty; expected a mapping with keys {', '.join(sorted(allowed))}")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}")
    return data


def _number(x: Any, where: str) -> float:
    """A finite number (not a Boolean, not a string); shared with :mod:`mopmc.design.spec`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ConfigError(f"{where}: {x!r} is not a finite number")
    return float(x)


def _name(x: Any, where: str) -> str:
    """An identifier: it becomes a PRISM name (variables, clocks, actions, reward models); shared with
    :mod:`mopmc.design.spec`."""
    if not isinstance(x, str) or not _NAME.match(x):
        raise ConfigError(f"{where}: {x!r} is not a name (letters, digits and _, not starting with a digit)")
    return x


def _integer(x: Any, where: str) -> int:
    """An integer (``3`` or ``3.0``; not ``2.5``, a Boolean or a string)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or (isinstance(x, float) and not x.is_integer()):
        raise ConfigError(f"{where}: {x!r} is not an integer")
    return int(x)


def episode_length(n: Any, where: str) -> int:
    """``n`` checked as an episode length (1 .. MAX_N); ``where`` names it in the message (``--n``)."""
    n = _integer(n, where)
    if not 1 <= n <= MAX_N:
        raise ConfigError(f"{where}{' ' if where.startswith('--') else ' = '}{n}: the episode length must be between 1 and {MAX_N} "
                          f"(the switch has about 2,400 n states)")
    return n


def _delay_law(d: Mapping, where: str) -> tuple[str, float, float | None]:
    """(distribution, scale, truncate) of a delay mapping, checked where it is written (shared with
    :mod:`mopmc.design.spec`): exponential, scale > 0 seconds, truncate > 0 seconds or null."""
    distribution = d.get("distribution", "exponential")
    if distribution != "exponential":
        raise ConfigError(f"{where}.distribution: {distribution!r} is not supported (use exponential)")
    scale = _number(d.get("scale", 0.2), f"{where}.scale")
    if scale <= 0:
        raise ConfigError(f"{where}.scale: the delay scale must be > 0 seconds, not {scale:g}")
    truncate = None if d.get("truncate") is None else _number(d["truncate"], f"{where}.truncate")
    if truncate is not None and truncate <= 0:
        raise ConfigError(f"{where}.truncate: the truncation must be > 0 seconds (or null), not {truncate:g}")
    return distribution, scale, truncate


def _mapping(x: Any, where: str) -> Mapping:
    if x is None:
        return {}
    if not isinstance(x, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(x).__name__}")
    return x


def _prob(x: Any, where: str) -> float:
    p = _number(x, where)
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"{where}: probability {p} is outside [0, 1]")
    return p


def _need(data: Mapping, key: str, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}: missing key {key!r}")
    return data[key]


def parse_parameters(data: Any, source: str = "<memory>") -> SwitchParameters:
    """Parameters from parsed YAML data; see ``docs/parameter-file.md``."""
    top = _keys(data, _TOP, source)
    if "format" in top and top["format"] != FORMAT:
        raise ConfigError(f"{source}: format {top['format']!r} is not {FORMAT!r}")
    n = episode_length(_need(top, "n", source), f"{source}: n")
    k = _integer(_need(top, "k", source), f"{source}: k")
    if not 0 <= k <= MAX_N:
        raise ConfigError(f"{source}: k = {k}: the consecutive secondary calls must be between 0 and {MAX_N}")
    metrics = []
    for name, m in _mapping(_need(top, "metrics", source), f"{source}: metrics").items():
        where = f"{source}: metrics.{name}"
        _name(name, where)  # the recorder's events (<name>_bad) and default reward model are PRISM names
        m = _keys(m or {}, _METRIC, where)
        reward = _name(f"{name}_cost" if m.get("reward") is None else m["reward"], f"{where}.reward")
        if reward == "ctrl_cost":
            raise ConfigError(f"{where}.reward: 'ctrl_cost' is the controllers' reward model; give the metric another 'reward'")
        if reward in [x.reward for x in metrics]:
            raise ConfigError(f"{where}.reward: reward model {reward!r} is used twice; give each metric its own 'reward'")
        metrics.append(Metric(name, reward, str(m.get("meaning", "")), m.get("statistic"),
                              None if m.get("score") is None else _number(m["score"], f"{where}.score"), m.get("unit"),
                              dict(_mapping(m.get("provenance"), f"{where}.provenance"))))
    names = [m.name for m in metrics]
    delay = None
    if top.get("delay") is not None:
        delay = Delay(*_delay_law(_keys(top["delay"], _DELAY, f"{source}: delay"), f"{source}: delay"))
    confs = []
    conf_list = _need(top, "configurations", source) or []
    if not isinstance(conf_list, list):
        raise ConfigError(f"{source}: configurations: expected a list, got {type(conf_list).__name__}")
    for i, c in enumerate(conf_list):
        where = f"{source}: configurations[{i}]"
        c = _keys(c, _CONF, where)
        t, ctrl = _number(_need(c, "t", where), f"{where}.t"), _integer(_need(c, "controller", where), f"{where}.controller")
        if t < 0:  # t = 0: the secondary from the first step (P(delay >= 0) = 1), as the runtime config allows
            raise ConfigError(f"{where}.t: the deadline must be >= 0 seconds, not {t:g}")
        name = c.get("name", f"t{t:g}-ctrl{ctrl}")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.name: {name!r} is not a name")
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
    names = [c.name for c in confs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{source}: configuration names must be unique; {', '.join(map(repr, twice))} "
                          f"{'is' if len(twice) == 1 else 'are'} given more than once")
    costs = dict(_keys(top.get("costs") or {"primary": 1.0, "secondary": 2.0}, {"primary", "secondary"}, f"{source}: costs"))
    costs = {who: _number(costs.get(who, default), f"{source}: costs.{who}") for who, default in (("primary", 1.0), ("secondary", 2.0))}
    for who, v in costs.items():
        if v < 0:
            raise ConfigError(f"{source}: costs.{who}: {v:g} is negative; costs are >= 0")
    return SwitchParameters(n, k, tuple(confs), tuple(metrics), delay, costs, dict(_mapping(top.get("provenance"), f"{source}: provenance")), source)


def load_parameters(path_or_name: str | Path) -> SwitchParameters:
    """Load a parameter file, or a built-in set by name (``table3``)."""
    key = str(path_or_name)
    if key in BUILTIN:
        text = resources.files("mopmc.design").joinpath("data", BUILTIN[key]).read_text()
        source = f"built-in {key}"
    else:
        p = Path(key)
        if p.is_dir():
            raise ConfigError(f"parameter file {key} is a directory")
        if not p.is_file():
            raise ConfigError(f"parameter file {key} not found (built-in sets: {', '.join(BUILTIN)})")
        text, source = read_text(p), str(p)
    return parse_parameters(load_yaml(text, source), source)


def read_text(path: Path) -> str:
    """The text of ``path``; an unreadable or non-UTF-8 file is a :class:`ConfigError` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None


