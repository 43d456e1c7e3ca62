"""The convex query against the exact convex program over occupation measures (``lp_convex``)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from strategies import random_mdps
from support import switch_objectives
from mopmc.design.build import build_design
from mopmc.engine.lp import lp_convex, lp_optimise
from mopmc.engine.lp_product import occupation_polytope
from mopmc.errors import InfiniteValueError, PropertyError
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.properties.objectives import Objective
from mopmc.queries.convex import box_of, convex_query, make_loss, soft_target
from mopmc.queries.oracle import lp_oracle

def parsed(model, text):
    loaded = load(model, properties=text, valuations=True)
    (p,) = loaded.properties()
    return loaded.model, p.objectives


@pytest.fixture(scope="module")
def switch():
    return build_design("paper-switch").model


def assert_matches(res, exact_loss, *, scale=1.0):
    """Our certified interval contains the exact optimum (up to solver precision) and is tight."""
    assert res.status == "optimal"
    tol = max(res.eps_abs, res.eps_rel * abs(res.loss))
    assert res.loss - res.lower_bound <= tol + 1e-15
    # lp_convex runs Clarabel at its default tolerances: about 1e-8 absolute on the loss
    slack = 5e-8 * max(1.0, abs(exact_loss)) * scale
    assert res.lower_bound <= exact_loss + slack
    assert res.loss >= exact_loss - slack
    assert res.loss <= exact_loss + tol + slack
    # every iteration's bounds are ordered (the lower QP's tolerance once put lower above upper)
    assert all(h["lower"] <= h["upper"] for h in res.history), res.history


def in_box(point, lo, up, tol=1e-7):
    return np.all(point >= lo - tol) and np.all(point <= up + tol)


# -------------------------------------------------------------------------- shipped examples
@pytest.mark.parametrize("model, text, loss, target", [
    (files.tradeoff, 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])', "mse", None),
    (files.tradeoff, 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])', "mse", (3.0, 1.0)),
    (files.tradeoff, 'multi(R{"time"}<=1 [C], R{"energy"}<=1 [C])', "mse", "soft"),
    (files.tradeoff, 'multi(R{"time"}<=9 [C], R{"energy"}<=9 [C])', "var", None),
    (files.mini_switch, 'multi(R{"ctrl_cost"}<=1.3 [C], R{"ttc_cost"}<=0.05 [C], R{"headway_cost"}<=0.2 [C])', "mse", None),
    (files.mini_switch, 'multi(R{"ctrl_cost"}<=1.2 [C], R{"ttc_cost"}<=0.04 [C], R{"headway_cost"}<=0.15 [C])', "mse", "soft"),
    (files.mini_switch, 'multi(R{"ctrl_cost"}<=2 [C], R{"ttc_cost"}<=1 [C], R{"headway_cost"}<=1 [C])', "wmse", (1.0, 0.0, 0.0)),
    (files.robot, 'multi(P>=0.5 [F "goal"], P<=0.2 [F "hazard"])', "mse", (1.0, 0.0)),
])
def test_examples_match_lp(model, text, loss, target):
    m, objs = parsed(model, text)
    soft = target == "soft"
    t = soft_target(objs) if soft else (np.zeros(len(objs)) if target is None else np.array(target))
    weights = [1.0, 2.0, 0.5][: len(objs)] if loss == "wmse" else None
    res = convex_query(m, objs, loss, target=None if soft or target is None else list(target), weights=weights,
                       soft=soft, eps_rel=1e-7)
    lo, up = (None, None) if soft else box_of(objs)
    exact = lp_convex(m, objs, make_loss(loss, len(objs), t, weights).expression, box=None if soft else (lo, up))
    assert_matches(res, exact.loss)
    if not soft:
        assert in_box(res.point, lo, up)
    np.testing.assert_allclose(res.point, res.weights @ res.vertices, atol=1e-12)


def test_custom_cvxpy_loss_and_lp_engine():
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])')
    fn = lambda v: cp.norm1(v - np.array([2.0, 2.0])) + cp.square(v[0])  # noqa: E731
    exact = lp_convex(m, objs, fn, box=box_of(objs))
    for engine in ("kernel", "lp"):
        res = convex_query(m, objs, fn, engine=engine, eps_rel=1e-8)
        assert_matches(res, exact.loss)


def test_one_objective_is_the_nearest_achievable_value():
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=10 [C])')
    lo_v = lp_optimise(m, objs, [-1.0]).point[0]
    hi_v = lp_optimise(m, objs, [1.0]).point[0]
    for t in (0.0, (lo_v + hi_v) / 2, 20.0):
        res = convex_query(m, objs, "mse", target=[t], eps_rel=1e-9)
        assert res.status == "optimal"
        assert res.point[0] == pytest.approx(min(max(t, lo_v), min(hi_v, 10.0)), abs=1e-7)


def test_mixed_min_and_max_keep_order():
    m, objs = parsed(files.robot, 'multi(P<=0.05 [F "hazard"], P>=0.3 [F "goal"])')
    assert [o.sense for o in objs] == ["min", "max"]
    res = convex_query(m, objs, "mse", target=[0.5, 1.0], eps_rel=1e-8)
    exact = lp_convex(m, objs, make_loss("mse", 2, [0.5, 1.0], None).expression, box=box_of(objs))
    assert_matches(res, exact.loss)
    np.testing.assert_allclose(res.point, exact.point, atol=1e-4)
    assert res.point[0] <= 0.05 + 1e-7 and res.point[1] >= 0.3 - 1e-7


def test_unbounded_achievable_set_is_reported():
    # steps can grow forever (the robot may wander), so the set is unbounded upwards in steps: with
    # no box to cap it (--soft: no box) the query is refused ...
    m, objs = parsed(files.robot, 'multi(P>=0.5 [F "goal"], R{"steps"}<=3 [F "goal"])')
    with pytest.raises(InfiniteValueError, match="unbounded in direction"):
        convex_query(m, objs, "mse", soft=True)
    # ... while the box steps <= 3 caps it: half "always right" (P 1, 3/0.9 steps), half docking
    # forever (0, 0) is the MSE optimum at P = 0.5, by hand
    for engine in ("kernel", "lp"):
        res = convex_query(m, objs, "mse", engine=engine)
        assert res.status == "optimal" and np.allclose(res.point, [0.5, 0.5 * 3 / 0.9], atol=1e-9)
        assert res.loss == pytest.approx((0.25 + (1.5 / 0.9) ** 2) / 2, abs=1e-9)


def test_a_gap_at_the_oracle_precision_is_stalled_with_valid_bounds():
    """An oracle that only knows its answers to 0.01 (a rounded point, error 0.01) cannot close a
    1e-14 gap: the query stops as ``stalled``, not ``optimal`` or ``iteration_limit``, and its bounds
    still bracket the exact optimum."""
    from mopmc.queries.oracle import Vertex

    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])')
    exact = lp_oracle(m, objs)

    def coarse(w):
        v = exact(w)
        return Vertex(np.round(v.point, 2), 0.01, v.scheduler)

    res = convex_query(coarse, objs, "mse", eps_rel=1e-14, eps_abs=1e-14, max_iter=500)
    assert res.status == "stalled" and res.iterations < 500
    best = lp_convex(m, objs, make_loss("mse", 2, None, None).expression, box=box_of(objs)).loss
    assert res.lower_bound <= best + 1e-7 and res.gap > 1e-14


def test_unbounded_sides():
    # only upper sides (min objectives with <=) and only lower sides (explicit box)
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=2 [C], R{"energy"}<=10 [C])')
    for box in (((None, None), (2.0, None)), ((2.0, 3.0), (None, None)), ((None, 3.0), (2.5, None))):
        res = convex_query(m, objs, "mse", box=box, eps_rel=1e-8)
        exact = lp_convex(m, objs, make_loss("mse", 2, None, None).expression, box=box)
        assert_matches(res, exact.loss)


def test_ties_variance_has_many_optima():
    # var is invariant along (1, 1): many optimal points; only the value is unique
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=9 [C], R{"energy"}<=9 [C])')
    res = convex_query(m, objs, "var", eps_rel=1e-8)
    exact = lp_convex(m, objs, make_loss("var", 2, None, None).expression)
    assert_matches(res, exact.loss)
    assert res.loss == pytest.approx(0.0, abs=1e-9)  # the front crosses the diagonal


def test_infeasible_box_has_a_certificate():
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=1.5 [C], R{"energy"}<=2 [C])')
    res = convex_query(m, objs, "mse")
    assert res.status == "infeasible" and res.point is None
    sd = res.separating_direction
    w = np.array(sd["direction"])
    assert sd["bound"] < sd["required"]
    best = lp_optimise(m, objs, w).value  # exact max of w . x over the achievable set
    assert best <= sd["bound"] + 1e-9
    # every point of the box has w . x >= required
    corners = [np.array([a, b]) for a in (-1e3, 1.5) for b in (-1e3, 2.0)]
    assert min(w @ c for c in corners) >= sd["required"] - 1e-9


def test_bad_arguments():
    m, objs = parsed(files.tradeoff, 'multi(R{"time"}<=3 [C], R{"energy"}<=3 [C])')
    with pytest.raises(PropertyError, match="--soft"):
        convex_query(m, objs, "mse", soft=True, target=[0, 0])
    with pytest.raises(PropertyError, match="unknown loss"):
        convex_query(m, objs, "mae")
    with pytest.raises(PropertyError, match="2 objectives"):
        convex_query(m, objs, "mse", target=[1.0])
    with pytest.raises(PropertyError, match="non-convex"):
        convex_query(m, objs, "wmse", weights=[1.0, -1.0])
    for kw, word in (({"eps_rel": float("nan")}, "eps_rel nan"), ({"eps_abs": float("inf")}, "eps_abs inf"),
                     ({"eps_rel": 0.0, "eps_abs": 0.0}, "both 0"), ({"max_iter": -1}, "max_iter")):
        with pytest.raises(PropertyError, match=word):
            convex_query(m, objs, "mse", **kw)
    m2, objs2 = parsed(files.tradeoff, 'multi(R{"time"}min=? [C], R{"energy"}<=3 [C])')
    with pytest.raises(PropertyError, match="has none"):
        convex_query(m2, objs2, "mse", soft=True)


# -------------------------------------------------------------------------- random MDPs
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_mdps(max_states=8))
def test_random_mdps_match_lp(model):
    # probabilities are bounded; targets differ, so the product has goal memory; min and max mix
    objs = (Objective(0, 'P<=0.6 [F "a"]', "probability", "min", right_text='"a"', comparison="<=", threshold=0.6),
            Objective(1, 'P>=0.2 [F "b"]', "probability", "max", right_text='"b"', comparison=">=", threshold=0.2))
    loss = make_loss("mse", 2, [0.3, 1.0], None)
    try:
        exact = lp_convex(model, objs, loss.expression, box=box_of(objs))
    except InfiniteValueError:  # the box is infeasible: so must our answer be
        res = convex_query(model, objs, loss)
        assert res.status == "infeasible"
        assert lp_optimise(model, objs, res.separating_direction["direction"]).value <= res.separating_direction["bound"] + 1e-9
        return
    for engine in ("kernel", "lp"):
        res = convex_query(model, objs, loss, eps_rel=1e-7, engine=engine)
        assert_matches(res, exact.loss, scale=10.0)


def test_random_mdp_infeasible_box_agrees_with_lp():
    m, objs = parsed(files.mini_switch, 'multi(R{"ctrl_cost"}<=0.5 [C], R{"ttc_cost"}<=0.05 [C], R{"headway_cost"}<=0.2 [C])')
    res = convex_query(m, objs, "mse")
    assert res.status == "infeasible"
    with pytest.raises(InfiniteValueError, match="infeasible"):
        lp_convex(m, objs, make_loss("mse", 3, None, None).expression, box=box_of(objs))


# -------------------------------------------------------------------------- Table 3 facts
def exact_switch_mse(model, objs, target, box):
    """The occupation-measure program with tight Clarabel tolerances (lp_convex's defaults stop
    about 4e-9 short on the switch, more than eps_rel 1e-4 of a loss of 7.5e-6)."""
    lp = occupation_polytope(model, objs)
    x = cp.Variable(lp.n_vars, nonneg=True)
    v = lp.offset + cp.multiply(lp.scale, lp.gain @ x)
    d = cp.Variable(len(objs))
    cons = [lp.flow @ x == lp.rhs(), d == v - np.asarray(target)]
    if box is not None:
        cons.append(v <= np.asarray(box))
    prob = cp.Problem(cp.Minimize(cp.sum_squares(d) / len(objs)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-14, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value), lp.values(np.maximum(x.value, 0.0))


def test_table3_soft_mse(switch):
    objs = switch_objectives((1.9, 0.22, 0.169, 0.035))
    res = convex_query(switch, objs, "mse", soft=True, eps_rel=1e-6)
    exact, point = exact_switch_mse(switch, objs, [1.9, 0.22, 0.169, 0.035], None)
    assert_matches(res, exact)
    # the issue quotes 7.4770679e-6 at (1.9, 0.219065, 0.172351, 0.039219): that is lp_convex at
    # Clarabel's default tolerances; the exact optimum is lower, and our mixture reaches it
    assert res.loss == pytest.approx(7.4727964e-6, rel=1e-6)
    assert res.loss < 7.4770679e-6
    np.testing.assert_allclose(res.point, [1.9, 0.21906467, 0.17234995, 0.03921831], atol=2e-6)
    np.testing.assert_allclose(res.point, point, atol=1e-5)


def test_table3_mse_in_mo2_box_and_paper_point(switch):
    objs = switch_objectives((2.0, 0.23, 0.174, 0.04))
    res = convex_query(switch, objs, "mse", eps_rel=1e-7)
    assert res.status == "optimal"
    assert res.loss == pytest.approx(0.9097272, abs=1e-7)
    assert in_box(res.point, -np.inf, np.array([2.0, 0.23, 0.174, 0.04]))
    # the paper's reported point is not achievable: its distance to the achievable set is positive
    paper = convex_query(switch, switch_objectives((1.9, 0.2189, 0.1720, 0.0377)), "mse", soft=True)
    assert paper.lower_bound > 1e-7


@pytest.mark.parametrize("keep", [0, 3, 10])
def test_working_set_lower_program_equals_one_solve_over_all_halfspaces(monkeypatch, keep):
    """Constraint generation answers what one solve over every halfspace answers, also when the
    working set dropped halfspaces the next answer violates (keep=0 drops all but the tight ones)."""
    from mopmc.queries import clarabel_qp as qp
    from mopmc.queries import convex as cvx

    monkeypatch.setattr(cvx, "KEEP_ROUNDS", keep)
    solves = []
    full = qp.lower
    monkeypatch.setattr(qp, "lower", lambda *a: solves.append(len(a[2])) or full(*a))
    rng = np.random.default_rng(keep)
    m = 6
    lo, up = np.full(m, -np.inf), np.full(m, np.inf)
    up[0] = 2.0
    poly = cvx._Polytopes(m)
    added = 0
    for r in range(40):
        for _ in range(rng.integers(1, 4)):  # halfspaces of the unit ball, arriving a few at a time
            w = rng.normal(size=m)
            w /= np.linalg.norm(w)
            poly.add_halfspace(w, 1.0 + 0.05 * rng.random())
            added += 1
        W, b = poly.W, np.array(poly.offsets)
        quad = qp.mse(rng.normal(size=m) * 3.0)  # a new target each round moves the tight set
        status, z = cvx._working_lower(poly, quad, W, b, lo, up)
        status_all, z_all = full(quad, W, b, lo, up)
        assert status == status_all == "optimal"
        assert np.max(W @ z - b) <= 1e-9
        assert abs(quad.value(z) - quad.value(z_all)) <= 1e-9 * max(1.0, quad.value(z_all))
        np.testing.assert_allclose(z, z_all, atol=1e-6)
    assert len(poly.last_tight) == added
    assert min(solves) < added  # solves over part of the halfspaces
    if keep == 0:
        assert len(solves) > poly.rounds  # some answers violated a dropped halfspace: solved again


def test_frank_wolfe_direction():
    from mopmc.queries import convex as cvx

    loss = cvx.mse([1.0, 2.0])
    best = (0.0, np.ones(1), np.array([0.0, 0.0]))
    g = cvx._descent(loss, best, np.array([1.0, 0.0]))
    np.testing.assert_allclose(g, np.array([1.0, 2.0]) / np.sqrt(5.0))  # towards the target
    assert cvx._descent(loss, best, g) is None  # the cutting direction already asked it
    assert cvx._descent(loss, None, g) is None
    assert cvx._descent(loss, (0.0, np.ones(1), np.array([1.0, 2.0])), g) is None  # at the target
    assert cvx._descent(cvx.Loss("custom", lambda v: cp.sum(v)), best, g) is None  # not quadratic
    inf = np.full(2, np.inf)
    np.testing.assert_allclose(cvx._descent(loss, best, np.array([1.0, 0.0]), -inf, inf), g)
    assert cvx._descent(loss, best, np.array([1.0, 0.0]), np.array([-1.0, 0.0]), inf) is None  # on the box


@pytest.mark.parametrize("model, text", [
    (files.mini_switch, 'multi(R{"ctrl_cost"}<=1.2 [C], R{"ttc_cost"}<=0.04 [C], R{"headway_cost"}<=0.15 [C])'),
    (files.tradeoff, 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])'),
])
def test_axis_directions_in_one_batch_change_nothing(model, text):
    """The kernel oracle answers the 2m axis directions in one batch (``oracle.many``) where the
    model has no cycles: the query's result is the one of asking them one by one, to the last bit."""
    from mopmc.engine.oracle import kernel_oracle

    m, objs = parsed(model, text)
    batched = kernel_oracle(m, objs)
    single = kernel_oracle(m, objs)
    one_by_one = lambda w: single(w)  # noqa: E731 (no .many: the query asks each direction alone)
    a = convex_query(batched, objs, "mse", soft=True, eps_rel=1e-7)
    b = convex_query(one_by_one, objs, "mse", soft=True, eps_rel=1e-7)
    assert a.status == b.status and a.iterations == b.iterations
    assert a.loss == b.loss and a.lower_bound == b.lower_bound
    assert a.vertices.tobytes() == b.vertices.tobytes() and a.point.tobytes() == b.point.tobytes()
    assert [h["oracle_calls"] for h in a.history] == [h["oracle_calls"] for h in b.history]
    if model == files.mini_switch:
        assert batched.engine.acyclic  # the batch took the one-pass path
