"""Goal memory, infinite rewards and the check command, on small models with known answers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from support import TWO_WAYS, shared_model  # noqa: E402

from mopmc.engine.kernel import Engine
from mopmc.errors import InfiniteValueError
from mopmc.io.load import load
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective


def test_tiny_rewards_negative_as_storm():
    """Storm's test: multi(R{"a"}max>=0 [C], R{"b"}min<=0 [C]) holds; the loops are dominated."""
    loaded = load(shared_model("peer-tests/storm/tiny_rewards_negative.nm"),
                  properties='multi(R{"a"}max>=0 [C], R{"b"}min<=0 [C])')
    objs = loaded.properties()[0].objectives
    res = Engine(loaded.model, objs).optimise([1.0, 1.0])
    np.testing.assert_allclose(res.values, [0.0, 0.0])


def test_reward_loop_under_max_is_infinite():
    m = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1.0, 1.0, 1.0], rewards={"r": [1.0, 0.0, 0.0]})
    with pytest.raises(InfiniteValueError):
        Engine(m, [Objective(0, 'R{"r"}max=? [C]', "total_reward", "max", "r")])
    # the same loop is harmless (dominated) under min
    res = Engine(m, [Objective(0, 'R{"r"}min=? [C]', "total_reward", "min", "r")]).optimise([1.0])
    assert res.values[0] == 0.0


def _two_targets():
    # s0 -a-> s1 (target A) -> s2 (target B, absorbing); s0 -b-> s3 (absorbing)
    rg = [0, 2, 3, 4, 5]
    ip = [0, 1, 2, 3, 4, 5]
    tg = [1, 3, 2, 2, 3]
    labels = {"A": np.array([0, 1, 0, 0], bool), "B": np.array([0, 0, 1, 0], bool)}
    return SparseMDP.from_arrays(rg, ip, tg, [1.0] * 5, labels=labels)


def test_goal_memory_counts_each_target_once():
    """Targets with different sets: making one absorbing would lose the other (needs memory)."""
    m = _two_targets()
    objs = [Objective(0, 'P[F "A"]', "probability", "max", right_text='"A"'),
            Objective(1, 'P[F "B"]', "probability", "max", right_text='"B"')]
    eng = Engine(m, objs)
    res = eng.optimise([1.0, 1.0])
    np.testing.assert_allclose(res.values, [1.0, 1.0])
    assert res.scheduler.n_bits == 2


def test_check_command_infinite_exit_code(capsys):
    from typer.testing import CliRunner

    from mopmc.cli.check import app

    # an infinite value is a result (as in Storm): exit 0, one property or several alike
    path = str(shared_model("peer-tests/storm/tiny_rewards_negative.nm"))
    one = CliRunner().invoke(app, [path, "--prop", 'R{"b"}max=? [C]'])
    assert one.exit_code == 0 and "infinite" in one.output
    both = CliRunner().invoke(app, [path, "--prop", 'R{"a"}max=? [C]; R{"b"}max=? [C]', "--json"])
    assert both.exit_code == 0
    import json

    rows = json.loads(both.stdout)
    assert [r["status"] for r in rows] == ["ok", "infinite"]
    assert rows[0]["value"] == 0.0 and rows[0]["kind"] == "value"


def test_export_scheduler_with_goal_memory(tmp_path):
    """A single reachability objective: following the exported scheduler from the initial state
    reaches "B" (probability 2/3, against 0 through action b). Where graph analysis decides some
    states first (here: those that cannot reach "B"), the scheduler is memoryless (optimal for
    reachability); otherwise it carries the engine's goal bit."""
    import json

    from typer.testing import CliRunner

    from mopmc.cli.check import app

    model = tmp_path / "two_ways.nm"
    model.write_text(TWO_WAYS.replace("0.5:(s'=1) + 0.5:(s'=0)", "0.5:(s'=1) + 0.25:(s'=0) + 0.25:(s'=3)"))
    out = tmp_path / "sched.json"
    res = CliRunner().invoke(app, [str(model), "--prop", 'Pmax=? [F "B"]', "--json", "--export-scheduler", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["value"] == pytest.approx(2 / 3)
    doc = json.loads(out.read_text())
    assert doc["format"] == "mopmc-scheduler" and doc.get("memory", []) in ([], ['"B"'])  # at most the goal bit
    entries = {(e["state"]["s"], e.get("memory", 0)): e for e in doc["entries"]}
    assert [c["action"] for c in entries[(0, 0)]["choices"]] == ["a"]


def test_check_command_rejects_a_bad_precision(tmp_path):
    from typer.testing import CliRunner

    from mopmc.cli.check import app

    model = tmp_path / "two_ways.nm"
    model.write_text(TWO_WAYS)
    res = CliRunner().invoke(app, [str(model), "--prop", 'Pmax=? [F "B"]', "--precision", "0"])
    assert res.exit_code == 2 and "--precision" in res.output and "Traceback" not in res.output


from support import ZERO_CYCLE  # noqa: E402 (shared with tests/queries/test_lp_fallback.py)


def test_rewards_of_both_signs_in_an_end_component(tmp_path):
    """A cross-check with Storm found the kernel called an end component with any gain infinite:
    the a-b cycle gains 1 then loses 1 (or 2), so every path to 'done' totals 0 and no scheduler
    gains without bound. The kernel cannot decide such a component: the exact LP answers instead
    (a note says so; it was refused), by hand 0 for each (Storm: 0 for R[F]; it refuses negative
    R[C]). A component losing only, under min, is -inf in both engines (it was +inf)."""
    from mopmc.queries.single import check

    from support import run_mopmc

    path = tmp_path / "zc.nm"
    path.write_text(ZERO_CYCLE)
    props = ['R{"r"}min=? [F "done"]', 'R{"r2"}max=? [C]', 'R{"r"}max=? [C]', 'R{"r"}min=? [C]']
    lm = load(path, properties="; ".join(props + ['R{"spin"}min=? [F "done"]', 'R{"spin"}min=? [C]']))
    *mixed, spin_f, spin_c = lm.properties()
    for p in mixed:
        assert check(lm.model, p, engine="lp").value == 0.0, p.text
    # the kernel cannot weigh it: the exact LP answers instead, said in a note (it was refused in one line)
    r = run_mopmc("check", path, "--prop", props[0], "--json")
    assert r.code == 0 and r.json()[0]["value"] == 0.0, r.stderr
    assert "rewards have both signs" in r.stderr and "exact LP engine" in r.stderr
    assert "exact LP engine" in r.json()[0]["note"]
    for engine in ("kernel", "lp"):  # spin: b loses 1 in the a-b cycle, a gains nothing: -inf under min
        assert check(lm.model, spin_f, engine=engine).value == -np.inf, engine
        assert check(lm.model, spin_c, engine=engine).value == -np.inf, engine


def test_a_chain_that_never_leaves_rewards_of_both_signs_has_no_total(tmp_path):
    """A DTMC cycling forever through +1 and -2: its total diverges (to -inf, with the cycle's mean)
    or, with other numbers, oscillates. The LP engine reported +inf ('positive reward forever'),
    turning its own 'undefined' into an infinity; both engines now refuse it in one line."""
    from support import run_mopmc

    path = tmp_path / "mixed.pm"
    path.write_text('dtmc\nmodule m\n  s : [0..1] init 0;\n  [a] s=0 -> (s\'=1);\n  [b] s=1 -> (s\'=0);\nendmodule\n'
                    'rewards "r"\n  [a] true : 1;\n  [b] true : -2;\nendrewards\n')
    for engine in ("kernel", "lp"):
        r = run_mopmc("check", path, "--prop", 'R{"r"}=? [C]', "--engine", engine)
        assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1 and "both signs" in r.stderr, (engine, r.stderr)
