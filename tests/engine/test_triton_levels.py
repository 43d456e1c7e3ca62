"""The fused Triton level kernel equals the CPU engine (and the torch form of the padded levels).

On the CPU the kernel runs in Triton's interpreter (``TRITON_INTERPRET=1``), on CUDA compiled: the
same kernel source, with chain launches (one program walking many levels), grid launches (one
level, many programs), overflow transitions, several choices per state, partial self-loops,
choices that only loop, and CSR levels between padded ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from mdp_reference import total_objectives  # noqa: E402
from strategies import random_mdps  # noqa: E402
from support import shared_model  # noqa: E402
from test_torch_engine import _compare, _layered, _same_or_own_values, close  # noqa: E402

torch = pytest.importorskip("torch")
# before triton is imported: its interpreter is chosen then
os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")
pytest.importorskip("triton")

from mopmc.engine import triton_levels as tl  # noqa: E402
from mopmc.engine.kernel import Engine  # noqa: E402
from mopmc.engine.torch_engine import TorchEngine  # noqa: E402
from mopmc.errors import DependencyError, MopmcError  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() and os.environ["TRITON_INTERPRET"] != "1" else "cpu"


def _launch_kinds(engine) -> list[str]:
    return [step[0] for run in engine.runs for step in run.launches]


@pytest.mark.parametrize("chain_rows, unroll, lanes", [(1024, False, None), (8, False, None), (8, True, None), (8, True, 16)])
def test_layered_model_equals_cpu_engine_chain_and_grid(chain_rows, unroll, lanes):
    model = _layered(np.random.default_rng(5))
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    tri = TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton",
                      triton={"chain_rows": chain_rows, "block": 16, "unroll": unroll, "lanes": lanes})
    grid = "flat" if lanes else "grid"
    if unroll:
        shapes = {step[3:] for run in tri.runs for step in run.launches if step[0] == grid}
        assert shapes and all(kmax > 0 and tmax > 0 for kmax, tmax in shapes) and len(shapes) > 1
    ops = TorchEngine(model, objs, DEVICE, engine=eng, kernels="torch")
    assert tri.kernels == "triton" and tri.triton is not None
    kinds = _launch_kinds(tri)
    assert "level" in kinds, "the 150-choice level stays in CSR form between the padded ones"
    assert (grid in kinds) == (chain_rows == 8) and "chain" in kinds
    pads = [P for kind, P in tri.level_steps if kind == "pad"]
    assert any(P.K > 1 for P in pads) and any(P.o1 > P.o0 for P in pads) and any(P.T > 1 for P in pads)
    for w in ([1.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.3, -1.0]):
        ref = eng.optimise(w)
        res = tri.optimise(w)
        assert close(res.weighted, ref.weighted), (res.weighted, ref.weighted)
        _same_or_own_values(model, objs, ref, res)
        other = ops.optimise(w)
        assert close(res.values, other.values) and np.array_equal(res.policy, other.policy)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=random_mdps(max_states=30), data=st.data())
def test_random_mdps_equal_cpu_engine(model, data):
    m = len(model.rewards)
    senses = data.draw(st.lists(st.sampled_from(["min", "max"]), min_size=m, max_size=m))
    w = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.0, -0.5]), min_size=m, max_size=m)))
    chain_rows = data.draw(st.sampled_from([0, 2, 1024]))
    options = {"chain_rows": chain_rows, "block": 16, "unroll": data.draw(st.booleans()), "lanes": None}
    rows = data.draw(st.sampled_from([0, 1, 3]))  # the flat kernel with lanes for about this many rows (0: off)
    if rows:
        options["lanes"] = tl._pow2(rows * (m + 1))
    _compare(model, total_objectives(m, senses), w, DEVICE, kernels="triton", triton=options)


def test_switch_model_achievability_equals_cpu_engine():
    from mopmc.engine.oracle import kernel_oracle
    from mopmc.io.load import load
    from mopmc.queries.multi import achievability

    folder = shared_model("switch-scaling")
    loaded = load(folder / "switch_model_20.prism", properties=(folder / "switch_prop_achievable.props").read_text())
    objs = loaded.properties()[0].objectives
    eng = Engine(loaded.model, objs, renumber="always")
    cpu = achievability(kernel_oracle(loaded.model, objs, engine=eng), objs)
    chain = TorchEngine(loaded.model, objs, DEVICE, engine=eng, kernels="triton", triton={"chain_rows": 1024})
    assert _launch_kinds(chain) == ["chain"], "99 small levels: one launch"
    grid = TorchEngine(loaded.model, objs, DEVICE, engine=eng, kernels="triton")
    assert _launch_kinds(grid) == ["grid"] * 99, "the default: a grid launch per level"
    for tri in (chain, grid):
        got = achievability(kernel_oracle(loaded.model, objs, engine=tri), objs)
        assert got.achievable == cpu.achievable and close(got.margin, cpu.margin)


def test_overflow_csr_groups_each_slots_transitions():
    from mopmc.engine.torch_levels import PadLevel

    # two levels: slots 0-3 and 4-9; overflow listed per level (slot within its level)
    levels = [PadLevel(0, 2, 2, 1, 0, 0, 0, 3), PadLevel(2, 5, 2, 1, 4, 4, 3, 5)]
    over_slot = np.array([1, 1, 3, 0, 5])
    over_target = np.array([10, 11, 12, 13, 14])
    over_prob = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    optr, tg, pr, most = tl.overflow_csr(levels, over_slot, over_target, over_prob, 10)
    assert optr.tolist() == [0, 0, 2, 2, 3, 4, 4, 4, 4, 4, 5]
    assert tg.tolist() == [10, 11, 12, 13, 14] and pr.tolist() == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert most.tolist() == [2, 1]


def test_block_rows():
    assert tl.block_rows(1) == (1, 32)
    assert tl.block_rows(5) == (8, 32)
    assert tl.block_rows(101) == (128, 16)
    assert tl.block_rows(1000) == (1024, 16)


def test_kernels_option_errors(monkeypatch):
    model = _layered(np.random.default_rng(1), layers=7, width=20)
    objs = total_objectives(2, ["max", "min"])
    with pytest.raises(MopmcError, match="kernels 'cuda'"):
        TorchEngine(model, objs, "cpu", kernels="cuda")
    assert TorchEngine(model, objs, "cpu").kernels == "torch", "the CPU default is torch operations"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(DependencyError, match="interpreter"):
        TorchEngine(model, objs, "cpu", kernels="triton")


def test_a_kernel_that_fails_falls_back_to_torch_operations(monkeypatch):
    """A compiler or driver failure at the first launch: the default falls back (and says why),
    an explicit request is a clear error."""
    model = _layered(np.random.default_rng(2), layers=7, width=20)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")

    def broken(self, *args):
        raise RuntimeError("PTX assembly aborted")

    monkeypatch.setattr(tl.TritonLevels, "launch", broken)
    monkeypatch.setattr(tl, "available", lambda device: None)  # as on CUDA: triton is the default
    monkeypatch.setattr(TorchEngine, "_kernels", lambda self, k: ("triton", None) if k is None else (k, None))
    gpu = TorchEngine(model, objs, DEVICE, engine=eng)
    assert gpu.kernels == "torch" and gpu.triton is None and "PTX assembly aborted" in gpu.kernels_note
    ref = eng.optimise([1.0, 0.5])
    assert close(gpu.optimise([1.0, 0.5]).values, ref.values)
    with pytest.raises(DependencyError, match="PTX assembly aborted"):
        TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton")


@pytest.mark.parametrize("lanes", [None, 16])
def test_a_variant_that_fails_to_compile_falls_back_before_the_first_query(monkeypatch, lanes):
    """Every variant the runs use (unrolled shapes, flat launches) is compiled and run once when
    the engine starts: one that fails falls back to torch operations then, not at a query."""
    model = _layered(np.random.default_rng(2), layers=7, width=20)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    launch, launch_flat = tl.TritonLevels.launch, tl.TritonLevels.launch_flat

    def unrolled_broken(self, VX, arg, L0, L1, programs, kmax=0, tmax=0):
        if kmax:
            raise RuntimeError("PTX assembly aborted")
        return launch(self, VX, arg, L0, L1, programs, kmax, tmax)

    def flat_broken(self, *args):
        raise RuntimeError("out of resources: shared memory")

    monkeypatch.setattr(tl.TritonLevels, "launch", unrolled_broken)
    monkeypatch.setattr(tl.TritonLevels, "launch_flat", flat_broken)
    monkeypatch.setattr(tl, "available", lambda device: None)  # as on CUDA: triton is the default
    monkeypatch.setattr(TorchEngine, "_kernels", lambda self, k: ("triton", None) if k is None else (k, None))
    options = {"chain_rows": 8, "lanes": lanes}
    gpu = TorchEngine(model, objs, DEVICE, engine=eng, triton=options)
    assert gpu.kernels == "torch" and gpu.triton is None and all(run.launches is None for run in gpu.runs)
    assert ("out of resources" if lanes else "PTX assembly aborted") in gpu.kernels_note and "variant" in gpu.kernels_note
    ref = eng.optimise([1.0, 0.5])
    assert close(gpu.optimise([1.0, 0.5]).values, ref.values)
    with pytest.raises(DependencyError, match="variant"):
        TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton", triton=options)
    monkeypatch.setattr(tl.TritonLevels, "launch", launch)
    monkeypatch.setattr(tl.TritonLevels, "launch_flat", launch_flat)
    fine = TorchEngine(model, objs, DEVICE, engine=eng, triton=options)
    assert fine.kernels == "triton" and fine.kernels_note is None
    assert close(fine.optimise([1.0, 0.5]).values, ref.values)


@pytest.mark.parametrize("unroll, lanes", [(False, None), (True, None), (True, 32)])
def test_ties_break_as_in_the_cpu_engine(unroll, lanes):
    """Every state has two choices of equal weighted value under w = (1, 1) (rewards (a, b) and
    (b, a), the same successors in another order); the kernel rounds the weighted value as the CPU
    engine does, so it picks the same choices and returns the same objective values."""
    from mopmc.model.sparse_mdp import SparseMDP

    rng = np.random.default_rng(3)
    layers, width = 6, 30
    n = layers * width + 1
    rg, ip, tg, pr, r0, r1 = [0], [0], [], [], [], []
    for s in range(n - 1):
        layer = s // width
        succ = [n - 1] if layer == layers - 1 else [int(x) for x in (layer + 1) * width + rng.choice(width, 3, replace=False)]
        p = rng.dirichlet(np.ones(len(succ)))
        a, b = np.round(rng.uniform(0, 1, 2), 3)
        for order, (x, y) in ((slice(None), (a, b)), (slice(None, None, -1), (b, a))):
            tg += succ[order]
            pr += list(p[order])
            ip.append(len(tg))
            r0.append(x)
            r1.append(y)
        rg.append(len(ip) - 1)
    tg.append(n - 1)
    pr.append(1.0)
    ip.append(len(tg))
    r0.append(0.0)
    r1.append(0.0)
    rg.append(len(ip) - 1)
    model = SparseMDP.from_arrays(rg, ip, tg, np.array(pr), 0, rewards={"r0": np.array(r0), "r1": np.array(r1)})
    objs = total_objectives(2, ["max", "max"])
    eng = Engine(model, objs, renumber="always")
    tri = TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton", triton={"unroll": unroll, "lanes": lanes})
    assert ("flat" in _launch_kinds(tri)) == bool(lanes)
    for w in ([1.0, 1.0], [0.5, 0.5], [1.0, 0.0]):
        ref, res = eng.optimise(w), tri.optimise(w)
        assert np.array_equal(res.policy, ref.policy)
        assert close(res.values, ref.values), (res.values, ref.values)


def _jacobi_reference(tri, VX):
    """One Jacobi sweep by the torch form of each padded level, each reading a fresh copy of ``VX``."""
    out = VX.clone()
    arg = torch.zeros(VX.shape[0], dtype=torch.int64, device=VX.device)
    for P in tri.padded.levels.values():
        work = VX.clone()
        tri.padded.level(P, work, arg)
        out[P.a:P.b] = work[P.a:P.b]
    return out, arg


@pytest.mark.parametrize("options", [{}, {"block": 8, "unroll": False}, {"block": 64, "idx32": True, "evict": "evict_first"},
                                     {"lanes": 16}, {"lanes": 64, "idx32": True}])
def test_full_sweep_is_one_jacobi_sweep_of_the_padded_levels(options):
    model = _layered(np.random.default_rng(7))
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    tri = TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton", triton={"chain_rows": 8, "block": 16})
    tri.optimise([1.0, -0.5])  # RR's column 0 for this direction
    pads = tri.padded.levels.values()
    assert len(pads) > 3 and any(P.o1 > P.o0 for P in pads) and any(P.K > 1 for P in pads)
    VX = torch.rand((tri.VX.shape[0], tri.VX.shape[1]), dtype=torch.float64, device=tri.VX.device)
    VX[-1] = 0.0  # the zero row padding points at
    ref, ref_arg = _jacobi_reference(tri, VX)
    OUT = VX.clone()
    arg = torch.zeros_like(ref_arg)
    programs = tri.triton.sweep(VX, OUT, arg, **options)
    block = options.get("lanes", 0) // tri.VX.shape[1] or options.get("block", 16)  # rows per program
    assert programs == sum(-(-(P.b - P.a) // block) for P in pads)
    assert torch.allclose(OUT, ref, rtol=1e-13, atol=1e-13)
    picked = np.concatenate([np.arange(P.a, P.b) for P in pads if P.K > 1])
    assert torch.equal(arg[picked], ref_arg[picked])
    assert not torch.equal(OUT, VX), "the sweep changed the padded states"
    assert tri.triton.sweep_bytes(options.get("idx32", False)) > 0
    with pytest.raises(ValueError, match="power of two"):
        tri.triton.sweep(VX, OUT, arg, block=24)
    with pytest.raises(ValueError, match="evict 'all'"):
        tri.triton.sweep(VX, OUT, arg, evict="all")
    with pytest.raises(ValueError, match="lanes 2"):
        tri.triton.sweep(VX, OUT, arg, lanes=2)
    if "lanes" in options:  # the flat kernel: bit for bit the tile kernel's result
        TILE = VX.clone()
        tile_arg = torch.zeros_like(ref_arg)
        tri.triton.sweep(VX, TILE, tile_arg)
        assert torch.equal(OUT, TILE) and torch.equal(arg[picked], tile_arg[picked])
        return
    launches = tri.triton._sweep_tables(block, options.get("unroll", True))
    shapes = {(P.K, P.T) for P in pads}
    assert len(launches) == (1 if options.get("unroll") is False else len({tri.triton._unrolled(*s) for s in shapes})) > 0


def test_flat_sweep_leaves_shapes_it_cannot_unroll_to_the_tile_kernel(monkeypatch):
    model = _layered(np.random.default_rng(8), layers=6, width=24)
    objs = total_objectives(2, ["max", "min"])
    eng = Engine(model, objs, renumber="always")
    tri = TorchEngine(model, objs, DEVICE, engine=eng, kernels="triton", triton={"chain_rows": 8, "block": 16})
    tri.optimise([0.5, 1.0])
    unrolled = tri.triton._unrolled  # as if T = 2 were beyond UNROLL_MAX: those levels loop
    monkeypatch.setattr(tri.triton, "_unrolled", lambda K, T: (0, 0) if T > 1 else unrolled(K, T))
    shapes = {tri.triton._unrolled(P.K, P.T) for P in tri.padded.levels.values()}
    assert any(0 not in s for s in shapes) and any(0 in s for s in shapes), shapes
    VX = torch.rand(tuple(tri.VX.shape), dtype=torch.float64, device=tri.VX.device)
    VX[-1] = 0.0
    ref, ref_arg = _jacobi_reference(tri, VX)
    OUT, arg = VX.clone(), torch.zeros_like(ref_arg)
    tri.triton.sweep(VX, OUT, arg, lanes=32)
    assert torch.allclose(OUT, ref, rtol=1e-13, atol=1e-13)
