"""Hypothesis: achievability and numerical queries over the kernel on random MDPs against the LP
engine answering the same question directly (one LP over occupation measures, no oracle loop).

Thresholds are drawn around a point the LP finds in a random direction, so both verdicts occur.
Examples where an objective is infinite (the kernel or the LP refuses the model) are rejected.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.sparse import vstack

from strategies import random_mdps
from mopmc.engine.lp import lp_achievable, lp_optimise
from mopmc.engine.lp_product import occupation_polytope
from mopmc.errors import InfiniteValueError
from mopmc.properties.objectives import Objective
from mopmc.queries.dispatch import make_oracle
from mopmc.queries.multi import DEFAULT_PRECISION, achievability, numerical, pareto

SETTINGS = dict(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _objectives(senses, thresholds, query=None):
    out = []
    for i, (s, t) in enumerate(zip(senses, thresholds)):
        cmp = None if i == query else ("<=" if s == "min" else ">=")
        thr = None if i == query else float(t)
        text = f'R{{"r{i}"}}{s + "=?" if i == query else cmp + repr(thr)} [C]'
        out.append(Objective(i, text, "total_reward", s, f"r{i}", comparison=cmp, threshold=thr))
    return tuple(out)


def _with_exit(model, p: float):
    """Every choice also moves, with probability ``p``, to a fresh absorbing zero-reward state:
    then every scheduler stops almost surely and every total reward is finite."""
    n = model.n_states
    row_groups, indptr, targets, probs = list(model.row_groups), [0], [], []
    for c in range(model.n_choices):
        lo, hi = model.indptr[c], model.indptr[c + 1]
        targets += list(model.targets[lo:hi]) + [n]
        probs += [float(q) * (1 - p) for q in model.probs[lo:hi]] + [p]
        indptr.append(len(targets))
    row_groups.append(row_groups[-1] + 1)
    targets.append(n)
    probs.append(1.0)
    indptr.append(len(targets))
    rewards = {k: np.append(v, 0.0) for k, v in model.rewards.items()}
    return type(model).from_arrays(row_groups, indptr, targets, probs, initial=0, rewards=rewards,
                                   source="<hypothesis+exit>")


@st.composite
def cases(draw):
    model = draw(random_mdps(max_states=12, reward_models=3))
    if draw(st.booleans()):  # half the examples keep their end components (some infinite: rejected)
        model = _with_exit(model, draw(st.sampled_from([0.1, 0.5])))
    m = draw(st.integers(2, 3))
    senses = draw(st.lists(st.sampled_from(["min", "max"]), min_size=m, max_size=m))
    w = np.array(draw(st.lists(st.floats(-1, 1), min_size=m, max_size=m)))
    shift = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=m, max_size=m)))
    return model, senses, w, shift


def _anchor(model, senses, w, shift):
    """Thresholds near the LP's optimum in direction ``w`` (None when some optimum is infinite)."""
    free = _objectives(senses, [0.0] * len(senses))
    try:
        point = lp_optimise(model, free, w).point
    except InfiniteValueError:
        return None
    return point + shift


@settings(**SETTINGS)
@given(cases())
def test_achievability_verdict_equals_lp(case):
    model, senses, w, shift = case
    thresholds = _anchor(model, senses, w, shift)
    assume(thresholds is not None)
    objs = _objectives(senses, thresholds)
    try:
        ours = achievability(make_oracle(model, objs, "kernel"), objs)
    except InfiniteValueError:
        assume(False)
    ref = lp_achievable(model, objs)
    event(f"achievable={ref.achievable}")
    if abs(ours.margin) > 1e-3:
        assert ours.achievable is ref.achievable, (ours.margin, ref.margin)
    # stopped once decided: [margin, margin_upper] brackets the LP's margin (which the LP caps at 1)
    assert min(ours.margin, 1.0) - ours.precision <= min(ref.margin, 1.0)
    assert min(ref.margin, 1.0) <= ours.margin_upper + ours.precision


def _threshold_rows(lp, objs):
    """``rows @ x <= rhs``: every threshold of ``objs`` on the occupation measure ``x``."""
    rows, rhs = [], []
    for i, o in enumerate(objs):
        if o.threshold is None:
            continue
        s = 1.0 if o.comparison.startswith(">") else -1.0
        rows.append(-s * lp.scale[i] * lp.gain[i])
        rhs.append(s * (lp.offset[i] - o.threshold))
    return rows, rhs


def _lp_numerical(model, objs, k):
    """max/min objective ``k`` subject to the others' thresholds, as one LP; None when infeasible."""
    lp = occupation_polytope(model, objs)
    sign = 1.0 if objs[k].sense == "max" else -1.0
    rows, rhs = _threshold_rows(lp, objs)
    c = -sign * lp.scale[k] * lp.gain[k].toarray().ravel()
    res = linprog(c, A_ub=vstack(rows) if rows else None, b_ub=np.array(rhs) if rows else None,
                  A_eq=lp.flow, b_eq=lp.rhs(), bounds=lp.bounds(), method="highs")
    if res.status == 2:
        return None
    assert res.status == 0, res.message
    return float(lp.values(res.x)[k])


@settings(**SETTINGS)
@given(cases(), st.integers(0, 2))
def test_numerical_value_equals_lp_optimum(case, k):
    model, senses, w, shift = case
    k = k % len(senses)
    thresholds = _anchor(model, senses, w, shift)
    assume(thresholds is not None)
    objs = _objectives(senses, thresholds, query=k)
    try:
        ours = numerical(make_oracle(model, objs, "kernel"), objs, precision=1e-9)
    except InfiniteValueError:
        assume(False)
    ref = _lp_numerical(model, objs, k)
    if ref is None:
        assert ours.status == "infeasible"
        return
    if ours.status == "infeasible":
        # only when the thresholds are met with (almost) no slack: the LP says feasible
        assert lp_achievable(model, tuple(o for o in objs if o.threshold is not None) or objs).margin <= 1e-6
        return
    assert ours.value == pytest.approx(ref, abs=1e-6 * max(1.0, abs(ref)))
    assert ours.lower - 1e-9 <= ref <= ours.upper + 1e-9


@settings(**SETTINGS)
@given(cases(), st.lists(st.floats(-1, 1), min_size=6, max_size=6))
def test_exhaustive_pareto_spans_the_lp_optima(case, raw):
    """Exhaustive Pareto terminates, and in every direction the best of its vertices is the LP's
    optimum: the vertices found are the whole front."""
    model, senses, _, _ = case
    objs = tuple(Objective(i, f'R{{"r{i}"}}{s}=? [C]', "total_reward", s, f"r{i}") for i, s in enumerate(senses[:2]))
    try:
        ours = pareto(make_oracle(model, objs, "kernel"), objs, exhaustive=True)
    except InfiniteValueError:
        assume(False)
    assert ours.status == "optimal"
    pts = np.array(ours.points)
    sign = np.array([1.0 if s == "max" else -1.0 for s in senses[:2]])
    for w in np.array(raw).reshape(3, 2):
        w = np.abs(w) * sign  # directions that prefer better values in every objective
        try:
            ref = lp_optimise(model, objs, w).value
        except InfiniteValueError:
            continue
        assert np.max(pts @ w) == pytest.approx(ref, abs=1e-7 * max(1.0, abs(ref)))


def _pareto_objectives(senses, threshold):
    """Objectives 0 and 1 queried (``senses[:2]``), objective 2 bounded by ``threshold``."""
    objs = tuple(Objective(i, f'R{{"r{i}"}}{s}=? [C]', "total_reward", s, f"r{i}") for i, s in enumerate(senses[:2]))
    cmp = "<=" if senses[2] == "min" else ">="
    return objs + (Objective(2, f'R{{"r2"}}{cmp}{threshold!r} [C]', "total_reward", senses[2], "r2",
                             comparison=cmp, threshold=float(threshold)),)


def _lp_direction(model, objs, w):
    """max w . x subject to every threshold of ``objs``, as one LP; None when infeasible."""
    lp = occupation_polytope(model, objs)
    rows, rhs = _threshold_rows(lp, objs)
    c = -sum(w[i] * lp.scale[i] * lp.gain[i].toarray().ravel() for i in range(len(objs)))
    res = linprog(c, A_ub=vstack(rows) if rows else None, b_ub=np.array(rhs) if rows else None,
                  A_eq=lp.flow, b_eq=lp.rhs(), bounds=lp.bounds(), method="highs")
    if res.status == 2:
        return None
    assert res.status == 0, res.message
    return float(w @ lp.values(res.x))


@settings(**SETTINGS)
@given(cases(), st.lists(st.floats(-1, 1), min_size=6, max_size=6))
def test_pareto_with_a_threshold_is_the_lp_constrained_front(case, raw):
    """Two queried objectives and a threshold on a third: the reported front lies inside the
    threshold and, in every direction over the queried objectives, the best of its points is the LP
    optimum subject to the threshold; unmeetable thresholds give status infeasible."""
    model, senses, w, shift = case
    senses = (senses * 2)[:3]
    thresholds = _anchor(model, senses, w if len(w) == 3 else np.append(w, 0.0), np.append(shift, 0.0)[:3] * 0.5)
    assume(thresholds is not None)
    objs = _pareto_objectives(senses, thresholds[2])
    try:
        ours = pareto(make_oracle(model, objs, "kernel"), objs, exhaustive=True)
    except InfiniteValueError:
        assume(False)
    sign = np.array([1.0 if s == "max" else -1.0 for s in senses])
    feasible = lp_achievable(model, objs[2:]).margin
    event(f"feasible={feasible >= 0}")
    if ours.status == "infeasible":
        assert feasible <= 1e-6
        assert ours.certificate["required"] > ours.certificate["bound"]
        return
    assert feasible >= -1e-4 and ours.status == "optimal"
    pts = np.array(ours.points)
    assert len(ours.mixtures) == len(pts)
    for p, mix in zip(pts, ours.mixtures):  # each point is its mixture of the reported vertices
        assert np.allclose(sum(lam * np.array(ours.vertices[i]) for lam, i in mix), p, atol=1e-9)
        assert sign[2] * p[2] >= sign[2] * thresholds[2] - 1e-4
    for d in np.array(raw).reshape(3, 2):
        d = np.append(np.abs(d) * sign[:2], 0.0)
        ref = _lp_direction(model, objs, d)
        if ref is None:
            continue
        # equal up to the kernel's error; above only by the threshold's relaxation (<= precision)
        best = np.max(pts @ d)
        assert ref - 1e-6 * max(1.0, abs(ref)) <= best <= ref + 1e-4 * np.abs(d).sum() + 1e-6 * max(1.0, abs(ref))


def _check_certificate(model, objs, cert):
    """A certificate proves infeasibility: no weight on objectives without a threshold, and the
    exact LP's best ``direction . x`` over all schedulers is at most ``bound < required`` (while
    every point meeting the thresholds has ``direction . x >= required``)."""
    d = np.array(cert["direction"])
    for i, o in enumerate(objs):
        assert o.threshold is not None or d[i] == 0.0, (i, d)
        assert d[i] * (1.0 if o.sense == "max" else -1.0) >= 0.0  # towards better values
    assert cert["required"] > cert["bound"]
    assert cert["required"] == pytest.approx(sum(d[i] * o.threshold for i, o in enumerate(objs) if o.threshold is not None))
    free = tuple(dataclasses.replace(o, comparison=None, threshold=None) for o in objs)
    best = lp_optimise(model, free, d).value
    assert best <= cert["bound"] + 1e-7 * max(1.0, abs(best))


@settings(**SETTINGS)
@given(cases(), st.integers(0, 2), st.sampled_from(["numerical", "pareto"]))
def test_infeasibility_certificates_hold_against_the_lp(case, k, kind):
    """Numerical and Pareto queries whose thresholds cannot all be met: the certificate is checked
    against the exact occupation-measure LP; 'stalled' only where the LP finds the thresholds met
    with (almost) no slack."""
    model, senses, w, shift = case
    harder = np.abs(shift) * np.array([1.0 if s == "max" else -1.0 for s in senses])  # mostly unmeetable
    if kind == "numerical":
        thresholds = _anchor(model, senses, w, harder)
        assume(thresholds is not None)
        objs = _objectives(senses, thresholds, query=k % len(senses))
    else:  # two queried objectives and a threshold on a third
        senses = (senses * 2)[:3]
        thresholds = _anchor(model, senses, w if len(w) == 3 else np.append(w, 0.0), np.append(harder, harder[0])[:3])
        assume(thresholds is not None)
        objs = _pareto_objectives(senses, thresholds[2])
    try:
        ours = (numerical if kind == "numerical" else pareto)(make_oracle(model, objs, "kernel"), objs)
    except InfiniteValueError:
        assume(False)
    constrained = tuple(o for o in objs if o.threshold is not None)
    margin = lp_achievable(model, constrained).margin
    event(f"{kind}: {ours.status}")
    if ours.status == "infeasible":
        assert margin <= 1e-6
        _check_certificate(model, objs, ours.certificate)
    elif ours.status == "stalled":
        assert abs(margin) <= 1e-6 and ours.certificate is None
    else:
        # met, or missed by less than the precision: such thresholds count as met (Storm's
        # approximate semantics; a Pareto front relaxes them by the shortfall). Found by Hypothesis:
        # r2 <= -1e-5 where r2 is 0 under every scheduler
        assert margin >= -DEFAULT_PRECISION - 1e-9


def test_a_threshold_at_the_best_value_still_explores_the_front():
    """Found by Hypothesis: r2 >= 0 where 0 is r2's best value. The outer polytope cut by that
    threshold has no volume, so it had no corners, and the search stopped at the first vertices:
    the front was (0, 0, 0) although 'always choice 3' reaches r1 = 0.9 / (1 - 0.81) with r2 = 0."""
    from mopmc.model.sparse_mdp import SparseMDP

    model = SparseMDP.from_arrays([0, 1, 4, 5], [0, 2, 4, 6, 8, 9], [1, 2, 0, 2, 0, 2, 0, 2, 2],
                                  [0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 1.0], initial=0,
                                  rewards={"r0": np.zeros(5), "r1": np.array([0.0, 0, 1, 1, 0]), "r2": np.array([0.0, 0, -1, 0, 0])})
    objs = _pareto_objectives(["max", "max", "max"], 0.0)
    for exhaustive in (True, False):
        res = pareto(make_oracle(model, objs, "kernel"), objs, exhaustive=exhaustive)
        assert res.status == "optimal"
        np.testing.assert_allclose(res.points, [[0.0, 0.9 / 0.19, 0.0]], atol=1e-4 if not exhaustive else 1e-9)
        assert _lp_direction(model, objs, np.array([0.0, 1.0, 0.0])) == pytest.approx(0.9 / 0.19, abs=1e-9)


def test_a_corner_rounded_outside_the_outer_polytope_ends_the_search():
    """Found by Hypothesis with fresh examples: r1 = r2 and a threshold 5e-7 above r2's minimum.
    Qhull's joggled intersection gave a corner 3e-7 outside a known halfspace; its direction was
    asked again and again (nothing new, never confirmed) until the 500-call limit. The front is
    the same, now 'optimal' within a few calls, and equals the LP's in every direction tried."""
    from mopmc.model.sparse_mdp import SparseMDP

    model = SparseMDP.from_arrays(
        [0, 2, 4, 7, 8], [0, 3, 5, 7, 9, 11, 13, 15, 16], [0, 1, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 3],
        [0.45, 0.45, 0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 1.0], initial=0,
        rewards={"r0": np.eye(8)[1], "r1": np.eye(8)[0], "r2": np.eye(8)[0]})
    senses = ["min", "min", "min"]
    thresholds = _anchor(model, senses, np.zeros(3), np.array([0.0, 0.0, 5e-7]))
    objs = _pareto_objectives(senses, thresholds[2])
    res = pareto(make_oracle(model, objs, "kernel"), objs, exhaustive=True)
    assert res.status == "optimal" and res.iterations < 50
    pts = np.array(res.points)
    for d in ([-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [-0.5, -0.5, 0.0], [-0.1, -0.9, 0.0]):
        ref = _lp_direction(model, objs, np.array(d))
        assert np.max(pts @ d) == pytest.approx(ref, abs=1e-6)
