"""Single-objective values against Storm in exact mode (and the published exact switch minima)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from storm_reference import storm_exact  # noqa: E402
from support import shared_model  # noqa: E402

from mopmc.io.load import load
from mopmc.queries.single import check

#: Properties not in the reference table (``reference_values.json``, run with both kernel methods in
#: ``test_iterative.py``): checked against Storm's exact engine live.
CASES = [
    ("peer-tests/storm/multiobj_scheduler05.nm", 'R{"time"}min=? [F "tasks_complete"]'),
    ("peer-tests/storm/multiobj_team3.nm", 'Pmax=? [!"task2_compl" U "task1_compl"]; R{"w_2_total"}min=? [F "end"]'),
    ("peer-tests/storm/multiobj_consensus2_3_2.nm", 'Pmax=? [G "one_coin_ok"]'),
    ("peer-tests/storm/multiobj_zeroconf4.nm", 'Pmax=? [F l=4 & ip=1]; Pmin=? [F l=4 & ip=1]'),
    ("team-formation/team_3.nm", 'Pmax=? [F "task1_compl"]; Pmin=? [F "task2_compl"]'),
    ("team-formation/team_4.nm", 'Pmax=? [F "task1_compl"]'),
    ("dive-and-rise/dive_and_rise_action_rewards.nm", 'R{"target_1"}min=? [C]; R{"target_10"}max=? [C]'),
    ("switch-scaling/switch_model_20.prism", 'R{"headway_cost"}max=? [C]'),
]


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


@pytest.mark.parametrize("relative,props", CASES, ids=[c[0] for c in CASES])
def test_against_storm_exact(relative, props):
    path = shared_model(relative)
    loaded = load(path, properties=props)
    ours = []
    for p in loaded.properties():
        r = check(loaded.model, p)
        if p.objectives[0].kind == "probability":  # (team_4's Pmax was 1 + 9e-15 before the clamp)
            assert 0.0 <= r.value <= 1.0, (p.text, r.value)
        ours.append(r.value)
    ref = storm_exact(path, props)
    bad = [(p, a, b) for p, a, b in zip(props.split(";"), ours, ref) if not _close(a, b)]
    assert not bad, bad


SWITCH_MINIMA = {"ctrl_cost": 1.8484717986, "headway_cost": 0.1838291799,
                 "lane_dep_cost": 0.1638948944, "ttc_cost": 0.0308373657}


def test_switch_table3_minima_one_engine_four_directions():
    from mopmc.engine.kernel import Engine

    path = shared_model("switch-table3/switch_model.prism")
    props = "; ".join(f'R{{"{r}"}}min=? [C]' for r in SWITCH_MINIMA)
    loaded = load(path, properties=props)
    objs = [p.objectives[0] for p in loaded.properties()]
    eng = Engine(loaded.model, objs)
    prev = None
    for i, expected in enumerate(SWITCH_MINIMA.values()):
        w = [0.0] * 4
        w[i] = 1.0
        prev = eng.optimise(w, warm=prev)
        assert prev.values[i] == pytest.approx(expected, abs=1e-9)
