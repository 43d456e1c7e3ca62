"""Thresholds shown as the decimals the user wrote (mopmc.properties.display), checked against the
exact rationals Storm parses them into."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mopmc.io import storm
from mopmc.properties.display import decimal_text, display_formula, rational
from mopmc.properties.parse import parse_properties


@pytest.mark.parametrize("q, text", [
    (Fraction(7, 200), "0.035"), (Fraction(169, 1000), "0.169"), (Fraction(122449, 100000), "1.22449"),
    (Fraction(-1, 2), "-0.5"), (Fraction(12), "12"), (Fraction(0), "0"), (Fraction(1, 3), "1/3"),
    (Fraction(-2, 7), "-2/7"), (Fraction(1, 10**30), "1e-30"), (Fraction(3, 2**60), None),
])
def test_decimal_text_reads_back_exactly(q, text):
    shown = decimal_text(q)
    if text is not None:
        assert shown == text
    assert (Fraction(shown) if "/" not in shown else Fraction(*map(int, shown.split("/")))) == q


@pytest.mark.parametrize("written, shown, value", [
    ('P>=0.5 [F "a"]', 'P>=0.5 [F "a"]', 0.5),
    ('R{"c"}<=0.035 [C]', 'R{"c"}<=0.035 [C]', 0.035),
    ('R{"c"}<=-0.5 [C]', 'R{"c"}<=-0.5 [C]', -0.5),
    ('P<1e-3 [F "a"]', 'P<0.001 [F "a"]', 0.001),
    ('P>=1/3 [F "a"]', 'P>=1/3 [F "a"]', 1 / 3),
    ('P>=0.5 [F "a" & "b"]', 'P>=0.5 [F ("a" & "b")]', 0.5),
    ('multi(R{"c"}<=0.174 [C], R{"d"}<=0.04 [C], P>=0.993141 [G !"a"])',
     'multi(R{"c"}<=0.174 [C], R{"d"}<=0.04 [C], P>=0.993141 [G !("a")])', None),
])
def test_parsed_texts_show_decimals(written, shown, value):
    formulas = storm.parse_formulas(written, None, "<test>")
    raw = str(formulas[0].get_raw_formula())
    (p,) = parse_properties(formulas, {"c", "d"}, {"a", "b"})
    if p.text != shown:  # Storm's printing of the path formula may differ by parentheses only
        assert p.text.replace("(", "").replace(")", "") == shown.replace("(", "").replace(")", "")
    assert "/" not in p.text or "1/3" in p.text
    if value is not None:
        assert p.objectives[0].threshold == value
    # the shown text parses back to the same formula in Storm
    again = storm.parse_formulas(p.text, None, "<test>")
    assert str(again[0].get_raw_formula()) == raw


def test_rational_of_storm_expressions():
    assert rational("7/200") == Fraction(7, 200)
    assert rational("-(1/2)") == Fraction(-1, 2)
    assert rational("(1 / 3)") == Fraction(1, 3)
    assert rational("0.1") == Fraction(1, 10)
    assert rational("N") is None and rational("1/0") is None and rational("2**3") is None


def test_display_formula_leaves_state_formulas_alone():
    assert display_formula('P>=1/2 [F (s <= 1/2)]', Fraction(1, 2)) == 'P>=0.5 [F (s <= 1/2)]'
    assert display_formula('Pmax=? [F "a"]', None) == 'Pmax=? [F "a"]'
