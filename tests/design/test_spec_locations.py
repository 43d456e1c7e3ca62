"""Errors of a YAML design spec name the file and the key path where the fix belongs, also when
they are found while building (after the spec parsed); built-in designs keep naming the design."""

import pytest

from mopmc.design.automaton import Edge, Network, TimedAutomaton
from mopmc.design.explore import convert
from mopmc.errors import InvalidModelError
from support import assert_one_line_error, run_mopmc

TINY = """\
name: tiny
actions: [obs, act]
automata:
  - name: S
    locations: [wait, go, late]
    clocks: [z]
    variables: [{name: k, type: int, low: 0, high: 2, init: 0}]
    invariants: {wait: ["z <= 0.1"]}
    edges:
      - {from: wait, to: go, action: obs, clocks: ["z < 0.1"]}
      - {from: wait, to: late, clocks: ["z >= 0.1"]}
      - {from: go, to: wait, action: act, when: "k < 2", updates: {k: "k + 1"}, resets: [z]}
      - {from: late, to: wait, action: act, when: "k < 2", updates: {k: "k + 1"}, resets: [z]}
  - name: E
    locations: [e]
    edges: [{from: e, to: e, action: obs}, {from: e, to: e, action: act}]
rewards:
  late_steps: [{action: act, value: 1, when: "S_loc = late"}]
probabilities:
  table: [{guard: "z >= 0.1", when: "k = 0", p: 0.6}]
  delays: [{clock: z, distribution: exponential, scale: 0.2, truncate: 2.0}]
"""
TABLE = 'table: [{guard: "z >= 0.1", when: "k = 0", p: 0.6}]'


def _build(tmp_path, old: str = "", new: str = "", *extra: str):
    """``mopmc design build`` of the tiny spec with ``old`` replaced by ``new``, run in ``tmp_path``."""
    assert old in TINY
    (tmp_path / "spec.yaml").write_text(TINY.replace(old, new))
    return run_mopmc("design", "build", "spec.yaml", "--out", "m.prism", *extra, cwd=tmp_path)


def test_the_tiny_spec_builds(tmp_path):
    r = _build(tmp_path)
    assert r.code == 0, r.stderr


def test_a_duplicate_automaton_name_is_named_where_it_is_given(tmp_path):
    r = _build(tmp_path, "  - name: E\n", "  - name: S\n")
    assert_one_line_error(r, "spec.yaml: automata[1].name: ", "automaton name 'S'", "automata[0]")
    assert "rewards" not in r.stderr


def test_a_variable_declared_by_two_automata_is_named_where_the_second_is(tmp_path):
    r = _build(tmp_path, "    locations: [e]\n", "    locations: [e]\n    variables: [{name: k, low: 0, high: 1}]\n")
    assert_one_line_error(r, "spec.yaml: automata[1].variables[0].name: ", "variable 'k'", "automata[0] (S)")


def test_overlapping_guards_name_the_edge(tmp_path):
    r = _build(tmp_path, 'late, clocks: ["z >= 0.1"]', 'late, clocks: ["z >= 0.05"]')
    assert_one_line_error(r, "error: spec.yaml: automata[0].edges[1]: state (S_loc=wait, k=0, E_loc=e): S: guards of",
                          "are neither exclusive nor equivalent")


def test_an_update_out_of_range_names_the_update(tmp_path):
    r = _build(tmp_path, 'go, to: wait, action: act, when: "k < 2", updates: {k: "k + 1"}',
               'go, to: wait, action: act, when: "k < 2", updates: {k: "k + 5"}')
    assert_one_line_error(r, "error: spec.yaml: automata[0].edges[2].updates.k: state (S_loc=go, k=0, E_loc=e): ",
                          "sets k out of its range [0, 2]")


def test_an_uncovered_event_names_the_edge(tmp_path):
    r = _build(tmp_path, 'late, clocks: ["z >= 0.1"]', 'late, clocks: ["z >= 0.1"], events: [rain]')
    assert_one_line_error(r, "error: spec.yaml: automata[0].edges[1]: state (S_loc=wait", "no edge covers z >= 0.1 & !rain")


def test_missing_probabilities_name_the_probabilities(tmp_path):
    r = _build(tmp_path, "probabilities:\n  " + TABLE + "\n  delays: [{clock: z, distribution: exponential, scale: 0.2, truncate: 2.0}]\n")
    assert_one_line_error(r, "error: spec.yaml: probabilities: state (S_loc=wait", "no probability for the guards")


def test_overlapping_table_rows_name_the_second_row(tmp_path):
    r = _build(tmp_path, TABLE, 'table: [{guard: "z >= 0.1", when: "k = 0", p: 0.6}, {guard: "z >= 0.1", when: "k <= 1", p: 0.3}]')
    assert_one_line_error(r, "error: spec.yaml: probabilities.table[1].when: ",
                          "rows for z >= 0.1 overlap (when k = 0 and when k <= 1)")


def test_an_unknown_variable_in_a_table_row_names_the_row(tmp_path):
    r = _build(tmp_path, TABLE, 'table: [{guard: "z >= 0.1", when: "k = 0", p: 0.6}, {guard: "z < 0.1", when: "kk = 0", p: 0.3}]')
    assert_one_line_error(r, "error: spec.yaml: probabilities.table[1].when: unknown variable 'kk'")


def test_a_params_file_is_named_for_its_rows(tmp_path):
    (tmp_path / "p.yaml").write_text('probabilities:\n  table: [{guard: "z >= 0.1", when: "kk = 0", p: 0.6}]\n')
    r = _build(tmp_path, "", "", "--params", "p.yaml")
    assert_one_line_error(r, "error: p.yaml: probabilities.table[0].when: unknown variable 'kk'")


def test_too_many_read_values_name_the_automaton(tmp_path):
    r = _build(tmp_path, "high: 2, init: 0", "high: 2000000000, init: 0")
    assert_one_line_error(r, "error: spec.yaml: automata[0]: S reads variables with")


def test_a_design_without_a_file_keeps_naming_the_design():
    a = TimedAutomaton("A", ("s", "t"), "s", clocks=("z",),
                       edges=(Edge("s", "t", clocks=("z < 0.1",)), Edge("s", "t", clocks=("z < 0.2",))))
    with pytest.raises(InvalidModelError, match=r"^net: state \(A_loc=s\): A: guards of s -\[tau\]-> t"):
        convert(Network((a,), name="net"))


def test_a_reward_on_an_unknown_action_is_named_where_it_is_given(tmp_path):
    r = _build(tmp_path, "late_steps: [{action: act,", "late_steps: [{action: fly,")
    assert_one_line_error(r, "spec.yaml: rewards.late_steps[0].action: ", "unknown action 'fly'", "act, obs")
