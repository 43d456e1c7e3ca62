"""The documented analysis -> runtime loop with the default (shipped, 5 Hz) agent, and the checks that
keep a scheduler from running on episodes of another length.

The loop (README, docs/experiments.md): ``rt experiment table4`` -> ``rt estimate`` (n from what the
logs record: 6 s at the agent's 5 Hz = 30 steps, not the config's 1 Hz) -> ``design build --params``
-> ``convex --export-scheduler --binding`` -> ``rt simulate --switch FILE``.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from runtime_support import choose_entry, exit_entry, scheduler_doc
from support import assert_one_line_error, run_mopmc

from mopmc.cli.rt import app
from mopmc.runtime.scheduler import load_scheduler

TINY = {"env": {"duration": 6, "max_substep": 0.0667}}  # the docs' smoke config: 30 steps at 5 Hz, 6 at 1 Hz
PROP = ('multi(R{"ctrl_cost"}<=1.9 [C], R{"headway_cost"}<=0.22 [C], R{"lane_dep_cost"}<=0.169 [C], '
        'R{"ttc_cost"}<=0.035 [C])')


def covering(steps: int, k: int = 4) -> dict:
    """A scheduler of a model with n = ``steps``: choices at tc 0..n-1, exit checks at tc 1..n."""
    entries = [choose_entry(tc, {2: 1.0}) for tc in range(steps)]
    entries += [exit_entry(tc, k, 2, 1.0) for tc in range(1, steps + 1)]
    return scheduler_doc(entries, k=k)


def test_a_scheduler_knows_the_episode_length_it_covers(write_json) -> None:
    assert load_scheduler(write_json(covering(40))).episode_steps == 40
    assert load_scheduler(write_json(covering(7))).episode_steps == 7
    # only exit checks (every round goes to the secondary): the last check is after step n
    only_exits = scheduler_doc([choose_entry(0, {2: 1.0})] + [exit_entry(tc, 4, 2, 1.0) for tc in range(5, 13)], k=4)
    assert load_scheduler(write_json(only_exits)).episode_steps == 12


def test_simulate_refuses_a_scheduler_for_another_episode_length_before_running(tmp_path, write_json) -> None:
    """H1: a paper-switch scheduler (n = 40) with the default agent (5 Hz x 40 s = 200 steps) died at
    step 40 with 'no scheduler entry for the runtime state {tc=40, ...}'."""
    sched = write_json(covering(40), "cq.json")
    r = run_mopmc("rt", "simulate", "--episodes", "1", "--vehicles", "5", "--switch", sched, "--seed", "7", "--json")
    assert_one_line_error(r, "cq.json", "covers episodes of 40 steps", "this run has 200",
                          "agent 'shipped' at 5 Hz x 40 s", "--n 200", "--agent idm")
    assert "episode 1/1" not in r.stderr and "p10_ttc" not in r.stdout  # refused before any episode ran
    # more steps than the run is refused as well (the scheduler was optimised for another horizon)
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    r = run_mopmc("rt", "simulate", "-n", "1", "--agent", "idm", "--config", cfg, "--switch", sched)
    assert_one_line_error(r, "covers episodes of 40 steps", "this run has 6 (agent 'idm' at 1 Hz x 6 s)", "--n 6",
                          "env.duration 40")


def test_table4_and_sweeps_refuse_it_too(tmp_path, write_json) -> None:
    from mopmc.errors import SchedulerError
    from mopmc.runtime.sweep import Setting, run_sweep, small_config

    sched = write_json(covering(40), "cq.json")
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    out = tmp_path / "t4"
    result = CliRunner().invoke(app, ["experiment", "table4", "--out", str(out), "--episodes", "2", "--delays", "0.2",
                                      "--methods", "C1", "--scheduler", str(sched), "--config", str(cfg), "--workers", "0"])
    assert result.exit_code == 2, result.output
    assert "covers episodes of 40 steps" in result.stderr and "this run has 30 (agent 'shipped' at 5 Hz x 6 s)" in result.stderr
    assert not out.exists()
    setting = Setting("s", delay="0.1", switch=str(sched), config=small_config(vehicles=2, duration=6))
    with pytest.raises(SchedulerError, match=r"setting s: .*covers episodes of 40 steps \(its model's n\); this run has 6"):
        run_sweep(tmp_path / "sweep", [setting], 1, workers=0)
    assert not (tmp_path / "sweep").exists()


def test_unknown_switch_lists_the_configurations_of_the_config(tmp_path) -> None:
    """L2: a config with only C1 said 'expected none, C1, C2, C3, C4, uniform or ...'."""
    cfg = tmp_path / "c1.json"
    cfg.write_text(json.dumps({"switch": {"configurations": [{"name": "C1", "t": 0.2, "controller": "1"}]}}))
    r = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "--switch", "C2"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: unknown switch 'C2'; expected none, C1, uniform or a scheduler FILE.json"


def test_simulate_fast_is_the_stock_run_on_the_accelerated_road(tmp_path) -> None:
    """L15: ``rt simulate --fast`` as ``table1``/``table4 --fast``: the same episodes, recorded as fast."""
    pytest.importorskip("highway_env")
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps({"env": {"duration": 4, "max_substep": 0.0667}, "metrics": {"bootstrap": 0}}))
    args = ["simulate", "-n", "1", "--vehicles", "6", "--agent", "idm", "--switch", "C2", "--delay", "exp:0.3",
            "--config", str(cfg), "--seed", "3", "--json"]
    runs = {}
    for name, extra in (("stock", []), ("fast", ["--fast"])):
        r = CliRunner().invoke(app, [*args, *extra, "--log", str(tmp_path / f"{name}.csv")])
        assert r.exit_code == 0, r.output
        runs[name] = json.loads(r.stdout)
    assert runs["fast"]["settings"]["simulator"] == "fast" and runs["stock"]["settings"]["simulator"] == "stock"
    assert (tmp_path / "fast.csv").read_text() == (tmp_path / "stock.csv").read_text()


# --- the whole loop ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """The documented loop, with the docs' tiny config and the default agent (one subprocess each)."""
    pytest.importorskip("highway_env")
    root = tmp_path_factory.mktemp("loop")
    cfg = root / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    t4 = root / "t4"
    r = run_mopmc("rt", "experiment", "table4", "--out", t4, "--episodes", "2", "--delays", "0.3",
                  "--methods", "C1,C2,C3,C4", "--vehicles", "4", "--config", cfg, "--workers", "0", "--no-plot",
                  "--bootstrap", "0", "--fast", "--seed", "1")
    assert r.code == 0, r.stderr
    return root, cfg, t4


def test_estimate_takes_n_from_what_the_sweep_recorded(loop) -> None:
    root, cfg, t4 = loop
    # without --reference: one line naming the runs that can be the reference
    r = run_mopmc("rt", "estimate", t4, "--out", root / "p.yaml")
    assert_one_line_error(r, "--reference", f"{t4}/episodes/none@d0.300")
    for extra in ([], ["--config", cfg]):  # the config says 1 Hz; the agent ran at 5 Hz: 6 s -> 30 steps
        r = run_mopmc("rt", "estimate", t4, "--out", root / "p.yaml", "--reference", t4 / "episodes" / "none@d0.300",
                      *extra)
        assert r.code == 0, r.stderr
        doc = yaml.safe_load((root / "p.yaml").read_text())
        assert doc["n"] == 30, extra
        assert "(6 s at 5 Hz)" in doc["provenance"]["n"]["from"] and "n 30" in r.stdout
    r = run_mopmc("rt", "estimate", t4, "--out", root / "p.yaml", "--reference", t4 / "episodes" / "none@d0.300",
                  "--n", "12")
    assert r.code == 0 and yaml.safe_load((root / "p.yaml").read_text())["n"] == 12  # --n still decides


def test_the_documented_loop_runs_end_to_end(loop) -> None:
    root, cfg, t4 = loop
    params = root / "est.yaml"
    # as the walkthrough ran it: with the config, whose 1 Hz gave n = 6 and a run that died at tc = 6
    r = run_mopmc("rt", "estimate", t4, "--out", params, "--reference", t4 / "episodes" / "none@d0.300", "--config", cfg)
    assert r.code == 0, r.stderr
    model = root / "est.umb"
    r = run_mopmc("design", "build", "paper-switch", "--params", params, "--out", model)
    assert r.code == 0, r.stderr
    sched = root / "est_cq.json"
    r = run_mopmc("convex", model, "--prop", PROP, "--soft", "--export-scheduler", sched,
                  "--binding", root / "est.umb.binding.json")
    assert r.code == 0, r.stderr
    r = run_mopmc("rt", "simulate", "-n", "1", "--vehicles", "4", "--config", cfg, "--switch", sched,
                  "--delay", "exp:0.1", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["steps"] <= 30 and doc["settings"]["policy_frequency"] == 5.0
    assert load_scheduler(sched).episode_steps == 30
    # the same scheduler with the 1 Hz IDM stand-in (6 steps) is refused in one line
    r = run_mopmc("rt", "simulate", "-n", "1", "--vehicles", "4", "--config", cfg, "--switch", sched, "--agent", "idm")
    assert_one_line_error(r, "covers episodes of 30 steps", "this run has 6")


def test_estimate_from_a_csv_log_takes_its_longest_episode(loop, tmp_path) -> None:
    root, cfg, _ = loop
    log = tmp_path / "log.csv"
    r = CliRunner().invoke(app, ["simulate", "-n", "2", "--vehicles", "4", "--config", str(cfg), "--switch", "C1",
                                 "--delay", "exp:0.2", "--seed", "2", "--log", str(log)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "5",
                                 "--hw-score", "2"])
    assert r.exit_code == 0, r.output
    assert yaml.safe_load((tmp_path / "p.yaml").read_text())["n"] == 30


def test_simulate_checks_its_log_path_before_running(tmp_path) -> None:
    """--log in a missing folder failed only after every episode had run (a walkthrough)."""
    r = run_mopmc("rt", "simulate", "-n", "1", "--vehicles", "4", "--agent", "idm", "--log", tmp_path / "nodir" / "x.csv")
    assert_one_line_error(r, "--log", "nodir", "does not exist")
    assert "episode 1/1" not in r.stderr
