"""Answer a ``multi(...)`` property with the chosen engine's oracle."""

from __future__ import annotations

from mopmc.queries.multi import DEFAULT_PRECISION, MultiResult, achievability, numerical, pareto
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
    if engine == "torch":
        from mopmc.engine.torch_engine import torch_oracle

        return torch_oracle(model, objectives, device=device)
    from mopmc.engine.oracle import kernel_oracle  # provided by the engine package

    return kernel_oracle(model, objectives)


def multi_query(model, prop, *, engine: str = "kernel", precision: float = DEFAULT_PRECISION,
                device: str | None = None, exact_margin: bool = False) -> MultiResult:
    """Achievability, numerical or Pareto query for a parsed ``multi(...)`` property.

    Achievability stops once the verdict is certain (``margin``/``margin_upper`` then bracket the
    best smallest slack); ``exact_margin`` refines the margin itself to ``precision``."""
    oracle = make_oracle(model, prop.objectives, engine, device)
    kind = prop.kind
    if kind == "achievability":
        return achievability(oracle, prop.objectives, precision=precision, tight=exact_margin)
    if kind == "numerical":
        return numerical(oracle, prop.objectives, precision=precision)
    return pareto(oracle, prop.objectives, precision=precision, exhaustive=model.n_states < 10_000)
