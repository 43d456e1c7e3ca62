"""Runs of small cyclic SCCs merged into one block (mopmc.engine.scc.merge_small_cycles): the plan's
rewrite, and the values against Storm's exact engine on a chain of 2-state retry loops."""

from __future__ import annotations

import numpy as np
import pytest

from storm_reference import storm_exact
from mopmc.engine.kernel import Engine
from mopmc.engine.scc import Plan, merge_small_cycles
from mopmc.examples.scalable import retries


def _plan(*sizes_kinds):
    steps, at = [], 0
    for kind, n in sizes_kinds:
        steps.append((kind, np.arange(at, at + n, dtype=np.int64)))
        at += n
    return Plan(np.zeros(at, np.int64), np.zeros(at, np.int64), tuple(steps), 0)


def test_runs_of_small_steps_from_first_to_last_cycles_step_merge():
    pl = _plan(("pass", 1), ("cycles", 2), ("pass", 3), ("cycles", 2), ("pass", 1), ("cycles", 100), ("cycles", 2),
               ("pass", 5))
    got = merge_small_cycles(pl, small=64)
    kinds = [(k, len(s)) for k, s in got.steps]
    # the leading pass stays a pass; cycles(2) pass(3) cycles(2) merge; pass(1) stays (no cycles step
    # after it in its run); the big step stays; cycles(2) alone stays; the trailing pass stays
    assert kinds == [("pass", 1), ("cycles", 7), ("pass", 1), ("cycles", 100), ("cycles", 2), ("pass", 5)]
    order = np.concatenate([s for _, s in got.steps])
    np.testing.assert_array_equal(order, np.arange(len(order)))  # the processing order is kept


def test_the_merged_size_is_capped_and_a_lone_cycles_step_stays():
    pl = _plan(*([("cycles", 2)] * 10))
    got = merge_small_cycles(pl, small=64, most=6)
    assert [len(s) for _, s in got.steps] == [6, 6, 6, 2]
    single = _plan(("pass", 2), ("cycles", 2), ("pass", 2))
    assert merge_small_cycles(single) is single


@pytest.mark.parametrize("engine", ["kernel", "torch"])
def test_a_chain_of_retry_loops_is_one_block_and_equals_storm_exact(tmp_path, engine):
    """300 two-state SCCs in a row: one step each in the plan (300 blocks solved one by one, a few
    hundred microseconds each), one merged block now; the values are Storm's exact ones."""
    from mopmc.io.load import load
    from mopmc.queries.single import _kernel_value

    path = tmp_path / "m.prism"
    path.write_text(retries(300))
    props = ['R{"r"}min=? [F "goal"]', 'R{"r"}max=? [F "goal"]', 'Pmax=? [F s=150 & b=1]']
    want = storm_exact(path, ";".join(props))
    if engine == "torch":
        pytest.importorskip("torch")
        from mopmc.engine.torch_engine import TorchEngine

        make, options = TorchEngine, {"device": "cpu"}
    else:
        make, options = Engine, {}
    for prop, ref in zip(props, want):
        loaded = load(path, properties=prop)
        value, _, bound = _kernel_value(loaded.model, loaded.properties()[0].objectives[0], options, make)
        assert bound == 0.0 and value == pytest.approx(ref, rel=1e-12), prop
    loaded = load(path, properties=props[0])
    eng = Engine(loaded.model, loaded.properties()[0].objectives, allow_stay=False)
    assert sum(kind == "cycles" for kind, _ in eng.plan.steps) == 1
