"""Parse PRISM/Storm property text (with stormpy) into :class:`Property` objects."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from mopmc.errors import PropertyError, UnknownNameError
from mopmc.properties.objectives import Objective, Property

_SENSE = {"MINIMIZE": "min", "MAXIMIZE": "max"}


def read_property_file(path: str | Path) -> str:
    """Read a property file; PRISM's ``//`` comments are kept (Storm's parser skips them)."""
    path = Path(path)
    if not path.is_file():
        raise PropertyError(f"{path}: no such property file")
    return path.read_text()


def parse_properties(formulas, reward_models, labels, where: str = "<properties>") -> list[Property]:
    """Turn Storm's parsed properties into typed :class:`Property` objects, in order.

    Args:
        formulas: Storm ``Property`` objects (from :func:`mopmc.io.storm.parse_formulas`).
        reward_models: names of the model's reward models (for unnamed ``R`` and unknown names).
        labels: names of the model's labels (to report unknown labels).
        where: the source, for messages.
    """
    out = []
    for i, prop in enumerate(formulas):
        f = prop.get_raw_formula()
        text = str(f)
        try:
            name = prop.get_name()
        except Exception:
            name = None
        if f.is_multi_objective_formula:
            subs = list(f.subformulas)
            if not subs:
                raise PropertyError(f"{where}: property {i + 1}: multi() needs at least one objective")
            objs = tuple(_objective(j, s, reward_models, labels, where, i) for j, s in enumerate(subs))
            out.append(Property(i, text, name, objs, True))
        else:
            out.append(Property(i, text, name, (_objective(0, f, reward_models, labels, where, i),), False))
    return out


def _objective(j, f, reward_models, labels, where, i) -> Objective:
    text = str(f)
    at = f"{where}: property {i + 1} ({text})"
    if f.is_reward_operator_formula:
        return _reward(j, f, text, reward_models, labels, at)
    if f.is_probability_operator_formula:
        return _probability(j, f, text, labels, at)
    raise PropertyError(f"{at}: unsupported objective; use P[...] or R[...] with C, F or U")


def _bounds(f, at):
    sense = comparison = threshold = None
    if f.has_optimality_type:
        sense = _SENSE.get(f.optimality_type.name)
    if f.has_bound:
        op = f.comparison_type.name
        comparison = {"LESS": "<", "LEQ": "<=", "GREATER": ">", "GEQ": ">="}[op]
        try:
            threshold = float(Fraction(str(f.threshold)))
        except Exception as exc:
            raise PropertyError(f"{at}: threshold does not evaluate to a number ({exc})") from None
        if sense is None:
            sense = "min" if comparison.startswith("<") else "max"
    if sense is None:
        raise PropertyError(f"{at}: give a direction (min=?, max=?) or a bound (<=, >=)")
    return sense, comparison, threshold


def _reward(j, f, text, reward_models, labels, at) -> Objective:
    sense, comparison, threshold = _bounds(f, at)
    if f.has_reward_model_name():
        rm = f.reward_name
        if rm not in reward_models:
            raise UnknownNameError(f"{at}: unknown reward model {rm!r}; the model has: {', '.join(sorted(reward_models)) or '(none)'}")
    else:
        if len(reward_models) != 1:
            raise PropertyError(
                f"{at}: unnamed R is ambiguous: the model has {len(reward_models)} reward models "
                f"({', '.join(sorted(reward_models)) or 'none'}); write R{{\"name\"}}"
            )
        rm = next(iter(reward_models))
    path = f.subformula
    cls = type(path).__name__
    if cls == "TotalRewardFormula" or str(path) == "C":
        return Objective(j, text, "total_reward", sense, rm, comparison=comparison, threshold=threshold)
    if path.is_eventually_formula and not path.is_bounded_until_formula:
        target = path.subformula
        _check_labels(target, labels, at)
        return Objective(j, text, "reach_reward", sense, rm, right_text=str(target),
                         comparison=comparison, threshold=threshold)
    raise PropertyError(f"{at}: unsupported reward objective {str(path)!r}; supported: [C] and [F phi]")


def _probability(j, f, text, labels, at) -> Objective:
    sense, comparison, threshold = _bounds(f, at)
    path = f.subformula
    if path.is_bounded_until_formula:
        raise PropertyError(f"{at}: step- or time-bounded objectives are not supported")
    cls = type(path).__name__
    if path.is_eventually_formula:
        target = path.subformula
        _check_labels(target, labels, at)
        return Objective(j, text, "probability", sense, right_text=str(target),
                         comparison=comparison, threshold=threshold)
    if path.is_until_formula:
        left, right = path.left_subformula, path.right_subformula
        _check_labels(left, labels, at)
        _check_labels(right, labels, at)
        return Objective(j, text, "probability", sense, left_text=str(left), right_text=str(right),
                         comparison=comparison, threshold=threshold)
    if cls == "GloballyFormula":
        phi = path.subformula
        _check_labels(phi, labels, at)
        return Objective(j, text, "probability", sense, right_text=f"!({phi})", negated=True,
                         comparison=comparison, threshold=threshold)
    raise PropertyError(f"{at}: unsupported path formula {str(path)!r}; supported: F, U, G")


def _check_labels(formula, labels, at) -> None:
    from mopmc.properties.states import label_names

    for name in label_names(formula):
        if name not in labels:
            raise UnknownNameError(f"{at}: unknown label {name!r}; the model has: {', '.join(sorted(labels)) or '(none)'}")
