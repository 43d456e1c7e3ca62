"""Precision options of multi-objective queries.

The relative precision (``precision_type="reldiff"``, Storm's name) measures every objective in
units of its range, so one precision suits objectives in the hundreds and in the thousandths
alike; checked against the exact occupation-measure program: the exact front (the LP oracle, every
vertex), its best slacks and its optimum by linear programs over that front. ``--max-iter`` caps
the oracle calls, and a front it stops says so on stderr."""

import json

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.examples.scalable import cube
from mopmc.io.load import load
from mopmc.queries import highs_lp
from mopmc.queries.dispatch import make_oracle, multi_query
from mopmc.queries.multi import achievability, numerical, pareto
from mopmc.queries.oracle import RANGE_FLOOR, Space, lp_oracle

# the walk on a 4^3 cube with a second reward in the thousands: a curved front (many vertices)
# whose two objectives differ in scale by about 1000
SECOND = 'rewards "s"\n  [a] true : 2000;\n  [b] true : 1000;\n  [c] true : 1500;\nendrewards\n'
FRONT = 'multi(R{"r"}min=? [F "goal"], R{"s"}min=? [F "goal"])'
SIGN = np.array([-1.0, -1.0])  # both minimised: y = -x


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    path = tmp_path_factory.mktemp("rel") / "cube.nm"
    path.write_text(cube(3).replace("endrewards\n", "endrewards\n" + SECOND, 1))
    return path


def query(path, text):
    loaded = load(path, properties=text)
    return loaded.model, loaded.properties()[0]


@pytest.fixture(scope="module")
def exact(walk):
    """Every vertex of the exact front (original units) and each objective's range."""
    model, p = query(walk, FRONT)
    res = pareto(lp_oracle(model, p.objectives), p.objectives, exhaustive=True)
    V = np.array(res.points)
    assert len(V) >= 6  # curved: the relative precision has something to leave out
    return V, np.ptp(V, axis=0)


def _reach(P: np.ndarray, target: np.ndarray) -> bool:
    """Whether some mixture of the rows of ``P`` is <= ``target`` (minimisation)."""
    k, m = P.shape
    res = highs_lp.linprog(np.zeros(k), A_ub=P.T, b_ub=target, A_eq=np.ones((1, k)), b_eq=[1.0],
                           bounds=[(0, None)] * k)
    return res.status == 0


def test_space_measures_objectives_in_units_of_their_ranges():
    base = Space(sign=np.array([1.0, -1.0, 1.0]), lower=np.array([0.5, -np.inf, -2.0]), query=np.ones(3, bool))
    Y = np.array([[0.0, -300.0, 5.0], [1.0, -100.0, 5.0]])  # ranges 1, 200 and 0
    rel = base.relative(Y)
    np.testing.assert_allclose(rel.scale, [1.0, 1 / 200, 1 / (RANGE_FLOOR * 200)])
    np.testing.assert_allclose(rel.to_y([2.0, 100.0, 1.0]), [2.0, -0.5, 1 / (RANGE_FLOOR * 200)])
    np.testing.assert_allclose(rel.to_x(rel.to_y([2.0, 100.0, 1.0])), [2.0, 100.0, 1.0])
    np.testing.assert_allclose(rel.lower[[0, 2]], [0.5, -2.0 / (RANGE_FLOOR * 200)])
    assert rel.lower[1] == -np.inf
    single = base.relative(Y[:1])  # one point: every range 0, the units stay
    np.testing.assert_allclose(single.scale, 1.0)


def test_relative_pareto_front_is_within_the_precision_of_each_range(walk, exact):
    V, r = exact
    model, p = query(walk, FRONT)
    eta = 1e-2
    res = pareto(make_oracle(model, p.objectives), p.objectives, precision=eta, precision_type="reldiff")
    assert res.status == "optimal" and res.precision_type == "reldiff"
    P = np.array(res.points)
    tol = np.array(res.tolerances)
    np.testing.assert_allclose(tol, eta * r, rtol=1e-6)  # the unit directions found the exact extremes
    # sound: every point is achieved (within the engine's error)
    for x in P:
        assert _reach(V, x + 1e-6 * (1 + np.abs(x)))
    # complete to the precision: every exact vertex is matched within eta times each range ...
    for v in V:
        assert _reach(P, v + tol + 1e-9 * (1 + np.abs(v)))
    # ... and the precision is what it says: a hundredth of that leaves some vertex unmatched
    assert not all(_reach(P, v + tol / 100) for v in V)
    # fewer points than the absolute precision needs on the second objective (in the thousands)
    fine = pareto(make_oracle(model, p.objectives), p.objectives, precision=eta)
    assert len(res.points) < len(fine.points)
    # the halfspaces, in original units, hold for the exact front (every achievable point)
    for h in res.halfspaces:
        n, o = np.array(h["normal"]), h["offset"]
        assert np.abs(n).sum() == pytest.approx(1.0)
        assert np.all(V @ n <= o + 1e-6 * (1 + np.abs(o)))


def test_relative_numerical_value_within_the_range_precision(walk, exact):
    V, r = exact
    model, p = query(walk, 'multi(R{"r"}min=? [F "goal"], R{"s"}<=%r [F "goal"])' % float(np.median(V[:, 1])))
    eta = 1e-3
    res = numerical(make_oracle(model, p.objectives), p.objectives, precision=eta, precision_type="reldiff")
    # the exact optimum: min r over the exact front's mixtures with s <= threshold
    k = len(V)
    lp = highs_lp.linprog(V[:, 0], A_ub=V[:, 1][None, :], b_ub=[float(np.median(V[:, 1]))], A_eq=np.ones((1, k)),
                          b_eq=[1.0], bounds=[(0, None)] * k)
    assert res.status == "optimal"
    assert res.lower - 1e-7 <= lp.fun <= res.upper + 1e-7
    assert res.upper - res.lower <= eta * r[0] * (1 + 1e-9)
    assert res.tolerances[0] == pytest.approx(eta * r[0], rel=1e-6)


@pytest.mark.parametrize("shift", [0.3, -0.3])
def test_relative_achievability_margin_is_in_range_units(walk, exact, shift):
    V, r = exact
    q = np.median(V, axis=0) + shift * r  # thresholds a third of each range beyond (or short of) the front
    model, p = query(walk, 'multi(R{"r"}<=%r [F "goal"], R{"s"}<=%r [F "goal"])' % tuple(map(float, q)))
    res = achievability(make_oracle(model, p.objectives), p.objectives, precision=1e-4, precision_type="reldiff",
                        tight=True)
    # the exact best smallest slack in range units: max t with V^T l <= q - t r
    k = len(V)
    A = np.hstack([V.T, r[:, None]])
    lp = highs_lp.linprog(np.append(np.zeros(k), -1.0), A_ub=A, b_ub=q, A_eq=np.append(np.ones(k), 0.0)[None, :],
                          b_eq=[1.0], bounds=[(0, None)] * k + [(None, None)])
    assert res.achievable is (shift > 0)
    assert res.margin - 1e-6 <= -lp.fun <= res.margin_upper + 1e-6
    assert res.margin_upper - res.margin <= 1e-4 * (1 + 1e-9)
    if res.achievable:
        pts, w = np.array(res.witness.points), np.array(res.witness.weights)
        assert np.all(w @ pts <= q + 1e-9 * np.abs(q))
    else:
        c = res.certificate  # direction . x <= bound for every achievable x, and the thresholds need more
        d = np.array(c["direction"])
        assert np.all(V @ d <= c["bound"] + 1e-6 * (1 + abs(c["bound"])))
        assert c["required"] > c["bound"]


def test_absolute_is_the_default_and_unchanged(walk, exact):
    model, p = query(walk, FRONT)
    # no precision given: a small model's front is exhaustive (every vertex of the exact front) ...
    assert len(multi_query(model, p).points) == len(exact[0])
    # ... a precision given is what the front is refined to
    res = multi_query(model, p, precision=1.0)
    assert 2 <= len(res.points) < len(exact[0])
    assert res.precision_type == "abs" and res.tolerances is None
    assert res.to_json()["precision_type"] == "abs" and "tolerances" not in res.to_json()
    with pytest.raises(ValueError, match="precision_type 'rel'"):
        pareto(make_oracle(model, p.objectives), p.objectives, precision_type="rel")


def test_cli_precision_type(walk, exact):
    r = run_mopmc("check", walk, "--prop", FRONT, "--precision", "1e-2", "--precision-type", "reldiff", "--json")
    assert r.code == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["precision_type"] == "reldiff" and len(row["tolerances"]) == 2 and row["status"] == "optimal"
    # not exhaustive (as the absolute precision is on small models): the coarser front asked for
    assert 2 <= len(row["points"]) < len(exact[0])
    assert_one_line_error(run_mopmc("check", walk, "--prop", FRONT, "--precision-type", "rel"),
                          "--precision-type rel", "abs or reldiff")
    assert_one_line_error(run_mopmc("check", walk, "--prop", 'R{"r"}min=? [F "goal"]', "--precision-type", "reldiff"),
                          "--precision-type reldiff", "only multi(...)")


def test_cli_max_iter_and_the_note_when_it_stops_the_front(walk):
    r = run_mopmc("check", walk, "--prop", FRONT, "--max-iter", "3", "--json")
    assert r.code == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["status"] == "iteration_limit" and row["iterations"] == 3 + 2  # (+ the unit directions)
    (line,) = r.stderr.splitlines()
    assert "not within the precision 0.0001 after 5 oracle calls" in line and "--precision-type reldiff" in line
    r = run_mopmc("check", walk, "--prop", FRONT, "--max-iter", "3", "--precision-type", "reldiff", "--json")
    (line,) = r.stderr.splitlines()
    assert "relative to each objective's range" in line and "--precision-type" not in line
    assert_one_line_error(run_mopmc("check", walk, "--prop", FRONT, "--max-iter", "0"), "--max-iter 0", "positive")
    assert_one_line_error(run_mopmc("check", walk, "--prop", 'R{"r"}min=? [F "goal"]', "--max-iter", "9"),
                          "--max-iter 9", "only multi(...)")


@pytest.mark.parametrize("engine, device", [("kernel", None), ("lp", None), ("torch", "cpu")])
def test_relative_precision_on_every_engine(walk, exact, engine, device):
    """The same relative query through each engine's oracle: the numerical value within its range
    precision of the exact optimum, and the same achievability verdict."""
    V, r = exact
    q = float(np.median(V[:, 1]))
    model, p = query(walk, 'multi(R{"r"}min=? [F "goal"], R{"s"}<=%r [F "goal"])' % q)
    k = len(V)
    lp = highs_lp.linprog(V[:, 0], A_ub=V[:, 1][None, :], b_ub=[q], A_eq=np.ones((1, k)), b_eq=[1.0],
                          bounds=[(0, None)] * k)
    res = multi_query(model, p, engine=engine, device=device, precision=1e-3, precision_type="reldiff")
    assert res.status == "optimal" and res.precision_type == "reldiff"
    assert res.lower - 1e-7 <= lp.fun <= res.upper + 1e-7 and res.upper - res.lower <= 1e-3 * r[0] * (1 + 1e-9)
    model, p = query(walk, 'multi(R{"r"}<=%r [F "goal"], R{"s"}<=%r [F "goal"])' % (float(lp.fun + 0.01 * r[0]), q))
    assert multi_query(model, p, engine=engine, device=device, precision=1e-3, precision_type="reldiff").achievable


def test_an_exhaustive_front_cut_short_within_the_precision_is_optimal(walk, exact):
    model, p = query(walk, FRONT)
    coarse = pareto(make_oracle(model, p.objectives), p.objectives, precision=1.0)
    assert coarse.status == "optimal" and coarse.iterations < len(exact[0])
    calls = coarse.iterations - 2  # (after the unit directions)
    cut = pareto(make_oracle(model, p.objectives), p.objectives, precision=1.0, exhaustive=True, max_iter=calls)
    assert cut.status == "optimal" and len(cut.points) < len(exact[0])  # within 1.0, not every vertex
    finer = pareto(make_oracle(model, p.objectives), p.objectives, precision=1e-6, exhaustive=True, max_iter=calls)
    assert finer.status == "iteration_limit"
    for v in exact[0]:  # and within 1.0 indeed
        assert _reach(np.array(cut.points), v + 1.0 + 1e-9 * (1 + np.abs(v)))
