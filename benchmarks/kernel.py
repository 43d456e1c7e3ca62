"""Kernel vs Storm on the switch-scaling models: ``R{"ctrl_cost"}min=? [C]`` check time after loading.

Each measurement runs in a fresh process (best of 2); Storm's time is ``stormpy.model_checking`` on
the built model, ours is one ``Engine.optimise`` call (preprocessing reported separately), plus one
kernel call with the 4 objectives of ``switch_prop_achievable.props``.

    python benchmarks/kernel.py --max-n 60
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "switch-scaling"
PROP = 'R{"ctrl_cost"}min=? [C]'
FOUR = ["ctrl_cost", "headway_cost", "ttc_cost", "onlane_cost"]

STORM = """
import json, sys, time, stormpy
prog = stormpy.parse_prism_program(sys.argv[1])
props = stormpy.parse_properties(sys.argv[2], prog)
m = stormpy.build_model(prog, props)
t = time.perf_counter()
r = stormpy.model_checking(m, props[0], only_initial_states=True)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "value": float(r.get_value(m.initial_states[0])), "states": m.nr_states}))
"""

OURS = """
import json, sys, time
from mopmc.io.load import load
from mopmc.engine.kernel import Engine
four = sys.argv[3].split(",")
L = load(sys.argv[1], properties="; ".join('R{"%s"}min=? [C]' % r for r in four))
objs = [p.objectives[0] for p in L.properties()]
t = time.perf_counter(); e1 = Engine(L.model, objs[:1]); prep1 = time.perf_counter() - t
e1.optimise([1.0])  # compile
t = time.perf_counter(); r = e1.optimise([1.0]); one = time.perf_counter() - t
t = time.perf_counter(); e4 = Engine(L.model, objs); prep4 = time.perf_counter() - t
t = time.perf_counter(); r4 = e4.optimise([1.0, 1.0, 1.0, 1.0]); four_s = time.perf_counter() - t
print(json.dumps({"seconds": one, "prep": prep1, "value": float(r.values[0]), "four": four_s, "prep4": prep4,
                  "states": L.model.n_states}))
"""


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(n: int, code: str, *args: str) -> dict:
    runs = [run(code, *args) for _ in range(n)]
    return min(runs, key=lambda r: r["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-n", type=int, default=20)
    ap.add_argument("--max-n", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    print(f"{'n':>4} {'states':>9} {'storm s':>9} {'ours s':>9} {'ratio':>7} {'4-obj s':>8} {'prep s':>7}  value")
    for n in range(a.min_n, a.max_n + 1, 20):
        path = ROOT / f"switch_model_{n}.prism"
        if not path.exists():
            continue
        s = best_of(a.repeat, STORM, str(path), PROP)
        o = best_of(a.repeat, OURS, str(path), PROP, ",".join(FOUR))
        print(f"{n:>4} {o['states']:>9} {s['seconds']:>9.4f} {o['seconds']:>9.4f} {s['seconds'] / o['seconds']:>7.1f} "
              f"{o['four']:>8.4f} {o['prep4']:>7.2f}  {o['value']:.10f} (storm {s['value']:.10f})", flush=True)


if __name__ == "__main__":
    main()
