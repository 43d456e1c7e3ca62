"""The torch engine equals the CPU engine (within 1e-9 * max(1, |v|)): the reference-value table,
Hypothesis random MDPs, achievability and convex queries; CPU PyTorch always, CUDA when present.

Where the two engines pick different optimal policies (ties), the torch engine's values are checked
against an independent dense evaluation of its own scheduler instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from mdp_reference import evaluate_policy, random_mdp, total_objectives, zero_end_components  # noqa: E402
from reference_values import REFERENCES, reference_case, ref_id  # noqa: E402
from strategies import random_mdps  # noqa: E402
from support import assert_one_line_error, run_mopmc, shared_model  # noqa: E402

from mopmc.engine.kernel import Engine
from mopmc.errors import DependencyError, InfiniteValueError
from mopmc.properties.objectives import Objective, Property

torch = pytest.importorskip("torch")
from mopmc.engine import torch_engine as te  # noqa: E402
from mopmc.engine.torch_engine import DeviceError, TorchEngine  # noqa: E402

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available here")),
]
TOL = 1e-9


def close(a, b, tol=TOL) -> bool:
    a, b = np.asarray(a, float), np.asarray(b, float)
    same_inf = np.isinf(a) & (a == b)
    with np.errstate(invalid="ignore"):
        return bool(np.all(same_inf | (np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b)))))


# ---------------------------------------------------------------------------- reference table
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ref", REFERENCES, ids=ref_id)
def test_reference_table_equals_cpu_engine(ref, device):
    from mopmc.queries.single import check

    model, objective = reference_case(ref)
    prop = Property(0, ref.prop, None, (objective,), False)
    cpu = check(model, prop, engine="kernel")
    gpu = check(model, prop, engine="torch", device=device)
    assert gpu.status == cpu.status
    assert close(gpu.value, cpu.value), (gpu.value, cpu.value)
    assert ref.close_to(gpu.value), (gpu.value, ref.value)


# ---------------------------------------------------------------------------- random MDPs
def _rewards(model, objs):
    return np.column_stack([model.reward(o.reward_model) for o in objs])


def _same_or_own_values(model, objs, cpu_res, res):
    """Equal values with the same policy; otherwise the torch scheduler's exact values."""
    if np.array_equal(cpu_res.policy, res.policy):
        assert close(res.values, cpu_res.values), (res.values, cpu_res.values)
        return
    if not res.scheduler.memoryless:  # (a goal-memory product: the scheduler's exact values on it)
        from mopmc.engine.evaluate import evaluate

        exact = evaluate(model, res.scheduler, objs).values
        assert np.isfinite(exact).all(), "the torch engine's scheduler has an infinite objective"
        assert close(res.values, exact), (res.values, exact)
        return
    choice = res.scheduler.choices()
    choice = np.where(choice >= 0, choice, model.row_groups[:-1])
    exact = evaluate_policy(model, choice, _rewards(model, objs))
    assert exact is not None, "the torch engine's scheduler has an infinite objective"
    assert close(res.values, exact), (res.values, exact)


def _compare(model, objs, w, device, **options):
    try:
        eng = Engine(model, objs, renumber="always")
    except InfiniteValueError:
        with pytest.raises(InfiniteValueError):
            TorchEngine(model, objs, device)
        return None
    gpu = TorchEngine(model, objs, device, engine=eng, **options)
    try:
        cpu_res = eng.optimise(w)
    except InfiniteValueError:
        with pytest.raises(InfiniteValueError):
            gpu.optimise(w)
        return None
    res = gpu.optimise(w)
    assert close(res.weighted, cpu_res.weighted), (res.weighted, cpu_res.weighted)
    _same_or_own_values(model, objs, cpu_res, res)
    return eng, gpu, cpu_res, res


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(model=random_mdps(max_states=30), data=st.data())
def test_random_mdps_equal_cpu_engine(device, model, data):
    m = len(model.rewards)
    senses = data.draw(st.lists(st.sampled_from(["min", "max"]), min_size=m, max_size=m))
    w = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.0, -0.5]), min_size=m, max_size=m)))
    _compare(model, total_objectives(m, senses), w, device, padded=data.draw(st.booleans()))


def _layered(rng, layers: int = 12, width: int = 40, m: int = 2):
    """A DAG of ``layers`` layers (each state's successors lie in the next layer; the last layer is
    absorbing), with what the padded layout must handle: states of 1-3 choices (``K > 1``), a few
    choices with 20 successors beside many with 1-2 (overflow of the hybrid format), partial
    self-loops (``den < 1``), choices that only loop (never picked), and in one layer a state with
    150 choices (its level stays in CSR form)."""
    from mopmc.model.sparse_mdp import SparseMDP

    n = layers * width
    rg, ip, tg, pr = [0], [0], [], []
    rewards = [[] for _ in range(m)]
    for s in range(n):
        layer = s // width
        if layer == layers - 1:
            k = 1
        elif layer == 5 and s % width == 0:
            k = 150
        else:
            k = int(rng.integers(1, 4))
        for j in range(k):
            if layer == layers - 1 or (j == 1 and s % 7 == 0):
                succ, p = [s], [1.0]  # absorbing / a choice that only loops
                r = [0.0] * m
            else:
                nxt = (layer + 1) * width
                d = 20 if s % 11 == 0 and j == 0 else int(rng.integers(1, 3))
                succ = [int(x) for x in nxt + rng.choice(width, size=d, replace=False)]
                p = rng.dirichlet(np.ones(d))
                if s % 5 == 0:  # a partial self-loop
                    succ, p = succ + [s], np.concatenate((0.7 * p, [0.3]))
                p = list(p)
                r = [float(np.round(rng.uniform(0, 1), 3)) for _ in range(m)]
            tg += succ
            pr += p
            ip.append(len(tg))
            for i in range(m):
                rewards[i].append(r[i])
        rg.append(len(ip) - 1)
    return SparseMDP.from_arrays(rg, ip, tg, np.array(pr), 0, rewards={f"r{i}": np.array(r) for i, r in enumerate(rewards)})


@pytest.mark.parametrize("device", DEVICES)
def test_padded_levels_hybrid_layout_and_csr_fallback(device):
    rng = np.random.default_rng(5)
    model = _layered(rng)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    gpu = TorchEngine(model, objs, device, engine=eng)
    csr = TorchEngine(model, objs, device, engine=eng, padded=False)
    steps = gpu.level_steps
    pads = [P for kind, P in steps if kind == "pad"]
    assert any(P.K > 1 for P in pads) and any(P.o1 > P.o0 for P in pads) and any(P.T > 1 for P in pads)
    assert any(kind == "level" for kind, _ in steps), "the 150-choice level should stay in CSR form"
    assert all(kind == "level" for kind, _ in csr.level_steps)
    for w in ([1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.3, -1.0]):
        ref = eng.optimise(w)
        for e in (gpu, csr):
            res = e.optimise(w)
            assert close(res.weighted, ref.weighted), (res.weighted, ref.weighted)
            _same_or_own_values(model, objs, ref, res)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), m=st.integers(1, 3))
def test_cyclic_blocks_dense_lu_equal_cpu_engine(device, seed, n, m):
    _compare_cyclic(seed, n, m, device)


def _compare_cyclic(seed, n, m, device, **options):
    """:func:`_compare` on a random model with zero-reward end components, mixed senses and weights."""
    rng = np.random.default_rng(seed)
    model = zero_end_components(random_mdp(rng, n, m, zero_frac=0.5))
    senses = [("min", "max")[int(x)] for x in rng.integers(0, 2, m)]
    return _compare(model, total_objectives(m, senses), rng.uniform(-0.3, 1.0, m), device, **options)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), m=st.integers(1, 3))
def test_cyclic_blocks_sparse_lu_equal_cpu_engine(device, seed, n, m):
    """Blocks above ``dense_limit`` (here: all) by SuperLU on the host: exact, as the CPU engine."""
    got = _compare_cyclic(seed, n, m, device, dense_limit=0)
    if got is not None:
        _, gpu, _, res = got
        assert res.error_bound == 0.0
        blocks = [step for kind, step in gpu.steps if kind == "block"]
        assert all(b.sparse and not b.dense for b in blocks)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), m=st.integers(1, 3))
def test_cyclic_blocks_in_their_band_equal_cpu_engine(device, seed, n, m):
    """Blocks above ``sparse_limit`` (here: all) by band elimination on the host
    (:mod:`mopmc.engine.banded`): exact, as the CPU engine's SuperLU."""
    got = _compare_cyclic(seed, n, m, device, dense_limit=0, sparse_limit=0)
    if got is not None:
        _, gpu, _, res = got
        assert res.error_bound == 0.0
        blocks = [step for kind, step in gpu.steps if kind == "block"]
        assert all(b.banded is not None for b in blocks)


@pytest.mark.parametrize("device", DEVICES)
def test_a_large_cyclic_block_by_sparse_lu(device):
    """zeroconf (Storm's test suite): a cyclic block of 3,324 states, above the default
    ``dense_limit``, which the dense LU solved in 32 s on a 2-core CPU (80 policy-iteration rounds)."""
    from mopmc.io.load import load

    loaded = load(shared_model("peer-tests/storm/multiobj_zeroconf4.nm"),
                  properties='multi(Pmax=? [ F l=4 & ip=1 ] , P>=0.993141[ G (error=0) ])')
    objs = loaded.properties()[0].objectives
    eng = Engine(loaded.model, objs, renumber="always")
    gpu = TorchEngine(loaded.model, objs, device, engine=eng)
    sizes = [step.n for kind, step in gpu.steps if kind == "block" and step.sparse]
    assert max(sizes) > te.DEFAULT_DENSE_LIMIT
    for w in ([1.0, 0.0], [0.5, 0.5], [0.0, 1.0]):
        cpu_res, res = eng.optimise(w), gpu.optimise(w)
        assert res.error_bound == 0.0
        assert close(res.weighted, cpu_res.weighted), (res.weighted, cpu_res.weighted)
        _same_or_own_values(loaded.model, objs, cpu_res, res)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 25), m=st.integers(1, 3))
def test_iterative_block_evaluation_is_certified(device, seed, n, m):
    """Blocks above ``dense_limit`` and ``sparse_limit`` (here: all) and not banded within
    ``band_budget`` (here: none) go through bounded iterative evaluation."""
    rng = np.random.default_rng(seed)
    model = zero_end_components(random_mdp(rng, n, m, zero_frac=0.5, negative=False))
    objs = total_objectives(m, ["min"] * m)
    w = rng.uniform(0.1, 1.0, m)
    got = _compare(model, objs, w, device, dense_limit=0, sparse_limit=0, band_budget=0, precision=1e-12)
    if got is None:
        return
    _, gpu, cpu_res, res = got
    # the certificate: the exact optimum exceeds the returned weighted value by at most bound * |w|_1
    assert cpu_res.weighted - res.weighted <= res.error_bound * np.abs(w).sum() + 1e-12
    assert res.error_bound <= 1e-9


@pytest.mark.parametrize("device", DEVICES)
def test_warm_starts_across_directions(device):
    rng = np.random.default_rng(11)
    model = zero_end_components(random_mdp(rng, 150, 3, negative=False))
    objs = total_objectives(3, ["min", "max", "min"])
    eng = Engine(model, objs, renumber="always")
    gpu = TorchEngine(model, objs, device, engine=eng)
    prev = None
    for _ in range(6):
        w = rng.uniform(0, 1, 3)
        warm = gpu.optimise(w, warm=prev)
        assert close(warm.weighted, eng.optimise(w).weighted)
        assert close(warm.weighted, gpu.optimise(w).weighted)
        prev = warm


@pytest.mark.parametrize("device", DEVICES)
def test_goal_memory_reachability_objectives(device):
    from dataclasses import replace

    rng = np.random.default_rng(5)
    base = zero_end_components(random_mdp(rng, 40, 1, zero_frac=0.5))
    model = replace(base, labels={"A": rng.random(40) < 0.2, "B": rng.random(40) < 0.2})
    objs = [Objective(0, 'P[F "A"]', "probability", "max", right_text='"A"'),
            Objective(1, 'P[G !"B"]', "probability", "min", right_text='!(!"B")', negated=True),
            Objective(2, 'R{"r0"}[C]', "total_reward", "min", "r0")]
    for _ in range(4):
        _compare(model, objs, rng.uniform(0, 1, 3), device)


# ---------------------------------------------------------------------------- queries
def _switch20():
    from mopmc.io.load import load

    path = shared_model("switch-scaling/switch_model_20.prism")
    props = shared_model("switch-scaling/switch_prop_achievable.props").read_text()
    loaded = load(path, properties=props)
    return loaded.model, loaded.properties()[0]


@pytest.mark.parametrize("device", DEVICES)
def test_achievability_equals_cpu_engine(device):
    from mopmc.queries.dispatch import multi_query

    model, prop = _switch20()
    cpu = multi_query(model, prop, engine="kernel")
    gpu = multi_query(model, prop, engine="torch", device=device)
    assert gpu.achievable == cpu.achievable is True
    assert close(gpu.margin, cpu.margin) and close(gpu.margin_upper, cpu.margin_upper)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 40))
def test_random_achievability_equals_cpu_engine(device, seed, n):
    from dataclasses import replace as dc_replace

    from mopmc.engine.oracle import kernel_oracle
    from mopmc.queries.multi import achievability

    rng = np.random.default_rng(seed)
    model = zero_end_components(random_mdp(rng, n, 2, zero_frac=0.3, negative=False))
    objs = total_objectives(2, ["min", "max"])
    try:
        eng = Engine(model, objs, renumber="always")
    except InfiniteValueError:
        return
    lo = eng.optimise([1.0, 0.0]).values
    hi = eng.optimise([0.0, 1.0]).values
    thresholds = [float(rng.uniform(min(lo[0], hi[0]), max(lo[0], hi[0]) + 0.1)),
                  float(rng.uniform(min(lo[1], hi[1]) - 0.1, max(lo[1], hi[1])))]
    objs = [dc_replace(o, comparison=c, threshold=t) for o, c, t in zip(objs, ("<=", ">="), thresholds)]
    cpu = achievability(kernel_oracle(model, objs, engine=Engine(model, objs)), objs)
    gpu = achievability(te.torch_oracle(model, objs, device=device), objs)
    assert gpu.achievable == cpu.achievable
    assert close(gpu.margin, cpu.margin), (gpu.margin, cpu.margin)


def _convex_query():
    try:
        from mopmc.queries.convex import convex_query
    except ImportError:
        pytest.skip("mopmc.queries.convex.convex_query is not available")
    return convex_query


@pytest.mark.parametrize("device", DEVICES)
def test_convex_query_equals_cpu_engine(device):
    convex_query = _convex_query()
    model, prop = _switch20()
    objs = prop.objectives
    cpu = convex_query(model, objs, "mse", engine="kernel")
    gpu = convex_query(te.torch_oracle(model, objs, device=device), objs, "mse")
    assert gpu.status == cpu.status
    assert close(gpu.loss, cpu.loss) and close(gpu.lower_bound, cpu.lower_bound)
    assert close(gpu.point, cpu.point)


# ---------------------------------------------------------------------------- errors and plumbing
def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes ``import torch`` raise ImportError
    with pytest.raises(DependencyError, match=r'pip install "mopmc\[gpu\]"'):
        te.load_torch()


def test_unavailable_or_bad_device_is_a_clear_error():
    with pytest.raises(DeviceError, match="not a device"):
        te.resolve_device("tpu-7")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="CUDA is not available"):
            te.resolve_device("cuda")
    assert te.resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_memory_plan_refuses_a_device_too_small(monkeypatch):
    rng = np.random.default_rng(3)
    model = zero_end_components(random_mdp(rng, 60, 2))
    objs = total_objectives(2, ["min", "min"])
    eng = TorchEngine(model, objs, "cpu")
    assert eng.memory.needed > 60 * 8 and eng.memory.fits
    monkeypatch.setattr(te, "_free_bytes", lambda device: eng.memory.needed // 2)
    with pytest.raises(DeviceError, match="GiB"):
        TorchEngine(model, objs, "cpu")


def test_cli_engine_torch():
    path = str(shared_model("switch-scaling/switch_model_20.prism"))
    res = run_mopmc("check", path, "--engine", "torch", "--device", "cpu", "--json", "--prop", 'R{"ctrl_cost"}min=? [C]')
    assert res.code == 0, res.stderr
    model, prop = _switch20()
    cpu = Engine(model, [Objective(0, 'R{"ctrl_cost"}min=? [C]', "total_reward", "min", "ctrl_cost")]).optimise([1.0])
    assert close(res.json()[0]["value"], cpu.values[0])
    bad = run_mopmc("check", path, "--device", "cpu", "--prop", 'R{"ctrl_cost"}min=? [C]')
    assert_one_line_error(bad, "--device", "--engine torch")


def _best_width(ns, slots):
    """Brute force: the first ``T`` minimising ``slots * T + 3 * overflow(T)`` for per-choice counts ``ns``."""
    costs = {t: slots * t + 3 * int(np.maximum(ns - t, 0).sum()) for t in range(1, max(int(ns.max()), 1) + 1)}
    return min(costs, key=lambda t: (costs[t], t))


def test_padded_width_minimises_slots_plus_overflow():
    """``pad_plan``'s ``T`` per level against brute force over every width, with its ``K`` and overflow."""
    from mopmc.engine import numba_kernels as nk

    rng = np.random.default_rng(0)
    for _ in range(300):
        n_l = int(rng.integers(1, 12))
        ks = rng.integers(0, 4, size=n_l)
        ns = rng.integers(0, rng.integers(1, 30), size=int(ks.sum()))
        if rng.random() < 0.3 and len(ns):
            ns[:3] = rng.integers(0, 200)
        rg = np.concatenate(([0], np.cumsum(ks))).astype(np.int64)
        ip, tg = [0], []
        for c in range(len(ns)):
            s = int(np.searchsorted(rg, c, side="right") - 1)
            succ = [n_l + j for j in range(int(ns[c]))] + [s] * int(rng.integers(0, 2))  # others, and maybe a self-loop
            rng.shuffle(succ)
            tg += succ
            ip.append(len(tg))
        rg = np.concatenate((rg, [rg[-1]] * 300))  # the successors: states without choices
        K, T, over, padded = nk.pad_plan(rg, np.array(ip, np.int64), np.array(tg, np.int64), np.array([[0, n_l]], np.int64), 2.0, 10**6)
        slots = n_l * max(int(ks.max()), 1)
        assert padded[0] and K[0] == max(int(ks.max()), 1)
        if not len(ns):
            assert T[0] == 1 and over[0] == 0
            continue
        best = _best_width(ns, slots)
        assert T[0] == best and over[0] == int(np.maximum(ns - best, 0).sum())
    # a level whose slots would more than double (plus small) is not padded
    rg = np.array([0, 5, 6, 7, 8], np.int64)
    ip = np.arange(9, dtype=np.int64)
    tg = np.full(8, 3, np.int64)
    _, _, _, padded = nk.pad_plan(rg, ip, tg, np.array([[0, 3]], np.int64), 2.0, 0)
    assert not padded[0]  # 3 x 5 slots > 2 x 7 choices
    _, _, _, padded = nk.pad_plan(rg, ip, tg, np.array([[0, 3]], np.int64), 2.0, 1)
    assert padded[0]


def _pad_levels_reference(p, steps, self_only, den, waste, small):
    """The padded layout in numpy, level by level (the compiled ``pad_levels`` must equal it)."""
    from mopmc.engine.torch_levels import PadLevel

    rg, tg = p.row_groups, p.targets
    n, m = p.n_states, p.rewards.shape[1]
    soc, cot = p.state_of_choice(), p.choice_of_transition()
    other = tg != soc[cot]
    ns = np.bincount(cot[other], minlength=p.n_choices)
    ks = np.diff(rg)
    chosen, s0, t0, o0 = {}, 0, 0, 0
    for i, (kind, L) in enumerate(steps):
        if kind != "level":
            continue
        n_l, nc_l = L.b - L.a, L.c1 - L.c0
        K = max(int(ks[L.a:L.b].max()), 1)
        if n_l * K > waste * nc_l + small:
            continue
        c_ns = ns[L.c0:L.c1]
        T = _best_width(c_ns, n_l * K) if nc_l else 1
        over = int(np.maximum(c_ns - T, 0).sum())
        chosen[i] = PadLevel(L.a, L.b, K, T, s0, t0, o0, o0 + over)
        s0, t0, o0 = s0 + n_l * K, t0 + n_l * K * T, o0 + over
    target, prob = np.full(t0, n, np.int64), np.zeros(t0)
    dens, neg, RR = np.ones(s0), np.full(s0, -np.inf), np.zeros((s0, m + 1))
    choice, slot_base = np.full(s0, -1, np.int64), np.full(n, -1, np.int64)
    over_slot, over_target, over_prob = np.zeros(o0, np.int64), np.zeros(o0, np.int64), np.zeros(o0)
    for i, P in chosen.items():
        L = steps[i][1]
        a, K, T = P.a, P.K, P.T
        slot_base[a:P.b] = P.s0 + np.arange(P.b - a) * K
        c = np.arange(L.c0, L.c1)
        slot = (soc[c] - a) * K + (c - rg[soc[c]])
        ok = ~self_only[c]
        vs, vc = P.s0 + slot[ok], c[ok]
        choice[vs], dens[vs], neg[vs], RR[vs, 1:] = vc, den[vc], 0.0, p.rewards[vc]
        k = np.arange(L.k0, L.k1)[other[L.k0:L.k1]]
        kc = cot[k] - L.c0
        c_ns = ns[L.c0:L.c1]
        pos = np.arange(len(k)) - (np.cumsum(c_ns) - c_ns)[kc]
        inside = pos < T
        at = P.t0 + slot[kc[inside]] * T + pos[inside]
        target[at], prob[at] = tg[k[inside]], p.probs[k[inside]]
        out = ~inside
        over_slot[P.o0:P.o1], over_target[P.o0:P.o1], over_prob[P.o0:P.o1] = slot[kc[out]], tg[k[out]], p.probs[k[out]]
    return chosen, (target, prob, dens, neg, RR, choice, slot_base, over_slot, over_target, over_prob)


@pytest.mark.parametrize("case", ["layered", "random"])
@pytest.mark.parametrize("small", [4096, 64, 0])
@pytest.mark.parametrize("split", [False, True])
def test_compiled_padded_layout_equals_numpy_reference(case, small, split, monkeypatch):
    """``split``: the levels filled by three threads in parts of a few levels each."""
    from mopmc import workers
    from mopmc.engine import torch_levels
    from mopmc.engine.torch_levels import pad_levels

    if split:
        monkeypatch.setattr(workers, "count", lambda: 2)
        monkeypatch.setattr(torch_levels, "PAR_MIN", 1)
    rng = np.random.default_rng(11)
    if case == "layered":
        model, objs = _layered(rng), total_objectives(2, ["max", "min"])
    else:
        model = zero_end_components(random_mdp(rng, 300, 3, zero_frac=0.5))
        objs = total_objectives(3, ["max", "min", "max"])
    eng = Engine(model, objs, renumber="always")
    gpu = TorchEngine(model, objs, "cpu", engine=eng, padded=False)
    p = eng.problem
    steps = gpu._steps(p)
    soc, cot = p.state_of_choice(), p.choice_of_transition()
    loop = p.targets == soc[cot]
    den = 1.0 - np.bincount(cot[loop], weights=p.probs[loop], minlength=p.n_choices)
    got = pad_levels(p, steps, eng.self_only, den, small=small)
    levels, arrays = _pad_levels_reference(p, steps, eng.self_only, den, 2.0, small)
    assert got.levels == levels and len(levels) > 0
    for name, a, b in zip(got._fields[1:], got[1:], arrays):
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_a_device_too_small_for_the_padded_layout_pads_less(monkeypatch):
    rng = np.random.default_rng(5)
    model = _layered(rng)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    full = TorchEngine(model, objs, "cpu", engine=eng)
    csr = TorchEngine(model, objs, "cpu", engine=eng, padded=False)

    def pads(e):
        return sum(kind == "pad" for kind, _ in e.level_steps)

    assert full.memory.needed > csr.memory.needed and pads(full) > 0
    monkeypatch.setattr(te, "_free_bytes", lambda device: int(csr.memory.needed / 0.9) + 1)
    small = TorchEngine(model, objs, "cpu", engine=eng)
    assert small.memory.fits and pads(small) < pads(full)
    for w in ([1.0, 0.0], [0.3, -1.0]):
        assert close(small.optimise(w).weighted, eng.optimise(w).weighted)


def test_cli_convex_engine_torch():
    prop = 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4.5 [C])'
    gpu = run_mopmc("convex", "example:tradeoff", "--prop", prop, "--engine", "torch", "--device", "cpu", "--json")
    cpu = run_mopmc("convex", "example:tradeoff", "--prop", prop, "--json")
    assert gpu.code == 0 and cpu.code == 0, gpu.stderr + cpu.stderr
    assert gpu.json()["status"] == cpu.json()["status"] == "optimal"
    assert close(gpu.json()["loss"], cpu.json()["loss"])
    bad = run_mopmc("convex", "example:tradeoff", "--prop", prop, "--device", "cpu")
    assert_one_line_error(bad, "--device", "--engine torch")


def test_a_failed_graph_capture_leaves_the_run_eager_and_equal():
    """Capturing fails for real on a machine without CUDA: the run records why and stays eager."""
    rng = np.random.default_rng(5)
    model = _layered(rng)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    gpu = TorchEngine(model, objs, "cpu", engine=eng)
    runs = gpu.runs
    for r in runs:
        r.graphs = True  # as on CUDA
    results = [gpu.optimise(w) for w in ([1.0, 0.0], [0.3, -1.0], [1.0, 0.5])]
    if not torch.cuda.is_available():
        assert len(gpu.graph_errors) == len(runs) and all(r.graph is None for r in runs)
    for w, res in zip(([1.0, 0.0], [0.3, -1.0], [1.0, 0.5]), results):
        assert close(res.weighted, eng.optimise(w).weighted)
