"""The undetermined part of a guard: clock constraints and environment events, decided symbolically.

An edge's guard is a data condition on model variables (decided per discrete state) and an
*undetermined* part that the model cannot decide: clock constraints (``z < 0.2``) and events
(``exit_ok``, ``!hw_low``: propositions about the environment, such as the paper's road condition
phi). Only the undetermined part matters for the paper's assumption: at a discrete state the
enabled edges must be pairwise exclusive (a branching state) or all equivalent (a choice state).

Clock constraints on one clock are normalised to an interval; two guards are

* *equivalent* when every clock has the same interval and the event literals are the same;
* *exclusive* when some clock's intervals are disjoint or some event appears with both signs.

>>> g1, g2 = Guard.parse(["z < 0.2"]), Guard.parse(["z >= 0.2"])
>>> g1.exclusive(g2), g1.equivalent(g2)
(True, False)
>>> Guard.parse(["z < 0.1"]).relation(Guard.parse(["z < 0.2"]))
'overlapping'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mopmc.errors import ConfigError

_CLOCK = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|==|=|<|>)\s*([0-9.eE+-]+)\s*$")
_EVENT = re.compile(r"^\s*(!?)\s*([A-Za-z_]\w*)\s*$")


@dataclass(frozen=True, order=True)
class Interval:
    """A set of clock values ``lo (<|<=) z (<|<=) hi``; clocks are never negative."""

    lo: float = 0.0
    lo_closed: bool = True
    hi: float = math.inf
    hi_closed: bool = False

    def meet(self, other: "Interval") -> "Interval":
        lo, lo_c = max((self.lo, not self.lo_closed), (other.lo, not other.lo_closed))
        hi, hi_c = min((self.hi, self.hi_closed), (other.hi, other.hi_closed))
        return Interval(lo, not lo_c, hi, hi_c)

    @property
    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_closed and self.hi_closed))

    def contains(self, x: float) -> bool:
        return (self.lo < x or (self.lo_closed and self.lo == x)) and (x < self.hi or (self.hi_closed and x == self.hi))

    def text(self, clock: str) -> str:
        """The interval as a constraint text, e.g. ``z >= 0.2`` or ``0.1 <= z < 0.2``."""
        lo = "" if (self.lo == 0 and self.lo_closed) else f"{_num(self.lo)} {'<=' if self.lo_closed else '<'} "
        if self.hi == math.inf:
            if not lo:
                return f"{clock} >= 0"
            return f"{clock} {'>=' if self.lo_closed else '>'} {_num(self.lo)}"
        hi = f" {'<=' if self.hi_closed else '<'} {_num(self.hi)}"
        if self.lo == self.hi and self.lo_closed and self.hi_closed:
            return f"{clock} = {_num(self.lo)}"
        return f"{lo}{clock}{hi}"


def _num(x: float) -> str:
    return repr(float(x)).rstrip("0").rstrip(".") if float(x) != int(x) else str(int(x))


@dataclass(frozen=True)
class Guard:
    """Normalised undetermined guard: one interval per constrained clock, a set of event literals."""

    clocks: tuple[tuple[str, Interval], ...] = ()
    events: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def parse(cls, constraints: list[str] | tuple[str, ...] = (), events: list[str] | tuple[str, ...] = (), where: str = "guard") -> "Guard":
        """Build from texts such as ``"z < 0.2"`` and ``"!exit_ok"``."""
        ivs: dict[str, Interval] = {}
        for c in constraints:
            m = _CLOCK.match(str(c))
            if not m:
                raise ConfigError(f"{where}: clock constraint {c!r} is not of the form 'z < 0.2' (operators < <= > >= =)")
            try:
                clock, op, num = m.group(1), m.group(2), float(m.group(3))
            except ValueError:
                raise ConfigError(f"{where}: clock constraint {c!r}: {m.group(3)!r} is not a number") from None
            iv = {
                "<": Interval(hi=num, hi_closed=False),
                "<=": Interval(hi=num, hi_closed=True),
                ">": Interval(lo=num, lo_closed=False),
                ">=": Interval(lo=num, lo_closed=True),
                "=": Interval(num, True, num, True),
                "==": Interval(num, True, num, True),
            }[op]
            ivs[clock] = ivs.get(clock, Interval()).meet(iv)
        evs: dict[str, bool] = {}
        for e in events:
            m = _EVENT.match(str(e))
            if not m:
                raise ConfigError(f"{where}: event {e!r} is not a name or '!name'")
            name, positive = m.group(2), m.group(1) != "!"
            if evs.get(name, positive) != positive:
                raise ConfigError(f"{where}: event {name!r} appears both positive and negated")
            evs[name] = positive
        return cls(tuple(sorted(ivs.items())), tuple(sorted(evs.items())))

    @property
    def trivial(self) -> bool:
        """True when the guard constrains nothing (always satisfied)."""
        return not self.events and all(iv == Interval() for _, iv in self.clocks)

    def _clock_map(self) -> dict[str, Interval]:
        return {c: iv for c, iv in self.clocks if iv != Interval()}

    def equivalent(self, other: "Guard") -> bool:
        return self._clock_map() == other._clock_map() and dict(self.events) == dict(other.events)

    def exclusive(self, other: "Guard") -> bool:
        a, b = dict(self.clocks), dict(other.clocks)
        if any(a[c].meet(b[c]).empty for c in a.keys() & b.keys()):
            return True
        if any(iv.empty for iv in (*a.values(), *b.values())):
            return True
        ea, eb = dict(self.events), dict(other.events)
        return any(ea[e] != eb[e] for e in ea.keys() & eb.keys())

    def relation(self, other: "Guard") -> str:
        """``"equivalent"``, ``"exclusive"`` or ``"overlapping"`` (the paper's assumption fails)."""
        if self.equivalent(other):
            return "equivalent"
        if self.exclusive(other):
            return "exclusive"
        return "overlapping"

    def holds(self, clocks: dict[str, float], events: dict[str, bool]) -> bool:
        """True at the clock values and event truth values given (every clock and event it names)."""
        return (all(iv.contains(clocks[c]) for c, iv in self.clocks)
                and all(events[e] == positive for e, positive in self.events))

    def text(self) -> str:
        """The guard as text, e.g. ``z >= 0.2 & !exit_ok`` (``true`` when trivial)."""
        parts = [iv.text(c) for c, iv in self._clock_map().items()]
        parts += [("" if pos else "!") + e for e, pos in self.events]
        return " & ".join(parts) or "true"


def _cells(bounds: set[float]) -> list[Interval]:
    """The clock values split at ``bounds``: each bound alone and the open stretches between them."""
    points = sorted(b for b in bounds if 0 <= b < math.inf)
    cells, lo, lo_closed = [], 0.0, True
    for b in points:
        if b > lo or (b == lo and not lo_closed):
            cells.append(Interval(lo, lo_closed, b, False))
        cells.append(Interval(b, True, b, True))
        lo, lo_closed = b, False
    cells.append(Interval(lo, lo_closed, math.inf, False))
    return [c for c in cells if not c.empty]


def _sample(iv: Interval) -> float:
    if iv.lo_closed:
        return iv.lo
    return iv.lo + 1.0 if iv.hi == math.inf else (iv.lo + iv.hi) / 2


def uncovered_event(guards: "list[Guard] | tuple[Guard, ...]") -> Guard | None:
    """Where some guard's clock constraints hold but, for some truth values of the events, no guard
    does: edges taken on an environment event need an edge for each of its values (the model has
    no move otherwise, and a probability for the event would be lost); ``None`` when there is no such
    place. A clock region that no guard's constraints cover is not reported: there the automaton
    lets time pass.

    >>> uncovered_event([Guard.parse(["z < 0.1"]), Guard.parse(["z >= 0.1"], ["exit_ok"])]).text()
    'z >= 0.1 & !exit_ok'
    >>> uncovered_event([Guard.parse(events=["exit_ok"]), Guard.parse(events=["!exit_ok"])]) is None
    True
    """
    import itertools

    events = sorted({e for g in guards for e, _ in g.events})
    if not events:
        return None
    clocks = sorted({c for g in guards for c, _ in g.clocks})
    per_clock = [_cells({x for g in guards for name, iv in g.clocks if name == c for x in (iv.lo, iv.hi)})
                 for c in clocks]
    for cell in itertools.product(*per_clock):
        at = {c: _sample(iv) for c, iv in zip(clocks, cell)}
        waiting = [g for g in guards if all(iv.contains(at[c]) for c, iv in g.clocks)]
        if not waiting:
            continue  # no edge waits for this clock region: time passes
        for values in itertools.product((True, False), repeat=len(events)):
            truth = dict(zip(events, values))
            if not any(g.holds(at, truth) for g in guards):
                # named by the clock constraints of an edge that holds there (the cell may be a point of it)
                return Guard(waiting[0].clocks, tuple(truth.items()))
    return None
