"""Step-bounded objectives (F<=k, U[l,u], C<=k, X): the step-counting product, checked against Storm
(upper bounds, single and multi-objective) and against a finite-horizon dynamic program written
here (lower bounds, which Storm's sparse engine refuses)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strategies import random_mdps
from support import assert_one_line_error, run_mopmc
from mopmc.errors import PropertyError, UnsupportedModelError
from mopmc.io import storm
from mopmc.io.storm_check import storm_values
from mopmc.model.unfold import MAX_STEPS, STEP_VARIABLE, unfold_steps
from mopmc.properties.parse import parse_properties
from mopmc.queries.dispatch import multi_query
from mopmc.queries.single import check

ENGINES = [("kernel", None), ("lp", None), ("torch", "cpu")]
SLOW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse(model, text):
    return parse_properties(storm.parse_formulas(text, None, "<test>"), model.rewards, model.labels)


def value(model, text, engine="kernel", device=None):
    (p,) = parse(model, text)
    return check(model, p, engine=engine, device=device).value


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


# ------------------------------------------------------------------ parsing: the step windows
@pytest.mark.parametrize("text, kind, window", [
    ('Pmax=? [F<=3 "a"]', "probability", (0, 3)),
    ('Pmax=? [F<3 "a"]', "probability", (0, 2)),
    ('Pmax=? [F>=2 "a"]', "probability", (2, None)),
    ('Pmax=? [F>2 "a"]', "probability", (3, None)),
    ('Pmax=? [F[2,4] "a"]', "probability", (2, 4)),
    ('Pmax=? [F=3 "a"]', "probability", (3, 3)),
    ('Pmin=? ["b" U<=(1+2) "a"]', "probability", (0, 3)),
    ('R{"r0"}min=? [C<=4]', "total_reward", (0, 3)),  # the choices at steps 0..3
    ('R{"r0"}min=? [C<4]', "total_reward", (0, 2)),
    ('R{"r0"}min=? [C<=0]', "total_reward", (0, -1)),
    ('R{"r0"}min=? [C]', "total_reward", None),
    ('Pmax=? [F "a"]', "probability", None),
    ('Pmax=? [X "a"]', "probability", (1, 1)),  # phi at step 1
    ('Pmin=? [X !("a" | "b")]', "probability", (1, 1)),
])
def test_step_windows(text, kind, window):
    model = _chain()
    (p,) = parse(model, text)
    o = p.objectives[0]
    assert (o.kind, o.steps) == (kind, window)
    assert "true U" not in o.text  # displayed as F<=k, not Storm's true U<=k


@pytest.mark.parametrize("text, fragment", [
    ('Pmax=? [F[3,1] "a"]', "the step interval [3, 1] is empty"),
    ('Pmax=? [F<0 "a"]', "admits no step"),
    ('R{"r0"}max=? [C<0]', "admits no step"),
    ('Pmax=? [F<=5/2 "a"]', "is not a non-negative integer"),
    ('Pmax=? [F<=-1 "a"]', "is not a non-negative integer"),
    ('Pmax=? [F{"r0"}<=2 "a"]', "reward- and time-bounded"),
    ('R{"r0"}max=? [I=2]', "instantaneous rewards"),
    ('R{"r0"}max=? [F<=2 "a"]', "step-bounded reachability reward"),
    ('Pmax=? [X X "a"]', 'X "a" is not a state formula'),
    ('Pmax=? [X F "a"]', 'F "a" is not a state formula'),
    ('Pmax=? [X ("b" U "a")]', "is not a state formula"),
])
def test_unsupported_bounds_are_refused(text, fragment):
    with pytest.raises(PropertyError, match=re.escape(fragment)):
        parse(_chain(), text)


def _chain():
    """0 -> 1 -> 2 (absorbing, labelled a); state 0 also has a self-loop choice. Rewards 1 per step."""
    from mopmc.model.sparse_mdp import SparseMDP

    return SparseMDP.from_arrays([0, 2, 3, 4], [0, 1, 2, 3, 4], [1, 0, 2, 2], [1.0, 1.0, 1.0, 1.0],
                                 rewards={"r0": np.array([1.0, 1.0, 1.0, 0.0])},
                                 labels={"a": np.array([0, 0, 1], bool), "b": np.array([1, 1, 0], bool)})


@pytest.mark.parametrize("text, left, right, window", [
    ('Pmax=? [!"a" U<=3 "a"]', '!"a"', '"a"', (0, 3)),
    ('Pmax=? [F<=3 !"b"]', None, '!"b"', (0, 3)),
    ('Pmax=? [F>=2 ("a"|"b")]', None, '"a" | "b"', (2, None)),
    ('Pmax=? [F<=(3+1) "a" & !"b"]', None, '"a" & (!"b")', (0, 4)),
])
def test_boolean_operands(text, left, right, window):
    (p,) = parse(_chain(), text)
    o = p.objectives[0]
    assert (o.left_text, o.right_text, o.steps) == (left, right, window)
    assert o.name.startswith("F" + ("<=" if window[0] == 0 else ">="))


def test_hand_computed_values():
    m = _chain()
    assert value(m, 'Pmax=? [F<=1 "a"]') == 0.0 and value(m, 'Pmax=? [F<=2 "a"]') == 1.0
    assert value(m, 'Pmin=? [F<=5 "a"]') == 0.0  # the self-loop waits forever
    assert value(m, 'Pmax=? [F>=4 "a"]') == 1.0  # once reached, "a" holds at every later step
    assert value(m, 'Pmax=? [F[1,1] "a"]') == 0.0
    assert value(m, 'Pmax=? [X "b"]') == 1.0 and value(m, 'Pmin=? [X "b"]') == 1.0
    assert value(m, 'Pmax=? [X !"b"]') == 0.0
    (x,) = parse(m, 'Pmax=? [X "a"]')
    assert x.objectives[0].name == 'X "a"' and x.objectives[0].text == 'Pmax=? [X "a"]'
    assert value(m, 'R{"r0"}max=? [C<=3]') == 3.0 and value(m, 'R{"r0"}min=? [C<=3]') == 2.0
    assert value(m, 'R{"r0"}max=? [C<=0]') == 0.0


def test_product_shape():
    m = _chain()
    (p,) = parse(m, 'Pmax=? [F<=2 "a"]')
    u, (o,) = unfold_steps(m, p.objectives)
    # layers {0}, {0, 1}, {0, 1, 2} and one sink; acyclic but for the sink's self-loop
    assert u.n_states == 1 + 2 + 3 + 1 and o.steps is None and o.right_text.startswith('"__step0')
    (q,) = parse(m, 'multi(Pmax=? [F<=2 "a"], R{"r0"}min=? [C])')
    u2, objs = unfold_steps(m, q.objectives)
    assert u2.n_states == 1 + 2 + 3 + 3  # layer 3 is the whole reachable model (steps >= 3)
    assert objs[1] is q.objectives[1]  # unbounded objectives are kept
    assert unfold_steps(m, objs[1:]) == (m, objs[1:])  # nothing bounded: nothing unfolded


def test_product_valuations_count_steps():
    from mopmc.model.sparse_mdp import StateValuations

    m = dataclasses.replace(_chain(), valuations=StateValuations(("x",), ("int",), np.array([[0], [1], [2]])))
    (p,) = parse(m, 'Pmax=? [F<=1 "a"]')
    u, _ = unfold_steps(m, p.objectives)
    assert u.valuations.names == ("x", STEP_VARIABLE)
    assert u.valuations.values.tolist() == [[0, 0], [0, 1], [1, 1], [0, -1]]  # the sink has step -1


def test_too_long_a_horizon_is_refused_at_once():
    (p,) = parse(_chain(), f'Pmax=? [F>={MAX_STEPS + 1} "a"]')
    with pytest.raises(UnsupportedModelError, match="use a smaller bound"):
        unfold_steps(_chain(), p.objectives)
    # (a single objective with an upper bound takes k backups, whatever k)
    assert value(_chain(), f'Pmax=? [F<={10 * MAX_STEPS} "a"]') == 1.0


def test_engines_refuse_bounded_objectives_given_directly():
    from mopmc.engine.evaluate import evaluate
    from mopmc.engine.kernel import Engine
    from mopmc.engine.lp import lp_value

    m = _chain()
    (p,) = parse(m, 'Pmax=? [F<=2 "a"]')
    with pytest.raises(PropertyError, match="step-bounded"):
        Engine(m, p.objectives).optimise([1.0])
    with pytest.raises(PropertyError, match="step-bounded"):
        lp_value(m, p.objectives[0])
    (q,) = parse(m, 'Pmax=? [F "a"]')
    optimum = Engine(m, q.objectives).optimise([1.0])
    with pytest.raises(PropertyError, match="step-bounded"):
        evaluate(m, optimum, p.objectives)


# ------------------------------------------------------------------ upper bounds: Storm
@SLOW
@given(model=random_mdps(max_states=10, reward_models=1, negative=False), k=st.integers(0, 6),
       sense=st.sampled_from(["min", "max"]))
def test_upper_bounds_equal_storm(model, k, sense):
    texts = [f'P{sense}=? [F<={k} "a"]', f'P{sense}=? ["b" U<={k} "a"]', f'R{{"r0"}}{sense}=? [C<={k}]',
             f'P{sense}=? [F<{k + 1} "a"]', f'P{sense}=? [X "a"]', f'P{sense}=? [X ("b" & !"a")]']
    expected = storm_values(model, "; ".join(texts))
    for text, want in zip(texts, expected):
        for engine, device in ENGINES:
            got = value(model, text, engine, device)
            assert close(got, want), (text, engine, got, want)


# ------------------------------------------------------------------ the horizon kernel: every state, every step
def _full_backups(model, rewards, steps, lo, hi, maximise, one, zero):
    """The plain backward induction over every state at every step (what the kernel prunes)."""
    v = np.zeros(model.n_states)
    for t in range(steps - 1, -1, -1):
        nxt, v = v, np.zeros(model.n_states)
        for s in range(model.n_states):
            if one[s] and lo <= t <= hi:
                v[s] = 1.0
            elif zero[s]:
                v[s] = 0.0
            else:
                vals = []
                for c in range(model.row_groups[s], model.row_groups[s + 1]):
                    acc = rewards[c]  # (summed in the kernel's order: the values are compared exactly)
                    for k in range(model.indptr[c], model.indptr[c + 1]):
                        acc += model.probs[k] * nxt[model.targets[k]]
                    vals.append(acc)
                v[s] = max(vals) if maximise else min(vals)
    return v


@SLOW
@given(model=random_mdps(max_states=30, max_choices=2, max_successors=2, reward_models=1),
       lo=st.integers(0, 4), width=st.integers(0, 8), maximise=st.booleans(), reward=st.booleans(),
       data=st.data())
def test_horizon_kernel_backs_up_only_what_reaches_the_initial_state(model, lo, width, maximise, reward, data):
    from mopmc.engine import numba_kernels as nk

    n = model.n_states
    hi = lo + width
    if reward:
        rewards = np.asarray(model.reward("r0"), np.float64)
        one = zero = np.zeros(n, np.bool_)
    else:
        rewards = np.zeros(model.n_choices)
        one = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
        zero = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    want = _full_backups(model, rewards, hi + 1, lo, hi, maximise, one, zero)
    for start in {0, n - 1}:
        got = nk.horizon_backups(model.row_groups, model.indptr, model.targets, model.probs, rewards, hi + 1, lo, hi,
                                 maximise, one, zero, start)
        assert got == want[start], (start, got, want[start])


def test_horizon_kernel_on_a_long_chain_reads_only_reachable_layers():
    """A chain 0 -> 1 -> ... -> 999 with reward 1 a step: C<=k collects k from state 0 (and from the
    start of the chain whatever k is past the end: 999)."""
    from mopmc.engine import numba_kernels as nk
    from mopmc.model.sparse_mdp import SparseMDP

    n = 1000
    targets = list(range(1, n)) + [n - 1]
    m = SparseMDP.from_arrays(list(range(n + 1)), list(range(n + 1)), targets, [1.0] * n,
                              rewards={"r": np.r_[np.ones(n - 1), 0.0]})
    no = np.zeros(n, np.bool_)
    r = np.asarray(m.reward("r"), np.float64)
    for k, start, want in ((5, 0, 5.0), (1200, 0, 999.0), (5, 997, 2.0), (0, 0, 0.0)):
        assert nk.horizon_backups(m.row_groups, m.indptr, m.targets, m.probs, r, k, 0, k - 1, True, no, no, start) == want


# ------------------------------------------------------------------ lower bounds: a dynamic program
def _until_dp(model, phi, psi, lo, hi, sense, tail):
    """Optimal P[phi U[lo,hi] psi] from the initial state by backward induction over the steps;
    ``tail[s]`` (when ``hi`` is None) is the unbounded optimum from ``s``, the value at step ``lo``."""
    opt = np.max if sense == "max" else np.min
    last = lo if hi is None else hi

    def step(t, nxt):
        v = np.zeros(model.n_states)
        for s in range(model.n_states):
            if t >= lo and psi[s]:
                v[s] = 1.0
            elif not phi[s] or (hi is not None and t == hi):
                v[s] = 0.0
            elif hi is None and t == lo:
                v[s] = tail[s]
            else:
                vals = []
                for c in range(model.row_groups[s], model.row_groups[s + 1]):
                    a, b = model.indptr[c], model.indptr[c + 1]
                    vals.append(float(np.dot(model.probs[a:b], nxt[model.targets[a:b]])))
                v[s] = opt(vals)
        return v

    v = np.zeros(model.n_states)
    for t in range(last, -1, -1):
        v = step(t, v)
    return v[model.initial]


def _unbounded_from_each_state(model, text):
    return np.array([storm_values(dataclasses.replace(model, initial=s), text)[0] for s in range(model.n_states)])


@SLOW
@given(model=random_mdps(max_states=7, reward_models=1), lo=st.integers(0, 4), width=st.integers(0, 3),
       sense=st.sampled_from(["min", "max"]), until=st.booleans())
def test_lower_bounds_equal_a_dynamic_program(model, lo, width, sense, until):
    a, b = model.labels["a"], model.labels["b"]
    phi = b if until else np.ones(model.n_states, bool)
    left = '"b" U' if until else "F"
    tail = _unbounded_from_each_state(model, f'P{sense}=? [{left} "a"]')
    cases = [(f'P{sense}=? [{left}[{lo},{lo + width}] "a"]', lo, lo + width),
             (f'P{sense}=? [{left}>={lo} "a"]', lo, None)]
    for text, l_, h_ in cases:
        want = _until_dp(model, phi, a, l_, h_, sense, tail)
        for engine, device in ENGINES:
            got = value(model, text, engine, device)
            assert abs(got - want) <= 1e-8, (text, engine, got, want)


# ------------------------------------------------------------------ multi-objective: Storm
@SLOW
@given(model=random_mdps(max_states=8, reward_models=2, negative=False), k=st.integers(1, 5),
       engine=st.sampled_from(ENGINES))
def test_multi_objective_bounded_equals_storm(model, k, engine):
    eng, device = engine
    assume(not model.labels["a"][model.initial])  # (Storm: "currently not implemented")
    numerical = f'multi(Pmax=? [F<={k} "a"], R{{"r0"}}<=2 [C<={k}])'
    (p,) = parse(model, numerical)
    want = storm_values(model, numerical)[0]
    res = multi_query(model, p, engine=eng, device=device, precision=1e-6)
    if isinstance(want, bool) or (isinstance(want, float) and math.isnan(want)):
        assert res.status == "infeasible"
    else:
        assert res.status == "optimal" and abs(res.value - want) <= 1e-4, (res.value, want)
    # achievability a margin away from the optimum: the verdict is certain, and Storm's
    best = res.value if res.status == "optimal" else None
    if best is not None:
        for t, verdict in ((best - 0.05, True), (best + 0.05, False)):
            if 0 < t < 1:
                text = f'multi(P>={t:.6f} [F<={k} "a"], R{{"r0"}}<=2 [C<={k}])'
                (q,) = parse(model, text)
                assert multi_query(model, q, engine=eng, device=device).achievable is verdict
                assert storm_values(model, text)[0] is verdict


# ------------------------------------------------------------------ the command line
DICE = "example:dice"


def test_cli_checks_bounded_properties_and_shows_them():
    res = run_mopmc("check", "example:robot", "--prop", 'Pmax=? [F<=4 "goal"]', "--prop", 'Pmax=? [F "goal"]')
    assert res.code == 0, res.stderr
    assert 'Pmax=? [F<=4 "goal"]' in res.stdout  # (rich would eat "[true U<=4 ...]" as markup)


def test_cli_refuses_exporting_or_evaluating_a_bounded_scheduler(tmp_path):
    out = tmp_path / "s.json"
    res = run_mopmc("check", "example:robot", "--prop", 'Pmax=? [F<=4 "goal"]', "--export-scheduler", str(out))
    assert_one_line_error(res, "step-bounded", "counts steps")
    assert not out.exists()
    good = run_mopmc("check", "example:robot", "--prop", 'Pmax=? [F "goal"]', "--export-scheduler", str(out))
    assert good.code == 0, good.stderr
    res = run_mopmc("evaluate", "example:robot", "--scheduler", str(out), "--prop", 'Pmax=? [F<=4 "goal"]')
    assert_one_line_error(res, "step-bounded", "mopmc check")


def test_json_objectives_carry_their_step_window():
    res = run_mopmc("check", "example:robot", "--prop", 'multi(Pmax=? [F<=4 "goal"], R{"steps"}<=9 [C<7])', "--json")
    assert res.code == 0, res.stderr
    objectives = res.json()[0]["objectives"]
    assert [o.get("steps") for o in objectives] == [[0, 4], [0, 5]]
    assert objectives[0]["formula"] == 'Pmax=? [F<=4 "goal"]'
