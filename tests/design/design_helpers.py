"""Small networks and a Storm round trip shared by the design tests."""

from __future__ import annotations

import numpy as np

from mopmc.design import DelayDistribution, Edge, Network, ProbabilityModel, RewardItem, TimedAutomaton, Variable


def delay_switch(t: float = 0.2) -> tuple[Network, ProbabilityModel]:
    """A two-location switch: obs before the deadline t (primary) or not (secondary), three rounds."""
    sw = TimedAutomaton(
        "S", ("wait", "prim", "sec", "done"), "wait", clocks=("z",), variables=(Variable("k", 0, 3, 0),),
        edges=(
            Edge("wait", "prim", "obs", clocks=(f"z < {t}",)),
            Edge("wait", "sec", None, clocks=(f"z >= {t}",)),
            Edge("prim", "done", "act_p"),
            Edge("sec", "done", "act_s"),
            Edge("done", "wait", None, when="k < 3", updates={"k": "k + 1"}, resets=("z",)),
        ),
    )
    env = TimedAutomaton("E", ("e",), "e", edges=(Edge("e", "e", "obs"),))
    rewards = {"cost": (RewardItem("act_p", 1.0), RewardItem("act_s", 2.0))}
    return Network((sw, env), rewards, "delay-switch"), ProbabilityModel((DelayDistribution("z", 0.2),))


def storm_round_trip(conv, tmp_path):
    """Storm's build of our PRISM text, as a SparseMDP with valuations."""
    from mopmc.design.prism_export import save_prism
    from mopmc.io.load import load_model

    path = save_prism(conv, tmp_path / "model.prism")
    return load_model(path, valuations=True)


def canonical(model, names) -> dict:
    """Valuation -> sorted choices (each a sorted tuple of (target valuation, rounded probability))."""
    cols = [list(model.valuations.names).index(n) for n in names]
    vals = [tuple(int(x) for x in row) for row in model.valuations.values[:, cols]]
    out = {}
    for s in range(model.n_states):
        choices = []
        for c in range(model.row_groups[s], model.row_groups[s + 1]):
            lo, hi = model.indptr[c], model.indptr[c + 1]
            choices.append(tuple(sorted((vals[t], round(float(p), 12)) for t, p in zip(model.targets[lo:hi], model.probs[lo:hi]))))
        out[vals[s]] = sorted(choices)
    return out


def assert_same_mdp(ours, theirs) -> None:
    assert (ours.n_states, ours.n_choices, ours.n_transitions) == (theirs.n_states, theirs.n_choices, theirs.n_transitions)
    names = list(ours.valuations.names)
    assert sorted(names) == sorted(theirs.valuations.names)
    assert canonical(ours, names) == canonical(theirs, names)


def reward_values(model, name: str) -> tuple[float, float]:
    """(min, max) total reward from the initial state, by Storm on the model written as UMB."""
    import tempfile
    from pathlib import Path

    import stormpy

    from mopmc.io.umb import write_umb

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.umb"
        write_umb(model, path)
        built = stormpy.build_model_from_umb(str(path))
    out = []
    for opt in ("min", "max"):
        prop = stormpy.parse_properties(f'R{{"{name}"}}{opt}=? [C]')[0]
        out.append(stormpy.model_checking(built, prop).get_value(built.initial_states[0]))
    return tuple(out)


__all__ = ["assert_same_mdp", "canonical", "delay_switch", "np", "reward_values", "storm_round_trip"]
