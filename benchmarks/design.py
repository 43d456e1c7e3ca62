"""Build time of the SW2 family: mopmc's converter beside Storm's build of the same model as PRISM.

    python benchmarks/design.py --n 20 40 100 200 400

Both build the same MDP (same states, choices, transitions; the sizes are printed and compared).
Times are wall-clock seconds of one run each, measured in the same process, so compare ratios.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[20, 40, 100, 200, 400])
    args = ap.parse_args()

    import stormpy

    from mopmc.design.explore import convert
    from mopmc.design.params import load_parameters
    from mopmc.design.prism_export import save_prism
    from mopmc.design.spec import switch_design

    base = load_parameters("table3")
    print(f"{'n':>5} {'states':>9} {'choices':>9} {'transitions':>11} {'mopmc s':>8} {'storm s':>8} {'storm/mopmc':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            design = switch_design(base.with_n(n))
            t0 = time.perf_counter()
            conv = convert(design.network, design.provider)
            ours = time.perf_counter() - t0
            path = save_prism(conv, Path(tmp) / f"sw2_{n}.prism")
            t0 = time.perf_counter()
            built = stormpy.build_model(stormpy.parse_prism_program(str(path)))
            storm = time.perf_counter() - t0
            m = conv.model
            same = (m.n_states, m.n_choices, m.n_transitions) == (built.nr_states, built.nr_choices, built.nr_transitions)
            print(f"{n:>5} {m.n_states:>9} {m.n_choices:>9} {m.n_transitions:>11} {ours:>8.2f} {storm:>8.2f} {storm / ours:>11.2f}"
                  + ("" if same else "  SIZES DIFFER"), flush=True)


if __name__ == "__main__":
    main()
