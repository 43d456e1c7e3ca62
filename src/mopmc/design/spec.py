"""Design specs: a YAML file of timed automata, or a built-in name (``paper-switch``).

A YAML spec is either a network of automata (``automata:``, ``rewards:``, ``probabilities:``) or the
paper's switch with a parameter file (``switch: {parameters: FILE}``); see ``docs/design.md``. Every
mapping rejects unknown keys by name.

>>> d = load_design("paper-switch")
>>> d.network.name, d.binding["configuration"]
('SW2(n=40, k=4)', 'conf')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mopmc.design.automaton import Edge, Network, RewardItem, TimedAutomaton, Variable
from mopmc.design.params import SwitchParameters, load_parameters, parse_parameters
from mopmc.design.probability import DelayDistribution, ProbabilityModel, ProbabilityTable
from mopmc.errors import ConfigError

BUILTIN = ("paper-switch",)


@dataclass(frozen=True)
class Design:
    """A network with its probability provider; for the switch also its parameters and binding."""

    network: Network
    provider: ProbabilityModel
    parameters: SwitchParameters | None = None
    binding: dict | None = None


def _keys(data: Any, allowed: set[str], where: str, required: tuple[str, ...] = ()) -> Mapping:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}")
    for k in required:
        if k not in data:
            raise ConfigError(f"{where}: missing key {k!r}")
    return data


def _list(data: Any, where: str) -> list:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{where}: expected a list, got {type(data).__name__}")
    return data


def switch_design(params: SwitchParameters) -> Design:
    """The paper's SW2 with ``params``."""
    from mopmc.design.switch import binding, sw2, switch_probabilities

    return Design(sw2(params), switch_probabilities(params), params, binding(params))


def _variable(v: Any, where: str) -> Variable:
    v = _keys(v, {"name", "type", "low", "high", "init"}, where, ("name",))
    kind = str(v.get("type", "int"))
    if kind == "int" and ("low" not in v or "high" not in v):
        raise ConfigError(f"{where}: variable {v['name']!r} is unbounded; give 'low' and 'high'")
    init = v.get("init", v.get("low", 0))
    return Variable(str(v["name"]), int(v.get("low", 0)), int(v.get("high", 1)), int(bool(init)) if kind == "bool" else int(init), kind)


def _edge(e: Any, where: str, actions: set[str] | None) -> Edge:
    e = _keys(e, {"from", "to", "action", "when", "clocks", "events", "resets", "updates"}, where, ("from", "to"))
    action = e.get("action")
    if action is not None and actions is not None and action not in actions and action != "tau":
        raise ConfigError(f"{where}: unknown action {action!r} (declared actions: {', '.join(sorted(actions))})")
    return Edge(str(e["from"]), str(e["to"]), action, e.get("when", True), tuple(_list(e.get("clocks"), f"{where}.clocks")),
                tuple(_list(e.get("events"), f"{where}.events")), tuple(_list(e.get("resets"), f"{where}.resets")),
                {str(k): v for k, v in (e.get("updates") or {}).items()})


def _automaton(a: Any, where: str, actions: set[str] | None) -> TimedAutomaton:
    a = _keys(a, {"name", "locations", "initial", "clocks", "variables", "edges", "invariants", "location_variable"}, where, ("name", "locations"))
    locs = tuple(str(x) for x in _list(a["locations"], f"{where}.locations"))
    variables = tuple(_variable(v, f"{where}.variables[{i}]") for i, v in enumerate(_list(a.get("variables"), f"{where}.variables")))
    edges = tuple(_edge(e, f"{where}.edges[{i}]", actions) for i, e in enumerate(_list(a.get("edges"), f"{where}.edges")))
    return TimedAutomaton(str(a["name"]), locs, str(a.get("initial", locs[0] if locs else "")), tuple(_list(a.get("clocks"), f"{where}.clocks")),
                          variables, edges, {str(k): tuple(v) for k, v in (a.get("invariants") or {}).items()}, a.get("location_variable"))


def probabilities(data: Any, where: str) -> ProbabilityModel:
    """``{table: [{guard, when, p}], delays: [{clock, distribution, scale, truncate}]}`` -> provider."""
    data = _keys(data or {}, {"table", "delays"}, where)
    providers: list = []
    if data.get("table"):
        providers.append(ProbabilityTable.from_rows(_list(data["table"], f"{where}.table")))
    for i, d in enumerate(_list(data.get("delays"), f"{where}.delays")):
        d = _keys(d, {"clock", "distribution", "scale", "truncate"}, f"{where}.delays[{i}]", ("clock",))
        providers.append(DelayDistribution(str(d["clock"]), float(d.get("scale", 0.2)), d.get("truncate"), str(d.get("distribution", "exponential"))))
    return ProbabilityModel(tuple(providers))


def parse_design(data: Any, source: str, params: str | Path | None = None) -> Design:
    """A :class:`Design` from parsed YAML (see the module docstring)."""
    top = _keys(data, {"name", "automata", "actions", "rewards", "probabilities", "switch"}, source)
    if "switch" in top:
        sw = _keys(top["switch"] or {}, {"parameters"}, f"{source}: switch")
        if params is not None:
            return switch_design(load_parameters(params))
        p = sw.get("parameters", "table3")
        if isinstance(p, Mapping):
            return switch_design(parse_parameters(p, f"{source}: switch.parameters"))
        path = Path(str(p))
        if not path.is_absolute() and str(p) != "table3":
            path = Path(source).parent / path
        return switch_design(load_parameters(path if str(p) != "table3" else "table3"))
    if "automata" not in top:
        raise ConfigError(f"{source}: a spec needs 'automata' (or 'switch')")
    actions = set(map(str, top["actions"])) if top.get("actions") is not None else None
    automata = tuple(_automaton(a, f"{source}: automata[{i}]", actions) for i, a in enumerate(_list(top["automata"], f"{source}: automata")))
    rewards = {}
    for name, items in (top.get("rewards") or {}).items():
        out = []
        for i, it in enumerate(_list(items, f"{source}: rewards.{name}")):
            it = _keys(it, {"action", "value", "when"}, f"{source}: rewards.{name}[{i}]", ("value",))
            out.append(RewardItem(it.get("action"), float(it["value"]), it.get("when", True)))
        rewards[str(name)] = tuple(out)
    network = Network(automata, rewards, str(top.get("name", Path(source).stem)))
    prob_data = top.get("probabilities")
    if params is not None:
        prob_data = _read_yaml(Path(params)).get("probabilities", {})
    return Design(network, probabilities(prob_data, f"{source}: probabilities"))


def _read_yaml(path: Path) -> Any:
    import yaml

    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None


def load_design(spec: str | Path, params: str | Path | None = None) -> Design:
    """Load a spec file or a built-in (``paper-switch``); ``params`` overrides its probabilities."""
    if str(spec) == "paper-switch":
        return switch_design(load_parameters(params if params is not None else "table3"))
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"design spec {spec} not found (built-in specs: {', '.join(BUILTIN)})")
    return parse_design(_read_yaml(path), str(path), params)
