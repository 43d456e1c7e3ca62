"""``mopmc convex`` and ``mopmc evaluate`` through the installed command."""

from __future__ import annotations

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.engine.lp import lp_convex
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.queries.convex import box_of, make_loss

PROP = 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])'


def test_convex_json_matches_lp_and_evaluate_round_trip(tmp_path):
    sched = tmp_path / "s.json"
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--target", "1,1", "--eps-rel", "1e-8", "--json",
                  "--export-scheduler", sched)
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["status"] == "optimal" and len(out["point"]) == 2
    assert {"objectives", "loss", "lower_bound", "gap", "iterations", "timings"} <= set(out)
    timings = out["timings"]
    assert {"load", "build", "setup", "oracle", "total"} <= set(timings) and 0 <= timings["build"] <= timings["load"]
    loaded = load(files.tradeoff, properties=PROP)
    (p,) = loaded.properties()
    exact = lp_convex(loaded.model, p.objectives, make_loss("mse", 2, [1, 1], None).expression, box=box_of(p.objectives))
    assert out["loss"] == pytest.approx(exact.loss, abs=1e-7)
    ev = run_mopmc("evaluate", files.tradeoff, "--scheduler", sched, "--prop", PROP, "--json")
    assert ev.code == 0, ev.stderr
    np.testing.assert_allclose(ev.json()["values"], out["point"], atol=1e-9)


def test_soft_with_target_is_an_error():
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--soft", "--target", "1,1")
    assert_one_line_error(r, "--soft", "--target")


@pytest.mark.parametrize("args, words", [
    (["--loss", "mae"], ["--loss", "mae"]),
    (["--target", "1,x"], ["--target"]),
    (["--target", "1"], ["expected 2"]),
    (["--target", "1,nan"], ["--target '1,nan': nan is not a finite number"]),  # said "got 2"
    (["--target", "1,,2"], ["--target '1,,2': an entry is empty"]),
    (["--eps-rel", "nan"], ["--eps-rel", "nan"]),
    (["--eps-abs", "inf"], ["--eps-abs", "inf"]),
    (["--eps-rel", "-1"], ["--eps-rel", "-1"]),
    (["--eps-rel", "0", "--eps-abs", "0"], ["--eps-rel", "--eps-abs", "both 0"]),
    (["--max-iter", "-1"], ["--max-iter", "-1"]),
])
def test_bad_options(args, words):
    assert_one_line_error(run_mopmc("convex", files.tradeoff, "--prop", PROP, *args), *words)


def test_infeasible_box_exits_0_with_the_direction():
    r = run_mopmc("convex", files.tradeoff, "--prop", 'multi(R{"time"}<=1.5 [C], R{"energy"}<=2 [C])', "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["status"] == "infeasible" and out["point"] is None
    assert out["separating_direction"]["bound"] < out["separating_direction"]["required"]


def test_evaluate_rejects_a_foreign_scheduler(tmp_path):
    sched = tmp_path / "s.json"
    assert run_mopmc("convex", files.tradeoff, "--prop", PROP, "--export-scheduler", sched, "--json").code == 0
    r = run_mopmc("evaluate", files.mini_switch, "--scheduler", sched, "--prop", 'R{"ctrl_cost"}min=? [C]')
    assert_one_line_error(r, "states")


def test_binding_file_of_design_build_exports_a_runtime_scheduler(tmp_path):
    import json

    from mopmc.design.params import load_parameters
    from mopmc.runtime.scheduler import load_scheduler

    model = tmp_path / "sw.umb"
    assert run_mopmc("design", "build", "paper-switch", "--n", "6", "--out", model).code == 0
    binding = tmp_path / "sw.umb.binding.json"
    sched = tmp_path / "cq.json"
    prop = 'multi(R{"ctrl_cost"}<=1.9 [C], R{"headway_cost"}<=0.3 [C], R{"lane_dep_cost"}<=0.2 [C], R{"ttc_cost"}<=0.05 [C])'
    r = run_mopmc("convex", model, "--prop", prop, "--soft", "--export-scheduler", sched, "--binding", binding, "--json")
    assert r.code == 0, r.stderr
    loaded = load_scheduler(str(sched))
    params = load_parameters("table3")
    scores = {m.name: m.score for m in params.metrics}
    obs = json.loads(sched.read_text())["binding"]["observations"]
    assert obs["low_headway"]["threshold"] == scores["hw"] and obs["low_ttc"]["threshold"] == scores["ttc"]
    assert [c.name for c in loaded.binding.configurations] == [c.name for c in params.configurations]
    # a binding file without the metric scores (older mopmc) is one clear error
    doc = json.loads(binding.read_text())
    del doc["metrics"]
    old = tmp_path / "old.binding.json"
    old.write_text(json.dumps(doc))
    r = run_mopmc("convex", model, "--prop", prop, "--soft", "--export-scheduler", sched, "--binding", old)
    assert_one_line_error(r, "--binding", "metric scores")
    # each key of the binding file is checked (these were accepted, or named wrongly), the episode
    # length against the model, and nothing is exported
    sched.unlink()
    cases = [(lambda d: d.update(n="forty"), "n: expected an integer >= 1 (the episode length), got 'forty'"),
             (lambda d: d.update(extra=1), "unknown key(s) extra; allowed: configuration"),
             (lambda d: d.update(n=7), "n: the binding is for episodes of 7 steps, the model's tc reaches 6"),
             (lambda d: d.update(format="other/1"), "format: expected 'mopmc-switch-binding/1'"),
             (lambda d: d["configurations"][0].update(index=9), "configurations[0].index: expected 1"),
             (lambda d: d["configurations"][0].update(colour=1), "configurations[0]: unknown key(s) colour"),
             (lambda d: d.update(secondary_locations=["zzz"]), "secondary_locations: expected a list of names from locations"),
             (lambda d: d.update(k=-1), "k: expected an integer >= 0")]
    for mutate, words in cases:
        doc = json.loads(binding.read_text())
        mutate(doc)
        old.write_text(json.dumps(doc))
        r = run_mopmc("convex", model, "--prop", prop, "--soft", "--export-scheduler", sched, "--binding", old)
        assert_one_line_error(r, f"--binding {old}: {words}")
        assert not sched.exists()


def test_table3_exports_for_the_runtime_with_the_binding_beside_the_model(tmp_path):
    """table3 on a built switch takes the MODEL.binding.json beside it: the export lists the switch's
    decision points, which the runtime loads; --binding names another; one that does not fit the
    model is refused before the queries run."""
    import json

    from mopmc.runtime.scheduler import load_scheduler

    model = tmp_path / "sw.umb"
    assert run_mopmc("design", "build", "paper-switch", "--n", "6", "--out", model).code == 0
    sched = tmp_path / "t3.json"
    r = run_mopmc("table3", model, "--no-storm", "--json", "--export-scheduler", sched)
    assert r.code == 0, r.stderr
    assert r.json()["scheduler"]["runtime"] is True
    loaded = load_scheduler(str(sched))
    assert loaded.episode_steps == 6
    runtime_entries = len(json.loads(sched.read_text())["entries"])
    # without the binding: the states the scheduler reaches, which evaluate reads without defaults
    (tmp_path / "sw.umb.binding.json").rename(tmp_path / "b.json")
    r = run_mopmc("table3", model, "--no-storm", "--json", "--export-scheduler", sched)
    assert r.code == 0, r.stderr
    out = r.json()["scheduler"]
    assert out["runtime"] is False and len(json.loads(sched.read_text())["entries"]) > runtime_entries
    prop = "multi(" + ", ".join(f'R{{"{o}"}}<=9 [C]' for o in r.json()["objectives"]) + ")"
    ev = run_mopmc("evaluate", model, "--scheduler", sched, "--prop", prop, "--json")
    assert ev.code == 0, ev.stderr
    assert ev.json()["defaulted_states"] == 0
    np.testing.assert_allclose(ev.json()["values"], out["evaluated"], rtol=1e-9)
    # --binding names it; a binding of another model is refused up front
    r = run_mopmc("table3", model, "--no-storm", "--json", "--export-scheduler", sched, "--binding", tmp_path / "b.json")
    assert r.code == 0 and r.json()["scheduler"]["runtime"] is True, r.stderr
    other = json.loads((tmp_path / "b.json").read_text())
    other["timestep"] = "clock"
    (tmp_path / "other.json").write_text(json.dumps(other))
    r = run_mopmc("table3", model, "--no-storm", "--export-scheduler", sched, "--binding", tmp_path / "other.json")
    assert_one_line_error(r, "--binding", "clock")
    # found beside the model but not fitting it: an evaluation file, with a note saying why
    (tmp_path / "sw.umb.binding.json").write_text(json.dumps(other))
    r = run_mopmc("table3", model, "--no-storm", "--json", "--export-scheduler", sched)
    assert r.code == 0, r.stderr
    out = r.json()["scheduler"]
    assert out["runtime"] is False and "not a runtime file" in out["note"] and "clock" in out["note"], out
    r = run_mopmc("table3", "--binding", tmp_path / "b.json")
    assert_one_line_error(r, "--binding", "paper-switch")


def test_iteration_limit_says_how_to_go_on():
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--target", "1,1", "--max-iter", "0", "--eps-rel", "1e-14",
                  "--eps-abs", "1e-14")
    assert r.code == 0, r.stderr
    assert "status iteration_limit" in r.stdout and "--max-iter continues" in r.stdout


def test_history_and_convergence_plot(tmp_path):
    """The history holds the certified bounds per iteration, ending at the answer's; --plot draws them."""
    from support import shared_model

    path = shared_model("dive-and-rise/dive_and_rise_action_rewards.nm")
    prop = (path.parent / "dive_and_rise_prop_10.props").read_text()
    png = tmp_path / "conv.png"
    r = run_mopmc("convex", path, "--prop", prop, "--soft", "--json", "--plot", png)
    assert r.code == 0, r.stderr
    out = r.json()
    h = out["history"]
    assert [e["iteration"] for e in h] == list(range(out["iterations"] + 1))
    assert h[-1]["upper"] == out["loss"] and min(h[-1]["lower"], out["loss"]) == out["lower_bound"]
    calls = [e["oracle_calls"] for e in h]
    assert calls[0] == 2 * 10 and calls == sorted(calls) and calls[-1] <= 2 * 10 + 2 * out["iterations"]
    lows, ups = [e["lower"] for e in h], [e["upper"] for e in h if e["upper"] != "inf"]
    scale = max(1e-12, abs(out["loss"]))
    assert all(b >= a - 1e-6 * scale for a, b in zip(lows, lows[1:]))  # the outer polytope only shrinks
    assert all(b <= a + 1e-6 * scale for a, b in zip(ups, ups[1:]))  # the inner one only grows
    assert out["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # two objectives: the objective-space panel too
    two = tmp_path / "two.svg"
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--plot", two)
    assert r.code == 0, r.stderr
    assert two.read_text().lstrip().startswith("<?xml") and "vertices found" in two.read_text()


def test_bad_plot_paths(tmp_path):
    assert_one_line_error(run_mopmc("convex", files.tradeoff, "--prop", PROP, "--plot", tmp_path / "x.txt"), "--plot", ".png")
    assert_one_line_error(run_mopmc("convex", files.tradeoff, "--prop", PROP, "--plot", tmp_path / "no" / "x.png"),
                          "--plot", "does not exist")


def test_bad_binding_is_refused_before_the_model_is_loaded(tmp_path):
    """--binding is checked first: a model path that does not exist is not what the error names."""
    import json

    missing = tmp_path / "no-such-model.prism"
    sched = tmp_path / "s.json"
    r = run_mopmc("convex", missing, "--prop", PROP, "--export-scheduler", sched, "--binding", "paper_switch")
    assert_one_line_error(r, "--binding paper_switch", "no such binding", "paper-switch")
    # --binding without --export-scheduler was silently ignored
    r = run_mopmc("convex", missing, "--prop", PROP, "--binding", "paper-switch")
    assert_one_line_error(r, "--binding paper-switch", "requires --export-scheduler")
    # a runtime binding document with a missing key: named now, not after the query
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"timestep": "s"}))
    r = run_mopmc("convex", missing, "--prop", PROP, "--export-scheduler", sched, "--binding", bad)
    assert_one_line_error(r, "--binding", "b.json", "missing key(s)", "actions")
    not_json = tmp_path / "b.txt"
    not_json.write_text("not json")
    r = run_mopmc("convex", missing, "--prop", PROP, "--export-scheduler", sched, "--binding", not_json)
    assert_one_line_error(r, "--binding", "cannot read a JSON binding")
    assert not sched.exists()
