"""Statistical equivalence of the fast road and stock highway-env over many seeded episodes.

Runs ``--episodes`` seeded episodes (default 200) of the same runtime setting twice on one
resumable sweep (:mod:`mopmc.runtime.sweep`): setting ``stock`` on highway-env's own road and
setting ``fast`` on the accelerated road (:mod:`mopmc.runtime.fastsim`). Both use the same root
seed, agent, delay spec, switch and vehicle count, so episode ``e`` has the same traffic seed and
primary delays in both. It reports P10 TTC, P50 HW (pooled steps, :mod:`mopmc.runtime.aggregate`)
and the collision rate (episodes ended early) with 95% percentile-bootstrap intervals over
episodes, and for each metric whether each point estimate lies inside the other's interval
(issue 10's criterion), plus the largest per-step difference of the logged metrics.

Rerunning with the same arguments resumes the sweep in ``--out`` (no finished episode is lost or
repeated); a larger ``--episodes`` runs only the missing ones.

    python benchmarks/simulator_stats.py --out runs/simstats [--episodes 200] [--vehicles 10]
        [--agent shipped] [--delay exp:0.2] [--switch none] [--duration 40] [--substep 0.01]
        [--seed 0] [--workers 1] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _bootstrap(values: list[float], stat, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    n = len(values)
    draws = [stat([values[i] for i in rng.integers(n, size=n)]) for _ in range(resamples)]
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def _stats(results, seed: int, resamples: int) -> dict[str, tuple[float, float, float]]:
    from mopmc.runtime.aggregate import summarise

    s = summarise(results, rng=np.random.default_rng(seed), resamples=resamples)
    crashed = [float(r.terminated) for r in results]
    low, high = _bootstrap(crashed, lambda x: float(np.mean(x)), np.random.default_rng(seed + 1), resamples)
    return {"P10 TTC [s]": (s.p10_ttc.value, s.p10_ttc.low, s.p10_ttc.high),
            "P50 HW [s]": (s.p50_headway.value, s.p50_headway.low, s.p50_headway.high),
            "collision rate": (float(np.mean(crashed)), low, high)}


def _max_step_difference(stock, fast) -> float:
    worst = 0.0
    for a, b in zip(stock, fast):
        if len(a.records) != len(b.records):
            return float("inf")
        for ra, rb in zip(a.records, b.records):
            for x, y in zip(ra, rb):
                if isinstance(x, float) and isinstance(y, float) and np.isfinite(x) and np.isfinite(y):
                    worst = max(worst, abs(x - y))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="sweep folder (resumed if it exists)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--vehicles", type=int, default=10)
    parser.add_argument("--agent", default="shipped")
    parser.add_argument("--delay", default="exp:0.2")
    parser.add_argument("--switch", default="none")
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--substep", type=float, default=0.01, help="max integration sub-step [s]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args()
    problems = [f"--episodes must be >= 2, got {args.episodes}"] if args.episodes < 2 else []
    problems += [f"--vehicles must be >= 0, got {args.vehicles}"] if args.vehicles < 0 else []
    problems += [f"--{k} must be > 0, got {getattr(args, k)}" for k in ("duration", "substep", "bootstrap")
                 if not getattr(args, k) > 0]
    if problems:
        print(f"simulator_stats: {problems[0]}", file=sys.stderr)
        return 2

    from mopmc.errors import MopmcError
    from mopmc.runtime.config import RuntimeConfig
    from mopmc.runtime.sweep import Setting, run_sweep

    base = RuntimeConfig()
    env = dataclasses.replace(base.env, vehicles=args.vehicles, duration=args.duration, max_substep=args.substep)
    config = dataclasses.replace(base, env=env)
    settings = [Setting(sim, delay=args.delay, switch=args.switch, agent=args.agent, seed=args.seed, config=config,
                        simulator=sim) for sim in ("stock", "fast")]
    started = time.perf_counter()
    try:
        result = run_sweep(args.out, settings, args.episodes, workers=args.workers, progress=True)
    except MopmcError as e:
        print(f"simulator_stats: {e}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - started
    stock, fast = result.episodes["stock"], result.episodes["fast"]
    a, b = _stats(stock, args.seed, args.bootstrap), _stats(fast, args.seed, args.bootstrap)
    lines = [f"{args.episodes} paired episodes per simulator (seed {args.seed}, agent {args.agent}, delay "
             f"{args.delay}, switch {args.switch}, {args.vehicles} vehicles, {args.duration:g} s, sub-step "
             f"{args.substep:g} s); 95% percentile-bootstrap intervals over episodes ({args.bootstrap} resamples)",
             "", "| metric | stock | fast | fast value in stock CI | stock value in fast CI |",
             "| --- | --- | --- | --- | --- |"]
    ok = True
    for m in a:
        (va, la, ha), (vb, lb, hb) = a[m], b[m]
        in_a, in_b = la <= vb <= ha, lb <= va <= hb
        ok &= in_a and in_b
        lines.append(f"| {m} | {va:.4f} [{la:.4f}, {ha:.4f}] | {vb:.4f} [{lb:.4f}, {hb:.4f}] | "
                     f"{'yes' if in_a else 'NO'} | {'yes' if in_b else 'NO'} |")
    steps = sum(len(r.records) for r in stock), sum(len(r.records) for r in fast)
    lines += ["", f"steps logged: stock {steps[0]}, fast {steps[1]}; largest per-step difference of the logged "
              f"values between paired episodes: {_max_step_difference(stock, fast):.3g}",
              f"within each other's 95% CIs on every metric: {'yes' if ok else 'NO'}",
              f"this call: {result.ran} episodes run, {result.skipped} resumed, {wall:.0f} s wall"]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
