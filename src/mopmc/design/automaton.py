"""Timed automata and their synchronised composition (paper Sec. 3.1-3.2).

A :class:`TimedAutomaton` has locations, an initial location, clocks, bounded integer and Boolean
variables, location invariants and edges. An :class:`Edge` has

* a data guard ``when`` over model variables (its own *and other components'*: components may read
  every variable, as PRISM modules do, but write only their own);
* an undetermined guard: clock constraints (``z < 0.2``) and environment events (``exit_ok``);
* an action name (``None`` is the internal action tau), clock resets, variable updates, a target.

A :class:`Network` composes automata: edges with a shared action name synchronise (every component
whose alphabet has the action takes one of its enabled edges with it); tau edges and actions of one
component interleave. Reward items attach values to actions (and optionally a state condition).

>>> ta = TimedAutomaton("T", ("a", "b"), "a", edges=(Edge("a", "b", action="go"),))
>>> Network((ta,)).actions
('go',)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from mopmc.design.expressions import TRUE, Expr, parse, resolve
from mopmc.design.guards import Guard
from mopmc.errors import ConfigError

TAU = "tau"


@dataclass(frozen=True)
class Variable:
    """A bounded integer (``kind="int"``) or Boolean (``kind="bool"``, values 0/1) variable."""

    name: str
    low: int = 0
    high: int = 1
    init: int = 0
    kind: str = "int"

    def __post_init__(self) -> None:
        if self.kind not in ("int", "bool"):
            raise ConfigError(f"variable {self.name!r}: kind must be 'int' or 'bool', not {self.kind!r}")
        if self.kind == "bool":
            object.__setattr__(self, "low", 0)
            object.__setattr__(self, "high", 1)
            object.__setattr__(self, "init", int(bool(self.init)))
        if self.low is None or self.high is None:
            raise ConfigError(f"variable {self.name!r} is unbounded; give 'low' and 'high'")
        if not int(self.low) <= int(self.init) <= int(self.high):
            raise ConfigError(f"variable {self.name!r}: init {self.init} is outside [{self.low}, {self.high}]")

    @property
    def size(self) -> int:
        return int(self.high) - int(self.low) + 1


@dataclass(frozen=True)
class Edge:
    """An edge ``source --[when, clocks, events] action, resets, updates--> target``."""

    source: str
    target: str
    action: str | None = None
    when: Expr | str = TRUE
    clocks: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    resets: tuple[str, ...] = ()
    updates: Mapping[str, Expr | str] = field(default_factory=dict)
    #: where it is written (``spec.yaml: automata[0].edges[2]``), for build-time errors; None: no file
    where: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "when", self.when if isinstance(self.when, Expr) else parse(self.when, f"edge {self.source}->{self.target}"))
        set_(self, "clocks", tuple(self.clocks))
        set_(self, "events", tuple(self.events))
        set_(self, "resets", tuple(self.resets))
        ups = {k: (v if isinstance(v, Expr) else parse(v, f"update of {k}")) for k, v in dict(self.updates).items()}
        set_(self, "updates", MappingProxyType(ups))
        if self.action == TAU:
            set_(self, "action", None)

    @property
    def guard(self) -> Guard:
        """The undetermined part of the guard, normalised."""
        return Guard.parse(self.clocks, self.events, where=self.describe())

    def describe(self) -> str:
        """``source -[action]-> target`` for messages."""
        return f"{self.source} -[{self.action or TAU}]-> {self.target}"

    def guard_text(self) -> str:
        parts = [] if self.when == TRUE else [self.when.to_prism()]
        g = self.guard
        if not g.trivial:
            parts.append(g.text())
        return " & ".join(parts) or "true"


@dataclass(frozen=True)
class TimedAutomaton:
    """A timed automaton component; see the module docstring.

    ``location_variable`` names the integer variable that holds the location in the MDP and in
    PRISM (default ``<name>_loc``); automata with one location and no branching have none. ``where``
    (``spec.yaml: automata[0]``) names it in build-time errors; ``None`` for automata without a file.
    """

    name: str
    locations: tuple[str, ...]
    initial: str
    clocks: tuple[str, ...] = ()
    variables: tuple[Variable, ...] = ()
    edges: tuple[Edge, ...] = ()
    invariants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    location_variable: str | None = None
    where: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "locations", tuple(self.locations))
        set_(self, "clocks", tuple(self.clocks))
        set_(self, "variables", tuple(self.variables))
        set_(self, "edges", tuple(self.edges))
        set_(self, "invariants", MappingProxyType({k: tuple(v) for k, v in dict(self.invariants).items()}))
        if self.location_variable is None:
            set_(self, "location_variable", f"{self.name}_loc")
        self._check()

    def _check(self) -> None:
        where = f"automaton {self.name}"
        if not self.locations:
            raise ConfigError(f"{where} has no locations")
        if len(set(self.locations)) != len(self.locations):
            raise ConfigError(f"{where}: duplicate location names")
        if self.initial not in self.locations:
            raise ConfigError(f"{where}: initial location {self.initial!r} is not a location ({', '.join(self.locations)})")
        own = {v.name for v in self.variables}
        for e in self.edges:
            for end in (e.source, e.target):
                if end not in self.locations:
                    raise ConfigError(f"{where}: edge {e.describe()} uses unknown location {end!r}")
            for c in (*e.resets, *(clock for clock, _ in e.guard.clocks)):
                if c not in self.clocks:
                    raise ConfigError(f"{where}: edge {e.describe()} uses unknown clock {c!r} (clocks: {', '.join(self.clocks) or 'none'})")
            for var in e.updates:
                if var not in own:
                    raise ConfigError(
                        f"{where}: edge {e.describe()} writes {var!r}, which is not its own variable; "
                        "components may read other components' variables but write only their own"
                    )
        for loc, inv in self.invariants.items():
            if loc not in self.locations:
                raise ConfigError(f"{where}: invariant for unknown location {loc!r}")
            g = Guard.parse(inv, where=f"{where}: invariant of {loc}")
            for c, _ in g.clocks:
                if c not in self.clocks:
                    raise ConfigError(f"{where}: invariant of {loc} uses unknown clock {c!r} (clocks: {', '.join(self.clocks) or 'none'})")

    @property
    def alphabet(self) -> tuple[str, ...]:
        """Named actions on its edges, in order of first use."""
        return tuple(dict.fromkeys(e.action for e in self.edges if e.action is not None))


@dataclass(frozen=True)
class RewardItem:
    """Reward ``value`` on every choice with ``action`` (``None``: every choice) in states where ``when`` holds."""

    action: str | None
    value: float
    when: Expr | str = TRUE

    def __post_init__(self) -> None:
        if not isinstance(self.when, Expr):
            object.__setattr__(self, "when", parse(self.when, "reward condition"))


@dataclass(frozen=True)
class Network:
    """The synchronised composition of timed automata, with named reward models.

    Components synchronise on shared action names; see the module docstring.
    """

    components: tuple[TimedAutomaton, ...]
    rewards: Mapping[str, tuple[RewardItem, ...]] = field(default_factory=dict)
    name: str = "network"

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", tuple(self.components))
        object.__setattr__(self, "rewards", MappingProxyType({k: tuple(v) for k, v in dict(self.rewards).items()}))
        self._check()

    @property
    def actions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for c in self.components for a in c.alphabet))

    def component(self, name: str) -> TimedAutomaton:
        for c in self.components:
            if c.name == name:
                return c
        raise ConfigError(f"no component {name!r} in {self.name} (it has {', '.join(c.name for c in self.components)})")

    def location_variables(self) -> dict[str, tuple[str, ...]]:
        """Location variable -> location names, for every component with a location variable."""
        return {c.location_variable: c.locations for c in self.components}

    def variable_names(self) -> set[str]:
        names = {v.name for c in self.components for v in c.variables}
        return names | set(self.location_variables())

    def resolved(self, expr: Expr, where: str) -> Expr:
        """``expr`` with location names replaced by indices; unknown names are errors."""
        return resolve(expr, self.variable_names(), self.location_variables(), where)

    def _check(self) -> None:
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise ConfigError(f"{self.name}: duplicate component names in {names}")
        seen: dict[str, str] = {}
        for c in self.components:
            for v in (c.location_variable, *(v.name for v in c.variables)):
                if v in seen:
                    raise ConfigError(f"{self.name}: variable {v!r} is declared by both {seen[v]} and {c.name}")
                seen[v] = c.name
        for c in self.components:
            for e in c.edges:
                where = f"{c.name}: edge {e.describe()}"
                self.resolved(e.when, where)
                for var, up in e.updates.items():
                    self.resolved(up, f"{where}, update of {var}")
        actions = set(self.actions)
        for name, items in self.rewards.items():
            for item in items:
                if item.action is not None and item.action not in actions:
                    raise ConfigError(
                        f"{self.name}: reward model {name!r} uses unknown action {item.action!r} "
                        f"(actions: {', '.join(sorted(actions))})"
                    )
                self.resolved(item.when, f"reward model {name!r}")


def compose(*automata: TimedAutomaton, rewards: Mapping[str, tuple[RewardItem, ...]] | None = None, name: str = "network") -> Network:
    """The synchronised composition ``A1 || A2 || ...`` on shared action names (paper Sec. 3.2)."""
    return Network(tuple(automata), rewards or {}, name)
