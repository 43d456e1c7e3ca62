"""Single-objective queries with Storm's semantics: ``R[C]``, ``P[F]``, ``P[U]``, ``P[G]``, ``R[F]``,
``P[X]``, step bounds, and long-run averages ``R[LRA]``, ``LRA[phi]`` (:mod:`mopmc.engine.long_run`).

``R{"r"}[F phi]`` outside ``multi(...)`` is infinite unless phi is reached almost surely: ``max`` is
infinite when some scheduler can avoid phi; ``min`` ranges over the schedulers that reach phi almost
surely (infinite when there are none). An optimum that is infinite in the preferred direction gives
a result with ``status == "infinite"`` (and ``value`` = +-inf); :func:`check_value` raises instead.
A property without a direction (``P=?``, ``R=?``: Markov chains only, see
:func:`mopmc.properties.parse.parse_properties`) is computed as ``max``, equal to ``min`` there.

>>> res = check(loaded.model, loaded.properties()[0])  # doctest: +SKIP
>>> res.value, res.scheduler                            # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from mopmc.engine.scheduler import Scheduler
from mopmc.errors import InfiniteValueError, MixedSignError, PropertyError, UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective, Property

DEFAULT_PRECISION = 1e-6


@dataclass(frozen=True)
class SingleResult:
    """``value`` in original units; ``satisfied`` for properties with a bound; ``status``:
    ``ok`` or ``infinite`` (then ``message`` says why and ``scheduler`` is None)."""

    property: Property
    value: float
    error_bound: float
    precision: float
    scheduler: Scheduler | None
    status: str = "ok"
    message: str | None = None
    timings: dict = field(default_factory=dict)
    note: str | None = None  # e.g. answered by the exact LP instead of the engine asked for

    @property
    def satisfied(self) -> bool | None:
        o = self.property.objectives[0]
        if o.threshold is None:
            return None
        ops = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
        return bool(ops[o.comparison](float(self.value), float(o.threshold)))

    def to_json(self) -> dict:
        o = self.property.objectives[0]
        out = {
            "property": self.property.text,
            "name": self.property.name,
            "kind": self.property.kind,
            "objectives": [o.to_json()],
            "value": self.value,
            "status": self.status,
            "precision": self.precision,
            "error_bound": self.error_bound,
            "timings": self.timings,
        }
        if o.threshold is not None:
            out["satisfied"] = self.satisfied
        if self.message:
            out["message"] = self.message
        if self.note:
            out["note"] = self.note
        return out


def check(
    model: SparseMDP,
    prop: Property,
    *,
    precision: float = DEFAULT_PRECISION,
    engine: str = "kernel",
    method: str = "auto",
    device: str | None = None,
) -> SingleResult:
    """Optimise one objective (``min``/``max``) on ``model``; see the module docstring.

    ``precision`` is the kernel's relative precision for large cyclic parts (``error_bound`` is the
    certified bound achieved, 0.0 when exact); ``method`` is :class:`~mopmc.engine.kernel.Engine`'s.
    """
    if prop.multi:
        raise PropertyError(f"{prop.text}: a multi-objective property; use the multi-objective queries")
    o = prop.objectives[0]
    start = time.perf_counter()
    long_run = o.kind == "long_run"
    if long_run:  # the optimal expected total reward of the MEC quotient (see mopmc.engine.long_run)
        from mopmc.engine import long_run as lra

        ec, gains = lra.mec_gains(model, lra.choice_rewards(model, o), o.sense == "max")
        model = lra.quotient(model, ec, gains)
        o = Objective(0, o.text, "total_reward", o.sense, lra.STOP, directionless=o.directionless)
    if o.steps is not None and engine != "lp":
        from mopmc.engine import horizon

        if horizon.applies(o):  # an upper step bound: k backups, as Storm (no scheduler: it counts steps)
            value = horizon.horizon_value(model, o)
            return SingleResult(prop, value, 0.0, precision, None, timings={"check": time.perf_counter() - start})
    if o.steps is not None:  # otherwise an unbounded objective on the step-counting product
        from mopmc.model.unfold import unfold_steps

        model, (o,) = unfold_steps(model, (o,))
    note = None
    try:
        if engine == "lp":
            value, sched, bound = _lp_value(model, o)
        elif engine in ("kernel", "torch"):
            if engine == "kernel":
                opts, make = {"precision": precision, "method": method}, None
            else:  # the kernel on a torch device (``device``: cuda or cpu)
                from mopmc.engine.torch_engine import TorchEngine as make

                opts = {"precision": precision, "device": device}
            try:
                memo: dict = {}
                if (early := _qualitative_first(model, o, memo)) is not None:
                    value, sched, bound = early
                elif (split := _qualitative_split(model, o, memo)) is not None:  # Storm's prob0/prob1 first
                    value, sched, bound = _split_value(model, o, split, opts, make)
                else:
                    value, sched, bound = _kernel_value(model, o, opts, make)
            except MixedSignError as exc:  # the exact LP weighs it (a total of 0, infinite, or none)
                from mopmc.queries.dispatch import lp_fallback_note

                note = lp_fallback_note(engine, model, exc)
                value, sched, bound = _lp_value(model, o)
        else:
            raise PropertyError(f"unknown engine {engine!r}; use kernel, lp or torch")
    except MixedSignError as exc:  # not an infinity: the engine cannot decide it
        raise UnsupportedModelError(exc.one_line()) from None
    except InfiniteValueError as exc:
        inf = math.inf if o.sense == "max" else -math.inf
        if getattr(exc, "value", None) is not None:
            inf = exc.value
        elif getattr(exc, "preferred", False):
            pass  # an end component gaining in the preferred direction: R{"r"}min=? [F goal] can be -inf
        elif o.kind == "reach_reward" or getattr(exc, "against", False):
            inf = -inf if o.kind != "reach_reward" else math.inf
        message = exc.one_line()
        if o.directionless:  # a Markov chain: no scheduler, no direction to speak of
            why = ("the target is reached with probability below 1" if o.kind == "reach_reward" else
                   f"the chain collects {'positive' if inf > 0 else 'negative'} reward forever in a reachable recurrent class")
            message = f"{model.source}: {o.text} is infinite: {why}"
        return SingleResult(prop, inf, 0.0, precision, None, "infinite", message,
                            {"check": time.perf_counter() - start})
    if o.kind == "probability":  # rounding may step an ulp or so outside [0, 1]: the nearer end is closer
        value = min(max(value, 0.0), 1.0)
        if 0.0 < value < 1e-9 or 1.0 - 1e-9 < value < 1.0:  # exactly 0 or 1 where the graph decides it
            value = _qualitative(model, o, value)  # (as Storm's precomputation; only near 0 or 1 to ask)
    if long_run:  # (a scheduler of the quotient: not one of the model)
        sched = None
        if len(gains):  # a mixture of the MECs' gains: rounding (-2e-76 for 0) stays within theirs
            value = min(max(value, float(np.min(gains))), float(np.max(gains)))
    return SingleResult(prop, value, bound, precision, sched, timings={"check": time.perf_counter() - start}, note=note)


def _qualitative(model: SparseMDP, o: Objective, value: float) -> float:
    """``value`` (of the probability objective ``o``, unbounded ``F``), or exactly 1 (0) where the
    graph shows that the optimum is 1 (0) at the initial state: a numeric solve gives such values
    up to rounding (1 - 2.7e-14 on a 10,000-state grid by SuperLU)."""
    if o.left_text is not None or o.negated or o.steps is not None:
        return value
    from mopmc.engine.reductions import graph

    g = graph.Csr(model.row_groups, model.indptr, model.targets)
    target = o.target_mask(model)
    if o.sense == "max":
        one = graph.almost_sure_max(g, target)[0][model.initial]
        zero = False
    else:
        one = graph.almost_sure_all(g, target)[model.initial]
        zero = graph.avoid_positive(g, target)[model.initial]
    return 1.0 if one else 0.0 if zero else value


#: rounds of the ``Pmax = 1`` fixpoint tried before the kernel (each a pass over the transitions)
QUALITATIVE_ROUNDS = 4


def _qualitative_first(model: SparseMDP, o: Objective, memo: dict | None = None):
    """``(value, scheduler, 0.0)`` where graph analysis alone decides ``o`` (the probability of an
    unbounded ``F``) at the initial state, as Storm's precomputation does: ``Pmin = 0`` where some
    scheduler avoids the target forever, ``Pmin = 1`` where none can (linear time; a random walk of
    1M states took 0.9 s numerically, Storm 0.1 s), ``Pmax = 1`` where some scheduler reaches it
    almost surely (a nested fixpoint, tried for :data:`QUALITATIVE_ROUNDS` rounds: on the
    shared-coin protocol's ``"goal"`` it peels a layer per round, 2 s at K=32, more than the
    kernel's whole query). ``None`` otherwise. The kernel's end components can cost a pass per
    layer a model peels: at K=32 the protocol's Pmin took 3.4 s and its Pmax of ``"finished"`` 4.3
    s (Storm: 0.04 and 0.16 s). The scheduler is the graph's own: it keeps to the avoiding states,
    or moves towards the target."""
    if o.kind != "probability" or o.left_text is not None or o.negated or o.steps is not None:
        return None
    from mopmc.engine import numba_kernels as nk
    from mopmc.engine.reductions import graph

    g = graph.Csr(model.row_groups, model.indptr, model.targets)
    target = o.target_mask(model)
    soc = model.state_of_choice()
    if o.sense == "min":
        rev = graph.reverse(g)
        inside = graph.avoid_positive(g, target, rev)
        if not inside[model.initial]:  # Pmin = 1 where no path avoiding the target reaches ``inside``
            bad = graph.can_reach(g, inside, rev, ~target[soc])
            if bad[model.initial]:
                if memo is not None:  # (Storm's prob0 and prob1 of Pmin, for _qualitative_split)
                    memo["min"] = (inside, ~bad & ~target)
                return None
            return 1.0, _memoryless(model, model.row_groups[:-1].copy()), 0.0  # (every scheduler)
        ok = inside[soc] & nk.all_successors_in(model.indptr, model.targets, inside, model.n_choices)
        value = 0.0
    else:
        found = graph.almost_sure_max(g, target, max_rounds=QUALITATIVE_ROUNDS)
        if found is None or not found[0][model.initial]:
            return None
        via = found[1]
        ok = np.zeros(model.n_choices, bool)
        ok[via[via >= 0]] = True
        value = 1.0
    choice = model.row_groups[:-1].copy()
    cs = np.flatnonzero(ok)[::-1]  # (the first such choice of each state wins)
    choice[soc[cs]] = cs
    return value, _memoryless(model, choice), 0.0


_SURE = "__mopmc_sure__"  # the split model's label: the target and the states reaching it surely


def _qualitative_split(model: SparseMDP, o: Objective, memo: dict | None = None):
    """For an unbounded ``Pmin[F phi]``, or ``Pmax[G phi]`` (as ``1 - Pmin[F !phi]``):
    ``(zero, one, target)``, the states where graph analysis alone decides the reach probability
    (Storm's prob0 and prob1), where those close a cycle of two or more states, else ``None``. The
    engine's policy iteration stops at improvements of 1e-12 relative, which on a probability near
    1 that is 0 in truth is no improvement at all: a trap left with probability 1e-15 kept
    ``Pmin[F !bad]`` at 1 - 1e-15 (and ``Pmax[G bad]`` at 1e-15 instead of 1). Maximum reach
    probabilities keep the engine's way: it drops the states that cannot reach the target, and the
    initial state's value near 1 is settled by :func:`_qualitative` (prob1 here cost 0.45 s on
    Model A n=200)."""
    if o.kind != "probability" or o.left_text is not None or o.steps is not None:
        return None
    if (o.sense == "max") != o.negated:  # a maximum reach probability
        return None
    target = o.target_mask(model)
    if memo and "min" in memo:  # (computed by _qualitative_first)
        zero, one = memo["min"]
    else:
        from mopmc.engine.reductions import graph

        g = graph.Csr(model.row_groups, model.indptr, model.targets)
        rev = graph.reverse(g)
        zero = graph.avoid_positive(g, target, rev)
        one = ~graph.can_reach(g, zero, rev, ~target[model.state_of_choice()]) & ~target
    if not _cyclic_within(model, zero | one):  # the engine's passes decide acyclic parts exactly
        return None
    return zero, one, target


def _cyclic_within(model: SparseMDP, states: np.ndarray) -> bool:
    """Whether the transitions among ``states`` close a cycle of two or more states (where the
    engine's policy iteration meets them: on acyclic parts and self-loops its passes are exact, and
    deciding their states first only costs a copy of the model, 0.3 s on Model A n=200)."""
    if states.sum() < 2:
        return False
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    soc = model.state_of_choice()
    src = np.repeat(soc, np.diff(model.indptr))
    keep = states[src] & states[model.targets] & (src != model.targets)
    if not keep.any():
        return False
    n = model.n_states
    g = csr_matrix((np.ones(int(keep.sum()), np.int8), (src[keep], model.targets[keep])), shape=(n, n))
    count, labels = connected_components(g, directed=True, connection="strong")
    return bool(np.bincount(labels[states]).max() > 1)


def _split_value(model: SparseMDP, o: Objective, split, options: dict, make=None):
    """``(value, scheduler, bound)`` of ``o`` from the engine on ``model`` with the states of
    ``split`` decided: those of probability 0 made absorbing (each choice a self-loop, so that
    choice numbers stay), those of probability 1 added to the target. The scheduler is memoryless:
    the engine's choices elsewhere, and on the states of probability 0 the graph's (keeping away
    from the target)."""
    import dataclasses

    from mopmc.engine import numba_kernels as nk

    zero, one, target = split
    soc = model.state_of_choice()
    lens = np.diff(model.indptr)
    dead = zero[soc]
    new_lens = np.where(dead, 1, lens)
    indptr = np.zeros(model.n_choices + 1, np.int64)
    np.cumsum(new_lens, out=indptr[1:])
    keep = np.repeat(~dead, lens)
    targets = np.empty(indptr[-1], np.int64)
    probs = np.empty(indptr[-1], np.float64)
    live_slots = np.repeat(~dead, new_lens)
    targets[live_slots], probs[live_slots] = model.targets[keep], model.probs[keep]
    targets[~live_slots], probs[~live_slots] = soc[dead], 1.0
    labels = dict(model.labels)
    labels[_SURE] = target | one
    split_model = dataclasses.replace(model, indptr=indptr, targets=targets, probs=probs, labels=labels)
    reach = dataclasses.replace(o, sense="min", negated=False, right_text=f'"{_SURE}"', threshold=None,
                                comparison=None)
    from mopmc.engine.kernel import Engine

    res = (make or Engine)(split_model, [reach], **options).optimise([1.0])
    value = float(res.values[0])
    # a memoryless scheduler: the engine's choices before the target, the graph's on decided states
    choice = model.row_groups[:-1].copy()
    sch = res.scheduler
    first = sch.memory == 0
    choice[sch.state[first]] = sch.choice[first]
    if zero.any():
        ok = zero[soc] & nk.all_successors_in(model.indptr, model.targets, zero, model.n_choices)
        cs = np.flatnonzero(ok)[::-1]
        choice[soc[cs]] = cs
    if o.negated:
        value = 1.0 - value
    return value, _memoryless(model, choice), res.error_bound


def _memoryless(model: SparseMDP, choice: np.ndarray) -> Scheduler:
    """The memoryless scheduler taking ``choice[s]`` in every state it reaches from the initial one."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    starts, ends = model.indptr[choice], model.indptr[choice + 1]
    lens = ends - starts
    src = np.repeat(np.arange(model.n_states), lens)
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    graph_ = csr_matrix((np.ones(len(src), np.int8), (src, model.targets[idx])), shape=(model.n_states,) * 2)
    reached = np.sort(breadth_first_order(graph_, model.initial, directed=True, return_predecessors=False))
    return Scheduler(reached, np.zeros(len(reached), np.int64), choice[reached], np.zeros((0, model.n_states), bool),
                     model.n_states)


def _lp_value(model: SparseMDP, o: Objective):
    """The exact LP's value (no scheduler, no error); an infinity as :class:`InfiniteValueError`."""
    from mopmc.engine.lp import lp_value

    value = float(lp_value(model, o))
    if math.isinf(value):
        exc = InfiniteValueError(f"{model.source}: {o.text} is {value}")
        exc.value = value  # the LP's own sign
        raise exc
    return value, None, 0.0


def check_value(model: SparseMDP, prop: Property, **kw) -> SingleResult:
    """Like :func:`check`, but an infinite optimum raises :class:`InfiniteValueError`."""
    res = check(model, prop, **kw)
    if res.status == "infinite":
        raise InfiniteValueError(res.message)
    return res


def _kernel_value(model: SparseMDP, o: Objective, options: dict, make=None):
    from mopmc.engine.kernel import Engine
    from mopmc.engine.reductions import graph

    Engine = make or Engine  # noqa: N806 (the torch engine takes the same arguments)

    if o.kind != "reach_reward":
        res = Engine(model, [o], **options).optimise([1.0])
        return float(res.values[0]), res.scheduler, res.error_bound
    target = o.target_mask(model)
    g = graph.Csr(model.row_groups, model.indptr, model.targets)
    rev = graph.reverse(g)
    if o.sense == "max":
        sure = graph.almost_sure_all(g, target, rev)
        if not sure[model.initial]:
            raise InfiniteValueError(
                f"{model.source}: {o.text} is infinite: some scheduler avoids the target with positive probability"
            )
        res = Engine(model, [o], **options).optimise([1.0])
    else:
        sure, _ = graph.almost_sure_max(g, target, None, rev)
        if not sure[model.initial]:
            raise InfiniteValueError(
                f"{model.source}: {o.text} is infinite: no scheduler reaches the target with probability 1"
            )
        from mopmc.engine import numba_kernels as nk

        mask = sure[rev.state_of_choice] & nk.all_successors_in(model.indptr, model.targets, sure, model.n_choices)
        res = Engine(model, [o], allow_stay=False, choice_mask=mask, **options).optimise([1.0])
    return float(res.values[0]), res.scheduler, res.error_bound
