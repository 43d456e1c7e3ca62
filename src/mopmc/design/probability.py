"""Probability providers: Pr(guard | state) for the edges of a branching state (paper Sec. 3.3).

Two kinds, as in the paper:

* :class:`DelayDistribution` - a clock measures a random delay with a known distribution; the
  probability of a clock interval comes from its CDF (exponential with scale 0.2 s, optionally
  truncated to ``[0, truncate]``).
* :class:`ProbabilityTable` - rows estimated from simulation: ``Pr(guard) = p`` in the states where a
  data condition holds (e.g. ``conf = 1``).

A provider answers ``None`` for a guard it does not know. Within one branching, at most one
outcome may be unknown to every provider: it gets the complement, ``1 - sum(others)``.

>>> d = DelayDistribution("z", scale=0.2)
>>> round(float(d.interval_probability(0.2, math.inf)), 6)
0.367879
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Protocol, Sequence

import numpy as np

from mopmc.design.expressions import TRUE, Expr, parse
from mopmc.design.guards import Guard
from mopmc.errors import ConfigError


class ProbabilityProvider(Protocol):
    """Answers ``Pr(guard | state)`` for a vector of states, or ``None`` if it does not know the guard."""

    def probability(self, guard: Guard, env: Mapping[str, np.ndarray], size: int) -> "Answer | None": ...


@dataclass(frozen=True)
class Answer:
    """Probabilities per state (``nan`` where no row applies) and the conditions that were used."""

    values: np.ndarray
    row: np.ndarray  # index of the row (condition) used per state, -1 when none
    conditions: tuple[Expr, ...] = (TRUE,)


@dataclass(frozen=True)
class DelayDistribution:
    """A clock that measures a random delay: exponential with ``scale`` seconds, optionally truncated.

    ``Pr(a <= z < b) = F(b) - F(a)`` with ``F`` the (truncated) CDF; guards on other clocks or with
    events are not answered.
    """

    clock: str
    scale: float = 0.2
    truncate: float | None = None
    distribution: str = "exponential"

    def __post_init__(self) -> None:
        if self.distribution != "exponential":
            raise ConfigError(f"delay distribution {self.distribution!r} is not supported (use 'exponential')")
        if not self.scale > 0:
            raise ConfigError(f"delay scale must be > 0, not {self.scale}")
        if self.truncate is not None and not self.truncate > 0:
            raise ConfigError(f"delay truncation must be > 0, not {self.truncate}")

    def cdf(self, x: float) -> float:
        if x <= 0:
            return 0.0
        if self.truncate is not None:
            if x >= self.truncate:
                return 1.0
            return -math.expm1(-x / self.scale) / -math.expm1(-self.truncate / self.scale)
        return -math.expm1(-x / self.scale)

    def interval_probability(self, lo: float, hi: float) -> float:
        # continuous distribution: open and closed ends have the same probability
        return self.cdf(hi) - self.cdf(lo) if hi != math.inf else 1.0 - self.cdf(lo)

    def probability(self, guard: Guard, env, size: int) -> Answer | None:
        if guard.events or [c for c, _ in guard.clocks] != [self.clock]:
            return None
        iv = guard.clocks[0][1]
        p = self.interval_probability(iv.lo, iv.hi)
        return Answer(np.full(size, p), np.zeros(size, dtype=np.int64))

    def reads(self, guard: Guard) -> tuple[Expr, ...]:
        return ()

    def resolved(self, network) -> "DelayDistribution":
        return self


@dataclass(frozen=True)
class TableRow:
    """``Pr(guard) = probability`` in states where ``when`` holds."""

    guard: Guard
    probability: float
    when: Expr = TRUE
    where: str | None = field(default=None, compare=False, repr=False)  # ``spec.yaml: probabilities.table[1]``

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.probability) <= 1.0:  # NaN too
            raise ConfigError(f"probability {self.probability} of {self.guard.text()} (when {self.when}) is outside [0, 1]")


@dataclass(frozen=True)
class ProbabilityTable:
    """Probabilities estimated from simulation, one row per (guard, condition).

    Example:
        >>> t = ProbabilityTable.from_rows([{"guard": "exit_ok", "when": "conf = 1", "p": 0.16}])
        >>> a = t.probability(Guard.parse(events=["exit_ok"]), {"conf": np.array([1, 2])}, 2)
        >>> a.values.tolist()
        [0.16, nan]
    """

    rows: tuple[TableRow, ...]

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping], where: str | None = None) -> "ProbabilityTable":
        """Rows as dicts ``{guard: "z >= 0.2" | "exit_ok", when: "conf = 1", p: 0.39}``; ``where`` (the
        list's place in a file, ``spec.yaml: probabilities.table``) names row ``i`` in build-time errors."""
        out = []
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise ConfigError(f"probability table row {i}: expected a mapping {{guard, when, p}}, got {type(r).__name__}")
            unknown = set(r) - {"guard", "when", "p"}
            if unknown:
                raise ConfigError(f"probability table row {i}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (use guard, when, p)")
            for key in ("guard", "p"):
                if key not in r:
                    raise ConfigError(f"probability table row {i}: missing key {key!r}")
            p = r["p"]
            if isinstance(p, bool) or not isinstance(p, (int, float)):
                raise ConfigError(f"probability table row {i}: p {p!r} is not a number")
            out.append(TableRow(parse_guard(str(r["guard"]), f"probability table row {i}"), float(p), parse(r.get("when", True), f"row {i}"),
                                where and f"{where}[{i}]"))
        return cls(tuple(out))

    def reads(self, guard: Guard) -> tuple[Expr, ...]:
        """The conditions of the rows for ``guard`` (their variables decide the probability)."""
        return tuple(r.when for r in self.rows if r.guard.equivalent(guard))

    def resolved(self, network) -> "ProbabilityTable":
        """Rows with location names in conditions replaced by indices of ``network``."""
        return ProbabilityTable(tuple(replace(r, when=network.resolved(r.when, f"{r.where}.when" if r.where else f"probability of {r.guard.text()}"))
                                      for r in self.rows))

    def probability(self, guard: Guard, env, size: int) -> Answer | None:
        rows = [r for r in self.rows if r.guard.equivalent(guard)]
        if not rows:
            return None
        values = np.full(size, np.nan)
        used = np.full(size, -1, dtype=np.int64)
        for i, r in enumerate(rows):
            mask = np.broadcast_to(np.asarray(r.when.eval(env), dtype=bool), (size,))
            clash = mask & (used >= 0)
            if clash.any():
                where = f"{r.where}.when" if r.where else "probability table"
                raise ConfigError(f"{where}: rows for {guard.text()} overlap (when {rows[used[clash][0]].when} and when {r.when})")
            values[mask] = r.probability
            used[mask] = i
        return Answer(values, used, tuple(r.when for r in rows))


def parse_guard(text: str, where: str) -> Guard:
    """``"z >= 0.2 & exit_ok"`` -> :class:`Guard` (clock constraints and event literals joined by ``&``)."""
    clocks, events = [], []
    for part in str(text).split("&"):
        part = part.strip()
        (clocks if any(op in part for op in "<>=") else events).append(part)
    return Guard.parse(clocks, events, where=where)


@dataclass(frozen=True)
class ProbabilityModel:
    """Providers asked in order; the first that knows a guard answers it. ``where`` (``spec.yaml:
    probabilities``) names them in build-time errors."""

    providers: tuple[ProbabilityProvider, ...] = ()
    where: str | None = field(default=None, compare=False, repr=False)

    def probability(self, guard: Guard, env, size: int) -> Answer | None:
        """Each provider fills the states that the earlier ones left without a probability."""
        values = np.full(size, np.nan)
        row = np.full(size, -1, dtype=np.int64)
        conditions: list[Expr] = []
        for p in self.providers:
            a = p.probability(guard, env, size)
            if a is None:
                continue
            fill = np.isnan(values) & ~np.isnan(a.values)
            values[fill] = a.values[fill]
            row[fill] = a.row[fill] + len(conditions)
            conditions.extend(a.conditions)
        return Answer(values, row, tuple(conditions)) if conditions else None

    def reads(self, guard: Guard) -> tuple[Expr, ...]:
        return tuple(w for p in self.providers for w in p.reads(guard))

    def resolved(self, network) -> "ProbabilityModel":
        return ProbabilityModel(tuple(p.resolved(network) for p in self.providers), self.where)
