"""Large banded cyclic blocks: subtraction-free band elimination (mopmc.engine.banded) against Storm's
exact engine, against the engines' own sparse LU on random MDPs, and against exact rational solves."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_reference import FAST, random_case, random_mdp, total_objectives, zero_end_components
from storm_reference import storm_exact
from mopmc.engine.banded import GthBand, band_order
from mopmc.examples.scalable import grid, walk
from mopmc.engine.iterative import IterativeBlock
from mopmc.engine.kernel import Engine
from mopmc.engine.policy_iteration import CyclicBlock
from mopmc.errors import InfiniteValueError

PROPS = ['Pmin=? [F "goal"]', 'R{"r"}min=? [F "goal"]', 'R{"r"}max=? [F "goal"]']


@pytest.mark.parametrize("engine", ["kernel", "torch"])
@pytest.mark.parametrize("text", [walk(1500), walk(800, "0.55", "0.45"), grid(14)],
                         ids=["walk-half", "walk-uneven", "grid"])
def test_large_banded_blocks_equal_storm_exact(tmp_path, text, engine):
    """The one cyclic block is above the size limit of sparse LU here: before, it went to value
    iteration (about n^2 sweeps on a random walk); now it is solved exactly in its band."""
    from mopmc.io.load import load
    from mopmc.queries.single import _kernel_value

    if engine == "torch":
        pytest.importorskip("torch")
        from mopmc.engine.torch_engine import TorchEngine

        make, options = TorchEngine, {"device": "cpu", "sparse_limit": 10}
    else:
        make, options = Engine, {"size_limit": 10}
    path = tmp_path / "m.prism"
    path.write_text(text)
    want = storm_exact(path, ";".join(PROPS))
    for prop, ref in zip(PROPS, want):
        o = load(path, properties=prop).properties()[0].objectives[0]
        loaded = load(path, properties=prop)
        value, _, bound = _kernel_value(loaded.model, o, options, make)
        assert bound == 0.0
        assert value == pytest.approx(ref, rel=1e-12), prop
    if engine == "kernel":  # the block did take the banded path, and goes to iteration without it
        objs = load(path, properties=PROPS[2]).properties()[0].objectives
        eng = Engine(loaded.model, objs, size_limit=10)
        blocks = [b for b in eng.blocks if b is not None]
        assert len(blocks) == 1 and isinstance(blocks[0], CyclicBlock) and blocks[0].banded is not None
        assert Engine(loaded.model, objs, size_limit=10, band_budget=0).n_iterative == 1


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), m=st.integers(1, 3), finite=st.booleans(),
       signed=st.booleans())
def test_band_elimination_equals_sparse_lu_on_random_mdps(seed, n, m, finite, signed):
    """Every cyclic block through band elimination (``size_limit=0``) against SuperLU
    (``method="exact"``): the same optimum, the same infinite directions."""
    model, objs, w = random_case(seed, n, m, finite, signed)
    try:
        exact = Engine(model, objs, method="exact").optimise(w)
    except InfiniteValueError:
        with pytest.raises(InfiniteValueError):
            Engine(model, objs, size_limit=0).optimise(w)
        return
    eng = Engine(model, objs, size_limit=0)
    assert eng.n_iterative == 0  # every block fits its band at these sizes
    res = eng.optimise(w)
    assert res.error_bound == 0.0
    assert res.weighted == pytest.approx(exact.weighted, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(res.values, exact.values, rtol=1e-9, atol=1e-9)


def _walk(n: int, up: Fraction):
    """A walk on 0..n-1 (up with ``up``, down otherwise, staying at 0), leaving from n-1 upwards."""
    rows, cols, probs = [], [], []
    for i in range(n):
        if i + 1 < n:
            rows.append(i), cols.append(i + 1), probs.append(up)
        rows.append(i), cols.append(max(i - 1, 0)), probs.append(1 - up)
    leave = [Fraction(0)] * n
    leave[-1] = up
    return rows, cols, probs, leave


def _exact_tridiagonal(n, rows, cols, probs, leave, rhs):
    """(I - P) x = rhs in rational arithmetic (Thomas algorithm; P tridiagonal)."""
    lo, di, up = [Fraction(0)] * n, [Fraction(1)] * n, [Fraction(0)] * n
    for r, c, p in zip(rows, cols, probs):
        if c == r:
            di[r] -= p
        elif c == r + 1:
            up[r] -= p
        else:
            lo[r] -= p
    d, y = list(di), list(rhs)
    for i in range(1, n):
        f = lo[i] / d[i - 1]
        d[i] -= f * up[i - 1]
        y[i] -= f * y[i - 1]
    x = [Fraction(0)] * n
    for i in range(n - 1, -1, -1):
        x[i] = (y[i] - (up[i] * x[i + 1] if i + 1 < n else 0)) / d[i]
    return x


@pytest.mark.parametrize("up", [Fraction(1, 2), Fraction(9, 20), Fraction(1, 3)])
@pytest.mark.parametrize("reverse", [False, True])
def test_band_elimination_is_accurate_entry_by_entry(up, reverse):
    """A 300-state walk whose hitting times reach 10^4 and more: every entry of the solution within
    a few ulp of the exact rational one, in either elimination direction."""
    n = 300
    rows, cols, probs, leave = _walk(n, up)
    rhs = [Fraction(1)] * n  # expected steps to leave
    exact = np.array([float(v) for v in _exact_tridiagonal(n, rows, cols, probs, leave, rhs)])
    perm = np.arange(n)[::-1].copy() if reverse else np.arange(n)
    where = np.empty(n, np.int64)
    where[perm] = np.arange(n)
    r, c = where[np.array(rows)], where[np.array(cols)]
    lu = GthBand(n, 1, r, c, np.array([float(p) for p in probs]), np.array([float(v) for v in leave])[perm])
    x = np.empty(n)
    x[perm] = lu.solve(np.ones(n))
    assert exact.max() > 1e4
    np.testing.assert_allclose(x, exact, rtol=1e-13)


def test_a_closed_part_is_a_zero_pivot():
    # 0 <-> 1 forever, 2 leaves: singular, as SuperLU reports it
    with pytest.raises(RuntimeError, match="never left"):
        GthBand(3, 1, np.array([0, 1, 2]), np.array([1, 0, 1]), np.array([1.0, 1.0, 0.5]), np.array([0.0, 0.0, 0.5]))


def test_band_order_budget():
    n = 1000
    rows = np.arange(n - 1)
    cols = rows + 1
    perm, b = band_order(n, rows, cols)
    assert sorted(perm.tolist()) == list(range(n)) and b == 1
    assert band_order(n, rows, cols, budget=2 * n) is None  # n (2b + 1) = 3n
    # a dense block: b = n - 1, beyond the operations budget
    full = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    assert band_order(n, *full, flops=10**8) is None


def test_method_auto_sends_only_blocks_beyond_the_band_to_iteration():
    m = zero_end_components(random_mdp(np.random.default_rng(5), 40, 1, zero_frac=0.5))
    objs = total_objectives(1, ["max"])
    assert Engine(m, objs, size_limit=0).n_iterative == 0
    assert Engine(m, objs, size_limit=0, band_budget=0).n_iterative > 0
    assert all(isinstance(b, (IterativeBlock, type(None))) for b in Engine(m, objs, size_limit=0, band_budget=0).blocks)


def test_an_ill_conditioned_walk_gets_its_policy_value_to_the_last_digits(tmp_path):
    """An 800-state walk drifting away from its goal: expected rewards near 1e71 (condition about
    as large). The kernel's value (its block is within SuperLU's size limit, and banded cheaply)
    is the exact value of the scheduler it returns, to 1e-12; SuperLU's was 2.9e16 (it loses
    about eps * condition). The optimum over schedulers is 9% higher (Storm exact: 3.15e71): the
    better choices gain O(1) on values of 1e71, below what a float64 engine can see."""
    from mopmc.io.load import load
    from mopmc.queries.single import _kernel_value

    n = 800
    path = tmp_path / "m.prism"
    path.write_text(walk(n, "0.45", "0.55"))
    loaded = load(path, properties='R{"r"}max=? [F "goal"]', valuations=True)
    model, o = loaded.model, loaded.properties()[0].objectives[0]
    value, sched, bound = _kernel_value(model, o, {})
    assert bound == 0.0
    # the returned scheduler's exact value: its chain over s = 0..n-1 in rational arithmetic, with the
    # model's probabilities (the doubles nearest 0.45 and 0.55 sum to 1 + 2^-54, a leak that alone
    # would cap the values near 2^54)
    s_of = model.valuations.values[:, list(model.valuations.names).index("s")]
    chosen = sched.lookup()  # (state, goal memory) -> choice; before the goal the memory is 0
    rows, cols, probs, reward = [], [], [], [Fraction(0)] * n
    leave = [Fraction(0)] * n
    rw = model.rewards["r"]
    for state in range(model.n_states):
        s = int(s_of[state])
        if s == n:
            continue
        c = chosen[(state, 0)]
        reward[s] = Fraction(float(rw[c]))
        for k in range(model.indptr[c], model.indptr[c + 1]):
            t, p = int(s_of[model.targets[k]]), Fraction(float(model.probs[k])).limit_denominator(1000)  # 9/20, not the double
            if t == n:
                leave[s] += p
            else:
                rows.append(s), cols.append(t), probs.append(p)
    exact = float(_exact_tridiagonal(n, rows, cols, probs, leave, reward)[int(s_of[model.initial])])
    assert exact > 1e70
    assert value == pytest.approx(exact, rel=1e-12)


def test_a_grid_like_block_beyond_the_band_goes_to_superlu_not_iteration(tmp_path):
    """Above the size limit, a block whose band factors do not fit (here: a budget of 1 number) but
    whose n b is within LU_GATE is factored by SuperLU in its own order (a 160,000-state grid: 98 s
    by value iteration before, 4.8 s now); with the band path off (budget 0) it iterates as before."""
    from mopmc.io.load import load
    from mopmc.queries.single import _kernel_value

    path = tmp_path / "g.prism"
    path.write_text(grid(14))
    prop = 'R{"r"}min=? [F "goal"]'
    (want,) = storm_exact(path, prop)
    loaded = load(path, properties=prop)
    o = loaded.properties()[0].objectives[0]
    value, _, bound = _kernel_value(loaded.model, o, {"size_limit": 10, "band_budget": 1})
    assert bound == 0.0 and value == pytest.approx(want, rel=1e-12)
    eng = Engine(loaded.model, (o,), size_limit=10, band_budget=1, allow_stay=False)
    blocks = [b for b in eng.blocks if b is not None]
    assert eng.n_iterative == 0 and all(isinstance(b, CyclicBlock) and b.banded is None for b in blocks)
    assert Engine(loaded.model, (o,), size_limit=10, band_budget=0, allow_stay=False).n_iterative == len(blocks)


def test_probability_one_by_the_graph_is_exactly_one(tmp_path):
    """Where the graph decides it (every or some scheduler reaches the goal almost surely), the
    value is exactly 1, as Storm's precomputation gives it; SuperLU's solve of this 10,000-state
    grid gave 1 - 2.7e-14. Values the graph does not decide stay the solve's (Storm exact)."""
    from mopmc.io.load import load
    from mopmc.queries.single import check

    path = tmp_path / "g.prism"
    path.write_text(grid(99))
    props = ['Pmin=? [F "goal"]', 'Pmax=? [F "goal"]', "Pmin=? [F x=50 & y=50]"]
    loaded = load(path, properties="; ".join(props))
    got = [check(loaded.model, p).value for p in loaded.properties()]
    assert got[:2] == [1.0, 1.0]
    assert got[2] == pytest.approx(storm_exact(path, props[2])[0], rel=1e-12)
