"""Answer a ``multi(...)`` property with the chosen engine's oracle."""

from __future__ import annotations

from dataclasses import replace

from mopmc.errors import MixedSignError
from mopmc.queries.multi import DEFAULT_PRECISION, MAX_ITER, MultiResult, achievability, numerical, pareto
from mopmc.queries.oracle import Oracle, lp_oracle


def make_oracle(model, objectives, engine: str = "kernel", device: str | None = None) -> Oracle:
    """The weighted-optimisation oracle of an engine: ``kernel`` (iterative CPU), ``lp`` (exact) or
    ``torch`` (the kernel on a torch ``device``: cuda or cpu). Step-bounded objectives are answered
    on the step-counting product (:func:`mopmc.model.unfold.unfold_steps`); the oracle's
    schedulers are then the product's."""
    from mopmc.model.unfold import unfold_steps

    model, objectives = unfold_steps(model, objectives)
    if engine == "lp":
        return lp_oracle(model, objectives)
    try:
        if engine == "torch":
            from mopmc.engine.torch_engine import torch_oracle

            return torch_oracle(model, objectives, device=device)
        from mopmc.engine.oracle import kernel_oracle  # provided by the engine package

        return kernel_oracle(model, objectives)
    except MixedSignError as exc:
        note = lp_fallback_note(engine, model, exc, named=len(objectives) > 1)
        oracle = lp_oracle(model, objectives)
        oracle.note = note
        return oracle


#: above this many states an objective the kernel cannot weigh is refused (naming --engine lp)
#: rather than answered by the exact LP, which may take long there
LP_FALLBACK_STATES = 200_000


def lp_fallback_note(engine: str, model, exc: MixedSignError, named: bool = False) -> str:
    """What the answer of the exact LP engine instead of ``engine`` says on stderr and in JSON;
    ``exc`` (the kernel's refusal) again where ``model`` is too large for that. ``named``: say which
    objectives (among several)."""
    if model.n_states > LP_FALLBACK_STATES:
        raise exc
    what = getattr(exc, "objectives", None) if named else None
    return (f"the {engine} engine cannot weigh an end component whose rewards have both signs"
            f"{f' ({what})' if what else ''}; answered by the exact LP engine (as --engine lp; it exports no scheduler)")


def multi_query(model, prop, *, engine: str = "kernel", precision: float | None = None,
                device: str | None = None, exact_margin: bool = False, precision_type: str = "abs",
                max_iter: int | None = None, progress=None) -> MultiResult:
    """Achievability, numerical or Pareto query for a parsed ``multi(...)`` property.

    Achievability stops once the verdict is certain (``margin``/``margin_upper`` then bracket the
    best smallest slack); ``exact_margin`` refines the margin itself to ``precision``.
    ``precision_type``: ``abs`` (in each objective's units) or ``reldiff`` (in units of each
    objective's range; :data:`~mopmc.queries.multi.PRECISION_TYPES`). ``precision`` ``None``:
    :data:`~mopmc.queries.multi.DEFAULT_PRECISION`, and the Pareto front of a model under 10,000
    states is then exhaustive (every vertex); a precision given (or a relative one) is asked for,
    and the front is refined to it. ``max_iter``: the most oracle calls after the first ones
    (default: :data:`~mopmc.queries.multi.MAX_ITER` of the query's kind). ``progress``:
    ``progress(calls, gap)`` before each of those calls (:data:`~mopmc.queries.multi.Progress`)."""
    oracle = make_oracle(model, prop.objectives, engine, device)
    kind = prop.kind
    how = dict(precision=DEFAULT_PRECISION if precision is None else precision, precision_type=precision_type,
               max_iter=MAX_ITER[kind] if max_iter is None else max_iter, progress=progress)
    if kind == "achievability":
        res = achievability(oracle, prop.objectives, tight=exact_margin, **how)
    elif kind == "numerical":
        res = numerical(oracle, prop.objectives, **how)
    else:
        exhaustive = model.n_states < 10_000 and precision is None and precision_type == "abs"
        res = pareto(oracle, prop.objectives, exhaustive=exhaustive, **how)
    note = getattr(oracle, "note", None)
    return replace(res, note=note) if note else res
