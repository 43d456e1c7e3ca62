"""Sensitivity analysis (paper Figure 9): knobs, perturbation, resumable runs, the exact oracle, the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from support import SWITCH_REWARDS, assert_one_line_error, run_mopmc

from mopmc.cli.table3 import MO, _multi
from mopmc.design import sensitivity as sens
from mopmc.design.build import convert_design
from mopmc.design.params import load_parameters, parse_parameters
from mopmc.design.probability import DelayDistribution
from mopmc.design.spec import switch_design

QUERY = sens.Query(_multi(MO))


def small(n: int = 3):
    return load_parameters("table3").with_n(n)


def test_the_table3_file_has_the_papers_20_probabilities():
    ks = sens.knobs(small())
    assert len(ks) == 20 and len({k.id for k in ks}) == 20
    assert ks[0].id == "t0.2-ctrl1.enter" and ks[0].value == small().configurations[0].enter
    assert [k.field for k in ks[:5]] == ["enter", "exit", "hw", "ttc", "ld"]


def test_knobs_per_controller_and_from_the_delay_distribution():
    data = {"n": 3, "k": 1, "delay": {"scale": 0.2},
            "metrics": {"hw": {}},
            "configurations": [{"t": 0.1, "controller": 1, "exit": 0.3, "metrics": {"hw": {"primary": 0.2, "secondary": 0.1}}}]}
    ks = sens.knobs(parse_parameters(data))
    assert [k.id for k in ks] == ["t0.1-ctrl1.enter", "t0.1-ctrl1.exit", "t0.1-ctrl1.hw.primary", "t0.1-ctrl1.hw.secondary"]
    assert ks[0].value == pytest.approx(1.0 - DelayDistribution("z", 0.2, None, "exponential").cdf(0.1))
    assert ks[0].value == pytest.approx(np.exp(-0.1 / 0.2))


def test_perturb_changes_exactly_one_probability_and_clips():
    p = small()
    before = {k.id: k.value for k in sens.knobs(p)}
    for knob in sens.knobs(p):
        q, new = sens.perturb(p, knob, 1.1)
        after = {k.id: k.value for k in sens.knobs(q)}
        assert new == pytest.approx(min(1.0, knob.value * 1.1))
        assert {i for i in before if before[i] != after[i]} == {knob.id}
        assert after[knob.id] == new
    big = sens.knobs(p)[0]
    q, new = sens.perturb(p, big, 3.0)  # 0.389 * 3 > 1: clipped, the complement 0
    assert new == 1.0 and q.configurations[0].enter == 1.0


def test_a_perturbed_probability_reaches_the_built_model():
    p = small(2)
    knob = next(k for k in sens.knobs(p) if k.id == "t0.1-ctrl1.exit")
    q, new = sens.perturb(p, knob, 0.9)
    old_probs = set(np.round(convert_design(switch_design(p)).model.probs, 12))
    new_probs = set(np.round(convert_design(switch_design(q)).model.probs, 12))
    assert round(new, 12) in new_probs and round(new, 12) not in old_probs
    assert round(knob.value, 12) in old_probs


def test_runs_equal_the_exact_occupation_measure_program(tmp_path):
    """The baseline and perturbed queries against the exact convex program on the same perturbed model."""
    from mopmc.engine.lp import lp_convex
    from mopmc.queries.convex import make_loss, soft_target

    p = small()
    results = sens.run(p, QUERY, tmp_path, levels=(0.1,))
    assert len(results) == 41 and results[0]["id"] == "baseline"
    assert all(r["status"] == "optimal" for r in results)
    by_id = {r["id"]: r for r in results}
    for task_id, knob_id, factor in (("baseline", None, 1.0), ("t0.1-ctrl2.exit+0.1", "t0.1-ctrl2.exit", 1.1),
                                     ("t0.2-ctrl1.ttc-0.1", "t0.2-ctrl1.ttc", 0.9)):
        q = p if knob_id is None else sens.perturb(p, next(k for k in sens.knobs(p) if k.id == knob_id), factor)[0]
        model = convert_design(switch_design(q)).model
        objs = sens._objectives(model, QUERY)
        exact = lp_convex(model, objs, make_loss("mse", 4, soft_target(objs), None).expression)
        r = by_id[task_id]
        assert r["loss"] == pytest.approx(exact.loss, rel=1e-5, abs=1e-9)
        assert r["lower_bound"] <= exact.loss + 1e-9
        np.testing.assert_allclose(r["point"], exact.point, atol=2e-4)
    # the spread: every perturbed loss differs from the baseline by a finite amount; the summary holds them
    summary = sens.summarise(results, SWITCH_REWARDS)
    loss_row = next(r for r in summary["rows"] if r["objective"] == "loss")
    losses = [r["loss"] for r in results[1:]]
    assert loss_row["n"] == 40 and loss_row["min"] == min(losses) and loss_row["max"] == max(losses)
    assert loss_row["baseline"] == results[0]["loss"]


def test_a_restarted_run_does_only_what_is_missing(tmp_path, monkeypatch):
    p = small()
    first = sens.run(p, QUERY, tmp_path, levels=(0.05,))
    files = sorted((tmp_path / "runs").glob("*.json"))
    assert len(files) == 41
    gone = files[3:6]
    kept = {f: f.stat().st_mtime_ns for f in files if f not in gone}
    for f in gone:
        f.unlink()
    calls = []
    real = sens.solve
    monkeypatch.setattr(sens, "solve", lambda params, query: calls.append(1) or real(params, query))
    again = sens.run(p, QUERY, tmp_path, levels=(0.05,))
    assert len(calls) == 3
    assert {f: f.stat().st_mtime_ns for f in kept} == kept
    assert [r["id"] for r in again] == [r["id"] for r in first]
    assert [r["point"] for r in again] == [r["point"] for r in first]
    # a level given twice is the same question (nothing to do); another question is refused, naming what differs
    assert len(sens.run(p, QUERY, tmp_path, levels=(0.05, 0.05))) == 41 and len(calls) == 3
    with pytest.raises(Exception, match="levels"):
        sens.run(p, QUERY, tmp_path, levels=(0.1,))
    from dataclasses import replace

    with pytest.raises(Exception, match="parameters_sha"):  # other costs: another model
        sens.run(replace(p, costs={"primary": 1.0, "secondary": 3.0}), QUERY, tmp_path, levels=(0.05,))


def test_the_cli_is_killed_and_resumed_without_losing_or_repeating_work(tmp_path):
    out = tmp_path / "sens"
    cmd = [sys.executable, "-m", "mopmc", "design", "sensitivity", "--out", str(out), "--n", "5",
           "--levels", "0.02,0.04,0.06", "--no-plot", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = out / "runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(runs.glob("*.json"))) < 10 and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = {f.name: f.stat().st_mtime_ns for f in runs.glob("*.json")}
    assert written, "nothing was written before the kill"
    for f in runs.glob("*.json"):  # written atomically: whole or not at all
        json.loads(f.read_text())
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["rows"]) == 3 * 5
    assert len(list(runs.glob("*.json"))) == 1 + 3 * 40
    assert {f: (runs / f).stat().st_mtime_ns for f in written} == written  # none recomputed


def test_cli_json_plot_and_workers(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    args = ["design", "sensitivity", "--n", "3", "--levels", "0.1", "--json"]
    r1 = run_mopmc(*args, "--out", one)
    assert r1.code == 0, r1.stderr
    # stderr is no terminal here: progress as lines, the last one at the end
    assert re.search(r"^sensitivity: (\d+)/\1 runs$", r1.stderr, re.M), r1.stderr
    r2 = run_mopmc(*args, "--out", two, "--workers", "2", "--no-plot")
    assert r2.code == 0, r2.stderr
    d1, d2 = r1.json(), r2.json()
    assert d1["objectives"] == [*SWITCH_REWARDS, "loss"]
    assert d1["rows"] == d2["rows"]  # the same numbers from two processes
    assert (one / "figure9.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (two / "figure9.png").exists()
    for name in ("results.csv", "summary.csv", "summary.md"):
        assert (one / name).stat().st_size > 0
    assert (one / "summary.md").read_text().count("\n| +-10% |") == 1


def test_cli_torch_engine_equals_the_kernel(tmp_path):
    pytest.importorskip("torch")
    args = ["design", "sensitivity", "--n", "3", "--levels", "0.1", "--json", "--no-plot"]
    kernel = run_mopmc(*args, "--out", tmp_path / "k").json()
    torch_doc = run_mopmc(*args, "--out", tmp_path / "t", "--engine", "torch", "--device", "cpu").json()
    for a, b in zip(kernel["rows"], torch_doc["rows"]):
        for key in ("min", "median", "max", "baseline"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-12)


def test_cli_bad_input(tmp_path):
    out = ["--out", tmp_path / "x"]
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--levels", "0.1,1.5"), "--levels")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--levels", "a,b"), "--levels")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--levels", "0.1,,0.2"),
                          "--levels '0.1,,0.2': an entry is empty")  # was dropped silently
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--loss", "huber"), "--loss")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--engine", "lp"), "--engine")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--device", "cuda"), "--device")
    if __import__("importlib").util.find_spec("torch") is not None:
        assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--engine", "torch", "--device", "gpu0"), "--device")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--workers", "0", "--n", "2"), "--workers")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--params", tmp_path / "none.yaml"), "none.yaml")
    assert_one_line_error(run_mopmc("design", "sensitivity", *out, "--n", "2", "--prop", 'multi(R{"foo"}<=1 [C])'), "foo")
    assert not (tmp_path / "x" / "spec.json").exists()  # nothing written for a bad question


def test_ray_gives_the_same_runs(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mopmc[cluster]')")
    p = small(2)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = sens.run(p, QUERY, tmp_path / "ray", levels=(0.1,), ray_address="auto")
    finally:
        ray.shutdown()
    here = sens.run(p, QUERY, tmp_path / "here", levels=(0.1,))
    assert [(r["id"], r["point"], r["loss"]) for r in on_ray] == [(r["id"], r["point"], r["loss"]) for r in here]
    assert len(list((tmp_path / "ray" / "runs").glob("*.json"))) == 41


def test_damaged_run_files_are_run_again_and_a_bad_folder_is_named(tmp_path, monkeypatch):
    p = small(2)
    first = sens.run(p, QUERY, tmp_path, levels=(0.1,))
    runs = tmp_path / "runs"
    base = json.loads((runs / "baseline.json").read_text())
    damaged = {  # each was a KeyError/TypeError/UnicodeDecodeError ("internal error") in the summary, or a wrong row
        "baseline.json": json.dumps({**base, "point": base["point"][:2]}),
        first[1]["id"] + ".json": "{}",
        first[2]["id"] + ".json": "null",
        first[3]["id"] + ".json": "[1, 2]",
        first[4]["id"] + ".json": json.dumps({**first[4], "id": first[5]["id"]}),
        first[5]["id"] + ".json": '{"trunc',
    }
    for name, text in damaged.items():
        (runs / name).write_text(text)
    (runs / (first[6]["id"] + ".json")).write_bytes(b"\xff\xfe")
    calls = []
    real = sens.solve
    monkeypatch.setattr(sens, "solve", lambda params, query: calls.append(1) or real(params, query))
    again = sens.run(p, QUERY, tmp_path, levels=(0.1,))
    assert len(calls) == len(damaged) + 1
    assert [(r["id"], r["point"]) for r in again] == [(r["id"], r["point"]) for r in first]
    # a run file that is a folder is named, not deleted
    (runs / "baseline.json").unlink()
    (runs / "baseline.json").mkdir()
    from mopmc.errors import ConfigError

    with pytest.raises(ConfigError, match=r"baseline.json: is a directory"):
        sens.run(p, QUERY, tmp_path, levels=(0.1,))


def test_cli_bad_output_folders_and_options(tmp_path):
    args = ("design", "sensitivity", "--n", "2", "--levels", "0.1", "--no-plot")
    spec_list = tmp_path / "spec_list"
    spec_list.mkdir()
    (spec_list / "spec.json").write_text("[1]")
    assert_one_line_error(run_mopmc(*args, "--out", spec_list), "spec.json: not a sensitivity run's spec")
    (tmp_path / "afile").write_text("x")
    assert_one_line_error(run_mopmc(*args, "--out", tmp_path / "afile"), "--out", "afile: cannot make the folder")
    assert_one_line_error(run_mopmc(*args, "--out", tmp_path / "afile" / "sub"), "--out", "cannot make the folder")
    assert_one_line_error(run_mopmc(*args, "--out", tmp_path / "x", "--eps-rel", "nan"), "--eps-rel nan")
    assert_one_line_error(run_mopmc(*args, "--out", tmp_path / "x", "--n", "0"), "--n 0: the episode length")
    assert not (tmp_path / "x").exists()  # a refused question leaves no folder that would refuse the next one
