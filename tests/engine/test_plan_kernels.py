"""The compiled steps of the engine's preprocessing against their plain numpy definitions.

``plan`` (a counting sort by level), the one-pass almost-sure exit on graphs whose SCCs are single
states (against the general fixpoint of :func:`~mopmc.engine.reductions.graph.almost_sure_max`),
the kept SCCs of a restriction, and the order tests ``is_range`` / ``nearly_sequential``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdp_reference import FAST
from mopmc.engine import numba_kernels as nk
from mopmc.engine.problem import Problem, is_range
from mopmc.engine.reductions import graph
from mopmc.engine.scc import (MERGE_MOST, MERGE_SMALL, Plan, merge_small_cycles, nearly_sequential, plan, processing_order,
                              split_sccs, state_sccs)


def _random_problem(rng, n, *, acyclic: bool) -> Problem:
    """1-3 choices per state, 0-3 transitions each; ``acyclic``: every transition goes to a state
    of a smaller number or back to its own (self-loops: every SCC a single state)."""
    choices = rng.integers(1, 4, n)
    rg = np.concatenate(([0], np.cumsum(choices))).astype(np.int64)
    lens = rng.integers(0, 4, rg[-1])
    ip = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    owner = np.repeat(np.repeat(np.arange(n), choices), lens)
    tg = rng.integers(0, n, ip[-1]).astype(np.int64)
    if acyclic:
        below = (rng.random(ip[-1]) * (owner + 1)).astype(np.int64)  # 0 .. owner
        tg = np.where(rng.random(ip[-1]) < 0.2, owner, below)
    exits = (lens == 0) | (rng.random(rg[-1]) < 0.15)
    return Problem(rg, ip, tg, np.full(ip[-1], 1.0), np.zeros((rg[-1], 1)), exits, 0)


def _plan_reference(label, levels) -> Plan:
    """The plan as two stable argsorts (the engine's former form)."""
    level = levels[label]
    cyclic = np.bincount(label)[label] > 1
    trivial = np.flatnonzero(~cyclic)
    trivial = trivial[np.argsort(level[trivial], kind="stable")]
    tl = level[trivial]
    steps, start = [], 0
    cyc = np.flatnonzero(cyclic)
    cyc = cyc[np.argsort(level[cyc], kind="stable")]
    bounds = np.flatnonzero(np.diff(level[cyc])) + 1
    for group in np.split(cyc, bounds) if len(cyc) else ():
        stop = int(np.searchsorted(tl, level[group[0]], side="right"))
        if stop > start:
            steps.append(("pass", trivial[start:stop]))
        start = stop
        steps.append(("cycles", np.sort(group)))
    if start < len(trivial):
        steps.append(("pass", trivial[start:]))
    return Plan(label, level, tuple(steps), int(cyclic.sum()))


@settings(max_examples=80, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), acyclic=st.booleans())
def test_plan_is_the_argsort_plan(seed, n, acyclic):
    p = _random_problem(np.random.default_rng(seed), n, acyclic=acyclic)
    sccs = state_sccs(p)
    mine, ref = plan(None, sccs, merge=False), _plan_reference(sccs.label, sccs.height)
    assert mine.n_cyclic == ref.n_cyclic
    np.testing.assert_array_equal(mine.level, ref.level)
    assert [k for k, _ in mine.steps] == [k for k, _ in ref.steps]
    for (_, a), (_, b) in zip(mine.steps, ref.steps):
        np.testing.assert_array_equal(a, b)


def _merge_reference(steps, small, most):
    """Runs of small steps merged from their first cycles step to their last, in plain Python (the
    engine's former form of :func:`~mopmc.engine.scc.merge_small_cycles`)."""
    out, run, size = [], [], 0

    def flush():
        cyc = [i for i, (kind, _) in enumerate(run) if kind == "cycles"]
        if len(cyc) >= 2:
            out.extend(run[:cyc[0]])
            out.append(("cycles", np.concatenate([states for _, states in run[cyc[0]:cyc[-1] + 1]])))
            out.extend(run[cyc[-1] + 1:])
        else:
            out.extend(run)
        run.clear()

    for kind, states in steps:
        if len(states) > small:
            flush()
            size = 0
            out.append((kind, states))
            continue
        if size + len(states) > most:
            flush()
            size = 0
        run.append((kind, states))
        size += len(states)
    flush()
    return out


def _same_steps(a, b):
    assert [k for k, _ in a] == [k for k, _ in b]
    for (_, x), (_, y) in zip(a, b):
        np.testing.assert_array_equal(x, y)


@settings(max_examples=80, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_the_merged_plan_is_the_plan_with_its_small_cycles_merged(seed, n):
    """plan() merges runs of small cyclic SCCs as it builds the steps (compiled): the same steps
    as merging the unmerged plan in plain Python, and the processing order is that of the steps."""
    p = _random_problem(np.random.default_rng(seed), n, acyclic=False)
    sccs = state_sccs(p)
    merged, unmerged = plan(None, sccs), plan(None, sccs, merge=False)
    _same_steps(merged.steps, _merge_reference(unmerged.steps, MERGE_SMALL, MERGE_MOST))
    _same_steps(merge_small_cycles(unmerged).steps, merged.steps)
    for pl in (merged, unmerged):
        np.testing.assert_array_equal(processing_order(pl), np.concatenate([s for _, s in pl.steps]))
    assert merged.n_cyclic == unmerged.n_cyclic


@settings(max_examples=150, **FAST)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, 40), small=st.integers(-1, 6), most=st.integers(0, 20))
def test_merge_groups_equal_the_python_merge(seed, k, small, most):
    """Steps of 1-8 states, cycles or passes, under small and large caps."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, k)
    kinds = np.where(rng.random(k) < 0.5, "cycles", "pass")
    ends = np.cumsum(sizes)
    steps = [(str(kd), np.arange(e - z, e)) for kd, z, e in zip(kinds, sizes, ends)]
    pl = Plan(np.zeros(int(sizes.sum()), np.int64), np.zeros(int(sizes.sum()), np.int64), tuple(steps), 0)
    _same_steps(merge_small_cycles(pl, small, most).steps, _merge_reference(steps, small, most))


def test_plan_of_no_states():
    pl = plan(None, state_sccs(Problem(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64),
                                       np.zeros(0), np.zeros((0, 1)), np.zeros(0, bool), -1)))
    assert pl.steps == () and pl.n_cyclic == 0


@settings(max_examples=80, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_one_pass_exit_equals_the_fixpoint_where_every_scc_is_one_state(seed, n):
    p = _random_problem(np.random.default_rng(seed), n, acyclic=True)
    pl = plan(p)
    assert pl.n_cyclic == 0
    good, via = graph.almost_sure_exit_acyclic(p, processing_order(pl))
    ref, _ = graph.almost_sure_max(graph.Csr(p.row_groups, p.indptr, p.targets), np.zeros(n, bool), p.exits)
    np.testing.assert_array_equal(good, ref)
    np.testing.assert_array_equal(via < 0, ~good)
    for s in np.flatnonzero(good):  # a proper choice: it leaves s and stays among the good states
        c = via[s]
        assert p.row_groups[s] <= c < p.row_groups[s + 1]
        succ = p.targets[p.indptr[c]:p.indptr[c + 1]]
        others = succ[succ != s]
        assert p.exits[c] or len(others)
        assert good[others].all()


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_split_sccs_keeps_the_states_of_the_kept_sccs(seed, n):
    rng = np.random.default_rng(seed)
    p = _random_problem(rng, n, acyclic=False)
    sccs = state_sccs(p, rng.random(n) < 0.2)
    keep, kept = split_sccs(sccs, sccs.reach)
    np.testing.assert_array_equal(keep, sccs.reach[sccs.label])
    new = np.cumsum(sccs.reach) - 1
    np.testing.assert_array_equal(kept.label, new[sccs.label[keep]])
    np.testing.assert_array_equal(kept.height, sccs.height[sccs.reach])


@pytest.mark.parametrize("n", [0, 1, 2, 100, 70_000, 200_000])
def test_order_tests_equal_numpy_on_long_and_short_arrays(n):
    rng = np.random.default_rng(n)
    run = np.arange(5, 5 + n, dtype=np.int64)
    assert is_range(run)
    if n > 1:
        broken = run.copy()
        broken[n // 2] += 1
        assert not is_range(broken)
    for jumpy in (0.0, 0.03, 0.07, 0.5):
        order = np.arange(n, dtype=np.int64)
        where = rng.random(n) < jumpy
        order[where] += 1000
        ref = n > 1 and float(np.mean(np.abs(np.diff(order)) > 64)) < 0.05
        assert nearly_sequential(order) == ref
        assert nk.order_steps(order, 64)[1] == int(np.sum(np.abs(np.diff(order)) > 64))


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), m=st.integers(0, 3))
def test_restrict_and_permute_on_worker_threads_equal_one_pass(seed, n, m):
    """Ranges of a few choices counted and filled by three threads: the arrays of the one-pass
    kernel (no workers)."""
    from mopmc import workers
    from mopmc.engine.problem import permute, restrict

    rng = np.random.default_rng(seed)
    p = _random_problem(rng, n, acyclic=False)
    p = p._replace(rewards=rng.normal(size=(p.n_choices, m)))
    keep = rng.random(n) < 0.7
    order = rng.permutation(np.flatnonzero(keep))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "count", lambda: 0)
        one = restrict(p, keep).problem, permute(p, order).problem
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workers, "count", lambda: 2)
        mp.setattr(workers, "MIN_RANGE", 2)
        many = restrict(p, keep).problem, permute(p, order).problem
    for a, b in zip(one, many):
        for name, x, y in zip(a._fields, a, b):
            assert np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype, name


def _product_reference(model, objectives, choice_mask=None):
    """The goal-memory product's arrays and reward columns in numpy (the engine's former form)."""
    from mopmc.engine.problem import gather_rows
    from mopmc.engine.reductions.goal_memory import _decision_sets, orientation

    n = model.n_states
    decided, bit_of = _decision_sets(model, objectives)
    k = decided.shape[0]
    dbits = np.zeros(n, np.int64)
    for j in range(k):
        dbits |= decided[j].astype(np.int64) << j
    ok = np.ones(model.n_choices, bool) if choice_mask is None else choice_mask
    drop_full = k > 0 and all(b >= 0 for b in bit_of)
    full = (1 << k) - 1
    index = np.zeros(n << k, np.int64)
    st, mem = nk.product_bfs(model.row_groups, model.indptr, model.targets, ok, n, dbits, model.initial, drop_full, full, index)
    if k == 0:
        st = np.sort(st)
        mem = np.zeros(len(st), np.int64)
        index = np.zeros(n, np.int64)
        index[st] = np.arange(1, len(st) + 1)
    rg0 = model.row_groups
    lens = rg0[st + 1] - rg0[st]
    pc_all = np.repeat(rg0[st] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) + np.arange(lens.sum())
    owner_all = np.repeat(np.arange(len(st), dtype=np.int64), lens)
    keep = ok[pc_all]
    pc, owner = pc_all[keep], owner_all[keep]
    rg = np.zeros(len(st) + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=len(st)), out=rg[1:])
    ip_all, idx = gather_rows(model.indptr, pc)
    towner = np.repeat(owner, np.diff(ip_all))
    b2 = mem[towner] | dbits[st[towner]]
    tgt = index[b2 * n + model.targets[idx]] - 1
    if drop_full:
        tgt = np.where(b2 == full, -1, tgt)
    live = tgt >= 0
    counts = np.diff(ip_all)
    kept = np.zeros(len(pc), np.int64)
    ne = counts > 0
    if ne.any():
        kept[ne] = np.add.reduceat(live.astype(np.int64), ip_all[:-1][ne])
    ip = np.zeros(len(pc) + 1, np.int64)
    np.cumsum(kept, out=ip[1:])
    ori = orientation(objectives)
    R = np.empty((len(pc), len(objectives)))
    for i, o in enumerate(objectives):
        if o.kind == "total_reward":
            col = model.reward(o.reward_model)[pc]
        else:
            unset = ((mem[owner] >> bit_of[i]) & 1) == 0
            s = st[owner]
            if o.kind == "probability":
                col = (unset & o.target_mask(model)[s]).astype(np.float64)
                if o.negated:
                    col = -col
            else:
                col = np.where(unset & ~o.target_mask(model)[s], model.reward(o.reward_model)[pc], 0.0)
        np.multiply(col, ori.direction[i], out=R[:, i])
    tchoice = np.repeat(np.arange(len(pc), dtype=np.int64), counts)  # (the dropped transitions' probabilities: the exit mass)
    mass = np.bincount(tchoice[~live], weights=model.probs[idx][~live], minlength=len(pc)).astype(np.float64)
    return Problem(rg, ip, tgt[live], model.probs[idx][live], R, kept < counts, 0 if k else int(index[model.initial]) - 1, mass)


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), which=st.sampled_from(["reach", "reward", "total", "masked"]))
def test_goal_memory_product_equals_the_numpy_form_bit_for_bit(seed, n, which):
    from dataclasses import replace

    from mdp_reference import random_mdp
    from mopmc.engine.reductions import goal_memory
    from mopmc.properties.objectives import Objective

    rng = np.random.default_rng(seed)
    base = random_mdp(rng, n, 2, zero_frac=0.5)
    model = replace(base, labels={"A": rng.random(n) < 0.2, "B": rng.random(n) < 0.3, "C": rng.random(n) < 0.2})
    sense = lambda: str(rng.choice(["min", "max"]))  # noqa: E731
    objs = {
        "reach": [Objective(0, 'P[F "A"]', "probability", sense(), right_text='"A"'),
                  Objective(1, 'P[G !"B"]', "probability", sense(), right_text='!(!"B")', negated=True),
                  Objective(2, 'R{"r0"}[C]', "total_reward", sense(), "r0")],
        "reward": [Objective(0, 'R{"r1"}[F "C"]', "reach_reward", sense(), "r1", right_text='"C"'),
                   Objective(1, 'P[F "A"]', "probability", sense(), right_text='"A"')],
        "total": [Objective(0, 'R{"r0"}[C]', "total_reward", sense(), "r0"),
                  Objective(1, 'R{"r1"}[C]', "total_reward", sense(), "r1")],
    }.get(which)
    mask = None
    if which == "masked":  # no memory bits, some choices not allowed: a product of the reachable part
        objs = [Objective(0, 'R{"r0"}[C]', "total_reward", sense(), "r0")]
        mask = rng.random(model.n_choices) < 0.8
        mask[model.row_groups[:-1]] = True  # every state keeps a choice
    got, pmap, _ = goal_memory.apply(model, objs, mask)
    ref = _product_reference(model, objs, mask)
    if pmap.identity:
        return
    for name, a, b in zip(Problem._fields, got, ref):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if a.dtype == np.float64:  # the same bits (signs of zeros included)
            assert np.array_equal(a.view(np.int64), b.view(np.int64)), name
        else:
            assert np.array_equal(a, b), name


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_cyclic_candidates_of_one_state_sccs_are_the_self_loop_states(seed, n):
    from mopmc.engine.reductions import end_components as ec

    p = _random_problem(np.random.default_rng(seed), n, acyclic=True)
    sccs = state_sccs(p)
    assert len(sccs.height) == n
    np.testing.assert_array_equal(ec.cyclic_candidates(p, sccs.label, n), ec.cyclic_candidates(p, sccs.label))


@settings(max_examples=80, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), acyclic=st.booleans())
def test_depth_first_labels_are_tarjans_where_every_cycle_is_a_self_loop(seed, n, acyclic):
    rng = np.random.default_rng(seed)
    p = _random_problem(rng, n, acyclic=acyclic)
    mark = rng.random(n) < 0.2
    count, label, height, reach = nk.scc_labels(p.row_groups, p.indptr, p.targets, mark)
    ok, n_labels, dlabel, dheight, dreach = nk.dag_labels(p.row_groups, p.indptr, p.targets, mark)
    assert ok == (count == n)  # it gives up exactly where some SCC has two or more states
    if ok:
        assert n_labels == count
        np.testing.assert_array_equal(dlabel, label)
        np.testing.assert_array_equal(dheight[:n_labels], height)
        np.testing.assert_array_equal(dreach[:n_labels], reach)
    sccs = state_sccs(p, mark)  # either way Tarjan's answer
    for a, b in zip(sccs, (label, height, reach)):
        np.testing.assert_array_equal(a, b)
