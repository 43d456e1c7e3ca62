"""The sound iterative method (forced with ``method="iterative"``) against exact references: random
MDPs re-evaluated independently, the Storm-exact reference table, per-state values, precision."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_reference import (
    FAST, evaluate_policy, objective_rewards as _rewards, random_case, random_mdp,
    scheduler_values, total_objectives, zero_end_components,
)
from mopmc.engine.kernel import Engine
from mopmc.errors import InfiniteValueError

def _within(a, b, bound):
    """|a - b| <= bound, allowing only floating-point rounding beyond it."""
    return np.all(np.abs(np.asarray(a) - np.asarray(b)) <= bound + 1e-9 * np.maximum(1.0, np.abs(b)))


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 150), m=st.integers(1, 3), finite=st.booleans(),
       signed=st.booleans())
def test_bounds_are_sound_on_random_mdps(seed, n, m, finite, signed):
    """Every value is within ``error_bound`` of the exact value of the returned scheduler (dense
    solve), and the exact weighted optimum is at most ``weighted + error_bound * |w|_1``."""
    model, objs, w = random_case(seed, n, m, finite, signed)
    try:
        exact = Engine(model, objs, method="exact").optimise(w)
    except InfiniteValueError:
        with pytest.raises(InfiniteValueError):
            Engine(model, objs, method="iterative").optimise(w)
        return
    res = Engine(model, objs, method="iterative").optimise(w)
    assert res.error_bound >= 0.0
    assert _within(res.values, scheduler_values(model, objs, res), res.error_bound)
    assert exact.weighted <= res.weighted + res.error_bound * np.abs(w).sum() + 1e-9 * max(1.0, abs(exact.weighted))
    assert abs(exact.weighted - res.weighted) <= 1e-6 * max(1.0, np.abs(exact.values).max()) * (1 + np.abs(w).sum())


def test_a_nearly_closed_cycle_needs_many_iterations_and_stays_sound():
    # 0 <-> 1 with leaving probability 1e-4: about 10^4 expected steps, values ~ 10^4
    m = _chain(1e-4)
    objs = total_objectives(1, ["max"])
    exact = Engine(m, objs, method="exact").optimise([1.0])
    res = Engine(m, objs, method="iterative").optimise([1.0])
    assert exact.values[0] == pytest.approx(2e4, rel=1e-9)  # v0 = 2 / leave
    assert 0.0 < res.error_bound <= 1e-6 * exact.values[0]
    assert _within(res.values, exact.values, res.error_bound)


def _chain(leave: float):
    from mopmc.model.sparse_mdp import SparseMDP

    # s0: to s1; s1: back to s0 (1 - leave) or to s2 (absorbing); reward 1 per step in s0 and s1
    return SparseMDP.from_arrays([0, 1, 2, 3], [0, 1, 3, 4], [1, 0, 2, 2], [1.0, 1 - leave, leave, 1.0],
                                 rewards={"r0": np.array([1.0, 1.0, 0.0])})


def test_precision_controls_the_bound():
    m = _chain(1e-3)
    objs = total_objectives(1, ["max"])
    exact = Engine(m, objs, method="exact").optimise([1.0]).values[0]
    eng = Engine(m, objs, method="iterative")
    coarse, fine = eng.optimise([1.0], precision=1e-3), eng.optimise([1.0], precision=1e-9)
    assert fine.error_bound < coarse.error_bound <= 1e-3 * exact
    for r in (coarse, fine):
        assert abs(r.values[0] - exact) <= r.error_bound


def test_method_auto_uses_the_size_limit():
    m = _chain(1e-3)
    objs = total_objectives(1, ["max"])
    assert Engine(m, objs).n_iterative == 0
    assert Engine(m, objs, size_limit=1).n_iterative == 0  # a two-state block: within its band
    assert Engine(m, objs, size_limit=1, band_budget=0).n_iterative == 1
    with pytest.raises(ValueError, match="method"):
        Engine(m, objs, method="fast")


@pytest.mark.parametrize("method", ["exact", "iterative"])
def test_per_state_values_match_an_independent_solve(method):
    rng = np.random.default_rng(3)
    model = zero_end_components(random_mdp(rng, 80, 2, zero_frac=0.5))
    objs = total_objectives(2, ["min", "max"])
    res = Engine(model, objs, method=method).optimise([0.6, 0.4], per_state=True)
    sv = res.state_values
    assert sv.shape == (model.n_states, 2)
    choice = res.scheduler.choices()
    choice = np.where(choice >= 0, choice, model.row_groups[:-1])
    R = _rewards(model, objs)
    reached = ~np.isnan(sv[:, 0])
    assert reached[model.initial] and reached.sum() > 1
    for s in np.flatnonzero(reached):
        v = evaluate_policy(replace(model, initial=int(s)), choice, R)
        assert _within(sv[s], v, res.error_bound), s
    np.testing.assert_array_equal(sv[model.initial], res.values)


# --- the reference table (Storm exact), through the single-objective check --------------------------

from reference_values import REFERENCES, ref_id, reference_property  # noqa: E402

@pytest.mark.parametrize("ref", REFERENCES, ids=ref_id)
def test_reference_table_exact_and_iterative(ref):
    """The kernel with both methods on every row of the table (on the acyclic switch models both
    are the same single backward pass)."""
    from mopmc.queries.single import check

    model, prop = reference_property(ref)
    exact = check(model, prop, method="exact")
    assert ref.close_to(exact.value), (exact.value, ref.value)
    assert exact.error_bound == 0.0
    it = check(model, prop, method="iterative")
    if math.isinf(ref.value):
        assert it.value == ref.value
        return
    assert it.error_bound <= 1e-6 * max(1.0, abs(ref.value)) + 1e-12
    assert abs(it.value - ref.value) <= it.error_bound + 1e-9 * max(1.0, abs(ref.value)), (it.value, ref.value, it.error_bound)
