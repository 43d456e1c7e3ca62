"""Storm in exact mode (rational arithmetic) as the reference for single-objective values."""

from __future__ import annotations

import math
from fractions import Fraction


def storm_exact(path, properties: str, constants: str = "") -> list[float]:
    """Values at the initial state of each property, computed by Storm's exact sparse engine."""
    import stormpy

    prog = stormpy.parse_prism_program(str(path))
    props = stormpy.parse_properties(properties, prog)
    model = stormpy.build_model[stormpy.Rational](prog, props)
    env = stormpy.environments.exact()
    out = []
    for p in props:
        res = stormpy.model_checking(model, p, only_initial_states=True, environment=env)
        v = res.get_value(model.initial_states[0])
        s = str(v)
        if s in ("inf", "-inf"):
            out.append(math.inf if s == "inf" else -math.inf)
        else:
            out.append(float(Fraction(s)))
    return out
