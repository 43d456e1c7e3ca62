"""``mopmc check`` on multi(...) properties, through the installed command: the JSON contract, the
near-boundary warning, scheduler export, plots and exit codes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc, shared_model
from mopmc.engine.evaluate import evaluate
from mopmc.io.load import load
from mopmc.io.scheduler_file import read_scheduler

PROPS = "\n".join([
    'multi(R{"time"}min=? [C], R{"energy"}min=? [C]);',
    'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C]);',
    'multi(R{"time"}min=? [C], R{"energy"}<=4 [C]);',
    'R{"time"}min=? [C]',
])


def test_json_contract(tmp_path):
    props = tmp_path / "all.props"
    props.write_text(PROPS)
    res = run_mopmc("check", "example:tradeoff", "--props", props, "--json")
    assert res.code == 0, res.stderr
    rows = res.json()
    assert [r["kind"] for r in rows] == ["pareto", "achievability", "numerical", "value"]
    for r in rows:
        assert set(r["timings"]) >= {"load", "check"} and all(v >= 0 for v in r["timings"].values())
        assert r["precision"] > 0
        for i, o in enumerate(r["objectives"]):
            bounded = "<=" in o["formula"]  # a bound adds its comparison and numeric threshold
            assert set(o) == {"index", "formula", "name"} | ({"comparison", "threshold"} if bounded else set())
            assert o["index"] == i and (not bounded or o["threshold"] == 4 and o["comparison"] == "<=")
    pareto, ach, num, value = rows
    assert [o["name"] for o in pareto["objectives"]] == ["time", "energy"]
    assert pareto["precision"] == 1e-4  # the multi-objective default, absolute per objective
    assert len(pareto["points"]) == 2 and len(pareto["halfspaces"]) >= 2
    # every point satisfies every halfspace (original units: normal . x <= offset)
    for h in pareto["halfspaces"]:
        assert all(np.dot(h["normal"], p) <= h["offset"] + 1e-9 for p in pareto["points"])
    assert ach["achievable"] is True and ach["margin"] > 0 and ach["near_boundary"] is False
    assert len(ach["witness"]["points"]) == len(ach["witness"]["weights"])
    assert num["lower"] <= num["value"] <= num["upper"] and num["status"] == "optimal"
    assert value["precision"] == 1e-6  # single objectives keep their relative default


def test_near_boundary_warning():
    path = shared_model("peer-tests/storm/multiobj_zeroconf4.nm")
    res = run_mopmc("check", path, "--prop", 'multi(P>=0.0003 [ F l=4 & ip=1 ] , P>=0.993141[ G (error=0) ])', "--json")
    assert res.code == 0
    (row,) = res.json()
    assert row["near_boundary"] is True and abs(row["margin"]) <= row["precision"]
    # the margin is proved >= 0 (its bounds are equal): a certain verdict, noted as near the boundary
    assert 0 <= row["margin"] <= row["margin_upper"]
    assert len(res.stderr_lines) == 1 and "the verdict (true) is certain" in res.stderr
    # with a finer precision the verdict is decided and nothing is printed
    res = run_mopmc("check", path, "--prop", 'multi(P>=0.0003 [ F l=4 & ip=1 ] , P>=0.993141[ G (error=0) ])',
                    "--json", "--precision", "1e-7")
    assert res.code == 0 and res.stderr_lines == []
    assert res.json()[0]["achievable"] is True and res.json()[0]["near_boundary"] is False


def test_export_pareto_schedulers_and_plot(tmp_path):
    out, png = tmp_path / "s.json", tmp_path / "front.png"
    prop = 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])'
    res = run_mopmc("check", "example:tradeoff", "--prop", prop, "--json", "--export-scheduler", out, "--plot", png)
    assert res.code == 0, res.stderr
    points = res.json()[0]["points"]
    doc = json.loads(out.read_text())
    assert doc["format"] == "mopmc-pareto-schedulers" and [v["point"] for v in doc["vertices"]] == points
    # each exported scheduler, read back onto the model (docs/formats.md), gives its vertex
    loaded = load("example:tradeoff", properties=prop, valuations=True)
    model, (p,) = loaded.model, loaded.properties()
    for i, v in enumerate(doc["vertices"]):
        scheduler, meta = read_scheduler(out, model, vertex=i)
        assert meta["point"] == v["point"]
        np.testing.assert_allclose(evaluate(model, scheduler, p.objectives).values, v["point"], atol=1e-9)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_schedulers_with_the_torch_engine(tmp_path):
    """The torch engine's vertices carry the CPU engine's schedulers: the export equals the kernel's."""
    pytest.importorskip("torch")
    prop = 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])'
    docs = []
    for engine in (["--engine", "kernel"], ["--engine", "torch", "--device", "cpu"]):
        out = tmp_path / f"{engine[1]}.json"
        res = run_mopmc("check", "example:tradeoff", "--prop", prop, "--json", "--export-scheduler", out, *engine)
        assert res.code == 0, res.stderr
        docs.append(json.loads(out.read_text()))
    kernel, torch_doc = docs
    assert [s["entries"] for s in torch_doc["schedulers"]] == [s["entries"] for s in kernel["schedulers"]]
    assert [v["components"] for v in torch_doc["vertices"]] == [v["components"] for v in kernel["vertices"]]
    np.testing.assert_allclose([v["point"] for v in torch_doc["vertices"]], [v["point"] for v in kernel["vertices"]],
                               rtol=1e-9, atol=1e-12)


def test_plot_three_objectives(tmp_path):
    png = tmp_path / "f3.png"
    path = shared_model("peer-tests/storm/multiobj_memory.prism")
    res = run_mopmc("check", path, "--const", "p=0.1", "--plot", png,
                    "--prop", "multi(Pmax=? [ s<4 U s=1 ], Pmax=? [ s<4 U s=2], Pmax=? [ s<4 U s=3] )")
    assert res.code == 0, res.stderr
    assert png.stat().st_size > 1000


def test_bad_input_exits_2(tmp_path):
    res = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])',
                    "--plot", tmp_path / "x.png")
    assert_one_line_error(res, "--plot", "achievability")
    res = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])',
                    "--engine", "lp", "--export-scheduler", tmp_path / "s.json")
    assert_one_line_error(res, "--export-scheduler", "kernel")
    # an optimum infinite in the preferred direction (reward +1 on a self-loop under max)
    path = shared_model("peer-tests/storm/tiny_rewards_negative.nm")
    res = run_mopmc("check", path, "--prop", 'multi(R{"b"}max=? [C], R{"a"}max=? [C])', "--json")
    assert_one_line_error(res, "infinite")


def test_exact_margin_refines_what_the_default_brackets():
    """Default: stop once the verdict is certain, margin <= best slack <= margin_upper; with
    --exact-margin both ends meet within the precision, inside the default's bracket. The best slack
    is checked against the exact LP (max over achievable x of min_i (threshold_i - x_i))."""
    from scipy.optimize import linprog

    from mopmc.engine.lp_product import occupation_polytope

    prop = 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])'
    fast = run_mopmc("check", "example:tradeoff", "--prop", prop, "--json").json()[0]
    exact = run_mopmc("check", "example:tradeoff", "--prop", prop, "--json", "--exact-margin").json()[0]
    assert fast["achievable"] and exact["achievable"]
    assert exact["margin_upper"] - exact["margin"] <= exact["precision"] + 1e-12
    assert fast["margin"] - 1e-9 <= exact["margin"] and exact["margin_upper"] <= fast["margin_upper"] + 1e-9
    loaded = load("example:tradeoff", properties=prop)
    (p,) = loaded.properties()
    lp = occupation_polytope(loaded.model, p.objectives)
    n = lp.n_vars
    gain = np.asarray((lp.gain.T.multiply(lp.scale)).T.todense())  # values = offset + gain @ x
    # max t s.t. offset_i + gain_i x + t <= 4, flow x = rhs, x >= 0
    a_ub = np.hstack([gain, np.ones((len(p.objectives), 1))])
    b_ub = 4.0 - np.asarray(lp.offset, float)
    a_eq = np.hstack([lp.flow.toarray(), np.zeros((lp.flow.shape[0], 1))])
    res = linprog(np.append(np.zeros(n), -1.0), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=lp.rhs(),
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    assert res.status == 0
    assert exact["margin"] - 1e-6 <= -res.fun <= exact["margin_upper"] + 1e-6


MO1 = """mdp
module m
  s : [0..4] init 0;
  [fast] s=0 -> 0.9:(s'=1) + 0.1:(s'=2);
  [slow] s=0 -> 0.99:(s'=1) + 0.01:(s'=2);
  [] s>0 -> true;
endmodule
label "goal" = s=1;
rewards "time"
  [fast] true : 1;
  [slow] true : 3;
endrewards
"""


def test_a_certified_miss_within_the_precision_is_not_achievable(tmp_path):
    """The thresholds missed by less than the precision, and the margin's upper bound proves it: the
    verdict was 'true' with a witness at (0.945, 2.0000957) missing both thresholds (a cross-check
    with Storm found it; Storm says False). The exact optimum of P[F goal] with time <= 2 is 0.945:
    at that threshold the verdict is true, certain, and said to be near the boundary in a note."""
    stormpy = pytest.importorskip("stormpy")
    model = tmp_path / "mo1.nm"
    model.write_text(MO1)
    prop = 'multi(P>=0.9451 [F "goal"], R{"time"}<=2 [C])'
    res = run_mopmc("check", model, "--prop", prop, "--json")
    assert res.code == 0, res.stderr
    (row,) = res.json()
    assert row["achievable"] is False and row["margin"] <= row["margin_upper"] < 0 and row.get("witness") is None
    assert row["near_boundary"] is True and "is certain" in res.stderr and "lower --precision" not in res.stderr
    program = stormpy.parse_prism_program(str(model))
    formulas = stormpy.parse_properties(prop, program)
    built = stormpy.build_model(program, formulas)
    assert not stormpy.model_checking(built, formulas[0], only_initial_states=True)[built.initial_states[0]]
    res = run_mopmc("check", model, "--prop", 'multi(P>=0.945 [F "goal"], R{"time"}<=2 [C])', "--json")
    (row,) = res.json()
    assert res.code == 0 and row["achievable"] is True and row["margin"] >= 0 and "is certain" in res.stderr


def test_a_numerical_query_with_a_threshold_at_its_best_value_is_noted(tmp_path):
    """P>=0.99 where 0.99 is the best probability: the answer (time 3) is exact, but only the
    schedulers at that best value meet it, and Storm answered such a query 'infeasible' (a
    cross-check found it). A note says so; a threshold with room (0.95) gets none, although it is
    tight at the answer."""
    model = tmp_path / "mo1.nm"
    model.write_text(MO1)
    res = run_mopmc("check", model, "--prop", 'multi(R{"time"}min=? [C], P>=0.99 [F "goal"])', "--json")
    (row,) = res.json()
    assert res.code == 0 and row["value"] == pytest.approx(3.0) and row["near_boundary"] is True
    assert "within the precision" in res.stderr and len(res.stderr_lines) == 1
    res = run_mopmc("check", model, "--prop", 'multi(R{"time"}min=? [C], P>=0.95 [F "goal"])', "--json")
    (row,) = res.json()
    assert res.code == 0 and row["near_boundary"] is False and res.stderr_lines == []
    assert row["value"] == pytest.approx(1 + 2 * (0.95 - 0.9) / 0.09)  # the mix of fast and slow meeting 0.95


def test_pareto_table_runs_along_the_front():
    prop = 'multi(R{"ctrl_cost"}min=? [C], R{"headway_cost"}min=? [C])'
    points = run_mopmc("check", "example:mini_switch", "--prop", prop, "--json").json()[0]["points"]
    table = run_mopmc("check", "example:mini_switch", "--prop", prop)
    assert table.code == 0, table.stderr
    rows = [line.split("│")[1:-1] for line in table.stdout.splitlines() if line.startswith("│")]
    numbers = [int(r[0]) for r in rows if r[0].strip().isdigit()]
    firsts = [points[i - 1][0] for i in numbers]  # "#" is the JSON order
    assert sorted(numbers) == list(range(1, len(points) + 1)) and firsts == sorted(firsts) and len(points) > 2
