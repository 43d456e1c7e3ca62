"""Compare a model built by mopmc's explicit builder with Storm's, state by state through valuations."""

from __future__ import annotations

import numpy as np


def choice_signatures(model, tol_digits: int = 12):
    """Per state (keyed by valuation): the sorted list of its choices, each
    ``(action, rewards..., ((target valuation, probability), ...))``, numbers rounded."""
    vals = model.valuations.values
    names = sorted(model.rewards)
    out = {}
    for s in range(model.n_states):
        sig = []
        for c in range(model.row_groups[s], model.row_groups[s + 1]):
            a = model.action_names[model.actions[c]] if model.actions is not None else ""
            rew = tuple(round(float(model.rewards[r][c]), tol_digits) for r in names)
            succ = tuple(sorted(
                (tuple(int(x) for x in vals[model.targets[k]]), round(float(model.probs[k]), tol_digits))
                for k in range(model.indptr[c], model.indptr[c + 1])
            ))
            sig.append((a, rew, succ))
        out[tuple(int(x) for x in vals[s])] = sorted(sig)
    return out


def assert_same_model(ours, storms) -> None:
    assert ours.n_states == storms.n_states
    assert ours.n_choices == storms.n_choices
    assert ours.n_transitions == storms.n_transitions
    assert set(ours.rewards) == set(storms.rewards)
    assert set(ours.labels) == set(storms.labels)
    order = [storms.valuations.names.index(n) for n in ours.valuations.names]
    assert sorted(ours.valuations.names) == sorted(storms.valuations.names)
    # Storm's valuations reordered to ours
    from dataclasses import replace

    storm_vals = replace(storms.valuations, names=ours.valuations.names, values=storms.valuations.values[:, order])
    storms_r = replace(storms, valuations=storm_vals)
    a, b = choice_signatures(ours), choice_signatures(storms_r)
    assert a.keys() == b.keys()
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, f"{len(diff)} states differ, e.g. {diff[0]}: ours {a[diff[0]]} Storm {b[diff[0]]}"
    index = storm_vals.index()
    perm = np.array([index[tuple(int(x) for x in row)] for row in ours.valuations.values])
    assert perm[ours.initial] == storms.initial
    for name in ours.labels:
        assert np.array_equal(ours.labels[name], storms.labels[name][perm]), name
