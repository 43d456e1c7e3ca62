"""Fixed strategies of the switch, for direct evaluation (the first rows of the paper's Table 3).

``C_i``: choose configuration ``i`` at every round; ``uniform``: each configuration with
probability 1/4 at every round. Both leave the secondary controller as soon as allowed (``ex_s``
whenever it is enabled). A configuration choice is a choice labelled ``conf`` (or ``conf_action``)
whose successor sets the configuration variable to the configuration's value. Every other state
takes its first choice: in the switch models the only other nondeterminism is the order in which
independent recorder steps interleave, which does not change any value.
"""

from __future__ import annotations

import numpy as np

from mopmc.engine.evaluate import Policy
from mopmc.errors import UnknownNameError
from mopmc.model.sparse_mdp import SparseMDP


def switch_strategy(model: SparseMDP, configuration: int | str, *, variable: str = "conf",
                    conf_action: str = "conf", exit_action: str = "ex_s") -> Policy:
    """The memoryless policy ``C_configuration`` (``1..K``) or ``"uniform"``; see the module docstring."""
    if model.valuations is None or variable not in model.valuations.names:
        raise UnknownNameError(f"{model.source}: the switch strategies need the configuration variable {variable!r} "
                               "in the state valuations (load the model with valuations)")
    if conf_action not in model.action_names or exit_action not in model.action_names:
        raise UnknownNameError(f"{model.source}: the switch strategies need actions {conf_action!r} and "
                               f"{exit_action!r}; the model has {', '.join(a for a in model.action_names if a)}")
    col = model.valuations.names.index(variable)
    vals = model.valuations.values[:, col]
    acts = np.asarray(model.actions)
    conf_id = model.action_names.index(conf_action)
    exit_id = model.action_names.index(exit_action)
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
    """The configuration values that ``conf`` choices select, in increasing order."""
    col = model.valuations.names.index(variable)
    acts = np.asarray(model.actions)
    conf = np.flatnonzero(acts == model.action_names.index(conf_action))
    return sorted({int(model.valuations.values[model.targets[model.indptr[c]], col]) for c in conf})
