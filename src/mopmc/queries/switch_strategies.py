"""Fixed strategies of the switch, for direct evaluation (the first rows of the paper's Table 3).

``C_i``: choose configuration ``i`` at every round; ``uniform``: each configuration with
probability 1/4 at every round. Both leave the secondary controller as soon as allowed (``ex_s``
whenever it is enabled). A configuration choice is a choice labelled ``conf`` (or ``conf_action``)
whose successor sets the configuration variable to the configuration's value. Every other state
takes its first choice: in the switch models the only other nondeterminism is the order in which
independent recorder steps interleave, which does not change any value.

A model may have no ``ex_s`` choice at all: when the episode is shorter than the lock (``n < k``)
the switch can never leave the secondary, and Storm's build of such a PRISM model then has no
``ex_s`` action name either (a UMB written by ``mopmc design build`` keeps the unused name). The
strategies are then the same without exits. A model without the configuration variable or without
``conf`` choices is not a switch model: an :class:`~mopmc.errors.UnknownNameError` says so.
"""

from __future__ import annotations

import numpy as np

from mopmc.engine.evaluate import Policy
from mopmc.errors import UnknownNameError
from mopmc.model.sparse_mdp import SparseMDP


def _switch_parts(model: SparseMDP, variable: str, conf_action: str, exit_action: str | None):
    """The configuration variable's values per state, the action of each choice, the id of
    ``conf_action`` and of ``exit_action`` (-1 when the model has no such choice); or an
    UnknownNameError saying why ``model`` is not a switch model."""
    if model.valuations is None or variable not in model.valuations.names:
        raise UnknownNameError(f"{model.source}: not a switch model: the switch strategies need the configuration "
                               f"variable {variable!r} in the state valuations (load the model with valuations)")
    names = tuple(model.action_names)
    have = ", ".join(a for a in names if a) or "(none)"
    if model.actions is None or conf_action not in names:
        raise UnknownNameError(f"{model.source}: not a switch model: the switch strategies need choices labelled "
                               f"{conf_action!r}; the model's actions are {have}")
    acts = np.asarray(model.actions)
    conf_id = names.index(conf_action)
    if not np.any(acts == conf_id):
        raise UnknownNameError(f"{model.source}: not a switch model: no choice is labelled {conf_action!r} "
                               f"(the action name is declared but unused)")
    exit_id = names.index(exit_action) if exit_action is not None and exit_action in names else -1
    vals = model.valuations.values[:, model.valuations.names.index(variable)]
    return vals, acts, conf_id, exit_id


def switch_strategy(model: SparseMDP, configuration: int | str, *, variable: str = "conf",
                    conf_action: str = "conf", exit_action: str = "ex_s") -> Policy:
    """The memoryless policy ``C_configuration`` (``1..K``) or ``"uniform"``; see the module docstring."""
    vals, acts, conf_id, exit_id = _switch_parts(model, variable, conf_action, exit_action)
    single = (model.indptr[1:] - model.indptr[:-1]) == 1
    succ_conf = np.where(single, vals[model.targets[model.indptr[:-1]]], -1)
    is_conf = acts == conf_id
    states, indptr, choice, prob = [], [0], [], []
    for s in range(model.n_states):
        lo, hi = int(model.row_groups[s]), int(model.row_groups[s + 1])
        if hi == lo:
            continue
        cs = np.arange(lo, hi)
        if is_conf[cs].any():
            options = cs[is_conf[cs]]
            if configuration == "uniform":
                chosen, p = options, np.full(len(options), 1.0 / len(options))
            else:
                chosen = options[succ_conf[options] == int(configuration)]
                if len(chosen) != 1:
                    raise UnknownNameError(f"{model.source}: state {s}: no unique {conf_action!r} choice setting "
                                           f"{variable}={configuration}")
                p = np.ones(1)
        else:
            ex = cs[acts[cs] == exit_id]
            chosen, p = (ex[:1], np.ones(1)) if len(ex) else (cs[:1], np.ones(1))
        states.append(s)
        choice.extend(chosen.tolist())
        prob.extend(p.tolist())
        indptr.append(len(choice))
    k = len(states)
    return Policy(np.array(states, np.int64), np.zeros(k, np.int64), np.array(indptr, np.int64),
                  np.array(choice, np.int64), np.array(prob, float), np.zeros((0, model.n_states), bool))


def configurations(model: SparseMDP, *, variable: str = "conf", conf_action: str = "conf") -> list[int]:
    """The configuration values that ``conf`` choices select, in increasing order.

    Raises :class:`~mopmc.errors.UnknownNameError` when ``model`` is not a switch model (no
    configuration variable in its valuations, or no ``conf`` choices).
    """
    vals, acts, conf_id, _ = _switch_parts(model, variable, conf_action, None)
    conf = np.flatnonzero(acts == conf_id)
    return sorted({int(vals[model.targets[model.indptr[c]]]) for c in conf})
