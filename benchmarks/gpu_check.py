"""One prepared check of the torch engine on a (lent) GPU: equality first, then timings.

1. **Equality**: every row of the reference-value table (``tests/engine/reference_values.json``),
   single-objective, torch engine vs CPU engine within ``1e-9 * max(1, |v|)``; any difference fails
   the script (exit 1) before any timing.
2. **Timings** (each also checked for equality with the CPU engine): Model A (``switch-scaling``,
   n=200) achievability and convex query, Model B (``dive-and-rise``) achievability with 100
   objectives, the design layer's paper switch SW2 with n=400 and n=800 (4 objectives, one kernel
   call and achievability at the Table 3 thresholds), and the memory-bandwidth floor (a large
   float64 copy and axpy). Per case: seconds for the CPU engine and the torch engine, oracle calls,
   and one kernel call (a full sweep over the model, level by level) against the time the device
   needs just to stream the sweep's bytes at the measured bandwidth.
3. **Per-sweep time against the bandwidth floor**: one full Bellman sweep over the whole model at
   once (value iteration's unit of work, no level order) by cuSPARSE (CSR SpMM + segmented max)
   and by the Triton kernel in one launch (a Jacobi sweep over every padded level, several launch
   shapes; each checked equal to the torch form of the levels), each against the floor of
   streaming the CSR arrays once, and the Triton sweep also against its own padded bytes.

Prints a table and writes a CSV (default ``benchmarks/results/gpu_check_<device>[_quick].csv``).
``--quick`` uses small models (n=20 switch, Model B with 10 objectives, SW2 n=20/40) to prove the
script end to end on a CPU::

    python benchmarks/gpu_check.py --quick --device cpu
    python benchmarks/gpu_check.py                    # on the GPU machine: well inside 10 minutes
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "engine"))
SHARED = Path(os.environ.get("MOPMC_SHARED") or HERE.parent.parent / "shared" / "benchmarks")
TOL = 1e-9
SW2_PROPS = 'multi(R{"ctrl_cost"}<=2.0 [C], R{"headway_cost"}<=0.23 [C], R{"lane_dep_cost"}<=0.174 [C], R{"ttc_cost"}<=0.04 [C])'


class Inequality(Exception):
    """The torch engine disagrees with the CPU engine."""


def close(a, b, tol=TOL) -> bool:
    a, b = np.asarray(a, float), np.asarray(b, float)
    with np.errstate(invalid="ignore"):
        return bool(np.all((np.isinf(a) & (a == b)) | (np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b)))))


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------- 1. equality
def reference_equality(device: str) -> dict:
    from reference_values import REFERENCES, reference_case

    from mopmc.properties.objectives import Property
    from mopmc.queries.single import check

    worst, rows, t0 = 0.0, 0, time.perf_counter()
    for ref in REFERENCES:
        model, objective = reference_case(ref)
        prop = Property(0, ref.prop, None, (objective,), False)
        cpu = check(model, prop, engine="kernel")
        gpu = check(model, prop, engine="torch", device=device)
        if gpu.status != cpu.status or not close(gpu.value, cpu.value):
            raise Inequality(f"{ref.model}: {ref.prop}: torch {gpu.value!r} ({gpu.status}) vs CPU {cpu.value!r} ({cpu.status})")
        if math.isfinite(cpu.value):
            worst = max(worst, abs(gpu.value - cpu.value) / max(1.0, abs(cpu.value)))
        rows += 1
    return {"case": f"reference table ({rows} rows)", "states": "", "objectives": 1, "cpu_s": "", "torch_s": round(time.perf_counter() - t0, 3),
            "calls": rows, "max_rel_diff": worst, "result": "equal"}


# ---------------------------------------------------------------------------- 2. timings
def bandwidth(device, gib: float) -> dict:
    """Bytes per second of a float64 copy (read + write) and axpy (2 reads + 1 write), best of 5."""
    import torch

    n = int(gib * 2**30 / 8)
    x = torch.rand(n, device=device, dtype=torch.float64)
    y = torch.empty_like(x)
    out = {}
    for name, op, traffic in (("copy", lambda: y.copy_(x), 2), ("axpy", lambda: y.add_(x, alpha=0.5), 3)):
        op()
        sync(device)
        best = math.inf
        for _ in range(5):
            t = time.perf_counter()
            op()
            sync(device)
            best = min(best, time.perf_counter() - t)
        out[name] = traffic * n * 8 / best
    del x, y
    return out


def sweep_bytes(engine) -> int:
    """Bytes one kernel call must at least stream: CSR (targets, local index, probabilities), the
    gathered successor rows of ``[V | X]``, rewards and per-choice data, and ``[V | X]`` written."""
    p = engine.cpu.problem
    k = engine.m + 1
    return len(p.targets) * (8 * 3 + 8 * k) + p.n_choices * (8 * engine.m + 8 * 4) + p.n_states * 8 * (k + 1)


def full_sweep(engine, floor: float, repeat: int = 5) -> dict:
    """One value-iteration sweep over the whole model at once (no level order): ``S = P [V | X]`` by
    one sparse CSR matrix product (cuSPARSE on CUDA), ``(RR + S) / den`` and the segmented max over
    row groups: the bandwidth-bound unit of work. Its time against the floor of streaming each
    array once (CSR, ``[V | X]``, ``RR``, the result)."""
    import warnings

    import torch

    warnings.filterwarnings("ignore", message="Sparse")
    p, dev, k = engine.cpu.problem, engine.device, engine.m + 1
    n, nc, nnz = p.n_states, p.n_choices, len(p.targets)
    put = lambda a, dt: torch.tensor(np.ascontiguousarray(a), device=dev, dtype=dt)  # noqa: E731
    P = torch.sparse_csr_tensor(put(p.indptr, torch.int64), put(p.targets, torch.int64), put(p.probs, torch.float64), size=(nc, n))
    VX = torch.rand((n, k), device=dev, dtype=torch.float64)
    RR = torch.rand((nc, k), device=dev, dtype=torch.float64)
    den = torch.ones((nc, 1), device=dev, dtype=torch.float64)
    own = put(p.state_of_choice(), torch.int64)

    def sweep():
        S = torch.sparse.mm(P, VX)
        S.add_(RR).div_(den)
        return torch.full((n,), -np.inf, device=dev, dtype=torch.float64).scatter_reduce_(0, own, S[:, 0], "amax")

    best = gpu_time(sweep, dev)
    once = nnz * 16 + nc * 8 + n * k * 8 + nc * k * 8 * 2 + nc * 8 * 2 + n * 8
    return {"seconds": best, "floor_s": once / floor}


#: launch shapes of the Triton full sweep (rows per program, warps, int32 targets, unrolled slots,
#: eviction policy, the flat kernel's lanes per program)
SWEEPS = [{"unroll": False, "block": 128, "warps": 4}, {}, {"block": 64}, {"block": 128, "warps": 4},
          # the flat kernel (a lane per row and column, no padded columns): not yet measured
          {"lanes": 128, "warps": 4}, {"lanes": 256, "warps": 4}, {"lanes": 256, "warps": 8}, {"lanes": 512, "warps": 8},
          {"lanes": 1024, "warps": 8}, {"lanes": 512, "warps": 4}]
#: measured on an H200 and no faster (benchmarks/results/gpu_check_cuda_unrolled.csv): 32-row
#: programs with loops, 64 x 4 warps, 128 x 2, 256 x 4 and 8, evict_first, int32 targets


def gpu_time(fn, device, reps: int = 20, rounds: int = 3) -> float:
    """Seconds of one ``fn()`` on the device: ``reps`` calls back to back between two syncs (the
    host's launch overhead hides behind the device's work), the best of ``rounds``."""
    fn()
    sync(device)
    best = math.inf
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def triton_full_sweep(name, model, m, engine, floor, csr_floor_s, shapes=None) -> list[dict]:
    """The Triton kernel's one-launch Jacobi sweep over every padded level
    (:meth:`~mopmc.engine.triton_levels.TritonLevels.sweep`) per launch shape: equal to the torch
    form of the levels (read from a copy of ``[V | X]``), its time against the floor of the CSR
    bytes (the yardstick of the cuSPARSE sweep) and of its own padded bytes."""
    import torch

    tri, pad = engine.triton, engine.padded
    dev = engine.device
    levels = sorted(pad.levels.values(), key=lambda P: P.s0)
    covered = sum(P.b - P.a for P in levels)
    VX = torch.rand(engine.VX.shape, device=dev, dtype=torch.float64)
    VX[-1] = 0.0  # the zero row padding points at
    ref = VX.clone()
    ref_arg = torch.zeros(VX.shape[0], device=dev, dtype=torch.int64)
    for P in reversed(levels):  # a level reads only lower levels: top down, each still reads VX's rows
        pad.level(P, ref, ref_arg)
    rows = []
    for opts in SWEEPS if shapes is None else shapes:
        label = f"{name}: Triton full sweep {opts or 'default'}"
        try:
            OUT = VX.clone()
            arg = torch.zeros_like(ref_arg)
            programs = tri.sweep(VX, OUT, arg, **opts)
            diff = float(((OUT - ref).abs() / ref.abs().clamp(min=1.0)).max())
            if diff > TOL:
                raise Inequality(f"{label}: differs from the torch levels by {diff:.3g}")
            secs = gpu_time(lambda: tri.sweep(VX, OUT, arg, **opts), dev)
            own = tri.sweep_bytes(opts.get("idx32", False)) / floor
            vs_csr = f"x{secs / csr_floor_s:.2f} CSR floor ({csr_floor_s * 1e3:.3f} ms), " if csr_floor_s else ""
            rows.append({"case": label, "states": model.n_states, "objectives": m, "torch_s": round(secs, 7), "calls": 1, "max_rel_diff": diff,
                         "result": f"{vs_csr}x{secs / own:.2f} own floor ({own * 1e3:.3f} ms, {tri.sweep_bytes(opts.get('idx32', False)) / secs / 1e9:.0f} GB/s), "
                                   f"{programs} programs, {covered}/{model.n_states} states padded"})
        except Inequality:
            raise
        except Exception as exc:  # noqa: BLE001 - a measurement: report and go on
            rows.append({"case": label, "result": f"ERROR {type(exc).__name__}: {exc}"[:300]})
        print(f"{rows[-1]['case']}: {rows[-1].get('torch_s', '-')} s, {rows[-1]['result']}", flush=True)
    return rows


def launches(engine) -> str:
    """How the Triton kernel runs the levels: chain, grid and flat launches per call."""
    if engine.triton is None:
        return ""
    kinds = [step[0] for r in engine.runs for step in r.launches]
    flat = f" + {kinds.count('flat')} flat" if "flat" in kinds else ""
    return f", {kinds.count('chain')} chain + {kinds.count('grid')} grid{flat} launches"


def time_kernel(engine, w, device, repeat: int = 3) -> float:
    engine.optimise(w)
    best = math.inf
    for _ in range(repeat):
        sync(device)
        t = time.perf_counter()
        engine.optimise(w)
        sync(device)
        best = min(best, time.perf_counter() - t)
    return best


def query_case(name, model, prop, device, floor, kinds=("achievability",)) -> list[dict]:
    """CPU engine vs torch engine on one model: one kernel call, then the queries in ``kinds``."""
    from mopmc.engine.kernel import Engine
    from mopmc.engine.oracle import kernel_oracle
    from mopmc.engine.torch_engine import TorchEngine
    from mopmc.queries.multi import achievability

    objs = prop.objectives
    t = time.perf_counter()
    cpu = Engine(model, objs, renumber="always")
    prep = time.perf_counter() - t
    t = time.perf_counter()
    gpu = TorchEngine(model, objs, device, engine=cpu)
    upload = time.perf_counter() - t
    w = np.ones(len(objs))
    r_cpu, r_gpu = cpu.optimise(w), gpu.optimise(w)
    if not close(r_gpu.weighted, r_cpu.weighted) or not close(r_gpu.values, r_cpu.values):
        raise Inequality(f"{name}: kernel call: torch {r_gpu.values} vs CPU {r_cpu.values}")
    dev = gpu.device
    k_cpu = time_kernel(cpu, w, dev)
    k_gpu = time_kernel(gpu, w, dev)
    levels = gpu.levels
    padded = sum(kind == "pad" for kind, _ in gpu.level_steps)
    floor_s = sweep_bytes(gpu) / floor
    p = cpu.problem
    runs = gpu.runs
    captured = sum(r.graph is not None for r in runs)
    graphs = (f"{captured}/{len(runs)} runs as CUDA graphs" + (f", capture FAILED: {gpu.graph_errors[0][:120]}" if gpu.graph_errors else "")
              if gpu.graphs else "eager")
    rows = [{"case": f"{name}: one kernel call ({gpu.kernels})", "states": model.n_states, "objectives": len(objs), "cpu_s": round(k_cpu, 5),
             "torch_s": round(k_gpu, 5), "calls": 1, "max_rel_diff": float(np.max(np.abs(r_gpu.values - r_cpu.values) / np.maximum(1, np.abs(r_cpu.values)))),
             "result": f"{levels} levels ({padded} padded){launches(gpu)}, {graphs}, floor {floor_s * 1e3:.3f} ms, x{k_gpu / floor_s:.0f} floor, "
                       f"{k_gpu / max(levels, 1) * 1e6:.1f} us/level" + (f"; {gpu.kernels_note}" if gpu.kernels_note else ""),
             "prep_s": round(prep, 3), "upload_s": round(upload, 3), "product_states": p.n_states, "transitions": len(p.targets)}]
    variants = []
    if gpu.graphs:  # the same call without graphs, for the launch overhead they save
        variants.append(("eager", {"graphs": False}))
    if gpu.kernels == "triton":  # the torch form of the padded levels, and other launch shapes of the Triton kernel
        variants += [("torch ops", {"kernels": "torch"}), ("triton, slot loops (not unrolled)", {"triton": {"unroll": False}}),
                     ("triton, chains up to 256 rows", {"triton": {"chain_rows": 256}}),
                     ("triton, 64-row programs", {"triton": {"block": 64}}), ("triton, 16-row programs", {"triton": {"block": 16}})]
        if gpu.m + 1 <= 16:  # the flat kernel: a lane per row and column (a row of 101 columns is a program)
            variants += [("triton, flat 256 lanes", {"triton": {"lanes": 256}}), ("triton, flat 128 lanes x 4 warps", {"triton": {"lanes": 128, "warps": 4}})]
    for label, options in variants:
        try:
            other = TorchEngine(model, objs, device, engine=cpu, **options)
            r_other = other.optimise(w)
            if not close(r_other.values, r_cpu.values):
                raise Inequality(f"{name}: kernel call ({label}): torch {r_other.values} vs CPU {r_cpu.values}")
            k_other = time_kernel(other, w, dev)
        except Inequality:
            raise
        except Exception as exc:  # noqa: BLE001 - a measurement: report and go on
            rows.append({"case": f"{name}: one kernel call, {label}", "result": f"ERROR {type(exc).__name__}: {exc}"[:300]})
            continue
        rows.append({"case": f"{name}: one kernel call, {label}", "states": model.n_states, "objectives": len(objs), "torch_s": round(k_other, 5),
                     "calls": 1, "result": f"x{k_other / k_gpu:.2f} the default{launches(other)}, {k_other / max(levels, 1) * 1e6:.1f} us/level"})
        del other
    try:
        fs = full_sweep(gpu, floor)
        rows.append({"case": f"{name}: one full Bellman sweep", "states": model.n_states, "objectives": len(objs), "torch_s": round(fs["seconds"], 6),
                     "calls": 1, "result": f"floor {fs['floor_s'] * 1e3:.3f} ms, x{fs['seconds'] / fs['floor_s']:.2f} floor (sparse CSR SpMM + segmented max)"})
    except Exception as exc:  # noqa: BLE001 - a measurement, not a check: report and go on
        rows.append({"case": f"{name}: one full Bellman sweep", "result": f"ERROR {type(exc).__name__}: {exc}"[:300]})
        fs = None
    if gpu.triton is not None:
        shapes = SWEEPS if name.startswith("Model A") else [{}, {"unroll": False, "block": 128, "warps": 4}, {"lanes": 256, "warps": 4},
                                                            {"lanes": 512, "warps": 8}]
        rows += triton_full_sweep(name, model, len(objs), gpu, floor, fs["floor_s"] if fs else None, shapes)
    for kind in kinds:
        def run(oracle):
            t = time.perf_counter()
            if kind == "achievability":
                res = achievability(oracle, objs)
                key = (res.achievable, res.margin)
            else:
                from mopmc.queries.convex import convex_query

                res = convex_query(oracle, objs, "mse")
                key = (res.status, res.loss)
            return time.perf_counter() - t, res, key

        calls = {"n": 0}

        def counted(o):
            def call(wts):
                calls["n"] += 1
                return o(wts)
            return call

        try:
            s_cpu, _, key_cpu = run(kernel_oracle(model, objs, engine=cpu))
        except Exception as exc:  # a query-layer failure: the torch engine must fail the same way
            cpu_error = f"{type(exc).__name__}: {exc}"
            try:
                run(kernel_oracle(model, objs, engine=gpu))
            except Exception as exc2:
                if type(exc2) is not type(exc):
                    raise Inequality(f"{name}: {kind}: CPU failed with {cpu_error}, torch with {type(exc2).__name__}: {exc2}") from None
                rows.append({"case": f"{name}: {kind}", "states": model.n_states, "objectives": len(objs),
                             "result": f"ERROR in both engines ({cpu_error})"[:300]})
                continue
            raise Inequality(f"{name}: {kind}: CPU failed with {cpu_error}, torch succeeded") from None
        calls["n"] = 0
        s_gpu, _, key_gpu = run(counted(kernel_oracle(model, objs, engine=gpu)))
        if key_cpu[0] != key_gpu[0] or not close(key_gpu[1], key_cpu[1]):
            raise Inequality(f"{name}: {kind}: torch {key_gpu} vs CPU {key_cpu}")
        rows.append({"case": f"{name}: {kind}", "states": model.n_states, "objectives": len(objs), "cpu_s": round(s_cpu, 3),
                     "torch_s": round(s_gpu, 3), "calls": calls["n"], "cpu_e2e_s": round(prep + s_cpu, 3),
                     "torch_e2e_s": round(prep + upload + s_gpu, 3),
                     "max_rel_diff": abs(key_gpu[1] - key_cpu[1]) / max(1.0, abs(key_cpu[1])) if math.isfinite(key_cpu[1]) else 0.0,
                     "result": f"{key_gpu[0]} ({key_gpu[1]:.6g})", "prep_s": round(prep, 3), "upload_s": round(upload, 3)})
    return rows


def cli_convex(path: Path, props: str, device: str) -> list[dict]:
    """``mopmc convex MODEL --soft --json`` in a fresh process, CPU engine and torch engine (twice:
    the first run on a fresh machine compiles the Triton kernel into Triton's on-disk cache, and a
    third time with the model built on one thread, ``MOPMC_BUILD_THREADS=0``, to show what the
    builder's worker threads take off the load): end to end as a user runs it (interpreter start,
    the model build, preprocessing, upload, the query), as Table 5's convex column."""
    import json
    import subprocess

    prop = next(line for line in props.splitlines() if line.strip().startswith("multi"))
    rows, got = [], {}
    for engine, one_thread in (("kernel", False), ("torch", False), ("torch", False), ("torch", True)):
        cmd = [sys.executable, "-m", "mopmc", "convex", str(path), "--prop", prop, "--soft", "--json"]
        if engine == "torch":
            cmd += ["--engine", "torch", "--device", device]
        env = {**os.environ, "MOPMC_BUILD_THREADS": "0"} if one_thread else None
        t = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - t
        if res.returncode != 0:
            lines = res.stderr.strip().splitlines() or ["(no stderr)"]
            named = [line for line in lines if "Error" in line or "error:" in line]
            rows.append({"case": f"{path.stem}: mopmc convex --engine {engine}", "result": f"ERROR {(named or lines)[-1][:250]} (exit {res.returncode})"})
            print(res.stderr[-3000:], file=sys.stderr)
            continue
        out = json.loads(res.stdout)
        again = " again: Triton's cache warm" if engine == "torch" and "torch" in got else ""
        if one_thread:
            again += ", build on one thread"
        got[engine] = out["loss"]
        rows.append({"case": f"{path.stem}: mopmc convex --soft --engine {engine} (CLI{again})", "torch_s" if engine == "torch" else "cpu_s": round(seconds, 3),
                     "torch_e2e_s" if engine == "torch" else "cpu_e2e_s": round(seconds, 3), "calls": out["iterations"],
                     "result": f"{out['status']} ({out['loss']:.6g}); " + ", ".join(
                         f"{k} {out['timings'][k]:.2f} s" for k in ("load", "build", "warm_wait", "setup", "oracle", "total")
                         if k in out["timings"])})
    if len(got) == 2 and not close(got["torch"], got["kernel"], 1e-6):
        raise Inequality(f"{path.stem}: mopmc convex: torch loss {got['torch']} vs CPU {got['kernel']}")
    return rows


def wide_case(top: int, K: int = 2, T: int = 4, m: int = 4, seed: int = 0):
    """A synthetic layered DAG whose time is bandwidth, not launches: layers of 4**0 .. 4**top
    states and a last one as wide as the widest, each state ``K`` choices of ``T`` random successors
    in the next layer (random rewards for ``m`` total-reward objectives), then one absorbing sink.
    Its two widest levels are most of the work: one grid launch each."""
    from mopmc.model.sparse_mdp import SparseMDP
    from mopmc.properties.objectives import Objective

    t = time.perf_counter()
    rng = np.random.default_rng(seed)
    sizes = [4**i for i in range(top + 1)] + [4**top]
    first = np.concatenate(([0], np.cumsum(sizes)))
    n = int(first[-1]) + 1  # + the sink
    targets = []
    for i, size in enumerate(sizes):
        if i + 1 < len(sizes):
            targets.append(first[i + 1] + rng.integers(0, sizes[i + 1], size=size * K * T))
        else:
            targets.append(np.full(size * K * T, n - 1))
    targets.append(np.array([n - 1]))
    targets = np.concatenate(targets).astype(np.int64)
    probs = rng.dirichlet(np.ones(T), size=(n - 1) * K).ravel()
    probs = np.concatenate((probs, [1.0]))
    n_choices = (n - 1) * K + 1
    row_groups = np.concatenate((np.arange(0, (n - 1) * K + 1, K), [n_choices])).astype(np.int64)
    indptr = np.concatenate((np.arange(0, (n - 1) * K * T + 1, T), [len(targets)])).astype(np.int64)
    rewards = {f"r{j}": np.concatenate((rng.uniform(0, 1, n_choices - 1).round(3), [0.0])) for j in range(m)}
    model = SparseMDP.from_arrays(row_groups, indptr, targets, probs, 0, rewards=rewards)
    objs = tuple(Objective(j, f'R{{"r{j}"}}{s}=? [C]', "total_reward", s, f"r{j}") for j, s in enumerate(["min", "max"] * (m // 2)))

    class Prop:
        objectives = objs

    return model, Prop, time.perf_counter() - t


def load_case(path: Path, props: str):
    from mopmc.io.load import load

    t = time.perf_counter()
    loaded = load(path, properties=props)
    return loaded.model, loaded.properties()[0], time.perf_counter() - t


def sw2_case(n: int):
    """The design layer's paper switch with timestep bound ``n``, through a temporary UMB file."""
    import tempfile

    from mopmc.design.build import build_design

    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"sw2_{n}.umb"
        build_design("paper-switch", path, n=n)
        model, prop, _ = load_case(path, SW2_PROPS)
    return model, prop, time.perf_counter() - t


#: Triton kernel options tried on Model B (equality: the weighted value rounds as the CPU engine's, so ties break alike)
PROBES = [{}, {"unroll": False}, {"block": 16, "warps": 4}, {"block": 16, "warps": 4, "chain_rows": 1024}, {"lanes": 256}, {"lanes": 512}]
#: and on SW2 and Model A (launch shapes for time, each checked for equality too)
SHAPES = [{}, {"unroll": False}, {"block": 64}, {"warps": 4}, {"unroll": False, "warps": 4}, {"chain_rows": 256}, {"block": 16},
          {"lanes": 256}, {"lanes": 128, "warps": 4}, {"lanes": 512}, {"lanes": 64, "warps": 2}]


def triton_sweep(device: str, quick: bool) -> list[dict]:
    """Launch shapes of the Triton kernel on Model B (100 objectives), Model A and SW2: equality with
    the CPU engine per shape (no abort: a row says DIFFERS) and one kernel call's time."""
    from mopmc.engine.kernel import Engine
    from mopmc.engine.torch_engine import TorchEngine, resolve_device

    b_k, a_n, sw = (10, 20, 40) if quick else (100, 200, 800)
    cases = [(f"Model B {b_k} objectives", lambda: load_case(SHARED / "dive-and-rise" / "dive_and_rise_action_rewards.nm",
                                                               (SHARED / "dive-and-rise" / f"dive_and_rise_prop_{b_k}.props").read_text())),
             (f"SW2 n={sw}", lambda: sw2_case(sw)),
             (f"Model A n={a_n}", lambda: load_case(SHARED / "switch-scaling" / f"switch_model_{a_n}.prism",
                                                    (SHARED / "switch-scaling" / "switch_prop_achievable.props").read_text()))]
    rows = []
    floor = bandwidth(resolve_device(device), 0.25 if quick else 1.0)["copy"]
    for name, make in cases:
        model, prop, _ = make()
        objs = prop.objectives
        cpu = Engine(model, objs, renumber="always")
        if not name.startswith("Model B"):  # the one-launch full sweep's shapes, against the cuSPARSE sweep's floor
            eng = TorchEngine(model, objs, device, engine=cpu, kernels="triton")
            eng.optimise(np.ones(len(objs)))
            rows += triton_full_sweep(name, model, len(objs), eng, floor, full_sweep(eng, floor)["floor_s"])
            del eng
        rng = np.random.default_rng(1)
        ws = [np.ones(len(objs)), rng.uniform(-1, 1, len(objs))]
        refs = [cpu.optimise(w) for w in ws]
        for label, options in [("torch ops", {"kernels": "torch"})] + [
                (f"triton {opts or 'default'}", {"kernels": "triton", "triton": opts}) for opts in (PROBES if name.startswith("Model B") else SHAPES)]:
            try:
                eng = TorchEngine(model, objs, device, engine=cpu, **options)
                diffs = [float(np.max(np.abs(eng.optimise(w).values - r.values) / np.maximum(1, np.abs(r.values)))) for w, r in zip(ws, refs)]
                secs = time_kernel(eng, ws[0], eng.device)
                diffs.append(float(np.max(np.abs(eng.optimise(ws[1]).values - refs[1].values))))  # after the graph capture
                ok = max(diffs) <= TOL
                row = {"case": f"{name}: {label}", "states": model.n_states, "objectives": len(objs), "torch_s": round(secs, 5),
                       "max_rel_diff": max(diffs), "result": ("equal" if ok else f"DIFFERS {diffs}") + launches(eng)
                       + f", {secs / max(eng.levels, 1) * 1e6:.1f} us/level"}
                del eng
            except Exception as exc:  # noqa: BLE001
                row = {"case": f"{name}: {label}", "result": f"ERROR {type(exc).__name__}: {exc}"[:300]}
            print(f"{row['case']}: {row.get('torch_s', '-')} s, {row['result']}", flush=True)
            rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--quick", action="store_true", help="small models, to prove the script on a CPU")
    ap.add_argument("--out", default=None, help="CSV path (default benchmarks/results/gpu_check_<device>[_quick].csv)")
    ap.add_argument("--skip-table", action="store_true", help="skip the reference-table equality pass")
    ap.add_argument("--triton-sweep", action="store_true", help="only the Triton kernel's launch shapes (equality and time) on Models B, SW2, A")
    args = ap.parse_args(argv)
    from mopmc.engine.torch_engine import resolve_device

    dev = resolve_device(args.device)
    device = str(dev)
    out = Path(args.out) if args.out else HERE / "results" / f"gpu_check_{dev.type}{'_quick' if args.quick else ''}.csv"
    t_all = time.perf_counter()
    rows: list[dict] = []
    env = {"device": device, "quick": args.quick}
    if dev.type == "cuda":
        import torch

        env["gpu"] = torch.cuda.get_device_name(dev)
    print(f"# gpu_check on {env}", flush=True)
    if args.triton_sweep:
        rows = triton_sweep(device, args.quick)
        _write(out, rows)
        _table(rows)
        return 1 if any("DIFFERS" in r["result"] or "ERROR" in r["result"] for r in rows) else 0
    try:
        if not args.skip_table:
            rows.append(reference_equality(device))
            print(f"reference table: equal ({rows[-1]['torch_s']} s)", flush=True)
            _write(out, rows)
        bw = bandwidth(dev, 0.25 if args.quick else 2.0)
        floor = bw["copy"]
        rows.append({"case": "bandwidth floor (float64)", "states": "", "objectives": "", "cpu_s": "", "torch_s": "", "calls": "",
                     "max_rel_diff": "", "result": f"copy {bw['copy'] / 1e9:.1f} GB/s, axpy {bw['axpy'] / 1e9:.1f} GB/s"})
        print(rows[-1]["result"], flush=True)
        a_n = 20 if args.quick else 200
        b_k = 10 if args.quick else 100
        cases = [
            (f"Model A n={a_n}", lambda: load_case(SHARED / "switch-scaling" / f"switch_model_{a_n}.prism",
                                                   (SHARED / "switch-scaling" / "switch_prop_achievable.props").read_text()),
             ("achievability", "convex")),
            (f"Model B {b_k} objectives", lambda: load_case(SHARED / "dive-and-rise" / "dive_and_rise_action_rewards.nm",
                                                           (SHARED / "dive-and-rise" / f"dive_and_rise_prop_{b_k}.props").read_text()),
             ("achievability",)),
        ]
        a_path = SHARED / "switch-scaling" / f"switch_model_{a_n}.prism"
        for r in cli_convex(a_path, (SHARED / "switch-scaling" / "switch_prop_achievable.props").read_text(), device):
            print(f"{r['case']}: {r.get('cpu_s', r.get('torch_s', '-'))} s, {r['result']}", flush=True)
            rows.append(r)
        _write(out, rows)
        for n in ((20, 40) if args.quick else (400, 800)):
            cases.append((f"SW2 n={n}", lambda n=n: sw2_case(n), ("achievability",)))
        top = 6 if args.quick else 10
        cases.append((f"wide DAG 4^0..4^{top} x2 states", lambda: wide_case(top), ()))
        for name, make, kinds in cases:
            try:
                model, prop, build_s = make()
                got = query_case(name, model, prop, device, floor, kinds)
            except Inequality:
                raise
            except Exception as exc:  # noqa: BLE001 - record it, show it, go on with the next case
                import traceback

                traceback.print_exc()
                rows.append({"case": f"{name}: ERROR", "result": f"{type(exc).__name__}: {exc}"[:300]})
                _write(out, rows)
                continue
            for r in got:
                r["build_s"] = round(build_s, 3)
                print(f"{r['case']}: cpu {r.get('cpu_s', '-')} s, torch {r.get('torch_s', '-')} s, {r['result']}", flush=True)
            rows.extend(got)
            _write(out, rows)  # finished cases survive a run cut short
    except Inequality as exc:
        print(f"FAIL: the torch engine differs from the CPU engine: {exc}", file=sys.stderr)
        _write(out, rows + [{"case": "FAIL", "result": str(exc)}])
        return 1
    total = time.perf_counter() - t_all
    errors = sum(r["case"].endswith(": ERROR") for r in rows)
    rows.append({"case": "total", "torch_s": round(total, 1), "result": f"all equal, {errors} cases failed" if errors else "all equal"})
    _write(out, rows)
    _table(rows)
    print(f"wrote {out} ({total:.1f} s)")
    return 1 if errors else 0


COLUMNS = ["case", "states", "objectives", "build_s", "prep_s", "upload_s", "cpu_s", "torch_s", "cpu_e2e_s", "torch_e2e_s", "calls",
           "max_rel_diff", "result", "product_states", "transitions"]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(tmp, path)


def _table(rows: list[dict]) -> None:
    cols = ["case", "states", "objectives", "cpu_s", "torch_s", "torch_e2e_s", "calls", "max_rel_diff", "result"]
    cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    print(" | ".join(c.ljust(wd) for c, wd in zip(cols, width)))
    print("-+-".join("-" * wd for wd in width))
    for x in cells:
        print(" | ".join(v.ljust(wd) for v, wd in zip(x, width)))


def _fmt(v) -> str:
    return f"{v:.2e}" if isinstance(v, float) and 0 < abs(v) < 1e-3 else str(v)


if __name__ == "__main__":
    raise SystemExit(main())
