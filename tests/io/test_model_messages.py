"""Model errors that Storm words poorly: an empty variable range after --const, and Storm's
messages with very long numbers (a reward literal 1e-320 printed as 321 digits)."""

from support import assert_one_line_error, run_mopmc

UNDEF = """mdp
const int N;
module m
  s : [0..N] init 0;
  [a] s<N -> 0.5 : (s'=s+1) + 0.5 : (s'=s);
  [b] s=N -> true;
endmodule
"""

TINY_REWARD = """mdp
module m
  s : [0..2] init 0;
  [a] s<2 -> (s'=s+1);
  [b] s=2 -> true;
endmodule
rewards "q"
  [a] true : 1e-320;
endrewards
"""


def test_empty_range_names_the_variable(tmp_path):
    path = tmp_path / "u.nm"
    path.write_text(UNDEF)
    res = run_mopmc("check", str(path), "--const", "N=-1", "--prop", "Pmax=? [F s=0]")
    assert_one_line_error(res, "variable s: [0..-1] has an empty range", "--const N=-1")
    ok = run_mopmc("check", str(path), "--const", "N=2", "--prop", "Pmax=? [F s=2]", "--json")
    assert ok.code == 0 and ok.json()[0]["value"] == 1.0, ok.stderr


def test_long_numbers_in_storm_messages_are_cut(tmp_path):
    path = tmp_path / "r.nm"
    path.write_text(TINY_REWARD)
    res = run_mopmc("--builder", "storm", "check", str(path), "--prop", 'R{"q"}max=? [C]')
    assert_one_line_error(res, "(321 digits)")
    assert len(res.stderr) < 400


def test_a_property_word_used_as_a_name_is_named():
    # T is Storm's expected-time operator, so the generic unknown-identifier scan skips it
    for prop in ('R{"time"}<=T [C]', 'Pmax=? [F T=1]'):
        assert_one_line_error(run_mopmc("check", "example:tradeoff", "--prop", prop), "unknown identifier 'T'")
    res = run_mopmc("check", "example:tradeoff", "--prop", 'R{"time"}<=3 [C')
    assert_one_line_error(res, 'expecting "]"')
    assert "unknown identifier" not in res.stderr


def test_a_semantic_refusal_of_storms_names_the_property():
    res = run_mopmc("check", "example:robot", "--prop", 'R{"steps"}max=? [C>=2]')
    assert_one_line_error(res, "lower time bound", '(in R{"steps"}max=? [C>=2])')


def test_an_infinite_direction_of_the_lp_engine_is_worded_plainly():
    res = run_mopmc("check", "example:robot", "--prop", 'multi(R{"steps"}max=? [C], Pmax=? [F "goal"])',
                    "--engine", "lp")
    assert_one_line_error(res, "direction [1.0, 0.0] (over R{\"steps\"}max=? [C]) is infinite")
    assert "np.float64" not in res.stderr
