"""Long cyclic chains vs Storm: one-SCC random walks to a goal, where value iteration needs about n^2 sweeps.

The walk ``s`` in 0..N: action ``slow`` moves up or down with 1/2 each (reward 1), ``fast`` up with
0.6 (reward 2); the goal is N. Its one cyclic block is far above the 100,000 states that SuperLU
takes; mopmc solves it in its band (``mopmc.engine.banded``). Per n and property: check seconds on
the built model (fresh process each; ours after a warm-up call: numba's compile and cache loads are
in the "first" column), Storm's default engine and its sound one (``stormpy.environments.sound()``), and
each value's distance to ours (Storm's exact engine at the smallest n as the referee).

    python benchmarks/chains.py --sizes 5000,50000,150000,1000000 --storm-timeout 300

Other families (``--family``, :mod:`mopmc.examples.scalable`): ``grid``, ``cube`` (three
dimensions: iterated, as sparse LU's work grows as the cube of its separators), ``retries`` and ``coin``
(the shared-coin consensus protocol with 4 processes, n = its K; its properties: the maximal and
minimal probabilities that all finish with coin 1, the maximal probability that all finish, and
the minimal expected steps until they do).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mopmc.examples.scalable import FAMILIES

PROPS = ['Pmin=? [F "goal"]', 'R{"r"}min=? [F "goal"]', 'R{"r"}max=? [F "goal"]']
FAMILY_PROPS = {"coin": ['Pmax=? [F "goal"]', 'Pmin=? [F "goal"]', 'Pmax=? [F "finished"]', 'R{"r"}min=? [F "finished"]']}

STORM = """
import json, sys, time, stormpy
from fractions import Fraction
method = sys.argv[3]
prog = stormpy.parse_prism_program(sys.argv[1])
props = stormpy.parse_properties(sys.argv[2], prog)
if method == "exact":
    m = stormpy.build_model[stormpy.Rational](prog, props)
    env = stormpy.environments.exact()
else:
    m = stormpy.build_model(prog, props)
    env = stormpy.environments.sound() if method == "sound" else stormpy.Environment()
t = time.perf_counter()
r = stormpy.model_checking(m, props[0], only_initial_states=True, environment=env)
dt = time.perf_counter() - t
v = r.get_value(m.initial_states[0])
value = float(Fraction(str(v))) if method == "exact" else float(v)
print(json.dumps({"seconds": dt, "value": value, "states": m.nr_states}))
"""

OURS = """
import json, sys, time
from mopmc.io.load import load
from mopmc.queries.single import check
L = load(sys.argv[1], properties=sys.argv[2])
prop = L.properties()[0]
t = time.perf_counter(); check(L.model, prop); first = time.perf_counter() - t
t = time.perf_counter(); r = check(L.model, prop); dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "first": first, "value": r.value, "bound": r.error_bound, "states": L.model.n_states}))
"""


def run(code: str, timeout: float, *args: str) -> dict | None:
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def cell(r: dict | None, ours: float, timeout: float) -> str:
    if r is None:
        return f"> {timeout:.0f} s"
    if "error" in r:
        return f"error: {r['error'][:40]}"
    err = abs(r["value"] - ours) / max(1.0, abs(ours))
    return f"{r['seconds']:.3f} s (rel. diff {err:.1e})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000,50000,150000,1000000")
    ap.add_argument("--storm-timeout", type=float, default=300.0)
    ap.add_argument("--exact-max", type=int, default=5000, help="Storm's exact engine up to this n")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="walk")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"family {a.family}")
    print("| n | property | mopmc value | mopmc s (first) | Storm default | Storm sound | Storm exact |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"{a.family}{n}.prism"
            path.write_text(FAMILIES[a.family](n))
            for prop in FAMILY_PROPS.get(a.family, PROPS):
                o = run(OURS, 3600.0, str(path), prop)
                if o is None or "error" in o:
                    print(f"| {n:,} | `{prop}` | {o} | | | | |", flush=True)
                    continue
                d = cell(run(STORM, a.storm_timeout, str(path), prop, "default"), o["value"], a.storm_timeout)
                s = cell(run(STORM, a.storm_timeout, str(path), prop, "sound"), o["value"], a.storm_timeout)
                e = cell(run(STORM, a.storm_timeout, str(path), prop, "exact"), o["value"], a.storm_timeout) if n <= a.exact_max else "-"
                value = f"{o['value']:.12g}" + (f" ± {o['bound']:.1e}" if o["bound"] else "")
                print(f"| {n:,} | `{prop}` | {value} | {o['seconds']:.3f} ({o['first']:.2f}) | {d} | {s} | {e} |", flush=True)


if __name__ == "__main__":
    main()
