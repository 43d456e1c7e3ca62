"""Storm, measured as a user runs it: ``python -m mopmc.bench.storm_runner MODEL PROPFILE``.

``parse_prism_program`` + ``build_model(program, properties)`` + ``model_checking`` of the first
property, all with Storm's default options. Prints one JSON line after the build (sizes) and one
after the check (result), so that a run killed at the timeout still reports the model size.

This script imports stormpy directly, not through :mod:`mopmc.io.storm`: it measures Storm itself,
in its own process, with nothing of mopmc on the path.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> None:
    model, prop_file = argv
    t0 = time.perf_counter()
    import stormpy

    t1 = time.perf_counter()
    program = stormpy.parse_prism_program(model)
    properties = stormpy.parse_properties(open(prop_file).read(), program)
    t2 = time.perf_counter()
    built = stormpy.build_model(program, properties)
    t3 = time.perf_counter()
    sizes = {"states": built.nr_states, "choices": built.nr_choices, "transitions": built.nr_transitions}
    print(json.dumps({"stage": "built", "import": t1 - t0, "parse": t2 - t1, "build": t3 - t2, **sizes}), flush=True)
    result = stormpy.model_checking(built, properties[0])
    t4 = time.perf_counter()
    value = _initial_value(result, built.initial_states[0])
    print(json.dumps({"stage": "checked", "check": t4 - t3, "result": value if isinstance(value, (bool, int, float)) else str(value)}), flush=True)


def _initial_value(result, initial: int):
    """The result in the initial state: a truth value (achievability) or a number."""
    state = initial if result.is_result_for_all_states else 0
    if result.is_qualitative:
        return bool(result.get_truth_values_vector()[state])
    return float(result.get_value(state))


if __name__ == "__main__":
    main(sys.argv[1:])
