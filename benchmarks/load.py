"""Model building: Storm's ``build_model(program)`` beside mopmc's ``load`` with its own explicit
builder and with Storm's builder.

Each measurement runs in a fresh Python process, best of ``--repeat`` runs; imports are not timed,
parsing is timed on all sides. mopmc's times include numba's start-up (about 0.5 s, paid once per
process; a check pays it anyway) and loading the compiled builder from numba's cache (compiled on
the very first run). Writes a table to ``benchmarks/results/load.md``. Usage:

    python benchmarks/load.py [--models A:20,100,200,C:5,B] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SHARED = Path(os.environ.get("MOPMC_BENCH_MODELS") or Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks")
OUT = Path(__file__).resolve().parent / "results" / "load.md"

STORM = """
import json, sys, time, stormpy
t = time.perf_counter()
prog = stormpy.parse_prism_program(sys.argv[1])
m = stormpy.build_model(prog)
print(json.dumps({"seconds": time.perf_counter() - t, "states": m.nr_states, "transitions": m.nr_transitions}))
"""

OURS = """
import json, sys, time
from mopmc.io.load import load
import mopmc.io.storm as s; s.stormpy()
t = time.perf_counter()
loaded = load(sys.argv[1], builder=sys.argv[2])
m = loaded.model
print(json.dumps({"seconds": time.perf_counter() - t, "states": m.n_states, "transitions": m.n_transitions,
                  "builder": loaded.builder}))
"""


def models(spec: str):
    """``A:20,200,C:5,B`` -> (label, path) pairs."""
    family, out = None, []
    for item in spec.split(","):
        if ":" in item:
            family, item = item.split(":")
        elif item in ("A", "B", "C", "T3"):
            family, item = item, ""
        if family == "A":
            out.append((f"A n={item}", SHARED / "switch-scaling" / f"switch_model_{item}.prism"))
        elif family == "C":
            out.append((f"C team {item}", SHARED / "team-formation" / f"team_{item}.nm"))
        elif family == "B":
            out.append(("B", SHARED / "dive-and-rise" / "dive_and_rise_action_rewards.nm"))
        elif family == "T3":
            out.append(("Table 3 switch", SHARED / "switch-table3" / "switch_model.prism"))
    return out


def write_report(path: Path, lines: list[str]) -> None:
    """Write ``lines`` to ``path`` atomically (a temporary file renamed over it) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    print(f"wrote {path}")


def run(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(code: str, repeat: int, *args) -> dict:
    return min((run(code, *args) for _ in range(repeat)), key=lambda r: r["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="A:20,60,100,140,200,B,T3,C:3,4,5")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    header = "| model | states | transitions | Storm build s | mopmc s (own builder) | mopmc s (Storm's builder) | own / Storm |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    print(header)
    for label, path in models(args.models):
        if not path.exists():
            print(f"{label}: missing {path}")
            continue
        run(OURS, path, "mopmc")  # numba's cache filled before timing
        storm = best(STORM, args.repeat, path)
        own = best(OURS, args.repeat, path, "mopmc")
        via = best(OURS, args.repeat, path, "storm")
        assert storm["states"] == own["states"] == via["states"], (storm, own, via)
        assert storm["transitions"] == own["transitions"] == via["transitions"], (storm, own, via)
        line = (f"| {label} | {own['states']:,} | {own['transitions']:,} | {storm['seconds']:.2f} | {own['seconds']:.2f} "
                f"| {via['seconds']:.2f} | {own['seconds'] / storm['seconds']:.2f} |")
        lines.append(line)
        print(line, flush=True)
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    write_report(OUT, [
        "# Model building, seconds (fresh process each, best of "
        f"{args.repeat}; `python benchmarks/load.py --models {args.models}`)", "",
        "Storm: `parse_prism_program` + `build_model`. mopmc: `load(path, builder=...)`, parse, build, "
        "validation and, for Storm's builder, the bulk move out of Storm; numba's start-up included.",
        f"Load average when written: {load_avg}.", "", *lines,
    ])


if __name__ == "__main__":
    main()
