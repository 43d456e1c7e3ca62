"""Scheduler evaluation (induced chain, sparse solve), mixing, and scheduler-file round trips,
checked against the kernel, the LP engine and Storm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from strategies import random_mdps
from support import SWITCH_REWARDS as REWARDS, shared_model, switch_objectives
from mopmc.design.build import build_design
from mopmc.design.spec import load_design
from mopmc.engine.evaluate import Mixture, Policy, evaluate, induced_chain
from mopmc.engine.lp import lp_optimise
from mopmc.engine.mixing import randomise
from mopmc.engine.oracle import kernel_oracle
from mopmc.errors import InfiniteValueError, SchedulerError
from mopmc.io.scheduler_file import read_scheduler, runtime_binding, write_scheduler
from mopmc.io.storm_check import induced_dtmc, storm_chain_values
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective
from mopmc.queries.convex import convex_query, mixture_of
from mopmc.queries.switch_strategies import switch_strategy

@pytest.fixture(scope="module")
def switch():
    return build_design("paper-switch").model


SMALL_N = 6  # the switch over 6 rounds: same structure, a small chain (fast file round trips)


@pytest.fixture(scope="module")
def small():
    return build_design("paper-switch", n=SMALL_N).model


@pytest.fixture(scope="module")
def soft(small):
    objs = switch_objectives((1.9, 0.22, 0.169, 0.035))
    return objs, convex_query(small, objs, "mse", soft=True, eps_rel=1e-6)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_mdps(max_states=10))
def test_kernel_schedulers_evaluate_to_their_values(model):
    objs = (Objective(0, 'P>=0.1 [F "a"]', "probability", "max", right_text='"a"', comparison=">=", threshold=0.1),
            Objective(1, 'P<=0.9 [G "b"]', "probability", "min", right_text='!("b")', negated=True, comparison="<=", threshold=0.9),
            Objective(2, 'P>=0.1 ["b" U "a"]', "probability", "max", left_text='"b"', right_text='"a"', comparison=">=", threshold=0.1))
    oracle = kernel_oracle(model, objs)
    for w in (np.array([1.0, 0.0, 0.0]), np.array([0.3, -0.5, 0.2]), np.array([-1.0, 1.0, 1.0])):
        v = oracle(w)
        ev = evaluate(model, v.scheduler, objs)
        np.testing.assert_allclose(ev.values, v.point, atol=1e-9)
        assert w @ ev.values == pytest.approx(lp_optimise(model, objs, w).value, abs=1e-7)


def test_mixture_and_randomised_on_a_memory_product():
    # two targets: the kernel's schedulers carry goal memory; the mixture and its randomised
    # version (on the product) reach the mixed point
    model = SparseMDP.from_arrays([0, 2, 4, 5, 6], [0, 1, 2, 4, 5, 6, 7], [1, 2, 3, 0, 2, 3, 2],
                                  [1, 1, 0.5, 0.5, 1, 1, 1], labels={"a": [0, 1, 0, 0], "b": [0, 0, 1, 0]})
    objs = (Objective(0, 'P>=0.1 [F "a"]', "probability", "max", right_text='"a"', comparison=">=", threshold=0.1),
            Objective(1, 'P>=0.1 [F "b"]', "probability", "max", right_text='"b"', comparison=">=", threshold=0.1))
    oracle = kernel_oracle(model, objs)
    a, b = oracle(np.array([1.0, 0.0])), oracle(np.array([0.0, 1.0]))
    mix = Mixture(np.array([0.4, 0.6]), (Policy.of(a.scheduler), Policy.of(b.scheduler)))
    want = 0.4 * a.point + 0.6 * b.point
    np.testing.assert_allclose(evaluate(model, mix, objs).values, want, atol=1e-12)
    rnd = randomise(model, mix)
    assert rnd.policy is not None
    np.testing.assert_allclose(evaluate(model, rnd.policy, objs).values, want, atol=1e-12)


def test_induced_chain_hash_set_path_equals_the_bit_table(monkeypatch):
    """Key spaces above the bit-table limit explore with a hash set: the same chain."""
    import mopmc.engine.evaluate as ev_mod

    from mopmc.examples import files
    from mopmc.io.load import load

    loaded = load(files.mini_switch, properties='R{"ctrl_cost"}min=? [C]')
    model, objs = loaded.model, loaded.properties()[0].objectives
    policy = Policy.of(kernel_oracle(model, objs)(np.array([1.0])).scheduler)
    table = induced_chain(model, policy, objs)
    monkeypatch.setattr(ev_mod, "_TABLE_LIMIT", 0)
    hashed = induced_chain(model, policy, objs)
    assert len(table.keys) > 10
    np.testing.assert_array_equal(table.keys, hashed.keys)
    assert (table.q != hashed.q).nnz == 0 and np.array_equal(table.rewards, hashed.rewards)


def test_randomise_refuses_what_needs_memory():
    # state 0: loop forever (nothing) or collect 1 and stop; half/half is not memoryless
    model = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1, 1, 1], rewards={"r": [0.0, 1.0, 0.0]})
    objs = (Objective(0, 'R{"r"}>=0 [C]', "total_reward", "max", "r", comparison=">=", threshold=0.0),)
    stay = Policy(np.array([0, 1]), np.zeros(2, np.int64), np.arange(3), np.array([0, 2]), np.ones(2), np.zeros((0, 2), bool))
    go = Policy(np.array([0, 1]), np.zeros(2, np.int64), np.arange(3), np.array([1, 2]), np.ones(2), np.zeros((0, 2), bool))
    mix = Mixture(np.array([0.5, 0.5]), (stay, go))
    assert evaluate(model, mix, objs).values[0] == pytest.approx(0.5)
    rnd = randomise(model, mix)
    assert rnd.policy is None and "stays forever" in rnd.reason


def test_infinite_values_and_missing_entries():
    model = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1, 1, 1], rewards={"r": [1.0, 1.0, 0.0]})
    objs = (Objective(0, 'R{"r"}max=? [C]', "total_reward", "max", "r"),)
    loop = Policy(np.array([0]), np.zeros(1, np.int64), np.arange(2), np.array([0]), np.ones(1), np.zeros((0, 2), bool))
    assert evaluate(model, loop, objs).values[0] == np.inf
    empty = Policy(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64),
                   np.zeros(0), np.zeros((0, 2), bool))
    with pytest.raises(SchedulerError, match="no entry"):
        evaluate(model, empty, objs)
    ev = evaluate(model, empty, objs, missing="first")
    assert ev.values[0] == np.inf and ev.defaulted == 1


@pytest.mark.parametrize("name, conf", [("c1", 1), ("c2", 2), ("c3", 3), ("c4", 4), ("unif", "uniform")])
def test_switch_strategies_match_storm_on_the_reference_files(switch, name, conf, tmp_path):
    import stormpy

    text = shared_model(f"switch-table3/switch_model_{name}.prism").read_text()
    # "leave the secondary as soon as allowed": re_s at ss=5 only while the lock holds
    old = "[re_s] ss=5 -> (ss'=1);"
    assert old in text
    path = tmp_path / "m.prism"
    path.write_text(text.replace(old, "[re_s] ss=5 & cc<MIN_CC -> (ss'=1);"))
    prog = stormpy.parse_prism_program(str(path))
    props = stormpy.parse_properties(";".join(f'R{{"{r}"}}min=? [C]; R{{"{r}"}}max=? [C]' for r in REWARDS), prog)
    built = stormpy.build_model(prog, props)
    vals = [stormpy.model_checking(built, p, only_initial_states=True).get_value(built.initial_states[0]) for p in props]
    lo, hi = np.array(vals[::2]), np.array(vals[1::2])
    np.testing.assert_allclose(lo, hi, atol=1e-12)  # no nondeterminism left
    ours = evaluate(switch, switch_strategy(switch, conf), switch_objectives((1, 1, 1, 1))).values
    np.testing.assert_allclose(ours, lo, atol=1e-10)


def test_convex_scheduler_round_trip_storm_and_lp(small, soft, tmp_path):
    switch = small
    objs, res = soft
    mix = mixture_of(res)
    rnd = randomise(switch, mix)
    assert rnd.policy is not None
    tol = 1e-7
    np.testing.assert_allclose(evaluate(switch, mix, objs).values, res.point, atol=tol)
    path = write_scheduler(tmp_path / "s.json", switch, objs, res.point, rnd.policy)
    back, meta = read_scheduler(path, switch)
    assert meta["kind"] == "randomised" and meta["point"] == pytest.approx(res.point.tolist())
    chain = induced_chain(switch, back, objs)
    # Storm on the induced Markov chain of the file's scheduler
    np.testing.assert_allclose(storm_chain_values(chain, objs), res.point, atol=tol)
    # the LP engine with the scheduler fixed: the occupation polytope of the induced chain is one point
    dtmc = induced_dtmc(chain, objs)
    chain_objs = [Objective(i, f'R{{"o{i}"}}max=? [C]', "total_reward", "max", f"o{i}") for i in range(4)]
    np.testing.assert_allclose(lp_optimise(dtmc, chain_objs, np.ones(4)).point, res.point, atol=tol)
    # the mixture file evaluates to the same point
    mpath = write_scheduler(tmp_path / "m.json", switch, objs, res.point, mix)
    np.testing.assert_allclose(evaluate(switch, read_scheduler(mpath, switch)[0], objs).values, res.point, atol=tol)


def test_runtime_loads_the_exported_switch_scheduler(small, soft, tmp_path):
    switch = small
    from mopmc.runtime.scheduler import load_scheduler

    objs, res = soft
    rnd = randomise(switch, mixture_of(res))
    binding = runtime_binding(load_design("paper-switch"))
    path = write_scheduler(tmp_path / "rt.json", switch, objs, res.point, rnd.policy, binding=binding, runtime=True)
    loaded = load_scheduler(path)
    assert loaded.kind == "randomised" and len(loaded.choose[0]) == SMALL_N
    dist = dict(loaded.configuration_distribution(0, 0, 0))
    assert sum(dist.values()) == pytest.approx(1.0)
    # decision points only: the interleaving states are left out, so evaluate with missing="first"
    back, _ = read_scheduler(path, switch)
    ev = evaluate(switch, back, objs, missing="first")
    np.testing.assert_allclose(ev.values, res.point, atol=1e-7)


def test_read_rejects_another_model(small, soft, tmp_path):
    switch = small
    objs, res = soft
    path = write_scheduler(tmp_path / "s.json", switch, objs, res.point, mixture_of(res))
    other = build_design("paper-switch", n=3).model
    assert other.n_states != switch.n_states
    with pytest.raises(SchedulerError, match="states"):
        read_scheduler(path, other)


def test_infinite_direction_is_an_error_in_evaluate_chain():
    model = SparseMDP.from_arrays([0, 1], [0, 1], [0], [1.0], rewards={"r": [-1.0]})
    objs = (Objective(0, 'R{"r"}max=? [C]', "total_reward", "max", "r"),)
    pol = Policy(np.array([0]), np.zeros(1, np.int64), np.arange(2), np.array([0]), np.ones(1), np.zeros((0, 1), bool))
    assert evaluate(model, pol, objs).values[0] == -np.inf
    with pytest.raises(InfiniteValueError):
        kernel_oracle(model, objs)(np.array([1.0]))
