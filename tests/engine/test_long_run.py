"""Long-run averages (``R{"r"}[LRA]``, ``LRA[phi]``): mopmc.engine.long_run against Storm's exact
engine (the model handed over as a UMB archive with rational values), by hand, and its refusals."""

from __future__ import annotations

import inspect
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import random_mdps
from support import assert_one_line_error, run_mopmc
from mopmc.engine import long_run
from mopmc.errors import PropertyError
from mopmc.io import storm
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.parse import parse_properties
from mopmc.queries.single import check

SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse(model, text):
    return parse_properties(storm.parse_formulas(text, None, "<test>"), model.rewards, model.labels)


def value(model, text, **kw):
    (p,) = parse(model, text)
    return check(model, p, **kw).value


def storm_exact(model: SparseMDP, text: str) -> float:
    """Storm's exact engine on ``model`` (its doubles read as rationals), at the initial state."""
    from mopmc.io.quiet import storm_output
    from mopmc.io.umb import write_umb

    sp = storm.stormpy()
    options_type = inspect.getmodule(sp.build_model_from_umb).storage
    tmp = storm.temp_umb_path()
    try:
        write_umb(model, tmp)
        options = options_type.UmbImportOptions()
        options.value_type = options_type.UmbImportValueType.RATIONAL
        built = sp.build_model_from_umb(str(tmp), options=options)
    finally:
        tmp.unlink(missing_ok=True)
    (prop,) = storm.parse_formulas(text, None, "<storm>")
    with storm_output():
        res = sp.model_checking(built, prop, only_initial_states=True, environment=sp.environments.exact())
    return float(Fraction(str(res.get_value(built.initial_states[0]))))


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


@SLOW
@given(model=random_mdps(max_states=12, max_choices=3, reward_models=1, negative=True),
       sense=st.sampled_from(["min", "max"]), kind=st.sampled_from(["reward", "label"]),
       rounds=st.sampled_from([long_run.GAIN_ROUNDS, 0]))
def test_equals_storm_exact(model, sense, kind, rounds):
    """Policy iteration (the default) and the linear program (no rounds of it) alike."""
    text = f'R{{"r0"}}{sense}=? [LRA]' if kind == "reward" else f'LRA{sense}=? ["a"]'
    want = storm_exact(model, text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(long_run, "GAIN_ROUNDS", rounds)
        got = value(model, text)
    assert close(got, want), (text, rounds, got, want)


def _two_loops():
    """State 0 picks loop A (0 -> 1 -> 0, rewards 4 and 0: gain 2) or loop B (0 -> 2 with reward 1;
    state 2 pays 2 a step and stays with probability 1/2: two steps there on average, so 5 per 3
    steps: gain 5/3)."""
    # choices: 0: [to 1] r=4, [to 2] r=1; 1: [to 0] r=0; 2: [stay 1/2, back 1/2] r=2
    return SparseMDP.from_arrays([0, 2, 3, 4], [0, 1, 2, 3, 5], [1, 2, 0, 0, 2], [1.0, 1.0, 1.0, 0.5, 0.5],
                                 rewards={"r": np.array([4.0, 1.0, 0.0, 2.0])},
                                 labels={"a": np.array([False, True, False]), "b": np.array([False, False, True])})


def test_hand_computed_gains():
    m = _two_loops()
    # loop A: 4 + 0 over 2 steps = 2; loop B: 1 at state 0, then 2 per step in state 2 for 2 steps on
    # average: (1 + 4) / 3 = 5/3; staying in 2 is not possible forever (it must leave with 1/2)
    assert value(m, 'R{"r"}max=? [LRA]') == 2.0
    assert close(value(m, 'R{"r"}min=? [LRA]'), 5 / 3)
    assert value(m, 'LRAmax=? ["a"]') == 0.5  # loop A: half of the steps in state 1
    assert value(m, 'LRAmin=? ["a"]') == 0.0  # loop B never visits 1
    assert close(value(m, 'LRAmax=? ["b"]'), 2 / 3)
    (p,) = parse(m, 'R{"r"}>=1.9 [LRA]')  # every scheduler: min 5/3 < 1.9
    assert check(m, p).satisfied is False
    (q,) = parse(m, 'LRA<=0.5 ["a"]')
    assert check(m, q).satisfied is True and check(m, q).scheduler is None


def test_transient_rewards_do_not_count():
    """0 -> 1 (reward 100), 1 loops with reward 3 or moves to the absorbing 2 (reward 0)."""
    m = SparseMDP.from_arrays([0, 1, 3, 4], [0, 1, 2, 3, 4], [1, 1, 2, 2], [1.0, 1.0, 1.0, 1.0],
                              rewards={"r": np.array([100.0, 3.0, 0.0, 7.0])})
    assert value(m, 'R{"r"}max=? [LRA]') == 7.0  # the absorbing state's loop pays 7
    assert value(m, 'R{"r"}min=? [LRA]') == 3.0


def test_quotient_has_no_end_component_but_the_sink():
    from mopmc.engine.mec import maximal_end_components

    m = _two_loops()
    ec, gains = long_run.mec_gains(m, np.asarray(m.reward("r")), True)
    q = long_run.quotient(m, ec, gains)
    qec = maximal_end_components(q)
    assert qec.count == 1 and qec.component[q.n_states - 1] == 0
    assert np.allclose(np.add.reduceat(q.probs, q.indptr[:-1]), 1.0)


@pytest.mark.parametrize("engine, device", [("lp", None), ("torch", "cpu")])
def test_every_engine_solves_the_quotient(engine, device):
    pytest.importorskip("torch") if engine == "torch" else None
    m = _two_loops()
    for text in ('R{"r"}max=? [LRA]', 'R{"r"}min=? [LRA]', 'LRAmax=? ["b"]'):
        assert close(value(m, text, engine=engine, device=device), value(m, text)), text


def test_refused_inside_multi_and_by_the_engines():
    m = _two_loops()
    with pytest.raises(PropertyError, match=r"long-run averages are answered as properties of their own"):
        parse(m, 'multi(R{"r"}max=? [LRA], LRAmax=? ["a"])')
    from mopmc.engine.kernel import Engine

    (p,) = parse(m, 'R{"r"}max=? [LRA]')
    with pytest.raises(PropertyError, match="is a long-run average"):
        Engine(m, p.objectives)


def test_cli_shows_and_exports_long_run_averages():
    res = run_mopmc("check", "example:dice", "--prop", 'LRAmax=? ["done"]', "--json")
    assert res.code == 0, res.stderr
    (row,) = json.loads(res.stdout)
    assert row["value"] == 1.0 and row["objectives"][0]["name"] == 'LRA "done"'
    bad = run_mopmc("check", "example:dice", "--prop", 'LRAmax=? ["nope"]')
    assert_one_line_error(bad, "unknown label 'nope'")
    over = run_mopmc("check", "example:dice", "--prop", 'LRA>=1.5 ["done"]')
    assert_one_line_error(over, "outside [0, 1]")


def test_large_end_component_uses_the_lp_and_a_policy_gain():
    """A ring of 300 states, one MEC: forward by 1 or 2 with probability 1/2 each (reward i % 7) or
    back by one (reward (3 i) % 5 / 2): no closed form, the LP's policy and its stationary gain."""
    n = 300
    i = np.arange(n)
    rg = np.arange(0, 2 * n + 1, 2)
    lens = np.ravel(np.column_stack([np.full(n, 2), np.ones(n, np.int64)]))
    indptr = np.r_[0, np.cumsum(lens)]
    fwd = np.sort(np.column_stack([(i + 1) % n, (i + 2) % n]), axis=1)
    targets = np.concatenate([np.r_[f, b] for f, b in zip(fwd, (i - 1) % n)])
    probs = np.tile([0.5, 0.5, 1.0], n)
    r = np.ravel(np.column_stack([i % 7, (3 * i) % 5 / 2])).astype(float)
    m = SparseMDP.from_arrays(rg, indptr, targets, probs, rewards={"r": r})
    ec, gains = long_run.mec_gains(m, r, True)
    assert ec.count == 1
    for text in ('R{"r"}max=? [LRA]', 'R{"r"}min=? [LRA]'):
        want = storm_exact(m, text)
        assert close(value(m, text), want), text
        with pytest.MonkeyPatch.context() as mp:  # the linear program alone
            mp.setattr(long_run, "GAIN_ROUNDS", 0)
            assert close(value(m, text), want), text


def test_policy_iteration_routes_a_multichain_policy_to_its_best_class():
    """Two self-loops (rewards 1 at state 0, 3 at state 1) on a cycle 0 -> 1 -> 2 -> 0 of reward 0,
    one MEC: the greedy start has two closed classes; the better one wins and the other states are
    routed to it."""
    m = SparseMDP.from_arrays([0, 2, 4, 5], [0, 1, 2, 3, 4, 5], [0, 1, 1, 2, 0], [1.0] * 5,
                              rewards={"r": np.array([1.0, 0.0, 3.0, 0.0, 0.0])})
    from mopmc.engine.mec import maximal_end_components

    ec = maximal_end_components(m)
    assert ec.count == 1
    own = np.flatnonzero(ec.choices)
    mec = long_run._Mec(m, own)
    assert long_run._policy_iteration(mec, np.asarray(m.reward("r"))[own]) == 3.0
    assert value(m, 'R{"r"}max=? [LRA]') == 3.0 and value(m, 'R{"r"}min=? [LRA]') == 0.0
