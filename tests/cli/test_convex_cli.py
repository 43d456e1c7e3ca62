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
