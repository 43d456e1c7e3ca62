"""Multi-objective queries over the exact LP oracle, checked against hand-computed values and Storm."""

import os

import numpy as np
import pytest

from support import shared_model
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.queries.dispatch import make_oracle
from mopmc.queries.multi import achievability, numerical, pareto
from mopmc.queries.oracle import lp_oracle

# tradeoff.nm: always "fast" gives (time, energy) = (1.2/0.98, 5.2/0.98); always "slow" gives
# (4.8333/0.9, 2.4167/0.9); every other point of the front mixes the two.
FAST = np.array([1.2 / 0.98, 5.2 / 0.98])
SLOW = np.array([(3 + 1 / 0.6 * 0.5 + 1) / 0.9, (1 + 0.5 * 0.5 / 0.6 + 1) / 0.9])


def props(text, model=files.tradeoff):
    loaded = load(model, properties=text)
    return loaded.model, loaded.properties()


def test_pareto_tradeoff_vertices():
    model, (p,) = props('multi(R{"time"}min=? [C], R{"energy"}min=? [C])')
    res = pareto(lp_oracle(model, p.objectives), p.objectives, exhaustive=True)
    pts = np.array(sorted(res.points))
    np.testing.assert_allclose(pts, np.array(sorted([FAST.tolist(), SLOW.tolist()])), atol=1e-9)


@pytest.mark.parametrize("t_time, t_energy, expected", [(2.0, 3.0, False), (4.0, 4.0, True), (5.0, 3.0, True), (1.0, 9.0, False)])
def test_achievability_verdicts(t_time, t_energy, expected):
    model, (p,) = props(f'multi(R{{"time"}}<={t_time} [C], R{{"energy"}}<={t_energy} [C])')
    res = achievability(lp_oracle(model, p.objectives), p.objectives)
    assert res.achievable is expected
    # the best mixture lam*FAST + (1-lam)*SLOW maximising min slack
    lam = np.linspace(0, 1, 200001)[:, None]
    mix = lam * FAST + (1 - lam) * SLOW
    margin = np.max(np.min(np.array([t_time, t_energy]) - mix, axis=1))
    # stopped once decided: margin and margin_upper bracket the true margin
    assert res.margin - 1e-4 <= margin <= res.margin_upper + 1e-4  # (the grid resolves the margin to ~1e-5)
    tight = achievability(lp_oracle(model, p.objectives), p.objectives, tight=True)
    assert tight.achievable is expected
    assert tight.margin == pytest.approx(margin, abs=1e-4)  # tight: the margin is exact
    if expected:
        pts, w = np.array(res.witness.points), np.array(res.witness.weights)
        assert np.all(w @ pts <= np.array([t_time, t_energy]) + 1e-9)
    else:
        cert = res.certificate
        assert cert["required"] > cert["bound"]


def test_numerical():
    model, (p,) = props('multi(R{"time"}min=? [C], R{"energy"}<=4 [C])')
    res = numerical(lp_oracle(model, p.objectives), p.objectives)
    lam = (4 - SLOW[1]) / (FAST[1] - SLOW[1])
    best = lam * FAST[0] + (1 - lam) * SLOW[0]
    assert res.value == pytest.approx(best, abs=1e-6)
    assert res.lower <= best + 1e-9 and res.upper >= best - 1e-9
    model, (p,) = props('multi(R{"time"}min=? [C], R{"energy"}<=2 [C])')
    assert numerical(lp_oracle(model, p.objectives), p.objectives).status == "infeasible"


@pytest.mark.skipif(os.environ.get("MOPMC_HEAVY_TESTS") != "1", reason="LP engine on the 92k-state Table 3 model (~25 s); set MOPMC_HEAVY_TESTS=1")
def test_table3_achievability_lp_against_storm():
    path = shared_model("switch-table3/switch_model.prism")
    for name, expected in (("switch_metrics_mo2.props", True), ("switch_metrics_mo.props", False)):
        text = (path.parent / name).read_text()
        loaded = load(path, properties=text)
        (p,) = [q for q in loaded.properties() if q.kind == "achievability"]
        res = achievability(lp_oracle(loaded.model, p.objectives), p.objectives)
        assert res.achievable is expected, (name, res.margin)


@pytest.mark.parametrize("model, text, query", [
    (files.mini_switch, 'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}min=? [C], R{"headway_cost"}min=? [C])', pareto),
    (files.mini_switch, 'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}<=0.05 [C], R{"headway_cost"}<=0.2 [C])', numerical),
    (files.tradeoff, 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])', pareto),
])
def test_unit_directions_in_one_batch_change_nothing(model, text, query):
    """Pareto and numerical queries start from the unit directions, which the CPU engine's oracle
    answers in one batch (``oracle.many``): the result is the one of asking them one by one."""
    from mopmc.engine.oracle import kernel_oracle

    model, (p,) = props(text, model)
    batched = kernel_oracle(model, p.objectives)
    single = kernel_oracle(model, p.objectives)
    a = query(batched, p.objectives)
    b = query(lambda w: single(w), p.objectives)  # (no .many: one by one)
    assert np.asarray(a.points).tobytes() == np.asarray(b.points).tobytes()
    assert a.iterations == b.iterations
    if query is numerical:
        assert (a.value, a.lower, a.upper) == (b.value, b.lower, b.upper)


def test_an_infeasible_numerical_certificate_weighs_only_the_thresholds():
    """The objective asked for is free in the threshold set: a direction weighing it separates
    nothing. Here min time is FAST[0] = 1.2245 > 0.1, so the certificate is -time <= -1.2245 < -0.1
    (it used to be the energy direction, with 'required' 0)."""
    model, (p,) = props('multi(R{"energy"}min=? [C], R{"time"}<=0.1 [C])')
    for engine in ("kernel", "lp"):
        res = numerical(make_oracle(model, p.objectives, engine), p.objectives)
        assert res.status == "infeasible"
        cert = res.certificate
        assert cert["direction"][0] == 0.0 and cert["direction"][1] < 0
        scale = -cert["direction"][1]
        assert cert["bound"] / scale == pytest.approx(-FAST[0], abs=1e-9)
        assert cert["required"] / scale == pytest.approx(-0.1, abs=1e-12)
