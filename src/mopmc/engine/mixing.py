"""One randomised scheduler from a mixture of deterministic ones, through occupation measures.

A mixture ``sum_k lambda_k sigma_k`` of schedulers reaches the point ``sum_k lambda_k v_k``. The
memoryless randomised scheduler (memoryless on the goal-memory product when the schedulers carry
goal memory) with the same point plays, in product state ``p``::

    pi(c | p) = sum_k lambda_k x_k(p, c) / sum_k lambda_k y_k(p)

where ``y_k(p)`` is the expected number of visits of ``p`` under ``sigma_k`` (a sparse solve of
its induced chain, :func:`mopmc.engine.evaluate.occupation`) and ``x_k(p, c) = y_k(p)`` for the
choice ``c`` that ``sigma_k`` takes there. States that some ``sigma_k`` never leaves (a bottom
component of its chain, collecting nothing) have infinite visits: if no component passes through
them transiently, ``pi`` mixes the components' choices there by ``lambda`` (those choices stay in
a closed zero-reward set); if one component passes through a state that another one never leaves,
no memoryless scheduler realises the mixture in general (staying forever with probability strictly
between 0 and 1 needs memory) and :func:`randomise` says so. States no component reaches get the
``lambda``-mixture of the components' choices (they do not affect the values).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mopmc.engine.evaluate import Mixture, Policy, occupation
from mopmc.model.sparse_mdp import SparseMDP


class Randomised(NamedTuple):
    """``policy`` is ``None`` when the mixture has no memoryless randomised equivalent (``reason``)."""

    policy: Policy | None
    reason: str | None


def randomise(model: SparseMDP, mixture: Mixture) -> Randomised:
    """The memoryless randomised scheduler of a mixture of deterministic policies; see the module."""
    pols = [p for w, p in zip(mixture.weights, mixture.policies) if w > 0]
    lams = np.array([w for w in mixture.weights if w > 0], float)
    lams = lams / lams.sum()
    if not pols:
        raise ValueError("a mixture needs a component with positive weight")
    bits = {p.n_bits for p in pols}
    if len(bits) != 1 or any(not np.array_equal(p.decided, pols[0].decided) for p in pols):
        return Randomised(None, "the components use different goal memories")
    for p in pols:
        if not p.deterministic:
            return Randomised(None, "the components must be deterministic")
    n = model.n_states
    keys = np.unique(np.concatenate([p.memory * n + p.state for p in pols]))
    kk = len(keys)
    K = len(pols)
    choice = np.full((K, kk), -1, np.int64)
    visits = np.zeros((K, kk))
    recurrent = np.zeros((K, kk), bool)
    for k, p in enumerate(pols):
        at = np.searchsorted(keys, p.memory * n + p.state)
        choice[k, at] = p.choice
        occ = occupation(model, p)
        where = np.searchsorted(keys, occ.keys)
        known = (where < kk) & (keys[np.minimum(where, kk - 1)] == occ.keys)  # others: the policy's end
        rec = occ.recurrent[known]
        where, vis = where[known], occ.visits[known]
        visits[k, where[~rec]] = vis[~rec]
        recurrent[k, where[rec]] = True
    through = lams @ visits
    stays = lams @ recurrent
    conflict = np.flatnonzero((through > 0) & (stays > 0))
    if len(conflict):
        key = int(keys[conflict[0]])
        s = key % n
        where = model.valuations.of(s) if model.valuations is not None else f"state {s}"
        return Randomised(None, f"one scheduler of the mixture passes through {where} (memory {key // n}) where "
                                "another stays forever; no memoryless randomised scheduler realises this mixture "
                                "(use the mixture itself)")
    weight = np.where(through > 0, visits, np.where(stays > 0, recurrent.astype(float), 1.0)) * lams[:, None]
    weight = np.where(choice >= 0, weight, 0.0)
    # one row per (key, distinct choice): sum the components' weights
    kidx = np.repeat(np.arange(kk)[None, :], K, axis=0).ravel()
    ch, wt = choice.ravel(), weight.ravel()
    sel = (ch >= 0) & (wt > 0)
    kidx, ch, wt = kidx[sel], ch[sel], wt[sel]
    order = np.lexsort((ch, kidx))
    kidx, ch, wt = kidx[order], ch[order], wt[order]
    first = np.ones(len(kidx), bool)
    first[1:] = (kidx[1:] != kidx[:-1]) | (ch[1:] != ch[:-1])
    starts = np.flatnonzero(first)
    wsum = np.add.reduceat(wt, starts)
    rk, rc = kidx[starts], ch[starts]
    totals = np.bincount(rk, weights=wsum, minlength=kk)
    prob = wsum / totals[rk]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rk, minlength=kk))))
    return Randomised(Policy(keys % n, keys // n, indptr, rc, prob, pols[0].decided), None)
