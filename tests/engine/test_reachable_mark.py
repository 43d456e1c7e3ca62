"""Models Storm built are marked reachable; the engine then skips its search and answers the same."""

from __future__ import annotations

import numpy as np

from mopmc.engine.kernel import Engine
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.model.sparse_mdp import SparseMDP, known_reachable, mark_reachable
from mopmc.properties.objectives import Objective


def test_loaded_models_are_marked_and_derived_ones_are_not():
    import dataclasses

    loaded = load(files.tradeoff, properties='multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])')
    assert known_reachable(loaded.model)
    assert not known_reachable(dataclasses.replace(loaded.model))
    objs = loaded.properties()[0].objectives
    unmarked = dataclasses.replace(loaded.model)
    for w in ([1.0, 0.0], [0.3, 0.7], [-1.0, 0.5]):
        a, b = Engine(loaded.model, objs).optimise(w), Engine(unmarked, objs).optimise(w)
        np.testing.assert_array_equal(a.values, b.values)


def test_unmarked_models_still_drop_unreachable_states():
    # state 2 is unreachable from 0 and pays reward: it must not count
    model = SparseMDP.from_arrays([0, 1, 2, 3], [0, 1, 2, 3], [1, 1, 0], [1.0, 1.0, 1.0],
                                  rewards={"r": np.array([1.0, 0.0, 5.0])}, initial=0)
    objs = (Objective(0, 'R{"r"}<=9 [C]', "total_reward", "min", "r", comparison="<=", threshold=9.0),)
    eng = Engine(model, objs)
    assert eng.product.n_states == 2  # the search removed state 2
    assert eng.optimise([1.0]).values[0] == 1.0
    assert mark_reachable(model) is model and known_reachable(model)
