"""Parse PRISM/Storm property text (with stormpy) into :class:`Property` objects."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

from mopmc.errors import PropertyError, UnknownNameError
from mopmc.properties.display import decimal_text, display_formula, rational
from mopmc.properties.objectives import Objective, Property

_SENSE = {"MINIMIZE": "min", "MAXIMIZE": "max"}


def read_property_file(path: str | Path) -> str:
    """Read a property file; PRISM's ``//`` comments are kept (Storm's parser skips them), and a
    line that completes a property without a ``;`` gets one (:func:`separate_lines`)."""
    path = Path(path)
    if path.is_dir():
        raise PropertyError(f"{path}: a directory, not a property file")
    if not path.is_file():
        raise PropertyError(f"{path}: no such property file")
    try:
        return separate_lines(path.read_text())
    except UnicodeDecodeError as exc:
        raise PropertyError(f"{path}: not a text file (byte {exc.start} is not UTF-8); give a PRISM property file") from None
    except OSError as exc:
        raise PropertyError(f"{path}: cannot read the property file ({exc.strerror})") from None


def separate_lines(text: str) -> str:
    r"""``text`` with ``;`` after each line that ends a statement without one: PRISM's property files
    have one property a line, while Storm's parser of a string needs them separated (it read two
    lines as one formula and failed). A line inside open brackets continues the statement (a
    property written over several lines); ``//`` comments and blank lines are left as they are.

    >>> separate_lines('Pmax=? [F "a"]\nmulti(Pmax=? [F "a"],\n  R{"r"}<=1 [C])  // both\n')
    'Pmax=? [F "a"];\nmulti(Pmax=? [F "a"],\n  R{"r"}<=1 [C]);  // both\n'
    """
    out = []
    depth = 0
    for line in text.splitlines(keepends=True):
        body, nl = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        code, sep, comment = body.partition("//")
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        stripped = code.rstrip()
        if stripped and depth <= 0 and not stripped.endswith(";"):
            body = stripped + ";" + code[len(stripped):] + sep + comment
        depth = max(depth, 0)
        out.append(body + nl)
    return "".join(out)


def parse_properties(formulas, reward_models, labels, where: str = "<properties>", *,
                     directionless_ok: bool = False) -> list[Property]:
    """Turn Storm's parsed properties into typed :class:`Property` objects, in order.

    Args:
        formulas: Storm ``Property`` objects (from :func:`mopmc.io.storm.parse_formulas`).
        reward_models: names of the model's reward models (for unnamed ``R`` and unknown names).
        labels: names of the model's labels (to report unknown labels).
        where: the source, for messages.
        directionless_ok: accept ``P=? [...]`` and ``R=? [...]`` without ``min``/``max`` or a
            bound, as Storm does on Markov chains (a DTMC, or a fixed scheduler's induced chain:
            ``mopmc evaluate``), where the minimum and the maximum are equal. Such an objective is
            kept with ``sense="max"`` and ``directionless=True``. Off (MDPs), they are refused, as
            Storm refuses them on nondeterministic models.

    Texts are Storm's printed formulas with thresholds as decimals (:mod:`mopmc.properties.display`).
    """
    out = []
    seen: dict[str, int] = {}
    for i, prop in enumerate(formulas):
        f = prop.get_raw_formula()
        text = str(f)
        _check_filter(prop, f"{where}: property {i + 1} ({text})")
        try:
            name = prop.get_name()
        except Exception:
            name = None
        if name is not None and name in seen:  # (the JSON rows are told apart by name)
            raise PropertyError(f"{where}: property {i + 1} ({text}): the name {name!r} is also property "
                                f"{seen[name] + 1}'s; give each property its own name")
        if name is not None:
            seen[name] = i
        if f.is_multi_objective_formula:
            subs = list(f.subformulas)
            if not subs:
                raise PropertyError(f"{where}: property {i + 1}: multi() needs at least one objective")
            objs = tuple(_objective(j, s, reward_models, labels, where, i, directionless_ok) for j, s in enumerate(subs))
            if any(o.kind == "long_run" for o in objs):
                lra = next(o for o in objs if o.kind == "long_run")
                raise PropertyError(f"{where}: property {i + 1} ({text}): {lra.text}: long-run averages are answered "
                                    "as properties of their own, not inside multi(...)")
            out.append(Property(i, _multi_text(text, [str(s) for s in subs], objs), name, objs, True))
        else:
            obj = _objective(0, f, reward_models, labels, where, i, directionless_ok, universal=True)
            out.append(Property(i, obj.text, name, (obj,), False))
    return out


def _multi_text(text: str, raw: list[str], objs) -> str:
    """Storm's printed ``multi(...)`` with each objective's printed form replaced by its displayed
    one (thresholds as decimals), left to right."""
    out, pos = [], 0
    for old, o in zip(raw, objs):
        k = text.find(old, pos)
        if k < 0:
            return text
        out.append(text[pos:k] + o.text)
        pos = k + len(old)
    return "".join(out) + text[pos:]


def _objective(j, f, reward_models, labels, where, i, directionless_ok=False, universal=False) -> Objective:
    raw = str(f)
    at = f"{where}: property {i + 1} ({raw})"
    long_run = type(f).__name__ == "LongRunAverageOperatorFormula"
    if not (f.is_reward_operator_formula or f.is_probability_operator_formula or long_run):
        raise PropertyError(f"{at}: unsupported objective; use P[...], R[...] (C, F, U, LRA) or LRA[...]")
    bounds = _bounds(f, at, directionless_ok, universal)
    text = re.sub(r"\[true U(?=[<>\[])", "[F", display_formula(raw, bounds[3]))  # Storm prints F<=k as true U<=k
    if text != raw:
        at = f"{where}: property {i + 1} ({text})"
    if f.is_reward_operator_formula:
        return _reward(j, f, text, reward_models, labels, at, bounds)
    if long_run:  # LRA [phi]: the long-run fraction of steps spent in phi
        phi = f.subformula
        _check_labels(phi, labels, at)
        sense, comparison, threshold, _, directionless = bounds
        return Objective(j, text, "long_run", sense, right_text=str(phi), comparison=comparison,
                         threshold=threshold, directionless=directionless)
    return _probability(j, f, text, labels, at, bounds)


def _bounds(f, at, directionless_ok=False, universal=False):
    """``(sense, comparison, threshold as float, threshold as Fraction, directionless)``.

    A bound without ``min``/``max`` is asked of every scheduler in a property of its own
    (``universal``: ``P>=0.4 [F goal]`` holds when the minimum is >= 0.4, as in PRISM and Storm),
    and of some scheduler inside ``multi(...)`` (``>=`` is then to be maximised)."""
    sense = comparison = threshold = exact = None
    directionless = False
    if f.has_optimality_type:
        sense = _SENSE.get(f.optimality_type.name)
    if f.has_bound:
        op = f.comparison_type.name
        comparison = {"LESS": "<", "LEQ": "<=", "GREATER": ">", "GEQ": ">="}[op]
        # Storm's ``threshold`` evaluates ``1/3`` with integer division (0), though its own checks
        # use 1/3: the printed expression, evaluated exactly, first
        try:
            printed = str(f.threshold_expr)
        except Exception:  # noqa: BLE001 - no printable expression: Storm's value below
            printed = None
        exact = None if printed is None else rational(printed)
        if exact is None and printed is not None and _divides_by_zero(printed):
            # (Storm's own evaluation of an integer division by zero kills the process: never reach it)
            raise PropertyError(f"{at}: threshold {printed} divides by zero")
        if exact is None:
            try:
                exact = Fraction(str(f.threshold))
            except Exception as exc:
                raise PropertyError(f"{at}: threshold does not evaluate to a number ({exc})") from None
        try:
            threshold = float(exact)
        except OverflowError:
            raise PropertyError(f"{_short(at)}: threshold {_short(printed or str(exact))} is beyond the range "
                                "of a double") from None
        if (f.is_probability_operator_formula or type(f).__name__ == "LongRunAverageOperatorFormula") \
                and not 0 <= exact <= 1:
            raise PropertyError(f"{at}: probability threshold {decimal_text(exact)} is outside [0, 1]")
        if sense is None:
            sense = "min" if comparison.startswith("<") != universal else "max"
    if sense is None:
        if not directionless_ok:
            raise PropertyError(f"{at}: give a direction (min=?, max=?) or a bound (<=, >=); "
                                "without one (P=?, R=?) only Markov chains (DTMCs) are answered, "
                                "where the minimum and the maximum agree")
        sense, directionless = "max", True
    return sense, comparison, threshold, exact, directionless


def _reward(j, f, text, reward_models, labels, at, bounds) -> Objective:
    sense, comparison, threshold, _, directionless = bounds
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
        return Objective(j, text, "total_reward", sense, rm, comparison=comparison, threshold=threshold,
                         directionless=directionless)
    if cls == "CumulativeRewardFormula":
        raw = str(path)
        if not raw.startswith("C"):
            raise PropertyError(f"{at}: unsupported reward objective {raw!r}; supported: [C], [C<=k], [F phi] and [LRA]")
        lo, hi = _step_window(raw[1:], at)
        if lo != 0 or hi is None:
            raise PropertyError(f"{at}: {raw}: a cumulative reward takes an upper step bound (C<=k or C<k)")
        # C<=k: the k choices taken at steps 0..k-1 (the window of F<=k ends at step k itself)
        return Objective(j, text, "total_reward", sense, rm, comparison=comparison, threshold=threshold,
                         directionless=directionless, steps=(0, hi - 1))
    if path.is_eventually_formula and not path.is_bounded_until_formula:
        target = path.subformula
        _check_labels(target, labels, at)
        return Objective(j, text, "reach_reward", sense, rm, right_text=str(target),
                         comparison=comparison, threshold=threshold, directionless=directionless)
    if cls == "LongRunAverageRewardFormula":
        return Objective(j, text, "long_run", sense, rm, comparison=comparison, threshold=threshold,
                         directionless=directionless)
    if cls == "InstantaneousRewardFormula":
        raise PropertyError(f"{at}: instantaneous rewards (I=k) are not supported; supported: [C], [C<=k], [F phi] and [LRA]")
    if path.is_bounded_until_formula:
        raise PropertyError(f"{at}: a step-bounded reachability reward is not supported; supported: [C], [C<=k], [F phi] and [LRA]")
    raise PropertyError(f"{at}: unsupported reward objective {str(path)!r}; supported: [C], [C<=k], [F phi] and [LRA]")


def _probability(j, f, text, labels, at, bounds) -> Objective:
    sense, comparison, threshold, _, directionless = bounds
    path = f.subformula
    if path.is_bounded_until_formula:
        left, right = path.left_subformula, path.right_subformula
        raw, lt, rt = str(path), str(left), str(right)
        bound = _bound_text(raw, lt, rt)
        if bound is None or path.is_multi_dimensional:
            raise PropertyError(f"{at}: unsupported bounded path formula {raw!r}; supported: step bounds "
                                "F<=k, F<k, F>=k, F>k, F[l,u] and the same on U")
        steps = _step_window(bound, at)
        _check_labels(left, labels, at)
        _check_labels(right, labels, at)
        return Objective(j, text, "probability", sense, left_text=None if lt == "true" else lt, right_text=rt,
                         comparison=comparison, threshold=threshold, directionless=directionless, steps=steps)
    cls = type(path).__name__
    if path.is_eventually_formula:
        target = path.subformula
        _check_labels(target, labels, at)
        return Objective(j, text, "probability", sense, right_text=str(target),
                         comparison=comparison, threshold=threshold, directionless=directionless)
    if path.is_until_formula:
        left, right = path.left_subformula, path.right_subformula
        _check_labels(left, labels, at)
        _check_labels(right, labels, at)
        return Objective(j, text, "probability", sense, left_text=str(left), right_text=str(right),
                         comparison=comparison, threshold=threshold, directionless=directionless)
    if cls == "GloballyFormula":
        phi = path.subformula
        _check_labels(phi, labels, at)
        return Objective(j, text, "probability", sense, right_text=f"!({phi})", negated=True,
                         comparison=comparison, threshold=threshold, directionless=directionless)
    raw = str(path)
    if raw.startswith("X ") and not path.is_until_formula:  # stormpy exposes no NextFormula class
        # X phi is phi at step 1 exactly: true U[1,1] phi, answered on the step-counting product
        phi = raw[2:].strip()
        _check_labels(phi, labels, at)
        if _temporal(phi):
            raise PropertyError(f"{at}: {phi} is not a state formula: nested path operators (X X, X F, ...) "
                                "are not supported; targets are labels and expressions")
        return Objective(j, text, "probability", sense, right_text=phi, comparison=comparison,
                         threshold=threshold, directionless=directionless, steps=(1, 1))
    raise PropertyError(f"{at}: unsupported path formula {raw!r}; supported: F, U, G, X")


def _temporal(state_text: str) -> bool:
    """Whether Storm's printed formula has a path operator outside quotes (``X "a"``, ``F "a"``,
    ``"a" U "b"``): label names may contain anything, so they are cut first."""
    bare = re.sub(r'"[^"]*"', '""', state_text)
    return re.search(r"(^|[\s(!&|])([XFG])\s|\sU[\s<>\[]", bare) is not None


def _short(text: str) -> str:
    """``text`` with digit runs of 30 or more cut (Storm prints 1e400 as 401 digits)."""
    return re.sub(r"\d{30,}", lambda m: f"{m.group()[:4]}...({len(m.group())} digits)", text)


def _divides_by_zero(printed: str) -> bool:
    """Whether Storm's printed arithmetic divides by an expression that evaluates to 0 (``(1 / 0)``,
    ``1/(2-2)``)."""
    try:
        tree = ast.parse(printed.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and rational(ast.unparse(node.right)) == 0
               for node in ast.walk(tree))


_FILTER = re.compile(r"Obtain the (\w+) of the '(.*)'-states with values described by")
_ONE_STATE_FILTERS = {"values", "maximum", "minimum", "average", "sum"}


def _check_filter(prop, at: str) -> None:
    """``filter(op, P, states)`` is answered when it asks about the initial state alone (the default
    ``filter(values, P, "init")``, or max/min/avg/sum over "init": the model has one initial state)."""
    m = _FILTER.search(str(prop))
    if m is None:
        return
    op, states = m.group(1), m.group(2)
    if states != '"init"' or op not in _ONE_STATE_FILTERS:
        raise PropertyError(f"{at}: filter({op} over the states {states}) is not supported; mopmc answers for "
                            'the initial state (drop the filter, or filter over "init")')


def _bound_text(raw: str, left: str, right: str) -> str | None:
    """The bound of Storm's printed ``LEFT U<bound> RIGHT`` (operands may be printed in parentheses:
    ``(!"bad") U<=3 ("goal" | "bad")``), or ``None``."""
    for lt in (left, f"({left})"):
        for rt in (right, f"({right})"):
            if raw.startswith(lt + " U") and raw.endswith(" " + rt) and len(raw) > len(lt) + len(rt) + 3:
                return raw[len(lt) + 2:len(raw) - len(rt) - 1]
    return None


def _step_window(bound: str, at) -> tuple[int, int | None]:
    """The step window ``(lo, hi)`` of Storm's printed bound (``<=5``, ``<(3 + 1)``, ``>=2``,
    ``[2, 4]``); ``hi`` is ``None`` without an upper bound and may be below ``lo`` (an empty window)."""
    import re

    bound = bound.strip()
    if bound.startswith("rew") or bound.startswith("{") or bound.startswith("time"):
        raise PropertyError(f"{at}: reward- and time-bounded path formulas are not supported; use step bounds (F<=k)")

    def steps(expr: str) -> int:
        value = rational(expr)
        if value is None or value.denominator != 1 or value < 0:
            raise PropertyError(f"{at}: step bound {expr.strip()} is not a non-negative integer")
        return int(value)

    interval = re.fullmatch(r"\[(.+),(.+)\]", bound)
    if interval:
        lo, hi = steps(interval.group(1)), steps(interval.group(2))
        if lo > hi:
            raise PropertyError(f"{at}: the step interval {bound} is empty (its lower end is above its upper end)")
        return lo, hi
    op = re.match(r"(<=|<|>=|>)", bound)
    if op is None:
        raise PropertyError(f"{at}: unsupported step bound {bound!r}; use <=k, <k, >=k, >k or [l,u]")
    k = steps(bound[op.end():])
    if op.group(1) == "<" and k == 0:
        raise PropertyError(f"{at}: the step bound <0 admits no step; use <=0 for the initial state alone")
    return {"<=": (0, k), "<": (0, k - 1), ">=": (k, None), ">": (k + 1, None)}[op.group(1)]


_NOT_STATE = {"EventuallyFormula", "GloballyFormula", "UntilFormula", "BoundedUntilFormula", "NextFormula",
              "ProbabilityOperatorFormula", "RewardOperatorFormula", "LongRunAverageOperatorFormula",
              "TimeOperatorFormula", "BinaryPathFormula", "UnaryPathFormula"}


def _check_labels(formula, labels, at) -> None:
    from mopmc.properties.states import label_names

    kind = type(formula).__name__
    if kind in _NOT_STATE or "[" in str(formula):  # (a P or R operator inside; labels and expressions have no [)
        raise PropertyError(f"{at}: {formula} is not a state formula: nested P/R operators and LTL path formulas "
                            "(F G, G F, ...) are not supported; targets are labels and expressions")

    for name in label_names(formula):
        if name not in labels:
            raise UnknownNameError(f"{at}: unknown label {name!r}; the model has: {', '.join(sorted(labels)) or '(none)'}")
