import math

import numpy as np
import pytest

from mopmc.runtime.aggregate import summarise
from mopmc.runtime.episode import EpisodeResult, StepRecord
from mopmc.runtime.metrics import TTC_CAP


def rec(ep, step, ttc, hw, ld, cost):
    return StepRecord(ep, step, float(step + 1), 0.0, 0.0, None, "primary" if cost == 1 else "1",
                      None, None, None, None, ttc, hw, ld, cost)


def episodes():
    a = EpisodeResult(0, tuple(rec(0, i, float(i + 1), 2.0, False, 1) for i in range(10)), False)
    b = EpisodeResult(1, tuple(rec(1, i, math.inf, 4.0, i == 3, 2) for i in range(10)), False)
    return [a, b]


def test_point_values():
    s = summarise(episodes(), ttc_scores=[5.0], headway_scores=[3.0], rng=np.random.default_rng(0), resamples=0)
    ttc = np.array([*range(1, 11), *[TTC_CAP] * 10], dtype=float)
    assert s.p10_ttc.value == pytest.approx(np.percentile(ttc, 10))
    assert s.p50_headway.value == pytest.approx(3.0)
    assert s.pr_ttc[5.0].value == pytest.approx(5 / 20)
    assert s.pr_headway[3.0].value == pytest.approx(0.5)
    assert s.prob_lane_departure.value == pytest.approx(1 / 20)
    assert s.episode_lane_departure.value == pytest.approx(0.5)
    assert s.controller_cost.value == pytest.approx(1.5)
    assert s.steps == 20 and s.episodes == 2


def test_bootstrap_is_seeded_and_brackets():
    eps = episodes() * 3
    a = summarise(eps, rng=np.random.default_rng(1), resamples=200)
    b = summarise(eps, rng=np.random.default_rng(1), resamples=200)
    assert a == b
    assert a.controller_cost.low <= a.controller_cost.value <= a.controller_cost.high


def test_empty_is_undefined():
    s = summarise([], rng=np.random.default_rng(0))
    assert s.p10_ttc.value is None and s.controller_cost.value is None
