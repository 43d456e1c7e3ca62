"""Design specs: a YAML file of timed automata, or a built-in name (``paper-switch``).

A YAML spec is either a network of automata (``automata:``, ``rewards:``, ``probabilities:``) or the
paper's switch with a parameter file (``switch: {parameters: FILE}``); see ``docs/design.md``. Every
mapping rejects unknown keys by name.

>>> d = load_design("paper-switch")
>>> d.network.name, d.binding["configuration"]
('SW2(n=40, k=4)', 'conf')
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mopmc.design.automaton import Edge, Network, RewardItem, TimedAutomaton, Variable
from mopmc.design.expressions import parse, resolve
from mopmc.design.params import (SwitchParameters, _delay_law, _integer, _mapping, _name, _number, load_parameters, load_yaml,
                                 parse_parameters, read_text)
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


@contextlib.contextmanager
def _at(where: str):
    """Errors of the design objects (which know names, not the file) prefixed with where in the spec."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


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


def _names(data: Any, where: str) -> tuple[str, ...]:
    return tuple(_name(x, f"{where}[{i}]") for i, x in enumerate(_list(data, where)))


def _strings(data: Any, where: str) -> tuple[str, ...]:
    """A list of texts (guards, constraints); a number is read as its text."""
    out = []
    for i, x in enumerate(_list(data, where)):
        if not isinstance(x, (str, int, float)) or isinstance(x, bool):
            raise ConfigError(f"{where}[{i}]: expected a text, got {type(x).__name__}")
        out.append(str(x))
    return tuple(out)


def _expression(x: Any, where: str) -> Any:
    """A guard, condition or update: a text, a number or a Boolean (YAML's true/false)."""
    if not isinstance(x, (str, int, float, bool)):
        raise ConfigError(f"{where}: expected an expression, got {type(x).__name__}")
    return x


def switch_design(params: SwitchParameters) -> Design:
    """The paper's SW2 with ``params``."""
    from mopmc.design.switch import binding, sw2, switch_probabilities

    return Design(sw2(params), switch_probabilities(params), params, binding(params))


def _variable(v: Any, where: str) -> Variable:
    v = _keys(v, {"name", "type", "low", "high", "init"}, where, ("name",))
    name = _name(v["name"], f"{where}.name")
    kind = str(v.get("type", "int"))
    if kind == "int" and (v.get("low") is None or v.get("high") is None):
        raise ConfigError(f"{where}: variable {name!r} is unbounded; give 'low' and 'high'")
    if kind == "bool":
        init = v.get("init", False)
        if isinstance(init, bool) or init in (0, 1):
            return Variable(name, 0, 1, int(init), kind)
        raise ConfigError(f"{where}.init: {init!r} is not a Boolean (true, false, 0 or 1)")
    low, high = _integer(v.get("low", 0), f"{where}.low"), _integer(v.get("high", 1), f"{where}.high")
    if low > high:
        raise ConfigError(f"{where}: variable {name!r} has low {low} > high {high}")
    init = _integer(v.get("init", low), f"{where}.init")
    with _at(where):
        return Variable(name, low, high, init, kind)


def _edge(e: Any, where: str, actions: set[str] | None) -> Edge:
    e = _keys(e, {"from", "to", "action", "when", "clocks", "events", "resets", "updates"}, where, ("from", "to"))
    action = e.get("action")
    if action is not None:
        action = _name(action, f"{where}.action")
    if action is not None and actions is not None and action not in actions and action != "tau":
        raise ConfigError(f"{where}: unknown action {action!r} (declared actions: {', '.join(sorted(actions))})")
    when = parse(_expression(e.get("when", True), f"{where}.when"), f"{where}.when")
    updates = {str(k): parse(_expression(v, f"{where}.updates.{k}"), f"{where}.updates.{k}")
               for k, v in _mapping(e.get("updates"), f"{where}.updates").items()}
    return Edge(str(e["from"]), str(e["to"]), action, when, _strings(e.get("clocks"), f"{where}.clocks"),
                _strings(e.get("events"), f"{where}.events"), _names(e.get("resets"), f"{where}.resets"), updates, where)


def _check_unique(automata: tuple[TimedAutomaton, ...], source: str) -> None:
    """Automaton names and the variables they declare (location variables too) are unique, named where
    the second is written (a clash would otherwise surface as an unrelated unknown name)."""
    names: dict[str, int] = {}
    owner: dict[str, int] = {}
    for i, a in enumerate(automata):
        where = f"{source}: automata[{i}]"
        if a.name in names:
            raise ConfigError(f"{where}.name: automaton name {a.name!r} is already used by automata[{names[a.name]}] "
                              "(duplicate component names); give each automaton its own name")
        names[a.name] = i
        declared = [(a.location_variable, f"{where}.name" if a.location_variable == f"{a.name}_loc" else f"{where}.location_variable",
                     "location variable")]
        declared += [(v.name, f"{where}.variables[{j}].name", "variable") for j, v in enumerate(a.variables)]
        for var, key, what in declared:
            if var in owner:
                raise ConfigError(f"{key}: {what} {var!r} is already declared by automata[{owner[var]}] ({automata[owner[var]].name})")
            owner[var] = i


def _check_names(automata: tuple[TimedAutomaton, ...], rewards: Mapping[str, tuple[RewardItem, ...]], source: str) -> None:
    """Every variable and location an edge guard, update or reward condition uses is declared,
    named where it is written (the network's own check knows only the edge)."""
    locations = {a.location_variable: a.locations for a in automata}
    variables = {v.name for a in automata for v in a.variables} | set(locations)
    for i, a in enumerate(automata):
        for j, e in enumerate(a.edges):
            where = f"{source}: automata[{i}].edges[{j}]"
            resolve(e.when, variables, locations, f"{where}.when")
            for var, up in e.updates.items():
                resolve(up, variables, locations, f"{where}.updates.{var}")
    actions = {x for a in automata for x in a.alphabet}
    for name, items in rewards.items():
        for i, item in enumerate(items):
            resolve(item.when, variables, locations, f"{source}: rewards.{name}[{i}].when")
            if item.action is not None and item.action not in actions:
                raise ConfigError(f"{source}: rewards.{name}[{i}].action: unknown action {item.action!r} "
                                  f"(the edges' actions: {', '.join(sorted(a for a in actions if a)) or 'none'})")


def _automaton(a: Any, where: str, actions: set[str] | None) -> TimedAutomaton:
    a = _keys(a, {"name", "locations", "initial", "clocks", "variables", "edges", "invariants", "location_variable"}, where, ("name", "locations"))
    name = _name(a["name"], f"{where}.name")
    locs = tuple(str(x) for x in _list(a["locations"], f"{where}.locations"))
    clocks = _names(a.get("clocks"), f"{where}.clocks")
    if len(set(clocks)) != len(clocks):
        raise ConfigError(f"{where}.clocks: a clock is declared twice in {list(clocks)}")
    variables = tuple(_variable(v, f"{where}.variables[{i}]") for i, v in enumerate(_list(a.get("variables"), f"{where}.variables")))
    edges = tuple(_edge(e, f"{where}.edges[{i}]", actions) for i, e in enumerate(_list(a.get("edges"), f"{where}.edges")))
    invariants = {str(k): _strings(v, f"{where}.invariants.{k}") for k, v in _mapping(a.get("invariants"), f"{where}.invariants").items()}
    locvar = a.get("location_variable")
    if locvar is not None:
        locvar = _name(locvar, f"{where}.location_variable")
    with _at(where):
        return TimedAutomaton(name, locs, str(a.get("initial", locs[0] if locs else "")), clocks, variables, edges,
                              invariants, locvar, where)


def probabilities(data: Any, where: str) -> ProbabilityModel:
    """``{table: [{guard, when, p}], delays: [{clock, distribution, scale, truncate}]}`` -> provider."""
    data = _keys(data or {}, {"table", "delays"}, where)
    providers: list = []
    if data.get("table"):
        rows = _list(data["table"], f"{where}.table")
        for i, r in enumerate(rows):
            r = _keys(r, {"guard", "when", "p"}, f"{where}.table[{i}]", ("guard", "p"))
            _expression(r.get("when", True), f"{where}.table[{i}].when")
            if not 0.0 <= _number(r["p"], f"{where}.table[{i}].p") <= 1.0:
                raise ConfigError(f"{where}.table[{i}].p: probability {r['p']} is outside [0, 1]")
        providers.append(ProbabilityTable.from_rows(rows, f"{where}.table"))
    for i, d in enumerate(_list(data.get("delays"), f"{where}.delays")):
        w = f"{where}.delays[{i}]"
        d = _keys(d, {"clock", "distribution", "scale", "truncate"}, w, ("clock",))
        distribution, scale, truncate = _delay_law(d, w)
        providers.append(DelayDistribution(_name(d["clock"], f"{w}.clock"), scale, truncate, distribution))
    return ProbabilityModel(tuple(providers), where)


def _check_probabilities(network: Network, provider: ProbabilityModel, where: str) -> None:
    """Every clock and event the probabilities name is one the automata use (else a row would be ignored),
    and the rows' conditions name declared variables and locations."""
    clocks = {c for a in network.components for c in a.clocks}
    events = {name for a in network.components for e in a.edges for name, _ in e.guard.events}
    for p in provider.providers:
        if isinstance(p, DelayDistribution) and p.clock not in clocks:
            raise ConfigError(f"{where}.delays: unknown clock {p.clock!r} (clocks: {', '.join(sorted(clocks)) or 'none'})")
        for i, row in enumerate(getattr(p, "rows", ())):
            network.resolved(row.when, f"{where}.table[{i}].when")
            for c, _ in row.guard.clocks:
                if c not in clocks:
                    raise ConfigError(f"{where}.table[{i}]: unknown clock {c!r} (clocks: {', '.join(sorted(clocks)) or 'none'})")
            for ev, _ in row.guard.events:
                if ev not in events:
                    raise ConfigError(f"{where}.table[{i}]: event {ev!r} is on no edge (events: {', '.join(sorted(events)) or 'none'})")


def parse_design(data: Any, source: str, params: str | Path | None = None) -> Design:
    """A :class:`Design` from parsed YAML (see the module docstring)."""
    top = _keys(data, {"name", "automata", "actions", "rewards", "probabilities", "switch"}, source)
    if "switch" in top:
        other = sorted(set(top) - {"switch", "name"})
        if other:
            raise ConfigError(f"{source}: a switch spec is built from its parameters alone; it takes no "
                              f"{', '.join(other)} (write a network spec without 'switch' instead)")
        sw = _keys(top["switch"] or {}, {"parameters"}, f"{source}: switch")
        if params is not None:
            return switch_design(load_parameters(params))
        p = sw.get("parameters", "table3")
        if isinstance(p, Mapping):
            return switch_design(parse_parameters(p, f"{source}: switch.parameters"))
        if not isinstance(p, str):
            raise ConfigError(f"{source}: switch.parameters: expected a file name or a mapping, got {type(p).__name__}")
        path = Path(str(p))
        if not path.is_absolute() and str(p) != "table3":
            path = Path(source).parent / path
        if str(p) != "table3" and not path.is_file():
            raise ConfigError(f"{source}: switch.parameters: parameter file {path} "
                              f"{'is a directory' if path.is_dir() else 'not found'} (built-in sets: table3)")
        return switch_design(load_parameters(path if str(p) != "table3" else "table3"))
    if "automata" not in top:
        raise ConfigError(f"{source}: a spec needs 'automata' (or 'switch')")
    actions = set(_names(top["actions"], f"{source}: actions")) if top.get("actions") is not None else None
    automata_data = _list(top["automata"], f"{source}: automata")
    if not automata_data:
        raise ConfigError(f"{source}: automata: expected a non-empty list")
    automata = tuple(_automaton(a, f"{source}: automata[{i}]", actions) for i, a in enumerate(automata_data))
    rewards = {}
    for name, items in _mapping(top.get("rewards"), f"{source}: rewards").items():
        out = []
        for i, it in enumerate(_list(items, f"{source}: rewards.{name}")):
            where = f"{source}: rewards.{name}[{i}]"
            it = _keys(it, {"action", "value", "when"}, where, ("value",))
            action = None if it.get("action") is None else _name(it["action"], f"{where}.action")
            out.append(RewardItem(action, _number(it["value"], f"{where}.value"),
                                  parse(_expression(it.get("when", True), f"{where}.when"), f"{where}.when")))
        rewards[_name(name, f"{source}: rewards: reward model")] = tuple(out)
    name = top.get("name", Path(source).stem)
    if not isinstance(name, (str, int, float)) or isinstance(name, bool):
        raise ConfigError(f"{source}: name: expected a text, got {type(name).__name__}")
    _check_unique(automata, source)
    _check_names(automata, rewards, source)
    with _at(source):
        network = Network(automata, rewards, str(name))
    prob_data, prob_where = top.get("probabilities"), f"{source}: probabilities"
    if params is not None:
        doc = _read_yaml(Path(params))
        if not isinstance(doc, Mapping) or "probabilities" not in doc:
            raise ConfigError(f"--params {params}: expected a mapping with 'probabilities' (table, delays) for the "
                              f"network spec {source}")
        _keys(doc, {"probabilities"}, f"--params {params}")
        prob_data, prob_where = doc["probabilities"], f"{params}: probabilities"
    provider = probabilities(prob_data, prob_where)
    _check_probabilities(network, provider, prob_where)
    return Design(network, provider)


def _read_yaml(path: Path) -> Any:
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a YAML file")
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    return load_yaml(read_text(path), str(path))


def load_design(spec: str | Path, params: str | Path | None = None) -> Design:
    """Load a spec file or a built-in (``paper-switch``); ``params`` overrides its probabilities."""
    if str(spec) == "paper-switch":
        return switch_design(load_parameters(params if params is not None else "table3"))
    path = Path(spec)
    if path.is_dir():
        raise ConfigError(f"design spec {spec} is a directory (built-in specs: {', '.join(BUILTIN)})")
    if not path.is_file():
        raise ConfigError(f"design spec {spec} not found (built-in specs: {', '.join(BUILTIN)})")
    return parse_design(_read_yaml(path), str(path), params)
