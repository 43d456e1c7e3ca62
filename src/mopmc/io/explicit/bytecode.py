"""Storm expressions compiled to a small postfix bytecode that the compiled explorer evaluates.

An expression becomes rows ``(op, arg)`` of an int64 array: ``CONST k`` pushes ``consts[k]``,
``VAR j`` pushes variable ``j`` of the current state; operators pop their operands and push the
result; ``&``, ``|`` and ``c ? a : b`` jump (to absolute rows) past what their left side or
condition makes unnecessary, as large guards and formulas are mostly conjunctions. Every value is a float64 (integers are exact up to 2**53, Booleans are 0/1), which is how
Storm's double-valued builder evaluates them too: rational literals become the nearest
double, as in Storm's builder, so probabilities come out as Storm's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

CONST, VAR = 0, 1
NOT, NEG, FLOOR, CEIL = 2, 3, 4, 5
PLUS, MINUS, TIMES, DIVIDE, MIN, MAX, POWER, MODULO = 10, 11, 12, 13, 14, 15, 16, 17
XOR, IFF, IMPLIES = 22, 23, 24
EQ, NEQ, LT, LE, GT, GE = 30, 31, 32, 33, 34, 35
# jumps (arg: the row to go on at): AND and OR stop once their left side decides, ITE evaluates one branch
AND_THEN, OR_ELSE, IF_NOT, GOTO = 50, 51, 52, 53

_UNARY = {"NOT": NOT, "MINUS": NEG, "FLOOR": FLOOR, "CEIL": CEIL}
_BINARY = {
    "PLUS": PLUS, "MINUS": MINUS, "TIMES": TIMES, "DIVIDE": DIVIDE, "MIN": MIN, "MAX": MAX,
    "POWER": POWER, "MODULO": MODULO, "XOR": XOR, "IFF": IFF,
    "IMPLIES": IMPLIES, "EQUAL": EQ, "NOT_EQUAL": NEQ, "LESS": LT, "LESS_OR_EQUAL": LE,
    "GREATER": GT, "GREATER_OR_EQUAL": GE,
}


class NotCompilable(Exception):
    """The expression uses something the bytecode does not express (the caller falls back to Storm)."""


@dataclass
class Code:
    """All compiled expressions of one program: expression ``e`` is ``rows[start[e]:start[e+1]]``."""

    variables: dict[str, int]
    rows: list[tuple[int, int]] = field(default_factory=list)
    consts: list[float] = field(default_factory=list)
    start: list[int] = field(default_factory=lambda: [0])
    depth: int = 1
    _const_index: dict[float, int] = field(default_factory=dict)

    def add(self, expr) -> int:
        """Compile a Storm expression; return its id."""
        depth = self._emit(expr)
        self.depth = max(self.depth, depth)
        self.start.append(len(self.rows))
        return len(self.start) - 2

    def add_conjunction(self, exprs) -> int:
        """Compile the conjunction of Storm expressions (``true`` when empty); return its id."""
        if not exprs:
            return self.add_constant(1.0)
        depth = self._emit(exprs[0])
        jumps = []
        for e in exprs[1:]:
            jumps.append(len(self.rows))
            self.rows.append((AND_THEN, -1))
            depth = max(depth, self._emit(e))
        for j in jumps:
            self.rows[j] = (AND_THEN, len(self.rows))
        self.depth = max(self.depth, depth)
        self.start.append(len(self.rows))
        return len(self.start) - 2

    def add_constant(self, value: float) -> int:
        self._push_const(float(value))
        self.start.append(len(self.rows))
        return len(self.start) - 2

    def add_guarded_sum(self, terms) -> int:
        """Compile the sum over ``(guard, value)`` Storm expressions of ``guard ? value : 0``."""
        depth = 0
        for k, (guard, value) in enumerate(terms):
            base = 1 if k else 0
            d0 = self._emit(guard)
            skip_value = len(self.rows)
            self.rows.append((IF_NOT, -1))
            d1 = self._emit(value)
            skip_zero = len(self.rows)
            self.rows.append((GOTO, -1))
            self.rows[skip_value] = (IF_NOT, len(self.rows))
            self._push_const(0.0)
            self.rows[skip_zero] = (GOTO, len(self.rows))
            depth = max(depth, base + max(d0, d1, 1))
            if k:
                self.rows.append((PLUS, 0))
        if not terms:
            self._push_const(0.0)
        self.depth = max(self.depth, depth, 1)
        self.start.append(len(self.rows))
        return len(self.start) - 2

    def arrays(self):
        """``(rows (K, 2) int64, consts float64, start int64)`` for the compiled kernels."""
        rows = np.array(self.rows, dtype=np.int64).reshape(-1, 2)
        return rows, np.array(self.consts or [0.0], dtype=np.float64), np.array(self.start, dtype=np.int64)

    def _push_const(self, value: float) -> None:
        k = self._const_index.get(value)
        if k is None:
            k = self._const_index[value] = len(self.consts)
            self.consts.append(value)
        self.rows.append((CONST, k))

    def _emit(self, e) -> int:
        """Append the postfix code of ``e``; return the stack depth it needs."""
        if e.is_literal():
            if e.has_boolean_type():
                value = 1.0 if e.evaluate_as_bool() else 0.0
            elif e.has_integer_type():
                value = float(e.evaluate_as_int())
            else:
                value = rational_literal(e)
            self._push_const(value)
            return 1
        if e.is_variable():
            name = e.get_identifier()
            if name not in self.variables:
                raise NotCompilable(f"unknown identifier {name!r}")
            self.rows.append((VAR, self.variables[name]))
            return 1
        if not e.is_function_application:
            raise NotCompilable(f"expression {e}")
        op = e.operator.name
        arity = e.arity
        if arity == 1 and op in _UNARY:
            depth = self._emit(e.get_operand(0))
            self.rows.append((_UNARY[op], 0))
            return depth
        if arity == 2 and op in ("AND", "OR"):
            d0 = self._emit(e.get_operand(0))
            jump = len(self.rows)
            self.rows.append((AND_THEN if op == "AND" else OR_ELSE, -1))  # decided: keep the left value
            d1 = self._emit(e.get_operand(1))
            self.rows[jump] = (self.rows[jump][0], len(self.rows))
            return max(d0, d1)
        if arity == 3 and op == "ITE":
            d0 = self._emit(e.get_operand(0))
            skip_then = len(self.rows)
            self.rows.append((IF_NOT, -1))
            d1 = self._emit(e.get_operand(1))
            skip_else = len(self.rows)
            self.rows.append((GOTO, -1))
            self.rows[skip_then] = (IF_NOT, len(self.rows))
            d2 = self._emit(e.get_operand(2))
            self.rows[skip_else] = (GOTO, len(self.rows))
            return max(d0, d1, d2)
        if arity == 2 and op in _BINARY:
            d0 = self._emit(e.get_operand(0))
            d1 = self._emit(e.get_operand(1))
            self.rows.append((_BINARY[op], 0))
            return max(d0, 1 + d1)
        raise NotCompilable(f"operator {op} with {arity} operands in {e}")


def rational_literal(e) -> float:
    """A rational literal as the nearest double (Storm's ``evaluate_as_double`` truncates:
    1/10 -> 0.09999999999999999, where Storm's builder has 0.1)."""
    return float(Fraction(str(e)))


def conjuncts(e) -> list:
    """The top-level conjuncts of a Storm expression."""
    if e.is_function_application and e.operator.name == "AND" and e.arity == 2:
        return conjuncts(e.get_operand(0)) + conjuncts(e.get_operand(1))
    return [e]


_FLIPPED = {"LESS": "GREATER", "LESS_OR_EQUAL": "GREATER_OR_EQUAL", "GREATER": "LESS",
            "GREATER_OR_EQUAL": "LESS_OR_EQUAL", "EQUAL": "EQUAL", "IFF": "IFF"}
_BIG = 1 << 62


def range_test(e, variables: dict[str, int]):
    """``(variable index, least, greatest)`` when ``e`` holds exactly for the variable's values in
    ``[least, greatest]``: a Boolean variable or its negation, or ``var OP literal`` (either way
    round) with an integer or Boolean literal and ``OP`` one of ``= < <= > >=``; else ``None``.
    Such conjuncts are tested on the packed state before any bytecode runs."""
    if e.is_variable() and e.has_boolean_type() and e.get_identifier() in variables:
        return variables[e.get_identifier()], 1, 1
    if not e.is_function_application:
        return None
    op = e.operator.name
    if op == "NOT" and e.arity == 1:
        inner = e.get_operand(0)
        if inner.is_variable() and inner.has_boolean_type() and inner.get_identifier() in variables:
            return variables[inner.get_identifier()], 0, 0
        return None
    if op not in _FLIPPED or e.arity != 2:
        return None
    a, b = e.get_operand(0), e.get_operand(1)
    if b.is_variable() and a.is_literal():
        a, b, op = b, a, _FLIPPED[op]
    if not (a.is_variable() and b.is_literal() and a.get_identifier() in variables):
        return None
    if b.has_boolean_type():
        if op not in ("EQUAL", "IFF"):
            return None
        value = int(b.evaluate_as_bool())
    elif b.has_integer_type():
        value = int(b.evaluate_as_int())
    else:
        return None
    j = variables[a.get_identifier()]
    return {
        "EQUAL": (j, value, value), "IFF": (j, value, value), "LESS": (j, -_BIG, value - 1),
        "LESS_OR_EQUAL": (j, -_BIG, value), "GREATER": (j, value + 1, _BIG), "GREATER_OR_EQUAL": (j, value, _BIG),
    }[op]


def implied_ranges(e, variables: dict[str, int]) -> dict[int, tuple[int, int]]:
    """Range tests that every state satisfying ``e`` passes (necessary, not sufficient): those of
    its range-test conjuncts, intersected per variable; for a disjunction the variables every
    disjunct tests, each with the hull of their ranges. ``(task & m=1) | (task & n=1)`` with
    ``task = status=7 & ...`` gives ``status`` in ``[7, 7]``: tested on the packed state, it spares
    the bytecode wherever it fails."""
    test = range_test(e, variables)
    if test is not None:
        return {test[0]: (test[1], test[2])}
    if not e.is_function_application or e.arity != 2 or e.operator.name not in ("AND", "OR"):
        return {}
    a, b = implied_ranges(e.get_operand(0), variables), implied_ranges(e.get_operand(1), variables)
    if e.operator.name == "AND":
        out = dict(a)
        for j, (lo, hi) in b.items():
            out[j] = (max(lo, out[j][0]), min(hi, out[j][1])) if j in out else (lo, hi)
        return out
    return {j: (min(a[j][0], b[j][0]), max(a[j][1], b[j][1])) for j in a.keys() & b.keys()}


def counter_update(e, variables: dict[str, int]):
    """``(variable index, delta)`` when ``e`` is ``var``, ``var + k``, ``k + var`` or ``var - k``
    for an integer literal ``k``: the explorer computes it without bytecode; else ``None``."""
    if e.is_variable() and e.has_integer_type() and e.get_identifier() in variables:
        return variables[e.get_identifier()], 0
    if not (e.is_function_application and e.arity == 2 and e.operator.name in ("PLUS", "MINUS")):
        return None
    a, b = e.get_operand(0), e.get_operand(1)
    if e.operator.name == "PLUS" and a.is_literal() and b.is_variable():
        a, b = b, a
    if not (a.is_variable() and a.has_integer_type() and a.get_identifier() in variables
            and b.is_literal() and b.has_integer_type()):
        return None
    k = int(b.evaluate_as_int())
    return variables[a.get_identifier()], (k if e.operator.name == "PLUS" else -k)
