"""Pareto queries with thresholds: the thresholds are constraints and the front is cut by them.

Storm refuses such queries ("The number of qualitative objectives should be either 0 (Pareto
query), 1 (quantitative query), or #objectives"), so each front point is checked against Storm's
*numerical* query that fixes the other queried objective at the point's value: the best value of
the first objective under those thresholds must be the point's own (the point is on the
constrained front), and unmeetable thresholds must be unachievable for Storm too.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from support import run_mopmc, shared_model

stormpy = pytest.importorskip("stormpy")

TEST1 = "peer-tests/prism/multi-pareto/test1.nm"
TEAM3 = "peer-tests/storm/multiobj_team3.nm"
CASES = [
    # (model, queried objectives (Storm text with {} for a bound), sense, threshold objectives)
    (TEST1, ["P{}[F x=3]", "P{}[F x=2]"], ["max", "max"], ["P>=0.3 [F x=3]"]),
    (TEST1, ["P{}[F x=3]", "P{}[F x=2]"], ["max", "max"], ["P>=0.5 [F x=2]"]),
    (TEAM3, ['P{} [ F "task1_compl" ]', 'R{{"w_1_total"}}{} [ C ]'], ["max", "max"], ['P>=0.5 [ F "task2_compl" ]']),
    (TEAM3, ['P{} [ F "task1_compl" ]', 'P{} [ F "task2_compl" ]'], ["max", "max"], ['R{"w_1_total"}>=2.1 [ C ]']),
]


def _storm(path, text):
    program = stormpy.parse_prism_program(str(path))
    props = stormpy.parse_properties(text, program)
    model = stormpy.build_model(program, props)
    res = stormpy.model_checking(model, props[0], only_initial_states=True)
    value = res[model.initial_states[0]]
    return value if isinstance(value, bool) else float(value)


def _bound(sense, value):
    return (">=" if sense == "max" else "<=") + repr(float(value))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].rsplit('/', 1)[-1]}:{c[3][0]}")
def test_constrained_front_points_are_storms_numerical_optima(case):
    model, queried, senses, thresholds = case
    path = shared_model(model)
    prop = "multi(" + ", ".join([q.format(s + "=?") for q, s in zip(queried, senses)] + thresholds) + ")"
    out = run_mopmc("check", path, "--prop", prop, "--json")
    assert out.code == 0, out.stderr
    row = out.json()[0]
    assert row["kind"] == "pareto" and row["status"] == "optimal"
    pts = np.array(row["points"])
    assert len(pts) >= 1 and len(row["mixtures"]) == len(pts)
    # the threshold halfspaces are part of the over-approximation
    for h in row["halfspaces"]:
        assert all(np.dot(h["normal"], p) <= h["offset"] + 1e-9 for p in pts)
    first = queried[0].format(senses[0] + "=?")
    best_alone = _storm(path, "multi(" + ", ".join([first] + thresholds) + ")")
    assert max(pts[:, 0]) == pytest.approx(best_alone, abs=1e-4)
    for p, mix in zip(pts, row["mixtures"]):
        # the point is a mixture of the reported deterministic vertices
        assert np.allclose(np.array(mix["weights"]) @ np.array(row["vertices"])[mix["vertices"]], p, atol=1e-9)
        # on the constrained front: Storm's best first objective with the second fixed at p's value
        fixed = queried[1].format(_bound(senses[1], p[1] - 1e-9 if senses[1] == "max" else p[1] + 1e-9))
        value = _storm(path, "multi(" + ", ".join([first, fixed] + thresholds) + ")")
        assert p[0] == pytest.approx(value, abs=1e-4)


def test_unmeetable_thresholds_make_the_pareto_query_infeasible(tmp_path):
    path = shared_model(TEST1)
    out = run_mopmc("check", path, "--prop", "multi(Pmax=? [F x=3], Pmax=? [F x=2], P>=0.7 [F x=3])", "--json")
    assert out.code == 0, out.stderr
    row = out.json()[0]
    assert row["status"] == "infeasible" and row["points"] == []
    assert row["certificate"]["required"] > row["certificate"]["bound"]
    assert _storm(path, "multi(P>=0.7 [F x=3])") is False


def test_constrained_front_exports_mixed_schedulers(tmp_path):
    path = shared_model(TEST1)
    target = tmp_path / "front.json"
    out = run_mopmc("check", path, "--prop", "multi(Pmax=? [F x=3], Pmax=? [F x=2], P>=0.3 [F x=3])",
                    "--json", "--export-scheduler", target)
    assert out.code == 0, out.stderr
    doc = json.loads(target.read_text())
    points = sorted(tuple(v["point"]) for v in doc["vertices"])
    assert np.allclose(points, [(0.3, 0.7, 0.3), (0.6, 0.4, 0.6)], atol=1e-9)
    assert doc["format"] == "mopmc-pareto-schedulers"
    for v in doc["vertices"]:
        weights = [c["weight"] for c in v["components"]]
        assert sum(weights) == pytest.approx(1.0)
        points = [doc["schedulers"][c["scheduler"]]["point"] for c in v["components"]]
        assert np.allclose(np.array(weights) @ np.array(points), v["point"], atol=1e-9)
