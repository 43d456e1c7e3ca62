"""Aggregate per-step logs into the paper's metrics, with episode-bootstrap confidence intervals.

Definitions (docs/runtime.md has the full table):

- ``p10_ttc``: 10th percentile of per-step TTC [s], TTC capped at :data:`~mopmc.runtime.metrics.TTC_CAP`.
- ``p50_headway``: median per-step time headway [s], capped at :data:`~mopmc.runtime.metrics.HEADWAY_CAP`.
- ``pr_ttc(q)`` / ``pr_headway(q)``: percentile rank of score q, the fraction of steps with metric <= q
  (the model's "low TTC"/"low HW" reward per step).
- ``prob_lane_departure``: per-step lane-departure frequency (the model's ``lane_dep_cost`` total
  reward when every episode has MAX_TS steps); ``episode_lane_departure``: fraction of episodes with
  at least one lane-departure step.
- ``controller_cost``: mean cost per step (1 primary, 2 secondary); the model's ``ctrl_cost``.

Percentiles use ``numpy.percentile(method="linear")`` over all steps pooled. Confidence intervals are
percentile-bootstrap intervals resampling whole episodes (steps within an episode are dependent).
Undefined values (no steps) are ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from mopmc.runtime.episode import EpisodeResult
from mopmc.runtime.metrics import HEADWAY_CAP, SECONDARY_COST, TTC_CAP


class Estimate(NamedTuple):
    """A point estimate with a bootstrap confidence interval (``None`` where undefined)."""

    value: float | None
    low: float | None
    high: float | None


class MetricsSummary(NamedTuple):
    episodes: int
    steps: int
    terminated_episodes: int
    p10_ttc: Estimate
    p50_headway: Estimate
    pr_ttc: dict[float, Estimate]
    pr_headway: dict[float, Estimate]
    prob_lane_departure: Estimate
    episode_lane_departure: Estimate
    controller_cost: Estimate
    secondary_share: Estimate


class _Columns(NamedTuple):
    ttc: np.ndarray
    headway: np.ndarray
    ld: np.ndarray
    cost: np.ndarray


def _columns(results: Sequence[EpisodeResult]) -> list[_Columns]:
    out = []
    for r in results:
        recs = r.records
        out.append(
            _Columns(
                np.minimum(np.array([x.ttc for x in recs], dtype=float), TTC_CAP),
                np.minimum(np.array([x.headway for x in recs], dtype=float), HEADWAY_CAP),
                np.array([x.lane_departure for x in recs], dtype=float),
                np.array([x.cost for x in recs], dtype=float),
            )
        )
    return out


def _pooled(cols: Sequence[_Columns], field: str) -> np.ndarray:
    arrays = [getattr(c, field) for c in cols]
    return np.concatenate(arrays) if arrays else np.zeros(0)


Statistic = Callable[[Sequence[_Columns]], float | None]


def _estimate(
    cols: Sequence[_Columns], stat: Statistic, rng: np.random.Generator, resamples: int, level: float
) -> Estimate:
    value = stat(cols)
    if value is None or resamples <= 0 or len(cols) < 2:
        return Estimate(value, None, None)
    draws = []
    n = len(cols)
    for _ in range(resamples):
        idx = rng.integers(n, size=n)
        v = stat([cols[i] for i in idx])
        if v is not None:
            draws.append(v)
    if not draws:
        return Estimate(value, None, None)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return Estimate(value, float(low), float(high))


def _percentile(field: str, q: float) -> Statistic:
    def stat(cols: Sequence[_Columns]) -> float | None:
        x = _pooled(cols, field)
        return float(np.percentile(x, q, method="linear")) if x.size else None

    return stat


def _rank(field: str, score: float) -> Statistic:
    def stat(cols: Sequence[_Columns]) -> float | None:
        x = _pooled(cols, field)
        return float(np.mean(x <= score)) if x.size else None

    return stat


def _mean(field: str) -> Statistic:
    def stat(cols: Sequence[_Columns]) -> float | None:
        x = _pooled(cols, field)
        return float(np.mean(x)) if x.size else None

    return stat


def _episode_ld(cols: Sequence[_Columns]) -> float | None:
    if not cols:
        return None
    return float(np.mean([bool(c.ld.any()) for c in cols]))


def _secondary_share(cols: Sequence[_Columns]) -> float | None:
    x = _pooled(cols, "cost")
    return float(np.mean(x == SECONDARY_COST)) if x.size else None


def summarise(
    results: Sequence[EpisodeResult],
    *,
    ttc_scores: Sequence[float] = (),
    headway_scores: Sequence[float] = (),
    rng: np.random.Generator,
    resamples: int = 1000,
    level: float = 0.95,
) -> MetricsSummary:
    """Aggregate episodes; ``rng`` drives the bootstrap (pass a seeded Generator)."""
    cols = _columns(results)

    def est(stat: Statistic) -> Estimate:
        return _estimate(cols, stat, rng, resamples, level)

    return MetricsSummary(
        episodes=len(results),
        steps=sum(len(r.records) for r in results),
        terminated_episodes=sum(r.terminated for r in results),
        p10_ttc=est(_percentile("ttc", 10)),
        p50_headway=est(_percentile("headway", 50)),
        pr_ttc={q: est(_rank("ttc", q)) for q in ttc_scores},
        pr_headway={q: est(_rank("headway", q)) for q in headway_scores},
        prob_lane_departure=est(_mean("ld")),
        episode_lane_departure=est(_episode_ld),
        controller_cost=est(_mean("cost")),
        secondary_share=est(_secondary_share),
    )
