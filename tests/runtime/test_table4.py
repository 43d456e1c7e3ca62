"""Table 4 on a tiny scene: files, resume, paired differences checked against the aggregate module."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("highway_env")

from runtime_support import choose_entry, exit_entry, scheduler_doc

from mopmc.cli.rt import app
from mopmc.runtime.aggregate import summarise
from mopmc.runtime.experiments.table4 import BASELINE, compare
from mopmc.runtime.simulate import simulate
from mopmc.runtime.sweep import read_episode, small_config

STEPS = 6


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("t4")
    sched = root / "always-c2.json"
    entries = [choose_entry(tc, {2: 1.0}) for tc in range(STEPS)]  # a model of n = STEPS: choices at tc 0..n-1
    entries += [exit_entry(tc, 4, 2, 1.0) for tc in range(STEPS + 1)]
    sched.write_text(json.dumps(scheduler_doc(entries, k=4)))
    config = root / "cfg.json"
    config.write_text(json.dumps({"env": {"duration": STEPS, "max_substep": 1 / 15}}))
    args = ["experiment", "table4", "--out", str(root / "out"), "--episodes", "3", "--delays", "0.1,0.3",
            "--methods", "C2,uniform", "--scheduler", str(sched), "--vehicles", "4", "--config", str(config),
            "--workers", "0", "--agent", "idm", "--bootstrap", "100", "--seed", "4"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return root, args


def _rows(root: Path) -> list[dict[str, str]]:
    with (root / "out" / "table4.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_files_and_rows(table) -> None:
    root, _ = table
    for name in ("table4.csv", "table4.md", "table4.json", "table4.png"):
        assert (root / "out" / name).stat().st_size > 0
    rows = _rows(root)
    assert [(r["method"], r["avg_delay"]) for r in rows] == [
        (m, d) for d in ("0.1", "0.3") for m in ("none", "C2", "uniform", "sched-always-c2")]
    md = (root / "out" / "table4.md").read_text()
    assert "| sched-always-c2 | 0.30 |" in md


def test_values_match_the_aggregate_of_independent_simulations(table) -> None:
    root, _ = table
    rows = {(r["method"], r["avg_delay"]): r for r in _rows(root)}
    cfg = small_config(vehicles=4, duration=STEPS)
    for d in ("0.1", "0.3"):
        base = simulate(episodes=3, delay=f"exp:{d}", switch="none", agent="idm", vehicles=4, seed=4, config=cfg)
        s0 = base.summary
        none = rows[("none", d)]
        assert float(none["p10_ttc"]) == pytest.approx(s0.p10_ttc.value)
        assert float(none["p50_hw"]) == pytest.approx(s0.p50_headway.value)
        assert float(none["ttc_score"]) == pytest.approx(s0.p10_ttc.value)  # default score: the no-switch P10
        c2 = simulate(episodes=3, delay=f"exp:{d}", switch="C2", agent="idm", vehicles=4, seed=4, config=cfg).summary
        r = rows[("C2", d)]
        assert float(r["ctl"]) == pytest.approx(c2.controller_cost.value - s0.controller_cost.value)
        assert float(r["prob_ld"]) == pytest.approx(c2.prob_lane_departure.value - s0.prob_lane_departure.value)
        assert float(r["p50_hw"]) == pytest.approx(c2.p50_headway.value - s0.p50_headway.value)
        score = float(r["ttc_score"])
        pr = summarise(simulate(episodes=3, delay=f"exp:{d}", switch="C2", agent="idm", vehicles=4, seed=4, config=cfg).episodes,
                       ttc_scores=(score,), rng=np.random.default_rng(0), resamples=0).pr_ttc[score].value
        pr0 = summarise(base.episodes, ttc_scores=(score,), rng=np.random.default_rng(0), resamples=0).pr_ttc[score].value
        assert float(r["pr_ttc"]) == pytest.approx(pr - pr0)
        assert all(float(r[f"{m}_low"]) <= float(r[f"{m}_high"]) for m in ("p10_ttc", "pr_ttc", "p50_hw", "ctl"))
        # the scheduler that always picks C2 and exits when allowed behaves exactly as C2
        sched = rows[("sched-always-c2", d)]
        assert {k: sched[k] for k in sched if k != "method"} == {k: r[k] for k in r if k != "method"}


def test_rerun_resumes_and_reproduces(table) -> None:
    root, args = table
    before = (root / "out" / "table4.csv").read_text()
    mtimes = {p: p.stat().st_mtime_ns for p in (root / "out" / "episodes").glob("*/*.json")}
    result = CliRunner().invoke(app, args + ["--no-plot"])
    assert result.exit_code == 0, result.output
    assert (root / "out" / "table4.csv").read_text() == before
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # no episode ran again


def test_identical_method_has_zero_difference(table) -> None:
    root, _ = table
    eps = [read_episode(p) for p in sorted((root / "out" / "episodes" / "uniform@d0.300").glob("*.json"))]
    rows = compare({BASELINE: eps, "same": eps}, 0.3, rng=np.random.default_rng(1), resamples=50)
    same = rows[1]
    assert all(c.value == 0 and c.low == 0 and c.high == 0 for c in same.cells.values())


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    for extra, message in ((["--methods", "C9"], "unknown switch"), (["--delays", "0.1,x"], "--delays"),
                           (["--scheduler", str(tmp_path / "nope.json")], "file not found"), (["--episodes", "1"], ">= 2"),
                           # an empty list ran a table of 'none' alone (exit 0), an empty entry was dropped
                           (["--methods", ""], "--methods: give at least one method"),
                           (["--delays", "0.1,,0.2"], "--delays '0.1,,0.2': an entry is empty")):
        r = CliRunner().invoke(app, ["experiment", "table4", "--out", str(tmp_path / "o"), *extra])
        assert r.exit_code == 2 and message in r.output, (extra, r.output)
