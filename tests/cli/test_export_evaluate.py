"""``mopmc check --export-scheduler`` writes the documented formats (docs/formats.md) and
``mopmc evaluate`` reads every file ``check`` exports back to the value or point the query reported.

Oracles: Storm on the MDP (the optimum) and Storm on the induced Markov chain of the file's
scheduler (:func:`mopmc.io.storm_check.storm_chain_values`), besides our own sparse evaluation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from support import TWO_WAYS, assert_one_line_error, run_mopmc, shared_model
from mopmc.engine.evaluate import Mixture, evaluate, induced_chain
from mopmc.io.load import load
from mopmc.io.scheduler_file import read_scheduler

pytest.importorskip("stormpy")
from mopmc.io.storm_check import storm_chain_values, storm_values  # noqa: E402

TRADEOFF_PARETO = 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])'
SWITCH = "switch-table3/switch_model.prism"


def _check(model, prop, out, *extra):
    res = run_mopmc("check", model, "--prop", prop, "--json", "--export-scheduler", out, *extra)
    assert res.code == 0, res.stderr
    assert res.stderr == ""  # --json: no "scheduler -> FILE" line
    (row,) = res.json()
    assert row["scheduler"]["path"] == str(out)
    return row


def _evaluate(model, path, prop, *extra):
    res = run_mopmc("evaluate", model, "--scheduler", path, "--prop", prop, "--json", *extra)
    assert res.code == 0, res.stderr
    return res.json()


def _storm_on_chain(model, sched, objectives):
    """Storm's values on the induced chain(s): a mixture's value is its weighted components'."""
    if isinstance(sched, Mixture):
        return sum(w * storm_chain_values(induced_chain(model, p, objectives), objectives)
                   for w, p in zip(sched.weights, sched.policies))
    return storm_chain_values(induced_chain(model, sched, objectives), objectives)


@pytest.mark.parametrize("model, prop", [
    ("example:tradeoff", 'R{"time"}min=? [C]'),
    ("example:robot", 'Pmax=? [F "goal"]'),
    ("example:robot", 'R{"steps"}min=? [F "goal"]'),
    ("two_ways", 'Pmax=? [F "B"]'),  # one goal-memory bit
])
def test_single_objective_export_evaluates_to_the_checked_value(tmp_path, model, prop):
    memory = model == "two_ways"
    if memory:  # (an optimum below 1: Pmax = 1 is decided by graph analysis, without goal memory)
        model = tmp_path / "two_ways.nm"
        model.write_text(TWO_WAYS.replace("0.5:(s'=1) + 0.5:(s'=0)", "0.5:(s'=1) + 0.25:(s'=0) + 0.25:(s'=3)"))
    out = tmp_path / "s.json"
    value = _check(model, prop, out)["value"]
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"], doc["kind"]) == ("mopmc-scheduler", 1, "deterministic")
    assert doc["point"] == [value] and doc["objectives"] == [prop]
    ev = _evaluate(model, out, prop)
    assert ev["kind"] == "deterministic" and ev["defaulted_states"] == 0
    assert ev["values"][0] == pytest.approx(value, rel=1e-6, abs=1e-9)
    loaded = load(model, properties=prop, valuations=True)
    (p,) = loaded.properties()
    sched, _ = read_scheduler(out, loaded.model)
    assert storm_chain_values(induced_chain(loaded.model, sched, p.objectives), p.objectives)[0] == \
        pytest.approx(value, rel=1e-6, abs=1e-9)
    assert storm_values(loaded.model, prop)[0] == pytest.approx(value, rel=1e-6, abs=1e-9)  # Storm's optimum
    if memory:  # the goal bit of "B", and the scheduler's choice before it is set
        assert doc["memory"] == ['"B"'] and doc["entries"][0]["memory"] == 0
        assert doc["entries"][0]["choices"][0]["action"] == "a"


@pytest.mark.parametrize("prop", ['multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])',
                                  'multi(R{"time"}min=? [C], R{"energy"}<=4 [C])'])
def test_witness_export_evaluates_to_the_witness_point(tmp_path, prop):
    out = tmp_path / "w.json"
    row = _check("example:tradeoff", prop, out)
    w = row["witness"]
    point = np.array(w["weights"]) @ np.array(w["points"])
    doc = json.loads(out.read_text())
    assert doc["format"] == "mopmc-scheduler" and doc["kind"] == ("mixture" if len(w["weights"]) > 1 else "deterministic")
    np.testing.assert_allclose(doc["point"], point, atol=1e-9)
    ev = _evaluate("example:tradeoff", out, prop)
    np.testing.assert_allclose(ev["values"], point, atol=1e-9)
    assert np.all(np.array(ev["values"]) <= 4 + 1e-6)  # the thresholds hold
    if row["kind"] == "numerical":
        assert ev["values"][0] == pytest.approx(row["value"], abs=1e-9)
        assert storm_values(load("example:tradeoff").model, prop)[0] == pytest.approx(row["value"], abs=1e-3)
    loaded = load("example:tradeoff", properties=prop, valuations=True)
    (p,) = loaded.properties()
    sched, _ = read_scheduler(out, loaded.model)
    np.testing.assert_allclose(_storm_on_chain(loaded.model, sched, p.objectives), point, atol=1e-7)


def test_pareto_export_one_file_each_vertex_evaluates_to_its_point(tmp_path):
    out = tmp_path / "p.json"
    res = run_mopmc("check", "example:tradeoff", "--prop", TRADEOFF_PARETO, "--export-scheduler", out)
    assert res.code == 0, res.stderr
    assert res.stderr_lines == [f"scheduler (2 Pareto vertices) -> {out}"]
    doc = json.loads(out.read_text())
    assert doc["format"] == "mopmc-pareto-schedulers" and doc["status"] == "optimal"
    points = [v["point"] for v in doc["vertices"]]
    assert len(points) == 2
    for i, pt in enumerate(points):
        ev = _evaluate("example:tradeoff", out, TRADEOFF_PARETO, "--vertex", str(i))
        assert (ev["vertex"], ev["vertices"], ev["kind"]) == (i, 2, "deterministic")
        np.testing.assert_allclose(ev["values"], pt, atol=1e-9)
        np.testing.assert_allclose(ev["file_point"], pt, atol=0)
    # the front's ends are the single-objective optima, by Storm on the MDP
    storm = storm_values(load("example:tradeoff").model, 'R{"time"}min=? [C]; R{"energy"}min=? [C]')
    assert min(pt[0] for pt in points) == pytest.approx(storm[0], rel=1e-6)
    assert min(pt[1] for pt in points) == pytest.approx(storm[1], rel=1e-6)
    loaded = load("example:tradeoff", properties=TRADEOFF_PARETO, valuations=True)
    (p,) = loaded.properties()
    for i, pt in enumerate(points):
        sched, meta = read_scheduler(out, loaded.model, vertex=i)
        assert meta["point"] == pt
        np.testing.assert_allclose(_storm_on_chain(loaded.model, sched, p.objectives), pt, atol=1e-7)


def test_constrained_pareto_vertices_are_mixtures_that_evaluate_to_their_points(tmp_path):
    path = shared_model("peer-tests/prism/multi-pareto/test1.nm")
    prop = "multi(Pmax=? [F x=3], Pmax=? [F x=2], P>=0.3 [F x=3])"
    out = tmp_path / "front.json"
    _check(path, prop, out)
    doc = json.loads(out.read_text())
    points = sorted(tuple(v["point"]) for v in doc["vertices"])
    assert np.allclose(points, [(0.3, 0.7, 0.3), (0.6, 0.4, 0.6)], atol=1e-9)
    assert any(len(v["components"]) > 1 for v in doc["vertices"])
    loaded = load(path, properties=prop, valuations=True)
    (p,) = loaded.properties()
    for i, v in enumerate(doc["vertices"]):
        sched, meta = read_scheduler(out, loaded.model, vertex=i)
        assert meta["kind"] == ("mixture" if len(v["components"]) > 1 else "deterministic")
        np.testing.assert_allclose(evaluate(loaded.model, sched, p.objectives).values, v["point"], atol=1e-9)
        np.testing.assert_allclose(_storm_on_chain(loaded.model, sched, p.objectives), v["point"], atol=1e-7)
    ev = _evaluate(path, out, prop, "--vertex", "1")
    np.testing.assert_allclose(ev["values"], doc["vertices"][1]["point"], atol=1e-9)


def test_reference_switch_model_exports_evaluate_to_the_reported_values(tmp_path):
    """The 92,017-state Table 3 model: the single-objective optimum (Storm's exact 1.8484717986,
    benchmarks README) and a Pareto front, whose file stays small (entries for reached states only)."""
    path = shared_model(SWITCH)
    prop = 'R{"ctrl_cost"}min=? [C]'
    single = tmp_path / "ctrl.json"
    value = _check(path, prop, single)["value"]
    assert value == pytest.approx(1.8484717986, abs=1e-8)
    assert _evaluate(path, single, prop)["values"][0] == pytest.approx(value, rel=1e-6)
    pareto = 'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}min=? [C])'
    out = tmp_path / "front.json"
    row = _check(path, pareto, out)
    assert out.stat().st_size < 20e6  # 86 MB before: every state of every vertex, pretty-printed
    doc = json.loads(out.read_text())
    assert [v["point"] for v in doc["vertices"]] == row["points"]
    last = len(doc["vertices"]) - 1
    ev = _evaluate(path, out, pareto, "--vertex", str(last))
    np.testing.assert_allclose(ev["values"], row["points"][last], rtol=1e-6, atol=1e-9)
    loaded = load(path, properties=f"{prop}; {pareto}", valuations=True)
    (p1, p2) = loaded.properties()
    sched, _ = read_scheduler(single, loaded.model)
    assert storm_chain_values(induced_chain(loaded.model, sched, p1.objectives), p1.objectives)[0] == \
        pytest.approx(value, rel=1e-6)
    for i in (0, last // 2):
        sched, _ = read_scheduler(out, loaded.model, vertex=i)
        point = doc["vertices"][i]["point"]
        np.testing.assert_allclose(evaluate(loaded.model, sched, p2.objectives).values, point, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(_storm_on_chain(loaded.model, sched, p2.objectives), point, rtol=1e-6, atol=1e-9)


def test_reference_switch_achievability_witness_evaluates_to_its_point(tmp_path):
    path = shared_model(SWITCH)
    props = shared_model("switch-table3/switch_metrics_mo2.props")
    out = tmp_path / "w.json"
    res = run_mopmc("check", path, "--props", props, "--json", "--export-scheduler", out)
    assert res.code == 0, res.stderr
    (row,) = res.json()
    assert row["achievable"] is True
    point = np.array(row["witness"]["weights"]) @ np.array(row["witness"]["points"])
    prop = row["property"]
    ev = _evaluate(path, out, prop)
    np.testing.assert_allclose(ev["values"], point, rtol=1e-6, atol=1e-9)
    assert np.all(np.array(ev["values"]) <= np.array([2.0, 0.23, 0.174, 0.04]) + 1e-4)


def test_the_table_mode_says_where_the_scheduler_went(tmp_path):
    out = tmp_path / "s.json"
    res = run_mopmc("check", "example:tradeoff", "--prop", 'R{"time"}min=? [C]', "--export-scheduler", out)
    assert res.code == 0, res.stderr
    assert res.stderr_lines == [f"scheduler (deterministic) -> {out}"]


# --------------------------------------------------------------------------------------- errors
def test_pareto_file_needs_a_vertex_and_a_single_file_takes_none(tmp_path):
    out = tmp_path / "p.json"
    _check("example:tradeoff", TRADEOFF_PARETO, out)
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", out, "--prop", TRADEOFF_PARETO)
    assert_one_line_error(r, "p.json", "Pareto file with 2 vertices", "--vertex I (0 to 1)")
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", out, "--prop", TRADEOFF_PARETO, "--vertex", "2")
    assert_one_line_error(r, "p.json", "--vertex 2", "2 vertices")
    single = tmp_path / "s.json"
    _check("example:tradeoff", 'R{"time"}min=? [C]', single)
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", single, "--prop", 'R{"time"}min=? [C]', "--vertex", "0")
    assert_one_line_error(r, "s.json", "--vertex 0", "one scheduler", "leave out --vertex")


def test_evaluate_refuses_unknown_keys_by_name(tmp_path):
    single = tmp_path / "s.json"
    _check("example:tradeoff", 'R{"time"}min=? [C]', single)
    doc = json.loads(single.read_text())
    for where, mutate, words in [
        ("top level", lambda d: d.update(colour="red"), ["top level", "unknown key(s) colour", "allowed"]),
        ("entry", lambda d: d["entries"][0].update(colour="red"), ["entries[0]", "unknown key(s) colour"]),
        ("choice", lambda d: d["entries"][0]["choices"][0].update(colour="red"),
         ["entries[0].choices[0]", "unknown key(s) colour"]),
        ("model", lambda d: d["model"].update(colour="red"), ["model", "unknown key(s) colour"]),
    ]:
        bad = json.loads(json.dumps(doc))
        mutate(bad)
        path = tmp_path / f"bad-{where.replace(' ', '_')}.json"
        path.write_text(json.dumps(bad))
        r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", path, "--prop", 'R{"time"}min=? [C]')
        assert_one_line_error(r, path.name, *words)


def test_missing_entry_names_the_file_and_the_option(tmp_path):
    single = tmp_path / "s.json"
    _check("example:tradeoff", 'R{"time"}min=? [C]', single)
    doc = json.loads(single.read_text())
    doc["entries"] = []
    single.write_text(json.dumps(doc))
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", single, "--prop", 'R{"time"}min=? [C]')
    assert_one_line_error(r, f"{single}: ", "no entry for the reachable state", "--missing first")
    assert "missing='first'" not in r.stderr
    ev = _evaluate("example:tradeoff", single, 'R{"time"}min=? [C]', "--missing", "first")
    assert ev["defaulted_states"] == 1
    # the table says it too, as docs/formats.md promises (only the JSON did)
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", single, "--prop", 'R{"time"}min=? [C]',
                  "--missing", "first")
    assert r.code == 0, r.stderr
    assert "--missing first: 1 reachable state(s) without an entry took their first choice" in " ".join(r.stdout.split())


def test_an_old_check_export_says_to_export_again(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"property": 'R{"time"}min=? [C]', "format": "mopmc-deterministic-scheduler",
                               "memory_bits": 0, "memory_sets": [], "entries": [{"state": 0, "choice": 0}]}))
    r = run_mopmc("evaluate", "example:tradeoff", "--scheduler", old, "--prop", 'R{"time"}min=? [C]')
    assert_one_line_error(r, "old.json", "not a mopmc-scheduler version 1 file", "export the scheduler again")


def test_output_paths_are_checked_before_the_model_is_built(tmp_path):
    """A nonexistent model shows the order: the output path's error comes first."""
    nomodel = tmp_path / "no-such-model.prism"
    nodir = tmp_path / "nodir" / "x.json"
    multi = 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])'
    for args, words in [
        (("convex", nomodel, "--prop", multi, "--export-scheduler", nodir), ["--export-scheduler", "does not exist"]),
        (("convex", nomodel, "--prop", multi, "--export-scheduler", tmp_path), ["--export-scheduler", "is a directory"]),
        (("convex", nomodel, "--prop", multi, "--plot", tmp_path / "nodir" / "c.png"), ["--plot", "does not exist"]),
        (("check", nomodel, "--prop", 'R{"time"}min=? [C]', "--export-scheduler", nodir),
         ["--export-scheduler", "does not exist"]),
        (("check", nomodel, "--prop", 'R{"time"}min=? [C]', "--export-scheduler", tmp_path),
         ["--export-scheduler", "is a directory"]),
        (("check", nomodel, "--prop", TRADEOFF_PARETO, "--plot", tmp_path / "nodir" / "f.png"),
         ["--plot", "does not exist"]),
        (("check", nomodel, "--prop", TRADEOFF_PARETO, "--engine", "lp", "--export-scheduler", tmp_path / "s.json"),
         ["--export-scheduler", "--engine kernel"]),
        (("evaluate", nomodel, "--prop", 'R{"time"}min=? [C]', "--scheduler", tmp_path / "none.json"),
         ["none.json", "no such scheduler file"]),
    ]:
        r = run_mopmc(*args)
        assert_one_line_error(r, *words)
        assert "no-such-model" not in r.stderr
    assert not (tmp_path / "nodir").exists()


def test_export_needs_one_property_and_a_scheduler(tmp_path):
    out = tmp_path / "s.json"
    r = run_mopmc("check", "example:tradeoff", "--prop", 'R{"time"}min=? [C]; R{"energy"}min=? [C]',
                  "--export-scheduler", out)
    assert_one_line_error(r, "--export-scheduler", "give one property (2 given)")
    r = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"time"}<=1 [C], R{"energy"}<=1 [C])',
                  "--export-scheduler", out)
    # no scheduler: the answer stands, nothing is written, a note says why (tests/cli/test_export_nothing.py)
    assert r.code == 0 and "false" in r.stdout, r.stderr
    assert r.stderr_lines == [l for l in r.stderr_lines if l.startswith("note: ")] and "not achievable" in r.stderr
    assert not out.exists()
