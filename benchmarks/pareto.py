"""Pareto fronts of objectives in the hundreds: absolute against relative precision, and Storm.

The walk on the (K+1)^3 cube (:func:`mopmc.examples.scalable.cube`) with a second reward ``"s"``
(2, 1, 1.5 per action) beside ``"r"`` (1, 3, 2): ``multi(R{"r"}min=? [F "goal"], R{"s"}min=? [F
"goal"])`` has a curved front of values in the hundreds (``--objectives 3``: and ``"u"``, a
surface). An absolute precision of 1e-4 (the default,
Storm's too) asks for about sqrt(range / 1e-4) vertices; ``--precision-type reldiff`` measures it
in units of each objective's range. Per row: oracle calls, front points, status and check seconds
on the built model (a fresh process each; Storm's default engine, its default precision 1e-4
absolute, under ``--storm-timeout``; Storm's Pareto method refuses its own relative precision
type, so it has no relative row).

    python benchmarks/pareto.py --k 21 --storm-timeout 600
    python benchmarks/pareto.py --k 9 --objectives 3 --storm-timeout 600
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from chains import run  # (a fresh process per row, None on a timeout; benchmarks/ is on the path)
from mopmc.examples.scalable import cube

SECOND = 'rewards "s"\n  [a] true : 2;\n  [b] true : 1;\n  [c] true : 1.5;\nendrewards\n'
THIRD = 'rewards "u"\n  [a] true : 1.5;\n  [b] true : 2;\n  [c] true : 1;\nendrewards\n'
FRONTS = {2: 'multi(R{"r"}min=? [F "goal"], R{"s"}min=? [F "goal"])',
          3: 'multi(R{"r"}min=? [F "goal"], R{"s"}min=? [F "goal"], R{"u"}min=? [F "goal"])'}

OURS = """
import json, sys, time
from mopmc.io.load import load
from mopmc.queries.dispatch import multi_query
L = load(sys.argv[1], properties=sys.argv[2])
p = L.properties()[0]
t = time.perf_counter()
r = multi_query(L.model, p, precision=float(sys.argv[3]), precision_type=sys.argv[4])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "calls": r.iterations, "points": len(r.points), "status": r.status,
                  "tolerances": r.tolerances, "states": L.model.n_states}))
"""

STORM = """
import json, sys, time, stormpy
prog = stormpy.parse_prism_program(sys.argv[1])
props = stormpy.parse_properties(sys.argv[2], prog)
m = stormpy.build_model(prog, props)
t = time.perf_counter()
r = stormpy.model_checking(m, props[0])
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "points": len(r.get_under_approximation().vertices), "status": "done"}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=21, help="cube side - 1 ((k+1)^3 states; 21: 10,648)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per mopmc run")
    ap.add_argument("--storm-timeout", type=float, default=900.0, help="0: no Storm row")
    ap.add_argument("--objectives", type=int, choices=sorted(FRONTS), default=2,
                    help="3: a third reward \"u\" (1.5, 2, 1), a front in three dimensions")
    args = ap.parse_args()
    front = FRONTS[args.objectives]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cube{args.k}.nm"
        path.write_text(cube(args.k).replace("endrewards\n", "endrewards\n" + SECOND + THIRD, 1))
        rows = []
        for precision, kind in (("1e-4", "abs"), ("1e-4", "reldiff"), ("1e-3", "reldiff"), ("1e-2", "reldiff")):
            r = run(OURS, args.timeout, str(path), front, precision, kind)
            rows.append((f"mopmc {kind} {precision}", r, args.timeout))
            print(f"{rows[-1][0]}: {r}", file=sys.stderr, flush=True)
        if args.storm_timeout > 0:
            rows.append(("Storm default (abs 1e-4)", run(STORM, args.storm_timeout, str(path), front), args.storm_timeout))
    print(f"\nCube walk K={args.k} ({(args.k + 1) ** 3:,} states), {front}\n")
    print("| run | oracle calls | points | status | check (s) | precision per objective |")
    print("|---|---|---|---|---|---|")
    for name, r, timeout in rows:
        if r is None:
            print(f"| {name} | | | timed out | > {timeout:.0f} | |")
        elif "error" in r:
            print(f"| {name} | | | error: {r['error'][:60]} | | |")
        else:
            tol = ", ".join(f"{t:.2g}" for t in r["tolerances"]) if r.get("tolerances") else ""
            print(f"| {name} | {r.get('calls', '')} | {r['points']} | {r['status']} | {r['seconds']:.1f} | {tol} |")


if __name__ == "__main__":
    main()
