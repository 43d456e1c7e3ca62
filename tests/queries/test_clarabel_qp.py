"""The convex query's direct QPs (Wolfe's algorithm, Clarabel without cvxpy) against cvxpy's answers."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from mopmc.examples import files
from mopmc.io.load import load
from mopmc.queries import clarabel_qp as qp
from mopmc.queries.convex import Loss, convex_query, make_loss


def cvxpy_nearest(V, z):
    lam = cp.Variable(len(V), nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(V.T @ lam - z)), [cp.sum(lam) == 1])
    prob.solve(solver=cp.CLARABEL)
    return float(np.sqrt(max(prob.value, 0.0)))


def point_sets(rng):
    for trial in range(60):
        k, m = int(rng.integers(1, 60)), int(rng.integers(1, 25))
        V = rng.normal(size=(k, m)) * rng.uniform(0.01, 100)
        if trial % 4 == 0:  # clustered: nearly affinely dependent vertices
            V = V * 1e-4 + rng.normal(size=m)
        if trial % 5 == 0:  # duplicates and points on a segment
            V = np.vstack((V, V[:1], 0.5 * (V[:1] + V[-1:])))
        z = rng.normal(size=m) * rng.uniform(0.1, 10) + (V.mean(0) if trial % 2 else 0.0)
        yield V, z
    for trial in range(4):  # many nearly dependent vertices in many dimensions, z just outside: rounding stalls Wolfe
        k, m = 200, 50
        base = rng.normal(size=m)
        V = base + 1e-7 * rng.normal(size=(k, m)) + 1e-3 * rng.normal(size=(1, m)) * rng.uniform(0, 1, size=(k, 1))
        yield V, V.mean(0) + 1e-6 * rng.normal(size=m)


def test_wolfe_nearest_point_equals_the_qp():
    rng = np.random.default_rng(0)
    for V, z in point_sets(rng):
        point, lam, _ = qp.min_norm_point(V, z)
        assert np.all(lam >= 0) and lam.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.allclose(lam @ V, point, atol=1e-9 * max(1.0, np.abs(V).max()))
        ref = cvxpy_nearest(V, z)
        got = float(np.linalg.norm(point - z))
        assert got <= ref * (1 + 1e-6) + 1e-7 * max(1.0, np.abs(V).max()), (got, ref)
        # from a warm start (the support of a nearby problem's answer): the same distance
        start = np.flatnonzero(qp.min_norm_point(V[:-1], z)[1] > 0) if len(V) > 1 else None
        warm, _, _ = qp.min_norm_point(V, z, start)
        assert np.linalg.norm(warm - z) == pytest.approx(got, rel=1e-6, abs=1e-7 * max(1.0, np.abs(V).max()))


@pytest.mark.parametrize("name", ["mse", "wmse", "var"])
def test_upper_program_equals_cvxpy(name):
    rng = np.random.default_rng(1)
    for trial in range(20):
        k, m = int(rng.integers(2, 30)), int(rng.integers(2, 6))
        V = rng.uniform(0, 2, size=(k, m))
        t = rng.uniform(0, 2, size=m)
        loss = make_loss(name, m, t, rng.uniform(0, 2, size=m) if name == "wmse" else None)
        boxed = trial % 2 == 1
        lo, up = np.full(m, -np.inf), np.full(m, np.inf)
        if boxed:
            up = V.mean(0) + 0.3  # feasible: the mean of the vertices lies inside
        status, lam = qp.upper(loss.quadratic, V, lo, up)
        assert status == "optimal"
        lv = cp.Variable(k, nonneg=True)
        cons = [cp.sum(lv) == 1] + ([V.T @ lv <= up] if boxed else [])
        ref = cp.Problem(cp.Minimize(loss.expression(V.T @ lv)), cons)
        ref.solve(solver=cp.CLARABEL)
        lam = np.clip(lam, 0, None) / np.clip(lam, 0, None).sum()
        assert loss.value(lam @ V) == pytest.approx(ref.value, rel=1e-6, abs=1e-9)
        assert loss.quadratic.value(lam @ V) == pytest.approx(float(loss.expression(cp.Constant(lam @ V)).value), rel=1e-12, abs=1e-15)
        # the residual form keeps its digits at the target: exactly 0 there, never negative near it
        at = t if name != "var" else np.full(m, 0.7)
        assert 0.0 <= loss.value(at) <= 1e-30 and loss.value(at + 1e-9 * np.arange(m)) > 0.0


@pytest.mark.parametrize("text, loss, soft", [
    ('multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])', "mse", False),
    ('multi(R{"time"}<=1 [C], R{"energy"}<=1 [C])', "mse", True),
    ('multi(R{"time"}<=9 [C], R{"energy"}<=9 [C])', "var", False),
])
def test_direct_and_cvxpy_paths_agree(text, loss, soft):
    loaded = load(files.tradeoff, properties=text)
    objs = loaded.properties()[0].objectives
    fast = convex_query(loaded.model, objs, loss, soft=soft, eps_rel=1e-9)
    ref = make_loss(loss, len(objs), fast_target(objs, soft), None)
    slow = convex_query(loaded.model, objs, Loss(ref.name, ref.expression), target=fast_target(objs, soft), eps_rel=1e-9,
                        box=(None, None) if soft else None)
    assert fast.status == slow.status == "optimal"
    assert fast.loss == pytest.approx(slow.loss, rel=1e-6, abs=1e-10)
    assert fast.lower_bound <= slow.loss + 1e-9 and slow.lower_bound <= fast.loss + 1e-9


def fast_target(objs, soft):
    from mopmc.queries.convex import soft_target

    return soft_target(objs) if soft else None


def test_wolfe_ignores_a_start_that_is_no_corral():
    """An interior-point support (more than m + 1 vertices) is no corral: cold start, same point."""
    rng = np.random.default_rng(3)
    V, z = rng.normal(size=(40, 5)), rng.normal(size=5) * 4.0
    cold, _, ok = qp.min_norm_point(V, z)
    warm, lam, ok_warm = qp.min_norm_point(V, z, np.arange(40))
    assert ok and ok_warm and np.count_nonzero(lam) <= 6
    assert np.linalg.norm(warm - z) == pytest.approx(np.linalg.norm(cold - z), rel=1e-9)
