"""The public model validator, run on every load."""

from __future__ import annotations

import numpy as np

from mopmc.errors import InvalidModelError
from mopmc.model.sparse_mdp import SparseMDP

SUM_TOLERANCE = 1e-9


def validate(model: SparseMDP, *, tolerance: float = SUM_TOLERANCE) -> SparseMDP:
    """Check the MDP invariants; raise :class:`InvalidModelError` naming the first violation.

    Checks: monotone CSR pointers with the right ends, successor indices in range, every state with
    at least one choice and every choice with at least one transition, probabilities finite and
    non-negative, each choice summing to 1 within ``tolerance``, rewards finite (negative rewards are
    legal), labels of the right length, the initial state in range.

    Returns the model, so that ``validate(load(...))`` chains.

    >>> validate(SparseMDP.from_arrays([0, 1], [0, 2], [0, 0], [0.5, 0.6]))
    Traceback (most recent call last):
    mopmc.errors.InvalidModelError: <memory>: state 0, choice 0 (local 0): probabilities sum to 1.1, not 1
    """
    where = model.source
    n, c, t = model.n_states, model.n_choices, model.n_transitions
    rg, ip = model.row_groups, model.indptr
    if n < 1:
        raise InvalidModelError(f"{where}: the model has no states")
    if len(model.probs) != t:
        raise InvalidModelError(f"{where}: {len(model.probs)} probabilities for {t} transitions (successor indices)")
    if rg[0] != 0 or rg[-1] != c or ip[0] != 0 or ip[-1] != t:
        raise InvalidModelError(f"{where}: row-group or choice pointers do not span the choices/transitions")
    bad = np.flatnonzero(np.diff(rg) < 1)
    if bad.size:
        raise InvalidModelError(f"{where}: state {int(bad[0])} has no choice (a deadlock without self-loop)")
    bad = np.flatnonzero(np.diff(ip) < 1)
    if bad.size:
        raise InvalidModelError(f"{where}: {_choice(model, int(bad[0]))} has no transition")
    if not 0 <= model.initial < n:
        raise InvalidModelError(f"{where}: initial state {model.initial} is out of range 0..{n - 1}")
    # each check first as a reduction without temporaries, the search for the culprit only on failure
    tg = model.targets
    bad = np.flatnonzero((tg < 0) | (tg >= n)) if t and not (tg.min() >= 0 and tg.max() < n) else ()
    if len(bad):
        k = int(bad[0])
        ch = int(np.searchsorted(ip, k, side="right") - 1)
        raise InvalidModelError(f"{where}: {_choice(model, ch)} has successor {int(model.targets[k])} out of range 0..{n - 1}")
    p = model.probs
    bad = np.flatnonzero(~np.isfinite(p) | (p < 0)) if t and not (p.min() >= 0 and p.max() < np.inf) else ()
    if len(bad):
        k = int(bad[0])
        ch = int(np.searchsorted(ip, k, side="right") - 1)
        raise InvalidModelError(f"{where}: {_choice(model, ch)} has probability {float(p[k])} (must be finite and >= 0)")
    sums = np.add.reduceat(p, ip[:-1]) if c else np.zeros(0)
    bad = np.flatnonzero(np.abs(sums - 1.0) > tolerance)
    if bad.size:
        ch = int(bad[0])
        raise InvalidModelError(f"{where}: {_choice(model, ch)}: probabilities sum to {sums[ch]:.12g}, not 1")
    for name, r in model.rewards.items():
        if r.shape != (c,):
            raise InvalidModelError(f"{where}: reward model {name!r} has {r.shape[0]} entries for {c} choices")
        bad = np.flatnonzero(~np.isfinite(r))
        if bad.size:
            ch = int(bad[0])
            raise InvalidModelError(f"{where}: reward model {name!r} is {float(r[ch])} at {_choice(model, ch)} (must be finite)")
    for name, mask in model.labels.items():
        if mask.shape != (n,):
            raise InvalidModelError(f"{where}: label {name!r} has {mask.shape[0]} entries for {n} states")
    if model.actions is not None and model.actions.shape != (c,):
        raise InvalidModelError(f"{where}: {model.actions.shape[0]} action labels for {c} choices")
    return model


def _choice(model: SparseMDP, choice: int) -> str:
    state = int(np.searchsorted(model.row_groups, choice, side="right") - 1)
    text = f"state {state}, choice {choice} (local {choice - int(model.row_groups[state])})"
    if model.valuations is not None:
        val = ", ".join(f"{k}={v}" for k, v in model.valuations.of(state).items())
        text = f"state {state} [{val}], choice {choice} (local {choice - int(model.row_groups[state])})"
    action = model.action_of(choice)
    if action:
        text += f" [{action}]"
    if model.choice_origins is not None and choice < len(model.choice_origins) and model.choice_origins[choice]:
        text += f", command {model.choice_origins[choice]}"
    return text
