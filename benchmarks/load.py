"""Model loading: Storm's ``build_model(program)`` beside mopmc's cold ``load_model``.

Each measurement runs in a fresh Python process (no caches), best of ``--repeat`` runs; imports are
not timed, parsing is timed on both sides. Usage:

    python benchmarks/load.py [--sizes 20,40,...,200] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "switch-scaling"

STORM = """
import json, sys, time, stormpy
t = time.perf_counter()
prog = stormpy.parse_prism_program(sys.argv[1])
m = stormpy.build_model(prog)
print(json.dumps({"seconds": time.perf_counter() - t, "states": m.nr_states}))
"""

OURS = """
import json, sys, time
from mopmc.io.load import load_model
import mopmc.io.storm as s; s.stormpy()
t = time.perf_counter()
m = load_model(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t, "states": m.n_states}))
"""


def run(code: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,40,60,80,100,120,140,160,180,200")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print(f"{'n':>4} {'states':>9} {'storm s':>8} {'mopmc s':>8} {'ratio':>6}")
    for n in [int(x) for x in args.sizes.split(",")]:
        path = SHARED / f"switch_model_{n}.prism"
        if not path.exists():
            print(f"{n:>4} missing {path}")
            continue
        storm = min((run(STORM, path) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        ours = min((run(OURS, path) for _ in range(args.repeat)), key=lambda r: r["seconds"])
        assert storm["states"] == ours["states"], (storm, ours)
        ratio = ours["seconds"] / storm["seconds"]
        print(f"{n:>4} {ours['states']:>9} {storm['seconds']:>8.2f} {ours['seconds']:>8.2f} {ratio:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
