"""Independent references for the kernel tests: random MDPs, policy evaluation by a dense solve,
and brute force over all deterministic memoryless policies (tiny models only)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck
from scipy.sparse.csgraph import connected_components

from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective


def random_mdp(rng: np.random.Generator, n: int, m: int, *, max_choices: int = 3, zero_frac: float = 0.4,
               absorbing_frac: float = 0.2, negative: bool = True) -> SparseMDP:
    """States 0..n-1, initial 0; some absorbing (zero-reward self-loops), cycles and unreachable parts."""
    rg, ip, tg, pr = [0], [0], [], []
    rewards = [[] for _ in range(m)]
    absorbing = rng.random(n) < absorbing_frac
    absorbing[0] = False
    for s in range(n):
        k = 1 if absorbing[s] else int(rng.integers(1, max_choices + 1))
        for _ in range(k):
            if absorbing[s]:
                succ, p = [s], [1.0]
            else:
                d = int(rng.integers(1, min(3, n) + 1))
                succ = list(rng.choice(n, size=d, replace=False))
                p = rng.dirichlet(np.ones(d)).tolist()
            tg += [int(x) for x in succ]
            pr += p
            ip.append(len(tg))
            for i in range(m):
                if absorbing[s] or rng.random() < zero_frac:
                    rewards[i].append(0.0)
                else:
                    lo = -1.0 if negative else 0.0
                    rewards[i].append(float(np.round(rng.uniform(lo, 1.0), 3)))
        rg.append(len(ip) - 1)
    pr = np.array(pr)
    return SparseMDP.from_arrays(rg, ip, tg, pr, 0, rewards={f"r{i}": np.array(r) for i, r in enumerate(rewards)})


def total_objectives(m: int, senses) -> list[Objective]:
    return [Objective(i, f'R{{"r{i}"}}{s}=? [C]', "total_reward", s, f"r{i}") for i, s in enumerate(senses)]


def evaluate_policy(model: SparseMDP, choice: np.ndarray, rewards: np.ndarray):
    """Values at the initial state of a memoryless policy (``choice`` per state), or None when some
    objective is infinite or undefined (a reachable recurrent class collects reward)."""
    n = model.n_states
    P = np.zeros((n, n))
    for s in range(n):
        c = choice[s]
        for k in range(model.indptr[c], model.indptr[c + 1]):
            P[s, model.targets[k]] += model.probs[k]
    r = rewards[choice]
    reach = np.zeros(n, bool)
    stack = [model.initial]
    reach[model.initial] = True
    while stack:
        s = stack.pop()
        for t in np.flatnonzero(P[s] > 0):
            if not reach[t]:
                reach[t] = True
                stack.append(t)
    _, lab = connected_components(P > 0, directed=True, connection="strong")
    closed = np.array([not np.any((P[lab == l] > 0)[:, lab != l]) for l in range(lab.max() + 1)])
    recurrent = closed[lab]
    if np.any(r[recurrent & reach] != 0.0):
        return None
    T = np.flatnonzero(~recurrent)
    x = np.zeros((n, rewards.shape[1]))
    if len(T):
        x[T] = np.linalg.solve(np.eye(len(T)) - P[np.ix_(T, T)], r[T])
    return x[model.initial]


def brute_force(model: SparseMDP, rewards: np.ndarray, weights: np.ndarray):
    """Max of ``weights . values`` over deterministic memoryless policies with finite values."""
    ranges = [range(model.row_groups[s], model.row_groups[s + 1]) for s in range(model.n_states)]
    best = -np.inf
    for pol in itertools.product(*ranges):
        v = evaluate_policy(model, np.array(pol), rewards)
        if v is not None:
            best = max(best, float(weights @ v))
    return best


def zero_end_components(model: SparseMDP) -> SparseMDP:
    """The same MDP with every reward inside a maximal end component set to 0 (all values finite)."""
    from mopmc.engine.mec import maximal_end_components  # the LP engine's, independent of the kernel's

    ec = maximal_end_components(model)
    rewards = {k: np.where(ec.choices, 0.0, v) for k, v in model.rewards.items()}
    return SparseMDP.from_arrays(model.row_groups, model.indptr, model.targets, model.probs, model.initial, rewards=rewards)


FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Hypothesis settings of the random-MDP property tests (derandomized by the profile in conftest.py;
HYPOTHESIS_PROFILE=explore draws fresh examples)."""


def objective_rewards(model: SparseMDP, objs) -> np.ndarray:
    """The objectives' reward vectors as columns (choices x objectives)."""
    return np.column_stack([model.reward(o.reward_model) for o in objs])


def scheduler_values(model: SparseMDP, objs, res) -> np.ndarray:
    """The values of a kernel result's scheduler, re-evaluated independently (states without a
    choice take their first); fails the test when an objective is infinite under it."""
    choice = res.scheduler.choices()
    choice = np.where(choice >= 0, choice, model.row_groups[:-1])
    v = evaluate_policy(model, choice, objective_rewards(model, objs))
    assert v is not None, "the returned scheduler has an infinite objective"
    return v


def random_case(seed: int, n: int, m: int, finite: bool, signed: bool):
    """``(model, objectives, weights)``: a random MDP (half its choices without reward; with
    ``finite`` every end component's rewards zeroed), total-reward objectives of random senses, and
    weights in [-1, 1] (``signed``) or [0, 1]."""
    rng = np.random.default_rng(seed)
    model = random_mdp(rng, n, m, zero_frac=0.5)
    if finite:
        model = zero_end_components(model)
    objs = total_objectives(m, [("min", "max")[int(x)] for x in rng.integers(0, 2, m)])
    w = rng.uniform(-1, 1, m) if signed else rng.uniform(0, 1, m)
    return model, objs, w
