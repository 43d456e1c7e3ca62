"""Step-bounded objectives (``P [F<=k phi]``, ``P [phi U[l,u] psi]``, ``R [C<=k]``) by unfolding.

An optimal scheduler for a step-bounded objective counts steps, so the model is unfolded with a step
counter: product state ``(s, t)`` is state ``s`` reached after exactly ``t`` steps, for ``t < T``,
and ``(s, T)`` after ``T`` steps or more, where ``T`` is the first step that no bound tells apart
from later ones. Each bounded objective becomes an unbounded one on the product:

- ``P [phi U[l,u] psi]``: target ``psi & l <= t <= u``, hold ``phi`` (``F`` is ``true U``);
- ``R [C<=k]``: the reward of the choices taken at steps ``0..k-1``.

Unbounded objectives keep their labels and rewards, lifted to the product. When every objective has
an upper step bound, nothing is collected after step ``T - 1``: all of layer ``T`` is one absorbing
sink state, and the product is acyclic (the kernel answers it in one backward pass).

>>> import numpy as np
>>> from mopmc.model.sparse_mdp import SparseMDP
>>> from mopmc.properties.objectives import Objective
>>> m = SparseMDP.from_arrays([0, 1, 2], [0, 2, 3], [0, 1, 1], [0.5, 0.5, 1.0], labels={"g": np.array([0, 1], bool)})
>>> o = Objective(0, 'P=? [F<=2 "g"]', "probability", "max", right_text='"g"', steps=(0, 2))
>>> u, (q,) = unfold_steps(m, [o])
>>> u.n_states, q.steps, q.right_text
(6, None, '"__step0_target"')
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from mopmc.errors import UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP, StateValuations, mark_reachable, ranges
from mopmc.properties.objectives import Objective

MAX_PRODUCT_STATES = 1 << 24
"""More product states than this are refused (the product and the engines' work on it cost about
500 bytes per state: 8 GiB here)."""

MAX_STEPS = 100_000
"""Longer horizons are refused: the product is built a step at a time (single objectives with an
upper bound need no product: :mod:`mopmc.engine.horizon` with the kernel or torch engine)."""

STEP_VARIABLE = "_step"
"""The product's step counter in its state valuations (the sink state has -1)."""


def horizon(objectives: Sequence[Objective]) -> int:
    """``T``: steps ``0..T-1`` are told apart, all later ones are one (at least 1)."""
    t = 1
    for o in objectives:
        if o.steps is not None:
            lo, hi = o.steps
            t = max(t, lo if hi is None else hi + 1)
    return t


def _successors(model: SparseMDP, states: np.ndarray) -> np.ndarray:
    ch = ranges(model.row_groups[states], model.row_groups[states + 1])
    tr = ranges(model.indptr[ch], model.indptr[ch + 1])
    return np.unique(model.targets[tr])


def _closure(model: SparseMDP, start: np.ndarray) -> np.ndarray:
    seen = np.zeros(model.n_states, bool)
    seen[start] = True
    front = start
    while len(front):
        nxt = _successors(model, front)
        front = nxt[~seen[nxt]]
        seen[front] = True
    return np.flatnonzero(seen)


def _layers(model: SparseMDP, T: int, sink: bool, where: str) -> list[np.ndarray]:
    """The sorted states of each layer ``0..T-1``, then (without ``sink``) layer ``T``."""
    if T > MAX_STEPS:
        raise UnsupportedModelError(
            f"{where}: the step bounds need the model unfolded over {T} steps, more than {MAX_STEPS}; use a "
            "smaller bound (a single objective with an upper bound takes any with --engine kernel or torch)")
    layers, front, total = [], np.array([model.initial], np.int64), 0
    for _ in range(T):
        layers.append(front)
        total += len(front)
        if total > MAX_PRODUCT_STATES:
            raise UnsupportedModelError(
                f"{where}: unfolding {T} steps needs more than {MAX_PRODUCT_STATES} product states "
                f"(layer {len(layers) - 1} alone has {len(front)}); use a smaller step bound")
        front = _successors(model, front)
    if not sink:
        layers.append(_closure(model, front))
        if total + len(layers[-1]) > MAX_PRODUCT_STATES:
            raise UnsupportedModelError(
                f"{where}: unfolding {T} steps needs more than {MAX_PRODUCT_STATES} product states; "
                "use a smaller step bound")
    return layers


def unfold_steps(model: SparseMDP, objectives: Sequence[Objective]) -> tuple[SparseMDP, tuple[Objective, ...]]:
    """The step-counting product of ``model`` and the objectives rewritten on it (see the module
    docstring); ``model`` and ``objectives`` unchanged when none has a step bound."""
    objectives = tuple(objectives)
    if all(o.steps is None for o in objectives):
        return model, objectives
    T = horizon(objectives)
    sink = all(o.steps is not None and o.steps[1] is not None for o in objectives)
    layers = _layers(model, T, sink, model.source)
    offset = np.concatenate(([0], np.cumsum([len(x) for x in layers]))).astype(np.int64)
    n_prod = int(offset[-1]) + (1 if sink else 0)
    sink_index = int(offset[-1])

    states, steps, choices, targets, probs, counts = [], [], [], [], [], []
    for t, S in enumerate(layers):
        ch = ranges(model.row_groups[S], model.row_groups[S + 1])
        tr = ranges(model.indptr[ch], model.indptr[ch + 1])
        nxt = min(t + 1, T)
        succ = model.targets[tr]
        if sink and nxt == T:
            tgt = np.full(len(succ), sink_index, np.int64)
        else:
            tgt = offset[nxt] + np.searchsorted(layers[nxt], succ)
        states.append(S)
        steps.append(np.full(len(S), t, np.int64))
        choices.append(ch)
        targets.append(tgt)
        probs.append(model.probs[tr])
        counts.append(model.row_groups[S + 1] - model.row_groups[S])
    state_of = np.concatenate(states)
    step_of = np.concatenate(steps)
    choice_of = np.concatenate(choices)
    per_choice = model.indptr[choice_of + 1] - model.indptr[choice_of]
    if sink:  # one state, one choice, a self-loop (concatenated once: np.append would copy each again)
        counts.append(np.ones(1, np.int64))
        per_choice = np.concatenate((per_choice, [1]))
        targets.append(np.array([sink_index], np.int64))
        probs.append(np.ones(1))
    per_state = np.concatenate(counts)
    tg = np.concatenate(targets)
    pr = np.concatenate(probs)
    rg = np.zeros(n_prod + 1, np.int64)
    np.cumsum(per_state, out=rg[1:])
    ip = np.zeros(len(per_choice) + 1, np.int64)
    np.cumsum(per_choice, out=ip[1:])
    # the sink's step is -1: outside every window, and no label or reward of the model holds there
    step = np.append(step_of, -1) if sink else step_of
    choice_step = np.repeat(step, per_state)

    def lift_state(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(n_prod, bool)  # (the sink's entry: False)
        np.take(mask, state_of, out=out[:len(state_of)])
        return out

    def lift_choice(values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(per_choice))  # (the sink's choice: 0)
        np.take(values, choice_of, out=out[:len(choice_of)])
        return out

    def within(at: np.ndarray, lo: int, hi: int | None) -> np.ndarray:
        return (at >= lo) & (at <= (np.iinfo(np.int64).max if hi is None else hi))

    labels = {k: lift_state(np.asarray(v, bool)) for k, v in model.labels.items()}
    rewards = {k: lift_choice(np.asarray(v, np.float64)) for k, v in model.rewards.items()}
    rewritten = []
    for j, o in enumerate(objectives):
        if o.steps is None:
            rewritten.append(o)
            continue
        lo, hi = o.steps
        if o.kind == "total_reward":
            name = _fresh(f"__step{j}_reward", model.rewards)
            rewards[name] = np.where(within(choice_step, lo, hi), rewards[o.reward_model], 0.0)
            rewritten.append(dataclasses.replace(o, steps=None, reward_model=name))
            continue
        target = _fresh(f"__step{j}_target", model.labels)
        labels[target] = lift_state(o.target_mask(model)) & within(step, lo, hi)
        left = None
        if o.left_text is not None:
            left = _fresh(f"__step{j}_hold", model.labels)
            labels[left] = lift_state(o.hold_mask(model))
        rewritten.append(dataclasses.replace(o, steps=None, right_text=f'"{target}"',
                                             left_text=None if left is None else f'"{left}"'))

    actions = None
    if model.actions is not None:
        actions = model.actions[choice_of]
        if sink:
            actions = np.append(actions, -1)
    valuations = None
    if model.valuations is not None:
        v = model.valuations
        rows = v.values[state_of]
        if sink:  # (all its variables 0)
            rows = np.vstack((rows, np.zeros(len(v.names), np.int64)))
        valuations = StateValuations(v.names + (STEP_VARIABLE,), v.kinds + ("int",), np.column_stack((rows, step)))
    origins = None
    if model.choice_origins is not None:
        origins = tuple(model.choice_origins[c] for c in choice_of.tolist()) + (("",) if sink else ())
    # fresh arrays of the product's own: read-only, SparseMDP adopts them without its defensive copy
    for a in (rg, ip, tg, pr, *rewards.values(), *labels.values()):
        a.setflags(write=False)
    product = SparseMDP(rg, ip, tg, pr, 0, rewards=rewards, labels=labels, action_names=model.action_names,
                        actions=actions, valuations=valuations, choice_origins=origins, source=model.source)
    return mark_reachable(product), tuple(rewritten)  # (every layer was explored from the initial state)


def _fresh(name: str, taken) -> str:
    while name in taken:
        name = "_" + name
    return name


def require_unbounded(objectives: Sequence[Objective]) -> None:
    """Refuse step-bounded objectives where an engine would answer them as unbounded ones (the
    engines take them unfolded; :mod:`mopmc.queries` unfolds them), and long-run averages, which
    :mod:`mopmc.engine.long_run` turns into a total reward on its quotient first."""
    from mopmc.errors import PropertyError

    for o in objectives:
        if o.kind == "long_run":
            raise PropertyError(f"{o.text} is a long-run average: mopmc.queries.single.check answers it, "
                                "as a property of its own")
        if o.steps is not None:
            raise PropertyError(f"{o.text} is step-bounded: the engines answer it on the step-counting product; "
                                "use mopmc.queries (or mopmc.model.unfold.unfold_steps first)")
