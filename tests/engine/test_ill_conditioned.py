"""Ill-conditioned cyclic blocks, found by a differential campaign against Storm's exact engine:
traps left only through steps of probability 1/1000 (condition numbers near 1e14) and walks
whose expected visits reach 1e12. The engines factor ``D - P`` with the diagonal summed from what
each state sends elsewhere, refine SuperLU's solutions with double-double residuals, and fall back
to subtraction-free band elimination where SuperLU meets a zero pivot (mopmc.engine.refine)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import csr_matrix, diags
from scipy.sparse.linalg import splu

from support import assert_one_line_error, run_mopmc
from mopmc.engine.refine import refine
from mopmc.io.load import load
from mopmc.queries.single import check

DATA = Path(__file__).parent / "data"

CASES = [
    # file, property, relative tolerance against Storm's exact value of the rational program
    ("ill_trap_dtmc.nm", 'P=? [F "t"]', 1e-12),  # see test_trap_is_as_close_as_the_doubles_allow
    ("ill_walk_rmin.nm", 'R{"r0"}min=? [C]', 1e-12),
    ("ill_walk_rmin_deep.nm", 'R{"r0"}min=? [C]', 1e-12),
    # a walk that reaches the deadlock x=12 (where y stays 0) with probability about 1 - 1e-15: the
    # policy iteration's 1e-12 margin kept Pmax[G bad] at 1e-15, not 1; graph analysis decides it now
    ("trap_globally.nm", 'Pmax=? [G "bad"]', 1e-12),
    ("trap_globally.nm", 'Pmin=? [F !"bad"]', 1e-12),
    ("trap_globally.nm", 'Pmax=? [F !"bad"]', 1e-12),
    ("trap_globally.nm", 'Pmin=? [G "bad"]', 1e-2),  # 1 - (1 - 1.005e-15) in doubles
    # states left with probability 1e-12 a step: a value through a self-loop divided by 1 minus the
    # loop's double was 2.2e-5 off (1 - fl(1 - 2e-12)), and the cycle's exits taken as 1 minus the
    # rest of their row 8.3e-8; the engines divide by what a choice sends elsewhere, summed, with
    # the probabilities of transitions to removed states kept as the choice's exit mass
    ("rare_exit_loop.nm", 'R{"r"}max=? [C]', 1e-14),
    ("rare_exit_loop.nm", 'R{"r"}max=? [F x>0]', 1e-14),
    ("rare_exit_split.nm", 'Pmax=? [F "one"]', 1e-14),
    ("rare_exit_split.nm", 'R{"r"}max=? [C]', 1e-14),
    ("rare_exit_cycle.nm", 'Pmax=? [F "one"]', 1e-14),
    ("rare_exit_cycle.nm", 'Pmin=? [F "one"]', 1e-14),
    ("rare_exit_cycle.nm", 'R{"r"}max=? [F x>1]', 1e-14),
    ("rare_exit_cycle.nm", 'R{"r"}max=? [C]', 1e-14),
    # found by benchmarks/differential.py: policy iteration stopped where one choice still beat the
    # policy by 0.9 on values of 2.3e12 (a 1e-12 relative margin; 24% below the optimum)
    ("rmax_reach_walk.nm", 'R{"r"}max=? [F "b"]', 1e-14),
    # five steps of probability 1e-12 in a row: the LU's values of a policy held some 1e61 steps were
    # noise (1e-26 for 9/14) though refinement "settled"; such policies go to band elimination
    ("rare_steps_in_a_row.nm", 'Pmax=? [F "done"]', 1e-14),
    ("rare_steps_in_a_row.nm", 'Pmin=? [G !"done"]', 1e-14),
    # the torch engine's dense LU took refinement's result where it had not settled (2.1e27 for 1e30)
    ("torch_dense_lu_walk.nm", 'R{"r"}max=? [C]', 1e-14),
    # long-run averages: I - P with 1 - fl(1 - 1e-12) on the diagonal gave 0.666647 for 2/3
    ("lra_near_one_selfloop.pm", 'LRA=? ["zero"]', 1e-14),
    ("lra_near_one_selfloop.pm", 'R{"r"}=? [LRA]', 1e-14),
    # a long-run quotient whose values of 1e-41 stood for 0: policy iteration cycled among four
    # policies for 10,000 rounds (torch answered 1 for 0, the CPU engine took 6.7 s)
    ("lra_quotient_cycling.nm", 'LRAmin=? [("goal" | "a")]', 1e-14),
]


def storm_exact(path: Path, prop: str) -> float:
    from mopmc.io import storm

    sp = storm.stormpy()
    program = sp.parse_prism_program(str(path))
    props = sp.parse_properties(prop, program)
    model = sp.build_model[sp.Rational](program, props)
    res = sp.model_checking(model, props[0], only_initial_states=True, environment=sp.environments.exact())
    return float(Fraction(str(res.get_value(model.initial_states[0]))))


@pytest.mark.parametrize("engine, device", [("kernel", None), ("torch", "cpu")])
@pytest.mark.parametrize("name, prop, tol", CASES)
def test_equals_storm_exact(name, prop, tol, engine, device):
    if engine == "torch":
        pytest.importorskip("torch")
    path = DATA / name
    want = storm_exact(path, prop)
    loaded = load(path, properties=prop)
    res = check(loaded.model, loaded.properties()[0], engine=engine, device=device)
    assert res.status == "ok", res.message  # (the deep walk was answered -inf: a zero pivot by cancellation)
    assert abs(res.value - want) <= tol * abs(want), (res.value, want)
    if res.scheduler is not None:  # the scheduler achieves the value (its induced chain, exactly)
        from mopmc.engine.evaluate import evaluate

        got = evaluate(loaded.model, res.scheduler, loaded.properties()[0].objectives).values[0]
        assert abs(got - want) <= max(tol * abs(want), 1e-12), (got, want)


def test_trap_is_as_close_as_the_doubles_allow():
    """The trap's chain, solved exactly in rationals on the model's own doubles, with the diagonal as
    the engines take it (what each state sends elsewhere): the engine's value is that to 1e-14, and
    both are Storm's exact value of the rational program to 1e-14. With the diagonal taken as 1 - p
    the doubles' exact answer is 4.4e-4 off (the engine answered that before), and with the diagonal's
    sum rounded to a double in refinement's residuals the engine was 5.9e-8 off (a leak of up to
    half an ulp a step, over the 1e14 steps the trap holds a path)."""
    loaded = load(DATA / "ill_trap_dtmc.nm", properties='P=? [F "t"]')
    m = loaded.model
    target = loaded.properties()[0].objectives[0].target_mask(m)
    value = check(m, loaded.properties()[0]).value
    # states that can reach the target, outside it
    from scipy.sparse.csgraph import breadth_first_order

    soc = m.state_of_choice()
    src = np.repeat(soc, np.diff(m.indptr))
    back = csr_matrix((np.ones(len(src)), (m.targets, src)), shape=(m.n_states,) * 2)
    can = set()
    for t in np.flatnonzero(target):
        can |= set(breadth_first_order(back, t, return_predecessors=False).tolist())
    maybe = [s for s in range(m.n_states) if s in can and not target[s]]
    idx = {s: i for i, s in enumerate(maybe)}
    k = len(maybe)
    a = [[Fraction(0)] * k for _ in range(k)]
    b = [Fraction(0)] * k
    for s in maybe:
        i = idx[s]
        for j in range(m.indptr[m.row_groups[s]], m.indptr[m.row_groups[s] + 1]):
            p, u = Fraction(float(m.probs[j])), int(m.targets[j])
            if u != s:
                a[i][i] += p  # the diagonal: what the state sends elsewhere
            if target[u]:
                b[i] += p
            elif u in idx and u != s:
                a[i][idx[u]] -= p
    exact = float(_solve_rational(a, b)[idx[m.initial]])
    assert abs(value - exact) <= 1e-14 * exact
    assert abs(exact - 1001 / 251001) <= 1e-14 * exact  # Storm's exact value of the rational program


def _solve_rational(a: list, b: list) -> list:
    """``a x = b`` by Gaussian elimination in rationals (``a`` and ``b`` are changed)."""
    k = len(b)
    for c in range(k):
        piv = next(r for r in range(c, k) if a[r][c] != 0)
        a[c], a[piv], b[c], b[piv] = a[piv], a[c], b[piv], b[c]
        for r in range(c + 1, k):
            if a[r][c] != 0:
                f = a[r][c] / a[c][c]
                for cc in range(c, k):
                    a[r][cc] -= f * a[c][cc]
                b[r] -= f * b[c]
    x = [Fraction(0)] * k
    for r in range(k - 1, -1, -1):
        x[r] = (b[r] - sum(a[r][cc] * x[cc] for cc in range(r + 1, k))) / a[r][r]
    return x


def test_lp_engine_names_its_numerical_trouble():
    for name, prop in (("ill_trap_dtmc.nm", 'P=? [F "t"]'), ("ill_walk_rmin_deep.nm", 'R{"r0"}min=? [C]')):
        res = run_mopmc("check", str(DATA / name), "--prop", prop, "--engine", "lp")
        assert_one_line_error(res, "HiGHS reports the occupation LP infeasible, which it is not")


def test_lp_engine_refuses_coefficients_highs_reads_as_zero():
    """HiGHS reads a coefficient below 1e-9 as 0: on a state left with probability 1e-12 a step it
    answered Pmax = 0 for 1 and R max = inf for 1e12, so the program is refused in one line."""
    for name, prop in (("rare_exit_loop.nm", 'R{"r"}max=? [C]'), ("rare_exit_cycle.nm", 'Pmax=? [F "one"]')):
        res = run_mopmc("check", str(DATA / name), "--prop", prop, "--engine", "lp")
        assert_one_line_error(res, "below the 1e-09 under which HiGHS reads one as 0", "--engine kernel")


def test_objective_values_beyond_the_lp_solvers_range_are_named():
    """An objective of 1e20 in ``multi(...)``: HiGHS reads it as infinite; one line, not a crash."""
    res = run_mopmc("check", str(DATA / "multi_huge_total.nm"), "--prop", 'multi(Pmax=? [F "t"], R{"r"}<=15 [C])')
    assert_one_line_error(res, "values reach 1e+20", "HiGHS reads numbers from 1e20 on as infinite")


def test_exit_mass_is_what_the_dropped_transitions_carried():
    """Restricting a problem keeps, per choice, the probabilities of the transitions it dropped
    (the terminal's), and the engines divide a self-loop's value by what its choice sends
    elsewhere: 2e-12 here exactly, where 1 - fl(1 - 2e-12) is 2.00018e-12."""
    from mopmc.engine.problem import Problem, denominators, exit_mass, permute, restrict

    p_self = 999999999998 / 1000000000000
    # state 0: one choice, a self-loop and 1e-12 to each of states 1 and 2 (absorbing)
    p = Problem(np.array([0, 1, 2, 3]), np.array([0, 3, 4, 5]), np.array([0, 1, 2, 1, 2]),
                np.array([p_self, 1e-12, 1e-12, 1.0, 1.0]), np.zeros((3, 1)), np.zeros(3, bool), 0)
    assert exit_mass(p).tolist() == [0.0, 0.0, 0.0]
    assert denominators(p).tolist() == [2e-12, 0.0, 0.0]  # (1 and 2 only loop: never divided by)
    q = restrict(p, np.array([True, True, False])).problem  # state 2 goes: its 1e-12 to the terminal
    assert q.exits.tolist() == [True, False] and q.exit_mass.tolist() == [1e-12, 0.0]
    assert denominators(q)[0] == 2e-12 != 1.0 - p_self
    r = permute(q, np.array([1])).problem  # and state 0 too: the mass adds up
    assert r.exit_mass.tolist() == [0.0]
    r = permute(q, np.array([0])).problem
    assert r.exit_mass.tolist() == [2e-12] and denominators(r)[0] == 2e-12


def test_refine_settles_on_a_well_conditioned_system_and_fixes_an_ill_conditioned_one():
    rng = np.random.default_rng(3)
    n = 60
    p = csr_matrix(rng.random((n, n)) * (rng.random((n, n)) < 0.1))
    p = csr_matrix(p.multiply(1.0 / (np.asarray(p.sum(axis=1)).ravel()[:, None] * 1.25 + 1e-300)))
    d = np.ones(n)
    b = rng.random(n)
    lu = splu((diags(d) - p).tocsc())
    x, settled = refine(lu.solve, p, d, b, lu.solve(b))
    assert settled and np.allclose((diags(d) - p) @ x, b, rtol=0, atol=1e-14)
    # a chain 0 <-> 1 <-> ... <-> 29 that leaves only from 0, with probability 1e-13 a step
    n = 30
    rows = np.r_[np.arange(1, n), np.arange(n - 1)]
    cols = np.r_[np.arange(n - 1), np.arange(1, n)]
    vals = np.r_[np.full(n - 1, 0.5), np.full(n - 1, 0.5)]
    p = csr_matrix((vals, (rows, cols)), shape=(n, n))
    d = np.asarray(p.sum(axis=1)).ravel()
    d[0] += 1e-13  # the way out
    b = np.ones(n)
    lu = splu((diags(d) - p).tocsc())
    x0 = lu.solve(b)
    x, settled = refine(lu.solve, p, d, b, x0)
    # expected steps to leave, exactly in rationals
    a = [[Fraction(0)] * n for _ in range(n)]
    for i in range(n):
        a[i][i] = Fraction(float(d[i]))
    for r, c, v in zip(rows, cols, vals):
        a[r][c] -= Fraction(float(v))
    want = np.array([float(v) for v in _solve_rational(a, [Fraction(1)] * n)])
    assert settled
    assert np.max(np.abs(x - want) / want) <= 1e-14  # (the LU alone: 5.8e-12)
