"""Malformed thresholds, filters, property files and property constants: one line, exit 2 (found by
fuzzing the command line; a division by zero used to kill the process inside Storm)."""

from __future__ import annotations

import pytest

from support import assert_one_line_error, run_mopmc

MODEL = "example:tradeoff"


@pytest.mark.parametrize("prop, fragment", [
    ('R{"time"}<=1/0 [C]', "divides by zero"),
    ('multi(R{"time"}<=0/0 [C], R{"energy"}<=4 [C])', "divides by zero"),
    ('R{"time"}<=1/(2-2) [C]', "divides by zero"),
    ('R{"time"}<=1e400 [C]', "beyond the range of a double"),
    ('Pmax>=1.5 [F "finished"]', "outside [0, 1]"),
    ('multi(P<=-0.1 [F "finished"], R{"time"}<=4 [C])', "outside [0, 1]"),
    ('filter(max, R{"time"}min=? [C], true)', "filter(maximum over the states true) is not supported"),
    ('filter(avg, R{"time"}min=? [C], !"init")', "is not supported"),
])
def test_bad_property_is_one_line(prop, fragment):
    res = run_mopmc("check", MODEL, "--prop", prop)
    assert_one_line_error(res, fragment)
    assert "1000000000000000000000000000000" not in res.stderr  # (1e400 is not printed digit by digit)


def test_threshold_constant_dividing_by_zero(tmp_path):
    props = tmp_path / "p.props"
    props.write_text('const double T = 1/0;\nR{"time"}<=T [C]\n')
    assert_one_line_error(run_mopmc("check", MODEL, "--props", str(props)), "divides by zero")
    assert_one_line_error(run_mopmc("convex", MODEL, "--prop", 'multi(R{"time"}<=1/0 [C], R{"energy"}<=4 [C])'),
                          "divides by zero")


def test_filter_over_the_initial_state_is_answered():
    plain = run_mopmc("check", MODEL, "--prop", 'R{"time"}min=? [C]', "--json")
    filtered = run_mopmc("check", MODEL, "--prop", 'filter(max, R{"time"}min=? [C], "init")', "--json")
    assert plain.code == filtered.code == 0, filtered.stderr
    assert filtered.json()[0]["value"] == plain.json()[0]["value"]


def test_unreadable_property_files(tmp_path):
    binary = tmp_path / "b.props"
    binary.write_bytes(b"\xff\xfe\x00P=?")
    assert_one_line_error(run_mopmc("check", MODEL, "--props", str(binary)), "not a text file")
    assert_one_line_error(run_mopmc("check", MODEL, "--props", str(tmp_path)), "a directory, not a property file")


@pytest.mark.parametrize("decl, value, fragment", [
    ("const double T;", "abc", "(double) takes a number"),
    ("const int T;", "0.5", "(int) takes an integer"),
    ("const bool T;", "1", "(bool) takes true or false"),
])
def test_property_constant_values_are_checked(tmp_path, decl, value, fragment):
    props = tmp_path / "p.props"
    use = '"finished"' if "bool" in decl else ""
    props.write_text(f'{decl}\n' + (f'Pmax=? [F T & {use}]' if use else 'R{"time"}<=T [C]') + "\n")
    res = run_mopmc("check", MODEL, "--props", str(props), "--const", f"T={value}")
    assert_one_line_error(res, f"--const T={value}", fragment)


def test_property_constant_with_a_good_value(tmp_path):
    props = tmp_path / "p.props"
    props.write_text('const int T;\nR{"time"}<=T [C]\n')
    res = run_mopmc("check", MODEL, "--props", str(props), "--const", "T=3", "--json")
    assert res.code == 0, res.stderr
    row = res.json()[0]  # R<=3 alone asks every scheduler: the maximum, 5.37, misses it
    assert row["satisfied"] is False and row["value"] == pytest.approx(5.37037037, abs=1e-6)


def test_duplicate_property_names_are_refused(tmp_path):
    props = tmp_path / "p.props"
    props.write_text('"a": R{"time"}min=? [C];\n"a": R{"energy"}min=? [C];\n')
    assert_one_line_error(run_mopmc("check", MODEL, "--props", str(props)), "the name 'a' is also property 1's")
    props.write_text('"a": R{"time"}min=? [C];\n"b": R{"energy"}min=? [C];\nR{"energy"}max=? [C]\n')
    res = run_mopmc("check", MODEL, "--props", str(props), "--json")
    assert res.code == 0 and [r["name"] for r in res.json()] == ["a", "b", "3"], res.stderr
