"""How properties are shown: thresholds as the decimals the user wrote, not Storm's rationals.

Storm keeps a threshold as an exact rational and prints it so (``R{"c"}<=7/200 [C]`` for
``<=0.035``). Every property text mopmc prints (tables, JSON ``property`` and ``formula``, warnings,
exported schedulers) is the :attr:`~mopmc.properties.Property.text` that
:func:`mopmc.properties.parse.parse_properties` builds with :func:`display_formula`: a threshold
whose denominator has no prime factors but 2 and 5 is written as a decimal (``0.035``); any other
(``1/3``) stays an exact fraction. The numeric threshold is also in the JSON (``threshold``).

>>> from fractions import Fraction
>>> decimal_text(Fraction(7, 200)), decimal_text(Fraction(122449, 100000)), decimal_text(Fraction(-1, 2))
('0.035', '1.22449', '-0.5')
>>> decimal_text(Fraction(1, 3)), decimal_text(Fraction(12)), decimal_text(Fraction(1, 10**12))
('1/3', '12', '1e-12')
>>> display_formula('R{"ttc_cost"}<=7/200 [C]', Fraction(7, 200))
'R{"ttc_cost"}<=0.035 [C]'
>>> display_formula('P>=(1 / 3) [F "six"]', Fraction(1, 3))
'P>=1/3 [F "six"]'
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction


def decimal_text(q: Fraction) -> str:
    """``q`` as a decimal when it terminates (denominator ``2^a 5^b``: the shortest form that reads
    back as exactly ``q``), else as the exact fraction ``n/d``."""
    q = Fraction(q)
    if q.denominator == 1:
        return str(q.numerator)
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return f"{q.numerator}/{q.denominator}"
    short = repr(float(q))
    try:
        if Fraction(short) == q:
            return short
    except (ValueError, OverflowError):
        pass
    digits = 0
    while (q * 10**digits).denominator != 1:
        digits += 1
    n = abs(q.numerator) * 10**digits // q.denominator
    whole, frac = divmod(n, 10**digits)
    return f"{'-' if q < 0 else ''}{whole}.{frac:0{digits}d}"


def rational(text: str) -> Fraction | None:
    """The exact value of Storm's printed threshold expression (``7/200``, ``-(1/2)``, ``(1 / 3)``,
    ``0.5``), or ``None`` when it is not plain arithmetic on numbers (e.g. it names a constant).

    >>> rational("-(1/2)"), rational("(1 / 3)"), rational("N/2")
    (Fraction(-1, 2), Fraction(1, 3), None)
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None

    def ev(node) -> Fraction:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Fraction(repr(node.value)) if isinstance(node.value, float) else Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            return a / b  # ZeroDivisionError: not a number
        raise ValueError("not plain arithmetic")

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


#: an operator formula with a bound as Storm prints it: ``P>=1/2 [``, ``R{"r"}<=7/200 [``
_BOUND = re.compile(r'^(P|R(?:\{"[^"]*"\})?)(min|max)?(<=|>=|<|>)(.+?) \[')


def display_formula(text: str, threshold: Fraction | None) -> str:
    """Storm's printed operator formula with its threshold written by :func:`decimal_text`
    (unchanged without a threshold or when the printed form is not recognised)."""
    if threshold is None:
        return text
    m = _BOUND.match(text)
    if not m:
        return text
    return text[: m.start(4)] + decimal_text(threshold) + text[m.end(4):]
