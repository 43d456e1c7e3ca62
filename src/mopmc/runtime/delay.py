"""Observation-to-action delay distributions and the delay spec grammar.

Grammar (all times in seconds)::

    0.15                 fixed delay of 0.15 s
    exp:MEAN             exponential with mean MEAN (scale = MEAN)
    exp:MEAN:TRUNC       exponential with mean MEAN, truncated to [0, TRUNC] (inverse CDF, not clipped)
    uniform:LO:HI        uniform on [LO, HI]
    empirical:FILE.csv   resample (with replacement) the delays listed in FILE.csv

The default spec is ``exp:0.2`` (the paper's exponential with scale 0.2 s). Every distribution draws
only from the :class:`numpy.random.Generator` passed to :meth:`DelayDistribution.sample`.

>>> import numpy as np
>>> d = parse_delay_spec("uniform:0.1:0.3")
>>> 0.1 <= d.sample(np.random.default_rng(0)) <= 0.3
True
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from mopmc.errors import ConfigError

DEFAULT_DELAY_SPEC = "exp:0.2"

_GRAMMAR = "a number (seconds), exp:MEAN[:TRUNC], uniform:LO:HI or empirical:FILE.csv"


class DelayDistribution(Protocol):
    """A distribution of delays in seconds."""

    spec: str

    def sample(self, rng: np.random.Generator) -> float:
        """One delay in seconds (>= 0)."""
        ...

    def cdf(self, t: float) -> float:
        """Pr(delay <= t); Pr(delay >= t) = 1 - cdf(t) for continuous distributions."""
        ...


@dataclass(frozen=True)
class FixedDelay:
    """Always ``seconds``."""

    seconds: float
    spec: str

    def sample(self, rng: np.random.Generator) -> float:
        return self.seconds

    def cdf(self, t: float) -> float:
        return 1.0 if t >= self.seconds else 0.0


@dataclass(frozen=True)
class ExponentialDelay:
    """Exponential with the given mean; truncated to [0, trunc] by rejection when trunc is set."""

    mean: float
    trunc: float | None
    spec: str

    def sample(self, rng: np.random.Generator) -> float:
        if self.trunc is None:
            return float(rng.exponential(self.mean))
        # Inverse-CDF of the truncated law: one uniform draw per sample, never a rejection loop.
        u = float(rng.random())
        mass = 1.0 - math.exp(-self.trunc / self.mean)
        return float(-self.mean * math.log1p(-u * mass))

    def cdf(self, t: float) -> float:
        if t <= 0:
            return 0.0
        plain = 1.0 - math.exp(-t / self.mean)
        if self.trunc is None:
            return plain
        if t >= self.trunc:
            return 1.0
        return plain / (1.0 - math.exp(-self.trunc / self.mean))


@dataclass(frozen=True)
class UniformDelay:
    """Uniform on [low, high]."""

    low: float
    high: float
    spec: str

    def sample(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(self.low, self.high))

    def cdf(self, t: float) -> float:
        if self.high == self.low:
            return 1.0 if t >= self.low else 0.0
        return float(min(1.0, max(0.0, (t - self.low) / (self.high - self.low))))


@dataclass(frozen=True)
class EmpiricalDelay:
    """Resamples a fixed list of observed delays with replacement."""

    values: tuple[float, ...]
    spec: str

    def sample(self, rng: np.random.Generator) -> float:
        return self.values[int(rng.integers(len(self.values)))]

    def cdf(self, t: float) -> float:
        return sum(v <= t for v in self.values) / len(self.values)


def _number(text: str, spec: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"delay spec {spec!r}: {what} {text!r} is not a number; expected {_GRAMMAR}"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"delay spec {spec!r}: {what} must be a finite number >= 0, got {text}")
    return value


def _read_empirical(path_text: str, spec: str) -> tuple[float, ...]:
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"delay spec {spec!r}: file {path_text!r} does not exist")
    values: list[float] = []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not a text file"
        raise ConfigError(f"delay spec {spec!r}: cannot read {path_text!r} ({why})") from None
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row if c.strip()]
        if not cells or cells[0].startswith("#"):
            continue
        if len(cells) != 1:
            raise ConfigError(
                f"{path_text}:{line_no}: expected one delay (seconds) per line, got {len(cells)} columns"
            )
        try:
            value = float(cells[0])
        except ValueError:
            if not values and line_no == 1:
                continue  # a header line
            raise ConfigError(f"{path_text}:{line_no}: {cells[0]!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{path_text}:{line_no}: delay must be finite and >= 0, got {cells[0]}")
        values.append(value)
    if not values:
        raise ConfigError(f"{path_text}: no delays found; expected one number (seconds) per line")
    return tuple(values)


def check_delay_scale(distribution: DelayDistribution, duration: float, where: str = "delay spec") -> None:
    """Refuse delays longer than the episode: a step lasts at least its delay, so an episode would
    simulate ``delay x steps`` seconds (``1e9`` would never finish). The scale is the fixed delay,
    the exponential's mean (its truncation if smaller), the uniform's upper end or the largest
    empirical delay."""
    if isinstance(distribution, FixedDelay):
        scale = distribution.seconds
    elif isinstance(distribution, ExponentialDelay):
        scale = distribution.mean if distribution.trunc is None else min(distribution.mean, distribution.trunc)
    elif isinstance(distribution, UniformDelay):
        scale = distribution.high
    elif isinstance(distribution, EmpiricalDelay):
        scale = max(distribution.values)
    else:
        return
    if scale > duration:
        raise ConfigError(f"{where} {distribution.spec!r}: delays of {scale:g} s exceed the episode duration "
                          f"({duration:g} s, env.duration); every step lasts at least its delay, so give delays in seconds")


def parse_delay_spec(spec: str) -> DelayDistribution:
    """Parse a delay spec (see the module docstring) into a distribution.

    Raises :class:`~mopmc.errors.ConfigError` naming the spec and the grammar when it is malformed.
    """
    text = spec.strip()
    if not text:
        raise ConfigError(f"empty delay spec; expected {_GRAMMAR}")
    kind, colon, rest = text.partition(":")
    if not colon:
        try:
            float(text)
        except ValueError:
            raise ConfigError(f"unknown delay spec {spec!r}; expected {_GRAMMAR}") from None
        return FixedDelay(_number(text, spec, "fixed delay"), text)
    kind = kind.lower()
    if kind == "empirical":
        return EmpiricalDelay(_read_empirical(rest, spec), text)
    args = rest.split(":")
    if kind == "exp":
        if len(args) not in (1, 2):
            raise ConfigError(f"delay spec {spec!r}: expected exp:MEAN or exp:MEAN:TRUNC")
        mean = _number(args[0], spec, "mean")
        if mean == 0:
            raise ConfigError(f"delay spec {spec!r}: mean must be > 0 (use 0 for no delay)")
        trunc = _number(args[1], spec, "truncation") if len(args) == 2 else None
        if trunc is not None and trunc == 0:
            raise ConfigError(f"delay spec {spec!r}: truncation must be > 0")
        return ExponentialDelay(mean, trunc, text)
    if kind == "uniform":
        if len(args) != 2:
            raise ConfigError(f"delay spec {spec!r}: expected uniform:LO:HI")
        low, high = _number(args[0], spec, "LO"), _number(args[1], spec, "HI")
        if low > high:
            raise ConfigError(f"delay spec {spec!r}: LO must be <= HI")
        return UniformDelay(low, high, text)
    raise ConfigError(f"unknown delay kind {kind!r} in {spec!r}; expected {_GRAMMAR}")
