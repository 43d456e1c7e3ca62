"""Policy steps per wall second: stock highway-env against mopmc's accelerated road, side by side.

Both run highway-v0's defaults with continuous actions (15 Hz simulation, 1 Hz policy) and the
same vehicle count, seeds and action sequence, one after the other in this process (one core);
the accelerated road (:mod:`mopmc.runtime.fastsim.road`: vectorised neighbour search and collision
broad phase, the vehicles' IDM/MOBIL/steering/bicycle code on floats) keeps highway-env's vehicle
dynamics, and the script also reports the largest position/speed difference between the two runs
and whether the speed-up reaches the 5x target of issue 10.

    python benchmarks/simulator.py [--vehicles 50] [--steps 10] [--episodes 2]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def run(fast: bool, vehicles: int, steps: int, seed: int) -> tuple[float, float, np.ndarray]:
    """(wall seconds, CPU seconds of this process, states) of ``steps`` policy steps."""
    from highway_env.envs.highway_env import HighwayEnv

    from mopmc.runtime.fastsim.road import accelerate

    env = HighwayEnv(config={"action": {"type": "ContinuousAction"}, "vehicles_count": vehicles})
    env.reset(seed=seed)
    if fast:
        accelerate(env.road)
    actions = np.random.default_rng(seed).uniform(-0.3, 0.3, size=(steps, 2))
    states = []
    started, cpu = time.perf_counter(), time.process_time()
    for a in actions:
        env.step(a)
        states.append([[*v.position, v.speed] for v in env.road.vehicles])
    return time.perf_counter() - started, time.process_time() - cpu, np.array(states)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vehicles", type=int, default=50)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=2)
    args = parser.parse_args()
    wall = {False: 0.0, True: 0.0}
    cpu = {False: 0.0, True: 0.0}
    worst = 0.0
    for e in range(args.episodes):
        runs = {}
        for fast in (False, True):
            w, c, runs[fast] = run(fast, args.vehicles, args.steps, seed=100 + e)
            wall[fast] += w
            cpu[fast] += c
        worst = max(worst, float(np.abs(runs[False] - runs[True]).max()))
    n = args.episodes * args.steps
    print(f"{args.vehicles} vehicles, {n} policy steps each (15 Hz simulation, 1 Hz policy)")
    print(f"{'simulator':<22}{'policy steps/s':>16}{'per CPU second':>16}")
    for fast, name in ((False, "highway-env (stock)"), (True, "mopmc fastsim road")):
        print(f"{name:<22}{n / wall[fast]:>16.2f}{n / cpu[fast]:>16.2f}")
    ratio = wall[False] / wall[True]
    print(f"speed-up {ratio:.2f}x wall, {cpu[False] / cpu[True]:.2f}x CPU (target 5x: "
          f"{'met' if ratio >= 5 else 'NOT met'}; wall times vary with other load on the machine); "
          f"max |position/speed difference| {worst:.3g}")


if __name__ == "__main__":
    main()
