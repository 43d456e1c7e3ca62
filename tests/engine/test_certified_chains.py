"""The certified pieces of the iterative method: Gauss-Seidel chains certified by their residual
(any first guess), the Gauss-Seidel certificate ``T U <= U``, warm starts across the directions of
one engine, and the rule that iterates three-dimensional blocks instead of factoring them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_reference import FAST, random_case, scheduler_values
from mopmc.engine import iterative_kernels as ik
from mopmc.engine.banded import LU_ITERATE, iterate_rather, lu_seconds
from mopmc.engine.kernel import Engine
from mopmc.errors import InfiniteValueError


def _chain(rng, n, leave):
    """A random substochastic chain on n states (CSR, one choice per state) that leaves with
    probability ``leave`` from a third of its states (state 0 among them; every state may step
    down, so it leaves almost surely); ``(ip, tg, pr, P dense)``."""
    ip, tg, pr = [0], [], []
    P = np.zeros((n, n))
    for s in range(n):
        k = int(rng.integers(1, 4))
        t = np.union1d(rng.choice(n, size=min(k, n), replace=False), [max(s - 1, 0)])
        p = rng.dirichlet(np.ones(len(t)))
        if s % 3 == 0:
            p = p * (1.0 - leave)
        tg.extend(t.tolist())
        pr.extend(p.tolist())
        ip.append(len(tg))
        P[s, t] += p
    return np.array(ip, np.int64), np.array(tg, np.int64), np.array(pr), P


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), m=st.integers(1, 3),
       leave=st.sampled_from([1.0, 0.3, 1e-3]), guess=st.sampled_from(["zero", "noise", "far"]))
def test_chain_residual_bounds_contain_the_exact_values_from_any_guess(seed, n, m, leave, guess):
    rng = np.random.default_rng(seed)
    ip, tg, pr, P = _chain(rng, n, leave)
    B = rng.uniform(-1, 1, (n, m))
    pol = np.arange(n, dtype=np.int64)
    exact = np.linalg.solve(np.eye(n) - P, B)
    x = {"zero": np.zeros((n, m)), "noise": exact + rng.normal(0, 1e-3, (n, m)),
         "far": rng.uniform(-1e6, 1e6, (n, m))}[guess]
    t = rng.uniform(0, 10, n)
    rel = np.full(m, 1e-8)
    lo, hi, sweeps, done = ik.chain_residual(pol, ip, tg, pr, B, rel, 1_000_000, 4, x, t, guess != "zero")
    assert done
    slack = 1e-12 * np.maximum(1.0, np.abs(exact))
    assert np.all(lo <= exact + slack) and np.all(exact <= hi + slack)
    assert np.all(hi - lo <= 2e-8 * np.abs(exact).max(axis=0) + 1e-300)


def test_a_guess_that_is_already_the_solution_is_certified_without_a_sweep():
    rng = np.random.default_rng(1)
    ip, tg, pr, P = _chain(rng, 40, 0.3)
    B = rng.uniform(0, 1, (40, 2))
    x = np.linalg.solve(np.eye(40) - P, B)
    t = np.linalg.solve(np.eye(40) - P, np.ones(40))
    lo, hi, sweeps, done = ik.chain_residual(np.arange(40), ip, tg, pr, B, np.full(2, 1e-9), 100, 4, x.copy(), t, True)
    assert done and sweeps == 0
    assert np.all(lo <= x + 1e-12) and np.all(x <= hi + 1e-12)


def test_a_chain_that_never_leaves_is_never_certified():
    # 0 <-> 1, no way out: the expected steps have no supersolution
    ip, tg, pr = np.array([0, 1, 2]), np.array([1, 0]), np.array([1.0, 1.0])
    lo, hi, sweeps, done = ik.chain_residual(np.arange(2), ip, tg, pr, np.ones((2, 1)), np.full(1, 1e-6), 400, 4,
                                             np.zeros((2, 1)), np.zeros(2), False)
    assert not done and sweeps >= 400
    assert np.all(np.isinf(lo)) and np.all(np.isinf(hi))


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), forward=st.booleans())
def test_a_sweep_that_lowers_every_value_certifies_an_upper_bound(seed, n, forward):
    """Where :func:`upper_sweep` says no value rose, Jacobi's ``T U <= U`` holds for the swept U."""
    rng = np.random.default_rng(seed)
    k = rng.integers(1, 3, n)
    rg = np.concatenate(([0], np.cumsum(k))).astype(np.int64)
    ip, tg, pr = [0], [], []
    for _ in range(rg[-1]):
        t = rng.choice(n, size=min(2, n), replace=False)
        tg.extend(t.tolist())
        pr.extend((rng.dirichlet(np.ones(len(t))) * 0.9).tolist())
        ip.append(len(tg))
    ip, tg, pr = np.array(ip, np.int64), np.array(tg, np.int64), np.array(pr)
    b = rng.uniform(0, 1, rg[-1])
    U = np.full(n, 20.0) + rng.uniform(0, 5, n)  # above the optimum (at most 10): sweeps fall
    TU, arg = np.empty(n), np.empty(n, np.int64)
    seen = 0
    for i in range(200):
        if ik.upper_sweep(rg, ip, tg, pr, b, U, forward):
            seen += 1
            assert ik.bellman(rg, ip, tg, pr, b, U + 1e-12 * np.abs(U), TU, arg)
    assert seen > 0


@pytest.mark.parametrize("seed", range(6))
def test_warm_starts_across_directions_stay_sound(seed):
    """One engine, many directions: each result within its bound of its scheduler's exact values,
    and the weighted optimum within the bound of the exact engine's."""
    model, objs, _ = random_case(seed, 120, 3, True, False)
    exact = Engine(model, objs, method="exact")
    try:
        exact.optimise([1.0, 1.0, 1.0])
    except InfiniteValueError:
        pytest.skip("an infinite case")
    it = Engine(model, objs, method="iterative")
    rng = np.random.default_rng(seed)
    for w in [np.ones(3), *rng.uniform(0, 1, (5, 3)), np.array([1.0, 0.0, 0.0])]:
        res, ref = it.optimise(w), exact.optimise(w)
        assert np.all(np.abs(res.values - scheduler_values(model, objs, res)) <= res.error_bound + 1e-9 * np.maximum(1.0, np.abs(res.values)))
        assert ref.weighted <= res.weighted + res.error_bound * np.abs(w).sum() + 1e-9 * max(1.0, abs(ref.weighted))


def test_three_dimensional_blocks_are_iterated_two_dimensional_ones_factored():
    for k in (200, 300, 400, 700):  # (k+1)^2 grids: bandwidth about k
        assert not iterate_rather(k * k, k)
    assert iterate_rather(29_790, 736)  # the 31^3 cube: SuperLU 2.1 s, the iteration 0.8 s
    assert lu_seconds(29_790, 736) > LU_ITERATE
    assert not iterate_rather(10**3, 100)  # a small cube: cheap to factor
    assert iterate_rather(9_260, 341)  # the 21^3 cube: 0.09 s iterated, 1.1 s factored
    assert not iterate_rather(16_494, 231)  # a shared-coin block (K = 8): mixes too slowly to iterate
    assert not iterate_rather(10**6, None)


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), leave=st.sampled_from([1.0, 0.3, 1e-3]))
def test_bicgstab_solves_proper_chains(seed, n, leave):
    rng = np.random.default_rng(seed)
    ip, tg, pr, P = _chain(rng, n, leave)
    rhs = rng.uniform(-1, 1, n)
    exact = np.linalg.solve(np.eye(n) - P, rhs)
    x = np.zeros(n)
    ok = ik.chain_bicgstab(np.arange(n), ip, tg, pr, rhs, x, 1e-12, 10_000)
    assert ok or leave < 0.3  # (well-conditioned chains converge; at 1e-3 one in a few hundred does not)
    if ok:  # the true residual, not only the recurrence's
        assert np.linalg.norm(rhs - (x - P @ x)) <= 1e-10 * max(np.linalg.norm(rhs), 1.0)  # (1e-12 up to rounding)
        residual = rhs - (x - P @ x)
        assert np.abs(residual).max() <= 1e-9 * max(1.0, np.abs(rhs).max())
        np.testing.assert_allclose(x, exact, rtol=1e-6, atol=1e-6 * np.abs(exact).max())


def test_bicgstab_gives_up_when_the_residual_stops_halving():
    """The stall guard: with ``stall = 1`` a solve gives up at the first iteration that does not
    halve the smallest residual norm so far (minus the iterations taken), with 300 the same solves
    converge (the iterations taken, the solution right)."""
    gave_up = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        n = 50
        ip, tg, pr, P = _chain(rng, n, 0.3)
        ptr, mid, ctg, cpr, d = ik._chain_csr(np.arange(n), ip, tg, pr)
        rhs = rng.uniform(-1, 1, n)
        r = np.empty(n)
        ik._lower_solve(ptr, mid, ctg, cpr, 1.0 / d, rhs, r)
        tol = 1e-12 * np.linalg.norm(r)
        strict = ik._bicgstab(ptr, mid, ctg, cpr, d, 1.0 / d, r.copy(), np.zeros(n), tol, 100_000, 1)
        y = np.zeros(n)
        taken = ik._bicgstab(ptr, mid, ctg, cpr, d, 1.0 / d, r.copy(), y, tol, 100_000, 300)
        assert 0 < taken < 100
        assert strict == taken or -taken <= strict < 0
        gave_up += strict < 0
        x = np.empty(n)
        ik._upper_solve(ptr, mid, ctg, cpr, 1.0 / d, y, x)
        np.testing.assert_allclose(x, np.linalg.solve(np.eye(n) - P, rhs), rtol=1e-8, atol=1e-10)
    assert gave_up > 0


def test_bicgstab_refuses_a_chain_that_never_leaves():
    ip, tg, pr = np.array([0, 1, 2]), np.array([1, 0]), np.array([1.0, 1.0])
    x = np.zeros(2)
    assert not ik.chain_bicgstab(np.arange(2), ip, tg, pr, np.ones(2), x, 1e-10, 1000)
    ip, tg, pr = np.array([0, 1]), np.array([0]), np.array([1.0])  # a self-loop: no diagonal left
    assert not ik.chain_bicgstab(np.arange(1), ip, tg, pr, np.ones(1), np.zeros(1), 1e-10, 1000)


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), m=st.integers(1, 3), signed=st.booleans())
def test_krylov_guesses_and_policy_rounds_stay_sound(seed, n, m, signed):
    """The large-block path (BiCGSTAB first guesses, rounds of policy iteration raising the start)
    forced on small random MDPs: bounds as sound as the plain iteration's."""
    import mopmc.engine.iterative as itm

    model, objs, w = random_case(seed, n, m, True, signed)
    try:
        exact = Engine(model, objs, method="exact").optimise(w)
    except InfiniteValueError:
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(itm, "KRYLOV_STATES", 1)
        res = Engine(model, objs, method="iterative").optimise(w)
    assert np.all(np.abs(res.values - scheduler_values(model, objs, res)) <= res.error_bound + 1e-9 * np.maximum(1.0, np.abs(res.values)))
    assert exact.weighted <= res.weighted + res.error_bound * np.abs(w).sum() + 1e-9 * max(1.0, abs(exact.weighted))
    assert abs(exact.weighted - res.weighted) <= 1e-6 * max(1.0, np.abs(exact.values).max()) * (1 + np.abs(w).sum())


@settings(max_examples=20, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), m=st.integers(1, 3), signed=st.booleans())
def test_directions_after_the_first_stay_sound_when_their_guess_does_not_certify(seed, n, m, signed):
    """Later directions start from the last one's values; where those do not certify within
    ``WARM_SWEEPS`` (0 here: never), BiCGSTAB solves the chain: bounds as sound."""
    import mopmc.engine.iterative as itm

    model, objs, w = random_case(seed, n, m, True, signed)
    rng = np.random.default_rng(seed)
    directions = [w] + [rng.uniform(-1, 1, m) if signed else rng.uniform(0, 1, m) for _ in range(2)]
    exact_engine = Engine(model, objs, method="exact")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(itm, "KRYLOV_STATES", 1)
        mp.setattr(itm, "WARM_SWEEPS", 0)
        eng = Engine(model, objs, method="iterative")
        for d in directions:
            try:
                exact = exact_engine.optimise(d)
            except InfiniteValueError:
                return
            res = eng.optimise(d)
            bound = res.error_bound + 1e-9 * np.maximum(1.0, np.abs(res.values))
            assert np.all(np.abs(res.values - scheduler_values(model, objs, res)) <= bound)
            assert exact.weighted <= res.weighted + res.error_bound * np.abs(d).sum() + 1e-9 * max(1.0, abs(exact.weighted))


def test_a_cube_pareto_direction_whose_guess_does_not_certify_is_solved_by_bicgstab(tmp_path, monkeypatch):
    """On a cube (one slowly mixing block) the second direction's guess, the first one's values,
    does not certify within 0 sweeps: the chain is solved by BiCGSTAB instead, and the values are
    the exact solver's within their bounds."""
    import mopmc.engine.banded as banded
    import mopmc.engine.iterative as itm
    from mopmc.engine.iterative import IterativeBlock

    from mopmc.examples.scalable import cube
    from mopmc.io.load import load

    second = 'rewards "s"\n  [a] true : 2;\n  [b] true : 1;\n  [c] true : 1.5;\nendrewards\n'
    path = tmp_path / "cube.prism"
    path.write_text(cube(6) + second)
    loaded = load(path, properties='multi(R{"r"}min=? [F "goal"], R{"s"}min=? [F "goal"])')
    model, objs = loaded.model, loaded.properties()[0].objectives
    monkeypatch.setattr(banded, "LU_ITERATE", 0.0)
    monkeypatch.setattr(banded, "SEPARATOR_SHARE", 0.0)
    monkeypatch.setattr(itm, "KRYLOV_STATES", 1)
    monkeypatch.setattr(itm, "WARM_SWEEPS", 0)
    calls = []  # (warm, max_sweeps, columns) of each chain
    real = IterativeBlock._chain
    monkeypatch.setattr(IterativeBlock, "_chain", lambda self, pol, B, tau, guess, warm, max_sweeps=None, steps=True:
                        calls.append((warm, max_sweeps, B.shape[1])) or real(self, pol, B, tau, guess, warm, max_sweeps, steps))
    eng = Engine(model, objs, method="auto")
    assert eng.n_iterative == 1
    exact = Engine(model, objs, method="exact")
    for w in ([1.0, 0.0], [0.3, 0.7], [0.0, 1.0]):
        res, ref = eng.optimise(np.array(w)), exact.optimise(np.array(w))
        assert ref.weighted <= res.weighted + res.error_bound * sum(w) + 1e-9 * abs(ref.weighted)
        assert abs(ref.weighted - res.weighted) <= 1e-6 * abs(ref.weighted)
    # a later direction's warm chain (0 sweeps) did not certify, and a cold one (BiCGSTAB) followed
    assert any(a == (True, 0, 3) and b[0] is False and b[2] == 3 for a, b in zip(calls, calls[1:]))


def _cube_model(k):
    from mopmc.examples.scalable import cube
    from mopmc.io.load import load

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cube.prism"
        path.write_text(cube(k))
        loaded = load(path, properties='R{"r"}max=? [F "goal"]')
        return loaded.model, loaded.properties()[0]


def test_a_cube_is_iterated_and_a_spent_budget_leaves_it_to_the_exact_solver(monkeypatch):
    """With the gate lowered a small cube takes the iterative path (values within their bound of
    the exact ones); with a budget of 3 sweeps it is factored after all, exactly, and stays so."""
    import mopmc.engine.banded as banded
    import mopmc.engine.kernel as kernel
    from mopmc.queries.single import check

    model, prop = _cube_model(6)
    exact = check(model, prop, method="exact")
    monkeypatch.setattr(banded, "LU_ITERATE", 0.0)
    monkeypatch.setattr(banded, "SEPARATOR_SHARE", 0.0)
    iterated = check(model, prop)
    assert iterated.error_bound > 0.0
    assert abs(iterated.value - exact.value) <= iterated.error_bound + 1e-9 * exact.value
    monkeypatch.setattr(kernel, "iteration_budget", lambda n, b, t: 3)
    spent = check(model, prop)
    assert spent.error_bound == 0.0
    assert spent.value == pytest.approx(exact.value, rel=1e-12)
