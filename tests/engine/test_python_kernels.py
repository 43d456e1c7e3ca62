"""Kernels run as plain Python on small calls (:data:`mopmc.engine.numba_kernels.PY_WORK`): the
same results bit for bit as the compiled kernels, on random MDPs (single objectives, the weighted
optimum with several objectives, reachability with goal memory, end components, many directions
at once) and on the shipped examples through the queries."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_reference import FAST, random_mdp, total_objectives
from mopmc.engine import numba_kernels as nk
from mopmc.engine.kernel import Engine
from mopmc.errors import InfiniteValueError


def _kernels() -> list:
    import mopmc.engine.banded as banded
    import mopmc.engine.iterative_kernels as ik

    return [k for mod in (nk, banded, ik) for k in vars(mod).values() if isinstance(k, nk._Lazy)]


@contextmanager
def _mode(python: bool):
    """Every kernel as plain Python (``python``; those that may run so) or compiled."""
    kernels = _kernels()
    saved = [(k, k.compiled) for k in kernels]
    before, spent, budget = nk.PY_WORK, nk._spent[0], nk.PY_BUDGET
    try:
        if python:
            nk.PY_WORK, nk.PY_BUDGET = 10**12, float("inf")
            for k in kernels:
                if k.python:
                    k.compiled = None
        else:
            nk.PY_WORK = 0
        yield
    finally:
        nk.PY_WORK, nk._spent[0], nk.PY_BUDGET = before, spent, budget
        for k, c in saved:
            k.compiled = c if c is not None else k.compiled


def _same(a, b) -> None:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64)), (a, b)


def _run(model, objs, W):
    try:
        eng = Engine(model, objs)
        out = eng.optimise_many(W)
    except InfiniteValueError as exc:
        return str(exc)
    return [(r.weighted, r.values, r.policy) for r in out]


@settings(max_examples=30, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), m=st.integers(1, 3), k=st.integers(1, 4))
def test_python_kernels_equal_the_compiled_ones_bit_for_bit(seed, n, m, k):
    rng = np.random.default_rng(seed)
    model = random_mdp(rng, n, m, negative=bool(rng.random() < 0.5))
    objs = total_objectives(m, [("min", "max")[int(x)] for x in rng.integers(0, 2, m)])
    W = rng.uniform(0, 1, (k, m))
    with _mode(python=False):
        want = _run(model, objs, W)
    with _mode(python=True):
        got = _run(model, objs, W)
    assert type(got) is type(want)
    if isinstance(want, str):
        assert got == want
        return
    for (gw, gv, gc), (ww, wv, wc) in zip(got, want):
        _same(gw, ww)
        _same(gv, wv)
        assert np.array_equal(gc, wc)


@pytest.mark.parametrize("example, prop", [
    ("example:dice", 'Pmax=? [F "done"]'),
    ("example:robot", 'R{"steps"}min=? [F "goal"]'),
    ("example:robot", 'Pmax=? [F<=10 "goal"]'),
    ("example:tradeoff", 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])'),
    ("example:mini_switch", 'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}<=0.5 [C])'),
])
def test_queries_on_the_examples_equal_compiled_bit_for_bit(example, prop):
    from mopmc.io.load import load
    from mopmc.queries.dispatch import multi_query
    from mopmc.queries.single import check

    loaded = load(example, properties=prop)
    p = loaded.properties()[0]

    def numbers():
        if prop.startswith("multi"):
            res = multi_query(loaded.model, p)
            return [float(x) for pt in (getattr(res, "points", None) or [getattr(res, "point", [])]) for x in np.ravel(pt)] + \
                [float(getattr(res, "value", 0.0) or 0.0)]
        return [check(loaded.model, p).value]

    with _mode(python=False):
        want = numbers()
    with _mode(python=True):
        got = numbers()
    _same(got, want)


def _total(a):
    return a.sum()


def test_small_calls_stay_python_and_large_ones_compile(monkeypatch):
    """A call within the bound runs as Python while the kernel is not compiled; one above it, or
    any within :func:`~mopmc.engine.numba_kernels.compiling` (the warm-up's), compiles it, and
    from then on every call is compiled."""
    k = nk._Lazy(_total)
    monkeypatch.setattr(nk, "PY_WORK", 10)
    monkeypatch.setattr(nk, "_spent", [0.0])  # (the tests before may have spent the budget)
    assert k(np.ones(10)) == 10.0 and k.compiled is None
    with nk.compiling():
        assert k(np.ones(3)) == 3.0
    assert k.compiled is not None
    k2 = nk._Lazy(_total)
    assert k2(np.ones(11)) == 11.0 and k2.compiled is not None
    k3 = nk._Lazy(_total, python=False)
    assert k3(np.ones(1)) == 1.0 and k3.compiled is not None
    # once the process has spent its budget in plain Python, small calls compile too
    k4 = nk._Lazy(_total)
    monkeypatch.setattr(nk, "_spent", [nk.PY_BUDGET + 1.0])
    assert k4(np.ones(2)) == 2.0 and k4.compiled is not None
