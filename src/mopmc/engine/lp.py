"""The exact LP engine: every query answered over the occupation-measure polytope.

This is the oracle the iterative kernel is checked against, and a usable engine for small and
medium models. Linear queries go to HiGHS (through ``scipy.optimize.linprog``), convex ones to
Clarabel (through cvxpy, imported lazily). See :mod:`mopmc.engine.lp_product` for the polytope.

Direction convention: :func:`lp_optimise` *maximises* ``w . v`` where ``v`` is the objective vector
in original units (probabilities, rewards); the objectives' own ``sense`` is ignored there. To
minimise objective ``i``, give it a negative weight.

Infinite values: a direction in which some scheduler collects unbounded reward (a reachable end
component collecting reward in the preferred direction) makes the LP unbounded; the multi-objective
functions raise :class:`~mopmc.errors.InfiniteValueError`, :func:`lp_value` returns ``inf``/``-inf``
as Storm's single-objective engine does. Schedulers infinite in the *other* direction are dominated
and never chosen (they are not representable with finite ``x``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_matrix, hstack, identity, vstack
from scipy.sparse.linalg import spsolve

from mopmc.engine.lp_interior import interior_margin
from mopmc.engine.lp_product import OccupationLP, occupation_polytope
from mopmc.engine.mec import maximal_end_components
from mopmc.errors import DependencyError, InfiniteValueError, MixedSignError, PropertyError, UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.model.unfold import require_unbounded
from mopmc.properties.objectives import Objective

_HIGHS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, "presolve": True}
INTERIOR_VARIABLES = 20_000
"""From this many LP variables on, :func:`lp_achievable` uses the interior-point solver."""
INTERIOR_ACCURACY = 1e-6
"""Interior-point margins this close to 0 (relative to the largest threshold) go to the simplex."""


class LPOptimum(NamedTuple):
    """``value`` = ``w . point``; ``point`` in original units; ``x`` the occupation vector."""

    value: float
    point: np.ndarray
    x: np.ndarray


class Achievability(NamedTuple):
    """``margin`` is the largest ``t`` (capped at 1) such that every threshold holds with slack ``t``
    (in each objective's own units); ``point``/``x`` realise it."""

    achievable: bool
    margin: float
    point: np.ndarray
    x: np.ndarray


class ConvexOptimum(NamedTuple):
    """``loss`` at the optimal ``point`` (original units), realised by occupation vector ``x``."""

    loss: float
    point: np.ndarray
    x: np.ndarray


@dataclass(frozen=True, eq=False)
class RandomisedScheduler:
    """A memoryless randomised scheduler on the LP's product MDP.

    ``choice[j]`` is the probability of product choice ``j`` in its state; ``stop[p]`` the
    probability, in product state ``p``, of committing to stay forever in the zero-reward end
    component of ``p`` (then play ``stay[p]``, a choice that never leaves it); ``visits[p]`` the
    expected number of visits to ``p`` under ``x``. Without stops and goal
    memory (``polytope.has_memory`` false) this is a memoryless scheduler of the model itself; map
    product choices to model choices with ``polytope.choice``.
    """

    polytope: OccupationLP
    choice: np.ndarray
    stop: np.ndarray
    stay: np.ndarray
    visits: np.ndarray


class _Status:
    OPTIMAL, UNBOUNDED, INFEASIBLE = "optimal", "unbounded", "infeasible"


def _linprog(c_max, a_eq, b_eq, a_ub=None, b_ub=None, bounds=(0, None), presolve: bool = True):
    """Maximise ``c . z``; returns (status, z)."""
    res = linprog(-np.asarray(c_max, dtype=float), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                  bounds=bounds, method="highs", options={**_HIGHS, "presolve": presolve})
    if res.status == 4:
        # tight tolerances can stall HiGHS on badly scaled models; polish() restores precision
        res = linprog(-np.asarray(c_max, dtype=float), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                      bounds=bounds, method="highs")
    if res.status == 4:
        # the dual simplex can fail outright on degenerate programs (dive-and-rise); the interior-point
        # method with crossover solves them
        res = linprog(-np.asarray(c_max, dtype=float), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                      bounds=bounds, method="highs-ipm")
    if res.status == 0:
        return _Status.OPTIMAL, res.x
    if res.status == 3:
        return _Status.UNBOUNDED, None
    if res.status == 2:
        # HiGHS' presolve may only know "infeasible or unbounded": ask for feasibility alone.
        feas = linprog(np.zeros(len(c_max)), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                       bounds=bounds, method="highs", options=_HIGHS)
        return (_Status.UNBOUNDED if feas.status == 0 else _Status.INFEASIBLE), None
    raise InfiniteValueError(f"HiGHS failed on the occupation LP: {res.message} (status {res.status})")


def _direction(lp: OccupationLP, weights: Sequence[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(lp.objectives),):
        raise PropertyError(f"{len(w)} weights for {len(lp.objectives)} objectives")
    return np.asarray(lp.gain.T @ (w * lp.scale)).ravel()


def _maximise(lp: OccupationLP, weights: Sequence[float]):
    c = _direction(lp, weights)
    if _gains_forever(lp, c[: lp.n_choices]):
        return _Status.UNBOUNDED, None
    status, x = _linprog(c, lp.flow, lp.rhs(), bounds=lp.bounds())
    if status == _Status.UNBOUNDED and not _gaining_circulation(lp, c[: lp.n_choices]):
        # HiGHS' presolve with tight dual tolerances misreads badly scaled but bounded LPs as
        # unbounded (occupation measures ~1e6 on nearly closed cycles): solve again without presolve.
        status, x = _linprog(c, lp.flow, lp.rhs(), bounds=lp.bounds(), presolve=False)
    return status, x


def _gaining_circulation(lp: OccupationLP, c: np.ndarray, tolerance: float = 1e-9) -> bool:
    """True when some end-component circulation gains ``c``: the LP is then really unbounded.

    A ray of the occupation polytope is an ``r >= 0`` with ``flow @ r = 0``; every row of the model
    is stochastic, so its stop part is 0 and its choices form end components. The normalised LP
    ``max c.r, flow r = 0, sum r = 1`` over the (usable) end-component choices only is small and well scaled.
    """
    inside = np.flatnonzero(lp.end_components.choices)
    if len(inside) == 0:
        return False
    cols = lp.flow[:, inside]
    rows = np.flatnonzero(np.asarray(abs(cols).sum(axis=1)).ravel() > 0)
    a_eq = vstack([cols[rows], csr_matrix(np.ones((1, len(inside))))], format="csr")
    b_eq = np.zeros(len(rows) + 1)
    b_eq[-1] = 1.0
    status, r = _linprog(c[inside], a_eq, b_eq)
    scale = float(np.abs(c[inside]).max()) if len(inside) else 0.0
    return status == _Status.OPTIMAL and float(c[inside] @ r) > tolerance * max(scale, 1e-300)


def _gains_forever(lp: OccupationLP, c: np.ndarray) -> bool:
    """True when an end component's own choices gain ``c >= 0`` with some ``c > 0``.

    Cycling through all of its choices then gains infinitely; HiGHS can take minutes to prove such
    an LP unbounded. Components with gains of both signs are left to HiGHS.
    """
    return bool(_gaining_only(lp.end_components, lp.product.state_of_choice(), c).any())


def _gaining_only(ec, owner: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per end component of ``ec`` (``owner``: the state of each choice): whether its own choices
    gain ``c >= 0`` with some ``c > 0`` (components that also lose are left to the LP)."""
    inside = np.flatnonzero(ec.choices)
    comp = ec.component[owner[inside]]
    positive = np.bincount(comp, weights=(c[inside] > 0), minlength=ec.count) > 0
    negative = np.bincount(comp, weights=(c[inside] < 0), minlength=ec.count) > 0
    return positive & ~negative


def lp_optimise(
    model: SparseMDP,
    objectives: Sequence[Objective],
    weights: Sequence[float],
    *,
    polytope: OccupationLP | None = None,
) -> LPOptimum:
    """Maximise ``weights . v`` over the achievable objective vectors ``v`` (original units).

    Pass ``polytope`` (from :func:`occupation_polytope`) to reuse it across directions. Raises
    :class:`InfiniteValueError` when the optimum is infinite, or when no scheduler has a finite
    objective vector.

    >>> from mopmc.properties.objectives import Objective
    >>> m = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1.0, 1.0, 1.0],
    ...                           rewards={"r": [0.0, 2.0, 0.0]})
    >>> float(lp_optimise(m, [Objective(0, "R[C]", "total_reward", "max", "r")], [1.0]).value)
    2.0
    """
    lp = polytope if polytope is not None else occupation_polytope(model, objectives)
    status, x = _maximise(lp, weights)
    if status == _Status.UNBOUNDED:
        w = [float(x) for x in weights]
        named = [o.text for o, x in zip(objectives, w) if x != 0]
        raise InfiniteValueError(
            f"{model.source}: the optimum in direction {[round(x, 6) for x in w]} (over {', '.join(named)}) is "
            "infinite: a reachable end component collects reward in that direction; bound the rewards or change "
            "the weights"
        )
    if status == _Status.INFEASIBLE:
        raise InfiniteValueError(
            f"{model.source}: every scheduler stays forever in an end component that collects reward, "
            "so no scheduler has finite objective values"
        )
    x = polish(lp, x)
    point = lp.values(x)
    return LPOptimum(float(np.dot(weights, point)), point, x)


def lp_value(model: SparseMDP, objective: Objective) -> float:
    """The single-objective optimum (``objective.sense``) with Storm's single-objective semantics.

    ``R[C]``, ``P[F]``, ``P[U]``, ``P[G]``: optimum over all schedulers; ``inf``/``-inf`` when
    infinite. ``R[F phi]`` outside ``multi``: paths that never reach ``phi`` collect infinity, so
    ``min`` ranges over schedulers reaching ``phi`` almost surely (``inf`` if none) and ``max`` is
    ``inf`` unless every scheduler reaches ``phi`` almost surely.
    """
    sign = 1.0 if objective.sense == "max" else -1.0
    require_unbounded((objective,))
    if objective.kind == "reach_reward":
        target = objective.target_mask(model)
        if target[model.initial]:
            return 0.0
        if objective.sense == "max" and _can_avoid_forever(model, target):
            return math.inf
        lp = occupation_polytope(model, [objective], ec_stops=False)
    else:
        if objective.kind == "total_reward" and _collects_in_reachable_ec(model, sign * model.reward(objective.reward_model)):
            return sign * math.inf  # as Storm: e.g. a reward loop under max, even one never left
        lp = occupation_polytope(model, [objective])
    status, x = _maximise(lp, [sign])
    if status == _Status.UNBOUNDED:
        return sign * math.inf
    if status == _Status.INFEASIBLE:
        # every scheduler misses phi (R[F]) or collects reward forever (R[C]); a probability always has
        # a feasible program, and where some scheduler ends in reward-free end components almost
        # surely so does R[C]: HiGHS then failed numerically (occupation measures near 1e12)
        if objective.kind == "probability" or (objective.kind == "total_reward" and _can_end_free(model, objective)):
            raise UnsupportedModelError(
                f"{model.source}: {objective.text}: HiGHS reports the occupation LP infeasible, which it is not: "
                "numerical trouble (expected visits far beyond double precision's reach); the kernel engine "
                "(--engine kernel) answers it")
        if objective.kind == "reach_reward":
            return math.inf
        r = model.reward(objective.reward_model)
        if np.all(r >= 0):
            return math.inf
        if np.all(r <= 0):
            return -math.inf
        raise MixedSignError(f"{model.source}: {objective.text}: every scheduler stays forever where it collects "
                             "rewards of both signs; the total has no value here (it diverges or oscillates with "
                             "the cycles' mean, which this engine does not weigh)")
    return float(lp.values(polish(lp, x))[0])


def _can_end_free(model: SparseMDP, objective: Objective) -> bool:
    """Whether some scheduler ends, almost surely, in end components whose choices collect no
    reward of ``objective`` (where its total is finite)."""
    from mopmc.engine.reductions import graph

    free = maximal_end_components(model, model.reward(objective.reward_model) == 0)
    g = graph.Csr(model.row_groups, model.indptr, model.targets)
    return bool(graph.almost_sure_max(g, free.component >= 0)[0][model.initial])


def _collects_in_reachable_ec(model: SparseMDP, gain: np.ndarray) -> bool:
    """True when an end component reachable from the initial state has a choice with ``gain > 0``
    and none with ``gain < 0``."""
    from scipy.sparse.csgraph import breadth_first_order

    ec = maximal_end_components(model)
    owner = model.state_of_choice()
    gaining = _gaining_only(ec, owner, gain)  # (one that also loses may net 0 or less: left to the LP)
    paying = ec.choices & (gain > 0)
    paying[paying] = gaining[ec.component[owner[paying]]]
    if not paying.any():
        return False
    src = owner[model.choice_of_transition()]
    graph = csr_matrix((np.ones(len(src)), (src, model.targets)), shape=(model.n_states,) * 2)
    reach = breadth_first_order(graph, model.initial, directed=True, return_predecessors=False)
    return bool(np.isin(owner[paying], reach).any())


def _can_avoid_forever(model: SparseMDP, target: np.ndarray) -> bool:
    """True when some scheduler avoids ``target`` forever with positive probability."""
    owner = model.state_of_choice()
    inside = ~target[owner]
    ec = maximal_end_components(model, inside)
    if ec.count == 0:
        return False
    from scipy.sparse.csgraph import breadth_first_order

    t_choice = model.choice_of_transition()
    src = owner[t_choice]
    keep = ~target[src] & (model.probs > 0)
    graph = csr_matrix((np.ones(int(keep.sum())), (src[keep], model.targets[keep])), shape=(model.n_states,) * 2)
    reach = breadth_first_order(graph, model.initial, directed=True, return_predecessors=False)
    return bool(np.any(ec.component[reach] >= 0))


def lp_achievable(
    model: SparseMDP,
    objectives: Sequence[Objective],
    thresholds: Sequence[float | None] | None = None,
    *,
    polytope: OccupationLP | None = None,
    tolerance: float = 1e-9,
    solver: str = "auto",
) -> Achievability:
    """Is there a scheduler meeting every threshold? Objectives without a threshold are free.

    ``thresholds`` default to the objectives' own; the comparison of objective ``i`` is its
    ``comparison`` (``>=``/``>`` for max, ``<=``/``<`` for min when absent). Non-strict bounds hold
    when ``margin >= -tolerance``, strict ones when ``margin > tolerance``.

    ``solver``: ``"highs"`` (HiGHS' simplex, a vertex), ``"clarabel"`` (interior point,
    :mod:`mopmc.engine.lp_interior`; ``point``/``x`` are then those of the induced scheduler, see
    :func:`polish`) or ``"auto"``: Clarabel from :data:`INTERIOR_VARIABLES` variables on, where the
    simplex takes minutes. When Clarabel's margin is within :data:`INTERIOR_ACCURACY` of 0, or it
    stops without a solution, the simplex decides.
    """
    if solver not in ("auto", "highs", "clarabel"):
        raise PropertyError(f"LP solver {solver!r}: use auto, highs or clarabel")
    lp = polytope if polytope is not None else occupation_polytope(model, objectives)
    thr = [o.threshold for o in objectives] if thresholds is None else list(thresholds)
    rows, rhs, strict = [], [], False
    for i, (o, t) in enumerate(zip(objectives, thr)):
        if t is None:
            continue
        cmp = o.comparison or (">=" if o.sense == "max" else "<=")
        strict |= cmp in ("<", ">")
        s = 1.0 if cmp.startswith(">") else -1.0
        # s * (offset + scale * gain x - t) >= margin  <=>  -s*scale*gain x + margin <= s*(offset - t)
        rows.append(hstack([-s * lp.scale[i] * lp.gain[i], csr_matrix([[1.0]])]))
        rhs.append(s * (lp.offset[i] - t))
    a_ub = vstack(rows, format="csr") if rows else None
    b_ub = np.array(rhs) if rows else None
    if solver == "auto":
        solver = "clarabel" if rows and lp.n_vars >= INTERIOR_VARIABLES else "highs"
    if solver == "clarabel" and rows:
        res = interior_margin(lp, a_ub, b_ub)
        if res.status == "infeasible":
            raise InfiniteValueError(f"{model.source}: no scheduler has finite objective values (LP infeasible)")
        near = INTERIOR_ACCURACY * max(1.0, float(np.abs(b_ub).max()))
        if res.status == "solved" and abs(res.margin) > near:
            x = polish(lp, res.x)
            ok = res.margin > tolerance if strict else res.margin >= -tolerance
            return Achievability(bool(ok), res.margin, lp.values(x), x)
    n = lp.n_vars
    c = np.zeros(n + 1)
    c[-1] = 1.0
    a_eq = hstack([lp.flow, csr_matrix((lp.n_states, 1))], format="csr")
    bounds = np.vstack((lp.bounds(), [[-np.inf, 1.0]]))
    status, z = _linprog(c, a_eq, lp.rhs(), a_ub, b_ub, bounds)
    if status != _Status.OPTIMAL:
        raise InfiniteValueError(f"{model.source}: no scheduler has finite objective values (LP {status})")
    margin = float(z[-1])
    x = z[:-1]
    ok = margin > tolerance if strict else margin >= -tolerance
    return Achievability(bool(ok), margin, lp.values(x), x)


def lp_convex(
    model: SparseMDP,
    objectives: Sequence[Objective],
    loss: Callable,
    box: tuple[Sequence[float] | None, Sequence[float] | None] | None = None,
    *,
    polytope: OccupationLP | None = None,
    solver: str = "CLARABEL",
) -> ConvexOptimum:
    """Minimise a convex ``loss(v)`` over the achievable vectors ``v`` within ``box = (lower, upper)``.

    ``loss`` receives the objective vector as a cvxpy expression (original units) and returns a
    convex cvxpy scalar; bounds may be ``None`` or contain ``None``/``inf`` for "unbounded".

    >>> import cvxpy as cp  # doctest: +SKIP
    >>> lp_convex(m, objs, lambda v: cp.sum_squares(v - target) / len(target), box=(None, upper))  # doctest: +SKIP
    """
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover - cvxpy is a declared dependency
        raise DependencyError('the convex LP oracle needs cvxpy and Clarabel: pip install cvxpy clarabel') from None
    lp = polytope if polytope is not None else occupation_polytope(model, objectives)
    x = cp.Variable(lp.n_vars, nonneg=True)
    v = lp.offset + cp.multiply(lp.scale, lp.gain @ x)
    cons = [lp.flow @ x == lp.rhs()]
    if not lp.usable.all():
        cons.append(x[np.flatnonzero(~lp.usable)] == 0)
    lower, upper = box if box is not None else (None, None)
    for bound, side in ((lower, 1.0), (upper, -1.0)):
        if bound is None:
            continue
        for i, b in enumerate(bound):
            if b is not None and math.isfinite(b):
                cons.append(side * v[i] >= side * b)
    prob = cp.Problem(cp.Minimize(loss(v)), cons)
    # Clarabel's default tolerances stop ~6e-4 (relative) short of the optimum on the switch model;
    # as an oracle this program must be tighter than the queries it checks.
    opts = {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-11, "tol_feas": 1e-11} if solver == "CLARABEL" else {}
    prob.solve(solver=solver, **opts)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise InfiniteValueError(f"{model.source}: convex query {prob.status} (box {box})")
    xv = np.maximum(np.asarray(x.value, dtype=float), 0.0)
    return ConvexOptimum(float(prob.value), lp.values(xv), xv)


def polish(lp: OccupationLP, x: np.ndarray) -> np.ndarray:
    """Recompute ``x`` as the exact occupation measure of the scheduler it induces.

    Solver tolerances leave ``x`` slightly off the flow constraints; one sparse solve with the
    induced randomised scheduler makes the point exactly the value of a scheduler (to rounding).
    Returns ``x`` unchanged when the system is singular (which a feasible ``x`` rules out).
    """
    choice, stop, visits = _policy(lp, x)
    prod = lp.product
    owner = prod.state_of_choice()
    visited = np.flatnonzero(visits > 0)
    where = np.full(lp.n_states, -1, dtype=np.int64)
    where[visited] = np.arange(len(visited))
    cols = np.repeat(np.arange(lp.n_choices), np.diff(prod.indptr))
    keep = (where[owner[cols]] >= 0) & (where[prod.targets] >= 0)
    weight = prod.probs[keep] * choice[cols[keep]]
    k = len(visited)
    q = csr_matrix((weight, (where[owner[cols[keep]]], where[prod.targets[keep]])), shape=(k, k))
    a = (identity(k, format="csr") - q.T).tocsc()
    b = np.zeros(k)
    b[where[prod.initial]] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y_v = spsolve(a, b) if k > 1 else b / a.toarray().ravel()
    if not np.all(np.isfinite(y_v)):
        return x
    y = np.zeros(lp.n_states)
    y[visited] = np.maximum(y_v, 0.0)
    out = np.zeros(lp.n_vars)
    out[: lp.n_choices] = y[owner] * choice
    out[lp.n_choices:] = y[lp.stop_states] * stop[lp.stop_states]
    return out


def randomised_scheduler(lp: OccupationLP, x: np.ndarray) -> RandomisedScheduler:
    """The memoryless randomised scheduler ``pi(a|s) = x(s,a) / (sum_a x(s,a) + stop(s))``.

    States that ``x`` never visits get the uniform distribution over their choices (they do not
    affect the values).
    """
    choice, stop, visits = _policy(lp, x)
    return RandomisedScheduler(lp, choice, stop, _stay_choices(lp), visits)


def _policy(lp: OccupationLP, x: np.ndarray):
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    prod = lp.product
    n = lp.n_states
    owner = prod.state_of_choice()
    xc = x[: lp.n_choices]
    stop = np.zeros(n)
    stop[lp.stop_states] = x[lp.n_choices:]
    total = np.bincount(owner, weights=xc, minlength=n) + stop
    visited = total > 0
    counts = np.diff(prod.row_groups)
    choice = np.where(visited[owner], xc / np.where(visited, total, 1.0)[owner], 1.0 / counts[owner])
    stop_p = np.where(visited, stop / np.where(visited, total, 1.0), 0.0)
    stop_p[(~visited) & (counts == 0)] = 1.0
    return choice, stop_p, total


def _stay_choices(lp: OccupationLP) -> np.ndarray:
    """For each stop state, a choice that stays in its zero-reward end component (-1: none/terminal)."""
    prod = lp.product
    stay = np.full(lp.n_states, -1, dtype=np.int64)
    if len(lp.stop_states) == 0 or lp.n_choices == 0:
        return stay
    zero = ~np.asarray((lp.gain[:, : lp.n_choices] != 0).sum(axis=0)).ravel().astype(bool)
    ec = maximal_end_components(prod, zero)
    owner = prod.state_of_choice()
    inside = np.flatnonzero(ec.choices)
    # last inside choice per state wins; any one will do
    stay[owner[inside]] = inside
    return stay
