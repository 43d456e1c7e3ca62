"""The engine's preprocessing alone, in fresh processes: the CPU engine's steps and the torch
engine's set-up (CPU preprocessing, then layout and upload) on ``--device``, with and without
worker threads (``MOPMC_BUILD_THREADS``).

Each run is a fresh process (its memory is touched for the first time, as in a ``mopmc`` command)
that loads the model and numba's kernels untimed, then times ``Engine(...)`` and, with torch
installed, ``TorchEngine(...)``. Settings are interleaved round by round; the table gives the best
and the median. Every setting must give the same values at the initial state. Writes
``benchmarks/results/prep.md``. Usage:

    python benchmarks/prep.py [--cases A200,C5-04,C5-10] [--threads 0,1] [--repeat 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import write_report  # noqa: E402  (the benchmarks' atomic report writer)

SHARED = Path(os.environ.get("MOPMC_SHARED") or Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
OUT = Path(__file__).resolve().parent / "results" / "prep.md"
STEPS = ("product", "worthless", "finite", "proper", "renumber")

CHILD = r"""
import json, sys, time
import numpy as np
from mopmc.cli.allocator import keep_freed_memory
keep_freed_memory()
from mopmc.engine import warmup
from mopmc.io.load import load
path, prop, device = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    import torch  # noqa: F401
except ImportError:
    device = ""
warmup.warm("check")
if device:
    warmup.warm("check", "torch", device)
loaded = load(path, properties=prop)
objectives = loaded.properties()[0].objectives
from mopmc.engine.kernel import Engine
t = time.perf_counter()
engine = Engine(loaded.model, objectives)
out = {"engine": time.perf_counter() - t, **engine.timings}
w = np.full(len(objectives), 1.0 / len(objectives))
out["values"] = [float(x) for x in engine.optimise(w).values]
if device:
    from mopmc.engine.torch_engine import TorchEngine
    t = time.perf_counter()
    gpu = TorchEngine(loaded.model, objectives, device)
    out["torch setup"] = time.perf_counter() - t
    out["torch prep"], out["layout+upload"] = gpu.timings["preprocess"], gpu.timings["upload"]
out["states"] = loaded.model.n_states
print(json.dumps(out))
"""


def cases(spec: str):
    """``A200,C5-04`` -> (label, model, property text)."""
    out = []
    for item in spec.split(","):
        if item.startswith("A"):
            path = SHARED / "switch-scaling" / f"switch_model_{item[1:]}.prism"
            props = (SHARED / "switch-scaling" / "switch_prop_achievable.props").read_text()
            prop = next(line for line in props.splitlines() if line.startswith("multi"))
            out.append((f"A n={item[1:]}", path, prop))
        elif item.startswith("C"):
            team, obj = item[1:].split("-")
            path = SHARED / "team-formation" / f"team_{team}.nm"
            prop = (SHARED / "team-formation" / f"team_{team}_props" / f"obj_{obj}.pctl").read_text().strip()
            out.append((f"C team {team}, {int(obj)} objectives", path, prop))
        else:
            raise SystemExit(f"--cases: {item!r} is neither A<n> nor C<team>-<objectives>")
    return out


def run(path: Path, prop: str, device: str, threads: int) -> dict:
    env = {**os.environ, "MOPMC_BUILD_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), prop, device], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{path.name} ({threads} workers): {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(xs: list[float]) -> str:
    return f"{min(xs):.3f} / {statistics.median(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="A200,C5-04,C5-10")
    ap.add_argument("--threads", default="0,1", help="worker counts to compare, e.g. 0,1,15")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="the torch engine's device (cpu or cuda); '' for none")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    columns = ["engine", *STEPS, "torch setup", "torch prep", "layout+upload"]
    lines = [
        f"# Engine preprocessing in fresh processes, seconds (best / median of {args.repeat}, interleaved; "
        f"`python benchmarks/prep.py --cases {args.cases} --threads {args.threads} --repeat {args.repeat} "
        f"--device {args.device or repr('')}`)",
        "",
        f"{cpus} CPUs. `workers`: `MOPMC_BUILD_THREADS`. `engine`: `Engine(model, objectives)` and its steps"
        + (f"; `torch setup`: `TorchEngine(model, objectives, {args.device!r})` (its CPU preprocessing, then layout and "
           "upload)." if args.device else "."),
        f"Load average when written: {', '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        "",
        "| case | states | workers | " + " | ".join(columns) + " |",
        "|---|---|---|" + "---|" * len(columns),
    ]
    for label, path, prop in cases(args.cases):
        if not path.exists():
            print(f"{label}: missing {path}")
            continue
        run(path, prop, args.device, 0)  # numba's cache filled, files in the page cache
        results: dict[int, list[dict]] = {k: [] for k in counts}
        for _ in range(args.repeat):
            for k in counts:
                results[k].append(run(path, prop, args.device, k))
        values = {tuple(r["values"]) for rs in results.values() for r in rs}
        if len(values) != 1:
            raise SystemExit(f"{label}: the settings gave different values: {sorted(values)}")
        for k in counts:
            rs = results[k]
            cells = [cell([r[c] for r in rs]) if c in rs[0] else "" for c in columns]
            lines.append(f"| {label} | {rs[0]['states']:,} | {k} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    write_report(args.out, lines)


if __name__ == "__main__":
    main()
