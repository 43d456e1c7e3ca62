"""The compiled graph kernels against scipy and their plain definitions on random CSR graphs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from mdp_reference import FAST
from mopmc.engine import numba_kernels as nk


def _random_csr(rng, n):
    """A state -> choices -> transitions CSR with 0-3 choices per state, 0-3 transitions each."""
    choices = rng.integers(0, 4, n)
    row_groups = np.concatenate(([0], np.cumsum(choices))).astype(np.int64)
    lens = rng.integers(0, 4, row_groups[-1])
    indptr = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    targets = rng.integers(0, n, indptr[-1]).astype(np.int64)
    return row_groups, indptr, targets


def _canonical(label):
    """Relabel by first occurrence, so that two partitions compare equal as arrays."""
    _, first, inverse = np.unique(label, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse]


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_scc_labels_are_scipys_components_in_reverse_topological_order(seed, n):
    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    count, label, height, reach = nk.scc_labels(rg, ip, tg, np.ones(n, bool))
    graph = csr_matrix((np.ones(len(tg)), tg, ip[rg]), shape=(n, n))
    graph.sum_duplicates()  # scipy 1.17's strong components never return on duplicate entries
    ref_count, ref = connected_components(graph, directed=True, connection="strong")
    assert count == ref_count
    np.testing.assert_array_equal(_canonical(label), _canonical(ref))
    src = np.repeat(np.arange(n), np.diff(ip[rg]))
    between = label[src] != label[tg]
    assert np.all(label[src][between] > label[tg][between])
    ref_height = np.zeros(count, np.int64)  # longest path to a sink, by relaxation to a fixpoint
    for _ in range(count):
        np.maximum.at(ref_height, label[src][between], ref_height[label[tg][between]] + 1)
    np.testing.assert_array_equal(height, ref_height)


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60))
def test_reverse_index_lists_each_states_predecessor_choices(seed, n):
    rng = np.random.default_rng(seed)
    _, ip, tg = _random_csr(rng, n)
    cot = np.repeat(np.arange(len(ip) - 1, dtype=np.int64), np.diff(ip))
    ptr, ch = nk.reverse_index_csr(n, ip, tg)
    for t in range(n):  # in transition order, so the choices come sorted
        np.testing.assert_array_equal(ch[ptr[t]:ptr[t + 1]], cot[tg == t])


def test_plan_of_a_state_graph_with_duplicate_edges():
    """Two choices of state 0 both reach 0 and 1: duplicate edges, on which scipy's strong
    components (the engine's former SCC routine) loops forever; the compiled Tarjan does not."""
    from mopmc.engine.problem import Problem
    from mopmc.engine.scc import plan

    rg, ip, tg = np.array([0, 2, 3]), np.array([0, 2, 4, 4]), np.array([0, 1, 0, 1])
    p = Problem(rg, ip, tg, np.full(4, 0.5), np.zeros((3, 1)), np.array([False, False, True]), 0)
    pl = plan(p)
    assert pl.n_cyclic == 0 and pl.label[0] != pl.label[1]
    assert [kind for kind, _ in pl.steps] == ["pass"]


def test_scc_labels_survive_a_long_chain():
    n = 200_000  # recursion depth n for a recursive Tarjan: the iterative one must not care
    rg = np.arange(n + 1, dtype=np.int64)
    ip = np.concatenate(([0], np.cumsum(np.r_[np.ones(n - 1, np.int64), 1]))).astype(np.int64)
    tg = np.r_[np.arange(1, n), 0].astype(np.int64)  # one big cycle
    count, label, height, _ = nk.scc_labels(rg, ip, tg, np.ones(n, bool))
    assert count == 1 and np.all(label == 0)
    tg2 = np.r_[np.arange(1, n), n - 1].astype(np.int64)  # a chain ending in a self-loop
    count, label, height, _ = nk.scc_labels(rg, ip, tg2, np.ones(n, bool))
    assert count == n and np.all(np.diff(label) == -1)
    np.testing.assert_array_equal(height, np.arange(n))


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60))
def test_self_loop_states_equal_the_owner_form(seed, n):
    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    soc = np.repeat(np.arange(n), np.diff(rg))
    cot = np.repeat(np.arange(len(ip) - 1), np.diff(ip))
    ref = np.zeros(n, bool)
    ref[tg[soc[cot] == tg]] = True
    np.testing.assert_array_equal(nk.self_loop_states(rg, ip, tg), ref)


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_reach_and_restricted_sccs_equal_the_sub_problem_computed_afresh(seed, n):
    """``reach`` is backward reachability of the seed states; the restricted SCCs (labels, heights)
    are those of the sub-problem of the reaching states, computed from scratch."""
    from mopmc.engine.problem import Problem, restrict
    from mopmc.engine.scc import restrict_sccs, state_sccs

    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    nc = int(rg[-1])
    p = Problem(rg, ip, tg, np.full(len(tg), 1.0), np.zeros((nc, 1)), np.zeros(nc, bool), 0)
    goal = rng.random(n) < 0.2
    sccs = state_sccs(p, goal)
    keep = sccs.reach[sccs.label]
    reach_ref = goal.copy()  # backward reachability by fixpoint
    src = np.repeat(np.arange(n), np.diff(ip[rg]))
    for _ in range(n):
        reach_ref[src[reach_ref[tg]]] = True
    np.testing.assert_array_equal(keep, reach_ref)
    if not keep.any():
        return
    sub = restrict(p, keep).problem
    assert sub.n_states == int(keep.sum())
    mine = restrict_sccs(sccs, sccs.reach)
    fresh = state_sccs(sub)
    np.testing.assert_array_equal(_canonical(mine.label), _canonical(fresh.label))
    np.testing.assert_array_equal(mine.height[mine.label], fresh.height[fresh.label])


def _restrict_reference(p, keep_states, keep_choices):
    """The restriction written out in numpy (how ``restrict`` read before its compiled pass)."""
    soc = np.repeat(np.arange(p.n_states), np.diff(p.row_groups))
    keep_c = keep_states[soc] if keep_choices is None else (keep_choices & keep_states[soc])
    state_map = np.full(p.n_states, -1, np.int64)
    state_map[keep_states] = np.arange(int(keep_states.sum()))
    origin = np.flatnonzero(keep_c)
    rg = np.zeros(int(keep_states.sum()) + 1, np.int64)
    np.cumsum(np.bincount(state_map[soc[origin]], minlength=len(rg) - 1), out=rg[1:])
    return state_map, origin, rg


def test_restrict_maps_equal_the_numpy_reference():
    from mopmc.engine.problem import Problem, restrict

    rng = np.random.default_rng(1)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        rg = np.concatenate(([0], np.cumsum(rng.integers(0, 4, size=n)))).astype(np.int64)
        nc = int(rg[-1])
        ip = np.concatenate(([0], np.cumsum(rng.integers(0, 4, size=nc)))).astype(np.int64)
        tg = rng.integers(0, n, size=int(ip[-1])).astype(np.int64)
        p = Problem(rg, ip, tg, rng.uniform(0, 1, size=len(tg)), rng.uniform(size=(nc, 2)), rng.random(nc) < 0.2, int(rng.integers(0, n)))
        keep_states = rng.random(n) < 0.6
        keep_choices = (rng.random(nc) < 0.7) if trial % 2 else None
        r = restrict(p, keep_states, keep_choices)
        state_map, origin, new_rg = _restrict_reference(p, keep_states, keep_choices)
        if keep_states.all() and (keep_choices is None or keep_choices.all()):
            assert r.problem is p
            continue
        assert np.array_equal(r.state_map, state_map) and np.array_equal(r.choice_origin, origin)
        assert np.array_equal(r.problem.row_groups, new_rg)
        assert np.array_equal(r.problem.rewards, p.rewards[origin])
        # every kept transition, renumbered; transitions into removed states make an exit
        for c_new, c in enumerate(origin):
            kept = [(state_map[t], q) for t, q in zip(tg[ip[c]:ip[c + 1]], p.probs[ip[c]:ip[c + 1]]) if state_map[t] >= 0]
            a, b = r.problem.indptr[c_new], r.problem.indptr[c_new + 1]
            assert list(zip(r.problem.targets[a:b], r.problem.probs[a:b])) == kept
            assert r.problem.exits[c_new] == (p.exits[c] or len(kept) < ip[c + 1] - ip[c])


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), m=st.integers(1, 3))
def test_permute_moves_every_state_with_its_choices_transitions_and_rewards(seed, n, m):
    from mopmc.engine.problem import Problem, permute

    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    nc = len(ip) - 1
    p = Problem(rg, ip, tg, rng.random(len(tg)), rng.random((nc, m)), rng.random(nc) < 0.3, int(rng.integers(n)))
    order = rng.permutation(n).astype(np.int64)
    r = permute(p, order)
    q = r.problem
    np.testing.assert_array_equal(r.state_map[order], np.arange(n))
    assert q.initial == r.state_map[p.initial]
    for i, s in enumerate(order):  # new state i is old state s: same choices in the same order
        old = np.arange(rg[s], rg[s + 1])
        new = np.arange(q.row_groups[i], q.row_groups[i + 1])
        np.testing.assert_array_equal(r.choice_origin[new], old)
        for c_new, c_old in zip(new, old):
            np.testing.assert_array_equal(q.rewards[c_new], p.rewards[c_old])
            assert q.exits[c_new] == p.exits[c_old]
            np.testing.assert_array_equal(q.targets[q.indptr[c_new]:q.indptr[c_new + 1]], r.state_map[tg[ip[c_old]:ip[c_old + 1]]])
            np.testing.assert_array_equal(q.probs[q.indptr[c_new]:q.indptr[c_new + 1]], p.probs[ip[c_old]:ip[c_old + 1]])
    assert q.rewards.flags.c_contiguous and q.rewards.shape == (nc, m)


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), m=st.integers(1, 3))
def test_permute_of_some_states_removes_the_others_as_restrict_does(seed, n, m):
    """An ``order`` listing a subset: the result is :func:`restrict` to that subset, renumbered in
    the listed order (transitions into removed states dropped, their choices marked as exits)."""
    from mopmc.engine.problem import Problem, permute, restrict

    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    nc = len(ip) - 1
    p = Problem(rg, ip, tg, rng.random(len(tg)), rng.random((nc, m)), rng.random(nc) < 0.3, int(rng.integers(n)))
    keep = rng.random(n) < 0.6
    order = rng.permutation(np.flatnonzero(keep)).astype(np.int64)
    r = permute(p, order)
    ref = restrict(p, keep)  # kept states in their old order
    q, qr = r.problem, ref.problem
    assert np.all(r.state_map[~keep] == -1)
    np.testing.assert_array_equal(r.state_map[order], np.arange(len(order)))
    assert q.initial == (r.state_map[p.initial] if keep[p.initial] else -1)
    for i, s in enumerate(order):  # new state i is old state s, also state ref.state_map[s] of the restriction
        j = ref.state_map[s]
        new = np.arange(q.row_groups[i], q.row_groups[i + 1])
        old = np.arange(qr.row_groups[j], qr.row_groups[j + 1])
        np.testing.assert_array_equal(r.choice_origin[new], ref.choice_origin[old])
        for a, b in zip(new, old):
            np.testing.assert_array_equal(q.rewards[a], qr.rewards[b])
            assert q.exits[a] == qr.exits[b]
            got = q.targets[q.indptr[a]:q.indptr[a + 1]]
            want = qr.targets[qr.indptr[b]:qr.indptr[b + 1]]  # numbered by the restriction
            np.testing.assert_array_equal(got, r.state_map[np.flatnonzero(keep)[want]])
            np.testing.assert_array_equal(q.probs[q.indptr[a]:q.indptr[a + 1]], qr.probs[qr.indptr[b]:qr.indptr[b + 1]])


@settings(max_examples=60, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_drop_worthless_in_plan_order_is_the_restriction_renumbered_by_its_plan(seed, n):
    """One copy instead of two: the kept states in processing order are the plain restriction
    permuted by the order of its plan, the plan returned is the result's own and every step of it
    a contiguous range."""
    from mopmc.engine.problem import Problem, is_range, permute
    from mopmc.engine.reductions.graph import drop_worthless
    from mopmc.engine.scc import plan, processing_order

    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    nc = len(ip) - 1
    rewards = np.where(rng.random((nc, 2)) < 0.15, rng.random((nc, 2)), 0.0)
    p = Problem(rg, ip, tg, rng.random(len(tg)), rewards, rng.random(nc) < 0.2, int(rng.integers(n)))
    plain, plain_sccs, plain_plan = drop_worthless(p)
    fused, fused_sccs, fused_plan = drop_worthless(p, "plan")
    if fused.problem.initial < 0:  # nothing kept worth planning
        assert plain.problem.initial < 0 and plain_plan is None and fused_plan is None
        return
    mine = plan(plain.problem, plain_sccs)
    np.testing.assert_array_equal(processing_order(plain_plan), processing_order(mine))
    if fused.problem is p:  # nothing removed: nothing copied
        assert plain.problem is p
        return
    order = processing_order(mine)
    ref = permute(plain.problem, order)
    for a, b in zip(fused.problem, ref.problem):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fused.choice_origin, plain.choice_origin[ref.choice_origin])
    kept = plain.state_map >= 0
    np.testing.assert_array_equal(fused.state_map[kept], ref.state_map[plain.state_map[kept]])
    assert np.all(fused.state_map[~kept] == -1)
    assert all(is_range(s) for _, s in fused_plan.steps)
    np.testing.assert_array_equal(processing_order(fused_plan), np.arange(fused.problem.n_states))
    fresh = plan(fused.problem)  # computed afresh on the result: the same plan
    assert [k for k, _ in fresh.steps] == [k for k, _ in fused_plan.steps]
    for (_, a), (_, b) in zip(fresh.steps, fused_plan.steps):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_canonical(fresh.label), _canonical(fused_plan.label))
    np.testing.assert_array_equal(_canonical(fresh.label), _canonical(fused_sccs.label))
    np.testing.assert_array_equal(fresh.level, fused_plan.level)
    auto = drop_worthless(p, "auto")[0].problem  # one of the two numberings
    assert any(all(np.array_equal(a, b) for a, b in zip(auto, q)) for q in (plain.problem, fused.problem))


@settings(max_examples=40, **FAST)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 50), cols=st.integers(0, 4))
def test_nonzero_rows_is_numpys_any_not_zero(seed, rows, cols):
    """NaN counts as not zero and -0.0 as zero, in any memory layout."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random((rows, cols)) < 0.3, rng.standard_normal((rows, cols)), 0.0)
    a[rng.random((rows, cols)) < 0.05] = np.nan
    a[rng.random((rows, cols)) < 0.1] = -0.0
    for x in (a, np.asfortranarray(a), a[:, ::-1], a[::2]):
        np.testing.assert_array_equal(nk.nonzero_rows(x), np.any(x != 0.0, axis=1))


# --- qualitative reachability: the worklist fixpoints against their plain definitions ----------------

def _plain_avoid(rg, ip, tg, target):
    """Pmin[F target] = 0: the largest set outside target where some choice keeps every successor in it."""
    n = len(rg) - 1
    inside = ~target
    while True:
        keep = np.array([inside[s] and any(all(inside[tg[k]] for k in range(ip[c], ip[c + 1]))
                                           for c in range(rg[s], rg[s + 1])) for s in range(n)], bool)
        if np.array_equal(keep, inside):
            return inside
        inside = keep


def _plain_almost_sure_max(rg, ip, tg, target, exits):
    """Pmax = 1: repeat (keep the states that reach target, or an exit, by choices staying inside)."""
    n = len(rg) - 1
    owner = np.repeat(np.arange(n), np.diff(rg))
    inside = np.ones(n, bool)
    while True:
        valid = np.array([inside[owner[c]] and all(inside[tg[k]] for k in range(ip[c], ip[c + 1]))
                          for c in range(len(ip) - 1)], bool)
        mark = inside & (target | np.bincount(owner[valid & exits], minlength=n).astype(bool))
        changed = True
        while changed:
            changed = False
            for c in np.flatnonzero(valid):
                s = owner[c]
                if not mark[s] and any(mark[tg[k]] for k in range(ip[c], ip[c + 1])):
                    mark[s] = changed = True
        if np.array_equal(mark, inside):
            return inside
        inside = mark


@settings(max_examples=80, **FAST)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40))
def test_qualitative_fixpoints_equal_their_plain_definitions(seed, n):
    from mopmc.engine.reductions import graph

    rng = np.random.default_rng(seed)
    rg, ip, tg = _random_csr(rng, n)
    target = rng.random(n) < 0.15
    exits = rng.random(len(ip) - 1) < 0.1
    g = graph.Csr(rg, ip, tg)
    np.testing.assert_array_equal(graph.avoid_positive(g, target), _plain_avoid(rg, ip, tg, target))
    mask, via = graph.almost_sure_max(g, target, exits)
    np.testing.assert_array_equal(mask, _plain_almost_sure_max(rg, ip, tg, target, exits))
    # the returned choices stay inside and are proper: following them from any state of mask
    # reaches target or an exit choice
    owner = np.repeat(np.arange(n), np.diff(rg))
    for s in np.flatnonzero(mask & ~target):
        c = via[s]
        assert c >= 0 and owner[c] == s
        assert all(mask[tg[k]] for k in range(ip[c], ip[c + 1]))


def test_a_walk_with_a_trap_at_one_end_is_peeled_at_once():
    """Gambler's ruin: 0 <- 1 <-> 2 <-> ... <-> n-1 -> goal, 0 a trap. No state reaches the goal
    almost surely; the plain fixpoint needs a round per state (quadratic), the worklist one."""
    from mopmc.engine.reductions import graph

    n = 200_000
    rg = np.arange(n + 2, dtype=np.int64)  # one choice per state; state n is the goal
    lens = np.full(n + 1, 2, np.int64)
    lens[0] = lens[n] = 1
    ip = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    tg = np.empty(ip[-1], np.int64)
    tg[0] = 0  # the trap loops
    s = np.arange(1, n)
    tg[ip[1:n]] = s - 1
    tg[ip[1:n] + 1] = s + 1
    tg[ip[n]] = n
    target = np.zeros(n + 1, bool)
    target[n] = True
    mask, _ = graph.almost_sure_max(graph.Csr(rg, ip, tg), target)
    assert mask.sum() == 1 and mask[n]
    assert graph.avoid_positive(graph.Csr(rg, ip, tg), target).sum() == 1  # only the trap avoids it
