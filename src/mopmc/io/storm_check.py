"""Storm's answers for models in memory: the model goes to Storm through a temporary UMB archive.

Used to print Storm's value beside ours (``mopmc table3``) and to check a scheduler on its induced
Markov chain independently (:func:`induced_dtmc` turns the chain of
:func:`mopmc.engine.evaluate.induced_chain` into a one-choice-per-state model with one state-reward
model ``o0, o1, ...`` per objective). stormpy is reached through :mod:`mopmc.io.storm`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from mopmc.io import storm
from mopmc.model.sparse_mdp import SparseMDP


def storm_values(model: SparseMDP, properties: str) -> list:
    """Storm's result at the initial state for each property (floats, or booleans for achievability)."""
    from mopmc.io.quiet import storm_output
    from mopmc.io.umb import write_umb

    sp = storm.stormpy()
    tmp = storm.temp_umb_path()
    try:
        write_umb(model, tmp)
        built = storm.build_from_umb(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    out = []
    props = storm.parse_formulas(properties, None, "<storm check>")
    with storm_output():
        for p in props:
            res = sp.model_checking(built, p, only_initial_states=True)
            init = built.initial_states[0]
            value = res.get_value(init) if hasattr(res, "get_value") else bool(res[init])
            out.append(value if isinstance(value, bool) else float(value))
    return out


def induced_dtmc(chain, objectives: Sequence) -> SparseMDP:
    """The induced chain as a model with one choice per state and rewards ``o<i>``."""
    k = len(chain.keys)
    q = chain.q.tocsr()
    q.sum_duplicates()
    q.sort_indices()
    rewards = {f"o{i}": np.asarray(chain.rewards[:, i], float) for i in range(len(objectives))}
    return SparseMDP.from_arrays(np.arange(k + 1), q.indptr, q.indices, q.data, initial=int(chain.initial),
                                 rewards=rewards, source="induced chain")


def storm_chain_values(chain, objectives: Sequence) -> np.ndarray:
    """Storm's total rewards ``R{"o<i>"}=? [C]`` on the induced chain (``1 - u`` for ``G``)."""
    m = len(objectives)
    if m == 0:
        return np.zeros(0)
    dtmc = induced_dtmc(chain, objectives)
    text = ";".join(f'R{{"o{i}"}}max=? [C]' for i in range(m))
    vals = np.array(storm_values(dtmc, text), float)
    for i, o in enumerate(objectives):
        if o.kind == "probability" and o.negated:
            vals[i] = 1.0 - vals[i]
    return vals


def is_finite(x) -> bool:
    return isinstance(x, float) and math.isfinite(x)
