"""``mopmc check`` after the new-user walkthrough: DTMC properties without a direction, infinite
values as results, JSON on stdout also on errors, repeated ``--prop``, thresholds as decimals,
Pareto points in the table, the precision's wording, property-parse messages and example names.
Every value is checked against Storm (stormpy) on the same model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.io.load import load
from mopmc.io.storm_check import storm_values

# a DTMC: from s0 half to an absorbing state paying "pos" forever, half to the goal
CHAIN = """dtmc
module m
  s : [0..3] init 0;
  [] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [] s=1 -> (s'=1);
  [] s=2 -> (s'=3);
  [] s=3 -> (s'=3);
endmodule
rewards "pos"
  s=1 : 1;
  s=0 : 2;
endrewards
rewards "fin"
  s=0 : 2;
  s=2 : 1;
endrewards
label "goal" = s=3;
"""


def _storm_on_prism(path, props: list[str]) -> list[float]:
    """Storm's values at the initial state, on the PRISM program itself (so a DTMC stays a DTMC:
    :func:`storm_values` goes through UMB, which Storm reads as an MDP)."""
    import stormpy

    from mopmc.io.load import resolve_path

    program = stormpy.parse_prism_program(str(resolve_path(path)))
    formulas = stormpy.parse_properties("; ".join(props), program)
    model = stormpy.build_model(program, formulas)
    assert model.model_type.name == "DTMC"
    init = model.initial_states[0]
    return [float(stormpy.model_checking(model, f, only_initial_states=True).get_value(init)) for f in formulas]


def _error_line(res) -> str:
    (line,) = res.stderr_lines
    assert line.startswith("error: ")
    return line[len("error: "):]


def _values(res) -> list:
    assert res.code == 0, res.stderr
    return [r["value"] for r in res.json()]


# ---------------------------------------------------------------- M3: P=? and R=? on a DTMC
def test_dtmc_properties_without_direction_equal_storm():
    props = ['P=? [F "six"]', 'R{"flips"}=? [F "done"]', 'Pmin=? [F "six"]', 'Pmax=? [F "six"]']
    res = run_mopmc("check", "example:dice", *[a for p in props for a in ("--prop", p)], "--json")
    ours = _values(res)
    storm = _storm_on_prism("example:dice", props)
    np.testing.assert_allclose(ours, storm, rtol=1e-6)
    np.testing.assert_allclose(ours, [1 / 6, 11 / 3, 1 / 6, 1 / 6], rtol=1e-12)  # the exact values
    assert [r["property"] for r in res.json()] == props


def test_dtmc_directionless_infinite_and_finite_equal_storm(tmp_path):
    model = tmp_path / "chain.pm"
    model.write_text(CHAIN)
    props = ['R{"pos"}=? [C]', 'R{"fin"}=? [F "goal"]', 'R{"fin"}=? [C]', 'P=? [F "goal"]']
    res = run_mopmc("check", model, "--props", _file(tmp_path, props), "--json")
    rows = res.json()
    storm = _storm_on_prism(model, props)
    assert storm[:2] == [math.inf, math.inf]
    assert [r["value"] for r in rows[:2]] == ["inf", "inf"] and [r["status"] for r in rows] == ["infinite", "infinite", "ok", "ok"]
    np.testing.assert_allclose([r["value"] for r in rows[2:]], storm[2:], rtol=1e-6)
    assert "recurrent class" in rows[0]["message"] and "probability below 1" in rows[1]["message"]
    assert "under max" not in rows[0]["message"]  # no direction was written: none is named


def test_mdp_still_needs_a_direction():
    res = run_mopmc("check", "example:robot", "--prop", 'P=? [F "goal"]')
    assert_one_line_error(res, "example:robot", "give a direction", "Markov chains")


def test_directionless_ok_parameter_for_a_fixed_scheduler():
    """``mopmc evaluate`` (an induced chain) accepts ``R=?`` on an MDP through this parameter."""
    from mopmc.errors import PropertyError

    loaded = load("example:tradeoff", properties='R{"time"}=? [C]')
    with pytest.raises(PropertyError, match="give a direction"):
        loaded.properties()
    (p,) = loaded.properties(directionless_ok=True)
    o = p.objectives[0]
    assert o.directionless and o.sense == "max" and o.reward_model == "time"


# ---------------------------------------------------------------- M4: infinite values are results
def test_infinite_value_is_a_result_alone_or_with_others(tmp_path):
    inf = 'R{"steps"}max=? [C]'
    assert storm_values(load("example:robot").model, inf) == [math.inf]  # Storm's answer
    one = run_mopmc("check", "example:robot", "--prop", inf, "--json")
    two = run_mopmc("check", "example:robot", "--props", _file(tmp_path, ['Pmax=? [F "goal"]', inf]), "--json")
    for res in (one, two):
        assert res.code == 0, res.stderr
        row = res.json()[-1]
        assert (row["value"], row["status"]) == ("inf", "infinite") and float(row["value"]) == math.inf
        assert res.stderr_lines == [f"note: {row['message']}"] and "example:robot" in row["message"]
    assert two.json()[0]["value"] == pytest.approx(storm_values(load("example:robot").model, 'Pmax=? [F "goal"]')[0])
    table = run_mopmc("check", "example:robot", "--prop", inf)
    assert table.code == 0 and "inf" in table.stdout and "infinite" in table.stdout and len(table.stderr_lines) == 1


# ---------------------------------------------------------------- M5: --json errors are JSON
@pytest.mark.parametrize("args, fragment, kind", [
    (["check", "example:tradeoff", "--prop", 'R{"nope"}min=? [C]'], "unknown reward model 'nope'", "UnknownNameError"),
    (["check", "example:tradeoff", "--prop", 'R{"time"}min=? [C'], "property syntax error", "PropertyError"),
    (["check", "/nonexistent/m.nm", "--prop", 'Pmax=? [F "x"]'], "no such file", "ModelFileError"),
    (["check", "example:dice", "--prop", 'P=? [F "six"]', "--const", "N=3"], "no constant 'N'", "UndefinedConstantsError"),
    (["info", "/nonexistent/m.nm"], "no such file", "ModelFileError"),
    (["convex", "example:tradeoff", "--prop", 'multi(R{"tim"}<=3 [C], R{"energy"}<=4 [C])'], "unknown reward model", "UnknownNameError"),
])
def test_json_errors_print_a_json_object(args, fragment, kind):
    res = run_mopmc(*args, "--json")
    assert_one_line_error(res, fragment)
    doc = res.json()  # stdout is JSON
    assert doc == {"error": _error_line(res), "exit_code": 2, "type": kind}
    plain = run_mopmc(*args)  # without --json stdout stays empty
    assert plain.stdout == "" and plain.stderr == res.stderr


def test_run_cli_json_error_mechanism(capsys):
    from mopmc.cli.common import print_json, run_cli
    from mopmc.errors import PropertyError

    def bad():
        raise PropertyError("p.props: line 1: broken\n  twice")

    with pytest.raises(SystemExit) as exc:
        run_cli(bad, json_out=True)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and json.loads(out) == {"error": "p.props: line 1: broken twice", "exit_code": 2,
                                                        "type": "PropertyError"}
    assert err == "error: p.props: line 1: broken twice\n"

    def printed_then_bad():  # JSON already printed: no second document on stdout
        print_json([1])
        raise PropertyError("late")

    with pytest.raises(SystemExit):
        run_cli(printed_then_bad, json_out=True)
    out, err = capsys.readouterr()
    assert json.loads(out) == [1] and err == "error: late\n"

    with pytest.raises(ZeroDivisionError):  # an internal error: JSON too, then main() words it
        run_cli(lambda: 1 / 0, json_out=True)
    out, _ = capsys.readouterr()
    assert json.loads(out)["type"] == "InternalError" and json.loads(out)["exit_code"] == 1
    with pytest.raises(SystemExit):
        run_cli(bad, json_out=False)
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------- M6: --prop repeated
def test_repeated_prop_checks_all_in_order():
    props = ['R{"time"}min=? [C]', 'R{"energy"}min=? [C]', 'R{"time"}max=? [F "finished"]']
    res = run_mopmc("check", "example:tradeoff", *[a for p in props for a in ("--prop", p)], "--json")
    rows = res.json()
    assert [r["property"] for r in rows] == props
    np.testing.assert_allclose([r["value"] for r in rows], storm_values(load("example:tradeoff").model, "; ".join(props)),
                               rtol=1e-6)
    both = run_mopmc("check", "example:tradeoff", "--prop", props[0], "--props", "x.props")
    assert_one_line_error(both, "exactly one of --prop", "--props")


# ---------------------------------------------------------------- M9: thresholds as decimals
def test_thresholds_as_decimals_with_numeric_field():
    prop = 'multi(R{"time"}<=1.3 [C], R{"energy"}<=4.035 [C])'
    res = run_mopmc("check", "example:tradeoff", "--prop", prop, "--prop", 'P>=1/5 [F "finished"]', "--json")
    assert res.code == 0, res.stderr
    multi, single = res.json()
    assert multi["property"] == prop
    assert [(o["formula"], o["comparison"], o["threshold"]) for o in multi["objectives"]] == [
        ('R{"time"}<=1.3 [C]', "<=", 1.3), ('R{"energy"}<=4.035 [C]', "<=", 4.035)]
    assert single["property"] == 'P>=0.2 [F "finished"]' and single["objectives"][0]["threshold"] == 0.2
    table = run_mopmc("check", "example:tradeoff", "--prop", prop)
    assert "4.035" in table.stdout and "/" not in table.stdout


def test_threshold_expression_is_its_value_as_in_storm():
    """Storm's ``threshold`` of ``1/5`` is 0 (integer division), but its own check compares with
    0.2: so do we (P=1/6 on the die is below 1/5, above 1/7)."""
    props = ['P>=1/5 [F "six"]', 'P>1/7 [F "six"]']
    res = run_mopmc("check", "example:dice", *[a for p in props for a in ("--prop", p)], "--json")
    rows = res.json()
    assert [r["satisfied"] for r in rows] == storm_values(load("example:dice").model, "; ".join(props)) == [False, True]
    assert [r["property"] for r in rows] == ['P>=0.2 [F "six"]', 'P>1/7 [F "six"]']
    assert rows[1]["objectives"][0]["threshold"] == pytest.approx(1 / 7, rel=1e-15)


# ---------------------------------------------------------------- L1: Pareto points in the table
def test_pareto_table_lists_the_points():
    prop = 'multi(R{"energy"}min=? [C], R{"time"}min=? [C])'
    points = run_mopmc("check", "example:tradeoff", "--prop", prop, "--json").json()[0]["points"]
    table = run_mopmc("check", "example:tradeoff", "--prop", prop)
    assert table.code == 0 and "Pareto points of" in table.stdout
    for pt in points:
        for v in pt:
            assert f"{v:.10g}" in table.stdout
    # the front's ends are the single-objective minima, by Storm
    storm = storm_values(load("example:tradeoff").model, 'R{"energy"}min=? [C]; R{"time"}min=? [C]')
    np.testing.assert_allclose(np.min(points, axis=0), storm, rtol=1e-6)


# ---------------------------------------------------------------- L6: precision per query kind
def test_precision_message_per_query_kind():
    multi = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"energy"}min=? [C], R{"time"}min=? [C])',
                      "--precision", "0")
    assert_one_line_error(multi, "--precision 0", "precision per objective (absolute, or in units of its range")
    single = run_mopmc("check", "example:tradeoff", "--prop", 'R{"time"}min=? [C]', "--precision", "0")
    assert_one_line_error(single, "--precision 0", "relative precision", "between 0 and 1")
    mixed = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"energy"}min=? [C], R{"time"}min=? [C])',
                      "--prop", 'R{"time"}min=? [C]', "--precision", "2", "--json")
    assert_one_line_error(mixed, "--precision 2", "property 2", "relative precision")
    ok = run_mopmc("check", "example:tradeoff", "--prop", 'multi(R{"energy"}min=? [C], R{"time"}min=? [C])',
                   "--precision", "2", "--json")
    assert ok.code == 0, ok.stderr  # an absolute precision may exceed 1


# ---------------------------------------------------------------- L8, L10: messages
def test_property_parse_messages(tmp_path):
    unknown = run_mopmc("check", "example:dice", "--prop", "Pmax=? [F t=7]")
    assert_one_line_error(unknown, "example:dice", "property syntax error", "unknown identifier 't'", "d, s")
    from mopmc import save_umb

    umb = tmp_path / "t.umb"
    save_umb(load("example:tradeoff").model, umb)
    res = run_mopmc("check", umb, "--prop", "Pmax=? [F s=3]")
    assert_one_line_error(res, "unknown identifier 's'", "label", '"finished"')
    assert "Note that" not in res.stderr and "Exception" not in res.stderr
    broken = tmp_path / "broken.nm"
    broken.write_text("mdp\nmodule m\n  s : [0..2] init 0;\n  [a] s=0 -> (s'=1)\n  [] s>0 -> true;\nendmodule\n")
    res = run_mopmc("check", broken, "--prop", "Pmax=? [F s=1]")
    assert_one_line_error(res, "broken.nm:5:", "syntax error: expecting")
    assert not res.stderr.rstrip().endswith(",")


def test_example_models_are_named_by_their_example_name():
    for args, fragment in ((["--prop", 'Pmax=? [F "sixx"]'], "unknown label"),
                           (["--prop", 'R{"x"}min=? [C]'], "unknown reward model"),
                           (["--prop", 'Pmax=? [F "six"]', "--const", "N=1"], "no constant")):
        res = run_mopmc("check", "example:dice", *args)
        assert_one_line_error(res, "example:dice", fragment)
        assert "examples/models" not in res.stderr and "dice.pm" not in res.stderr


def test_a_property_file_names_itself_in_its_syntax_errors(tmp_path):
    bad = tmp_path / "bad.props"
    bad.write_text('R{"time"}min=? [C];\nR{"time"}min=? [C\n')
    res = run_mopmc("check", "example:tradeoff", "--props", bad)
    assert_one_line_error(res, f"{bad}: property syntax error")
    assert "example:tradeoff" not in res.stderr


def _file(tmp_path, props: list[str]) -> str:
    path = tmp_path / "p.props"
    path.write_text(";\n".join(props) + "\n")
    return str(path)


CHOICE = """mdp
module m
  s : [0..5] init 0;
  [a] s=0 -> 0.3:(s'=1) + 0.7:(s'=2);
  [b] s=0 -> (s'=3);
  [a] s=1 -> 0.5:(s'=1) + 0.5:(s'=4);
  [b] s=1 -> (s'=1);
  [a] s=2 -> 1:(s'=2);
  [b] s=2 -> 0.5:(s'=5) + 0.5:(s'=0);
  [a] s=3 -> (s'=3);
  [] s>=4 -> true;
endmodule
label "goal" = s=4;
rewards "r"
  [a] s=0 : 1;
  [b] s=2 : 2;
endrewards
"""


def test_a_bound_on_its_own_holds_for_every_scheduler_as_in_storm(tmp_path):
    """P>=0.4 [F goal] alone holds when every scheduler meets it (Pmin >= 0.4), as in PRISM and
    Storm; it was checked against the maximum (some scheduler), a different verdict (a cross-check
    found it). Inside multi(...) a bound stays existential. Oracle: Storm on the PRISM text."""
    stormpy = pytest.importorskip("stormpy")
    model = tmp_path / "choice.nm"
    model.write_text(CHOICE)
    props = ['P>=0.4 [F "goal"]', 'P<=0.4 [F "goal"]', 'P>0 [F "goal"]', 'P<0.5 [F "goal"]',
             'R{"r"}>=1 [F "goal"|s=3]', 'R{"r"}<=1 [F "goal"|s=3]', 'Pmax>=0.4 [F "goal"]', 'Pmin<=0.4 [F "goal"]']
    res = run_mopmc("check", model, *[a for p in props for a in ("--prop", p)], "--json")
    assert res.code == 0, res.stderr
    program = stormpy.parse_prism_program(str(model))
    formulas = stormpy.parse_properties("; ".join(props), program)
    built = stormpy.build_model(program, formulas)
    init = built.initial_states[0]
    storm = [bool(stormpy.model_checking(built, f, only_initial_states=True)[init]) for f in formulas]
    ours = [r["satisfied"] for r in res.json()]
    assert ours == storm, (ours, storm)
    assert ours[:3] == [False, False, False] and ours[6:] == [True, True]  # the cases that tell them apart
    res = run_mopmc("check", model, "--prop", 'multi(P>=0.4 [F "goal"])', "--json")
    assert res.json()[0]["achievable"] is True  # some scheduler reaches 0.46


@pytest.mark.parametrize("prop", ['Pmax=? [F G "goal"]', 'Pmax=? [F (P>0.5 [F "goal"])]', 'Pmax=? ["goal" U (G "goal")]'])
def test_nested_and_ltl_formulas_are_refused_by_name(tmp_path, prop):
    """They were refused as an 'unknown label or expression', without the file (a cross-check)."""
    model = tmp_path / "choice.nm"
    model.write_text(CHOICE)
    r = run_mopmc("check", model, "--prop", prop)
    assert_one_line_error(r, "choice.nm: property 1", "is not a state formula", "not supported")


def test_a_property_constant_without_a_value_is_refused(tmp_path):
    """'const int K;' in a property file was taken as 0, silently (as stormpy does): Pmin=? [F s=K]
    answered for s=0 (a cross-check found it). --const K=V or a value in the file defines it."""
    model = tmp_path / "choice.nm"
    model.write_text(CHOICE)
    props = tmp_path / "k.props"
    props.write_text('const int K;\nPmin=? [F s=K]\n')
    assert_one_line_error(run_mopmc("check", model, "--props", props), "property constant(s) K without a value",
                          "--const K=VALUE")
    # --const defines it (it was refused: 'no constant K in the model')
    r = run_mopmc("check", model, "--props", props, "--const", "K=3", "--json")
    assert r.code == 0 and r.json()[0]["property"] == "Pmin=? [F (s = 3)]", (r.stdout, r.stderr)
    props.write_text('const int K = 3;\nPmax=? [F s=K]\n')
    r = run_mopmc("check", model, "--props", props, "--json")
    assert r.code == 0 and r.json()[0]["value"] == 1.0 and r.json()[0]["property"] == "Pmax=? [F (s = 3)]", r.stdout


def test_props_file_with_one_property_a_line_as_prism_writes_them(tmp_path):
    """PRISM's property files have one property a line, without ``;``: Storm's parser of a string
    read two such lines as one formula and failed; a property may span lines (open brackets)."""
    props = ['Pmin=? [F "six"]', 'R{"flips"}=? [F "done"]', 'Pmax=? [F "six"]']
    path = tmp_path / "lines.props"
    path.write_text("// dice\n" + props[0] + "\n\n" + props[1] + "  // flips\n" + 'Pmax=? [F\n  "six"]\n')
    res = run_mopmc("check", "example:dice", "--props", str(path), "--json")
    assert res.code == 0, res.stderr
    got = [r["value"] for r in res.json()]
    np.testing.assert_allclose(got, _storm_on_prism("example:dice", props), rtol=1e-6)  # (Storm iterates to 1e-6)
    assert got[0] == got[2] == 1 / 6
