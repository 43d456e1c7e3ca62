"""mopmc's explicit builder against Storm's: the same model up to the numbering of states.

Oracle: Storm's sparse builder on the same file; the two models are compared state by state through
the state valuations (choices with their action, rewards and successor distributions; labels;
initial state), on the shipped examples, the reference models, the design layer's switch and random
programs that mix the features (global variables, Booleans, synchronisation, formulas, state and
action rewards, deadlocks, DTMCs).
"""

from __future__ import annotations

import numpy as np
import pytest

from mopmc.errors import UnsupportedModelError
from mopmc.examples import files
from mopmc.io.load import load

from explicit_compare import assert_same_model
from support import shared_model

pytest.importorskip("stormpy")


def _both(path, constants=None, properties=None):
    ours = load(path, constants, properties, valuations=True, builder="mopmc")
    storms = load(path, constants, properties, valuations=True, builder="storm")
    assert ours.builder == "mopmc" and storms.builder == "storm"
    return ours, storms


@pytest.mark.parametrize("name", sorted(files.ALL))
def test_shipped_examples(name):
    ours, storms = _both(files.ALL[name])
    assert ours.kind == storms.kind
    assert_same_model(ours.model, storms.model)


@pytest.mark.parametrize(
    "relative",
    [
        "team-formation/team_3.nm",
        "dive-and-rise/dive_and_rise_action_rewards.nm",
        "switch-scaling/switch_model_20.prism",
        "switch-table3/switch_model.prism",
        "switch-table3/switch_model_unif.prism",
        "switch-case-study/switch_model.prism",
    ],
)
def test_reference_models(relative):
    ours, storms = _both(shared_model(relative))
    assert_same_model(ours.model, storms.model)


def _peer_models():
    import json
    from pathlib import Path

    cases = json.loads((Path(__file__).parents[1] / "queries" / "peer_tests.json").read_text())["cases"]
    models = {}
    for case in cases:
        models.setdefault(case["model"], case.get("constants") or {})
    return sorted(models.items())


@pytest.mark.parametrize("relative, constants", _peer_models(), ids=[m for m, _ in _peer_models()])
def test_peer_suite_models(relative, constants):
    """The models of Storm's and PRISM's own multi-objective tests (negative rewards included)."""
    ours, storms = _both(shared_model(relative), constants)
    assert_same_model(ours.model, storms.model)


def _transitions(model, state, rename):
    lo, hi = model.indptr[model.row_groups[state]], model.indptr[model.row_groups[state + 1]]
    return sorted(zip(rename[model.targets[lo:hi]].tolist(), model.probs[lo:hi].tolist()))


@pytest.mark.parametrize("name", sorted(files.ALL))
def test_probabilities_are_storms_to_one_ulp(name):
    """Rational literals become the nearest double; Storm's builder agrees on some and is one ulp
    below on others (robot's 1/10 is 0.1 in both, mini_switch's 3679/10000 is 0.36789999999999995
    in Storm's), so the models agree to one unit in the last place."""
    ours, storms = _both(files.ALL[name])
    a, b = ours.model, storms.model
    index = b.valuations.index()
    perm = np.array([index[tuple(int(x) for x in row)] for row in a.valuations.values])
    same = np.arange(b.n_states)
    for s in range(a.n_states):
        mine, theirs = _transitions(a, s, perm), _transitions(b, perm[s], same)
        assert [t for t, _ in mine] == [t for t, _ in theirs]
        for (_, p), (_, q) in zip(mine, theirs):
            assert abs(p - q) <= np.spacing(max(p, q)), (s, p, q)


FEATURES = """mdp
const int N = 3;
const double p = 0.3;
global g : [0..2] init 1;
formula f = x + y;
module A
  x : [0..N] init 0;
  b : bool init false;
  [] x < N -> 0.5 : (x'=x+1) + 0.5 : (b'=!b);
  [s] x > 0 & !b -> (x'=x-1);
  [s] x = N -> p : (x'=0) + 1-p : (g'=min(g+1,2));
endmodule
module B
  y : [0..2];
  [s] y < 2 -> 0.25 : (y'=y+1) + 0.75 : true;
  [s] y = 2 -> (y'=0);
  [t] b => y>0 -> (y'=mod(y+1,3));
  [u] x = 2 & y = 2 & g = 2 -> (y'=floor(f/2)) & (g'=ceil(g/2));
endmodule
module C
  d : [0..1] init 0;
  [] d = 0 & x = 2 -> 0.1 : (d'=1) + 0.9 : true;
  [s] d = 0 -> true;
  [t] d = 0 -> true;
  [u] d = 0 -> true;
endmodule
rewards "r"
  x = 1 : 2;
  [s] f > 2 : 1.5;
  [] b : 0.25;
  [t] true : f / 2;
  [t] x=1 ? true : false : pow(2, y);
endrewards
rewards "q"
  true : 1;
endrewards
label "done" = f = 4 & b;
label "low" = g < 1 | x = 0;
"""


def test_features(tmp_path):
    path = tmp_path / "features.nm"
    path.write_text(FEATURES)
    ours, storms = _both(path)
    assert_same_model(ours.model, storms.model)
    assert ours.model.labels["deadlock"].any()  # d = 1 blocks s, t, u; x = 3 blocks []


def test_dtmc_with_constants(tmp_path):
    path = tmp_path / "chain.pm"
    path.write_text(
        "dtmc\nconst int N;\nconst double q;\nmodule m\n s : [0..N] init 0;\n"
        " [] s < N -> q : (s'=s+1) + 1-q : (s'=max(s-1,0));\n [] s = N -> true;\nendmodule\n"
        'rewards "steps"\n s < N : 1;\nendrewards\nlabel "top" = s = N;\n'
    )
    ours, storms = _both(path, {"N": "6", "q": "0.4"})
    assert ours.kind == "dtmc" and ours.model.is_dtmc
    assert_same_model(ours.model, storms.model)


def test_design_layer_switch(tmp_path):
    from mopmc.design.explore import convert
    from mopmc.design.params import load_parameters
    from mopmc.design.prism_export import save_prism
    from mopmc.design.spec import switch_design

    d = switch_design(load_parameters("table3").with_n(7))
    path = save_prism(convert(d.network, d.provider), tmp_path / "sw2.prism")
    ours, storms = _both(path)
    assert_same_model(ours.model, storms.model)


def _random_program(rng: np.random.Generator) -> str:
    """A random MDP of two modules with synchronisation, Booleans, a global variable and rewards."""
    actions = ["", "", "a", "b"]

    def atom():
        v, k = rng.choice(["x", "y", "g", "b"]), int(rng.integers(-1, 5))
        if v == "b":
            return "b" if rng.random() < 0.5 else "!b"
        op = rng.choice(["=", "<", "<=", ">", ">=", "!="])
        if rng.random() < 0.3:  # the literal on the left
            return f"{k} {op} {v}"
        return f"{v} {op} {k}"

    def guard():
        r = rng.random()
        if r < 0.2:  # disjuncts sharing a conjunct: the builder pre-tests what they all imply
            shared = atom()
            return f"({shared} & {atom()}) | ({atom()} & {shared})"
        if r < 0.3:  # a conjunction with a disjunction inside
            return f"({atom()} | {atom()}) & {atom()}"
        parts = [atom() for _ in range(int(rng.integers(1, 3)))]
        return f" {rng.choice(['&', '|'])} ".join(parts)

    def update(own):
        asg = []
        for v in own:
            if rng.random() < 0.6:
                if v == "b":
                    asg.append("(b'=!b)")
                else:
                    hi = 3 if v == "x" else 2
                    asg.append(f"({v}'=min(max({v}+{int(rng.integers(-1, 2))},0),{hi}))")
        return " & ".join(asg) or "true"

    def module(name, own, decl):
        lines = [f"module {name}", *decl]
        for _ in range(int(rng.integers(2, 6))):
            act = rng.choice(actions)
            k = int(rng.integers(1, 4))
            weights = rng.integers(1, 5, size=k)
            ps = [f"{w}/{weights.sum()}" for w in weights]
            mine = own if act == "" else [v for v in own if v != "g"]  # globals change in unlabelled commands only
            ups = " + ".join(f"{p} : {update(mine)}" for p in ps)
            lines.append(f"  [{act}] {guard()} -> {ups};")
        lines.append("endmodule")
        return lines

    out = ["mdp", "global g : [0..2] init 0;"]
    counters = [  # counters (the explorer adds them up without bytecode), kept in range by their guards
        "  [] x < 3 & 1 >= y -> (x'=x+1);", "  [] 0 < x & g = 1 -> 0.5 : (x'=x-1) + 0.5 : (x'=-1+x) & (g'=2);",
        "  [] x <= 1 & b -> (x'=2+x) & (g'=g-1 + 1);",
    ]
    out += module("M1", ["x", "b", "g"], ["  x : [0..3] init 0;", "  b : bool init false;", *counters])
    out += module("M2", ["y"], ["  y : [0..2] init 1;", "  [a] y = 0 -> (y'=1);", "  [b] y = 2 -> true;"])
    out += ['rewards "r1"', f"  {guard()} : {int(rng.integers(1, 4))};", f"  [a] {guard()} : 0.5;", "endrewards"]
    out += ['rewards "r2"', f"  [] {guard()} : x + 1;", "  [b] true : y / 3;", f"  [] {atom()} : 0.25;", "endrewards"]
    out += [f'label "l" = {guard()};']
    return "\n".join(out) + "\n"


def test_implied_ranges_are_necessary_and_found_through_disjunctions(tmp_path):
    from mopmc.io import storm
    from mopmc.io.explicit.bytecode import implied_ranges

    path = tmp_path / "m.nm"
    path.write_text(
        "mdp\nmodule m\n s : [0..8] init 0;\n m : [0..1] init 0;\n [] s < 8 -> (s'=s+1);\nendmodule\n"
        "formula task = s=7 & (m=1 => s>=2);\n"
        'label "a" = (task & m=1) | (task & m=0);\n'  # both disjuncts imply s = 7
        'label "b" = (s>=2 & s<=4) | (s=6 & m=1);\n'  # s in [2, 6] (the hull), m only in one disjunct
        'label "c" = s=3 => m=1;\n'  # an implication: nothing necessary
        'label "d" = (s>=2 | m=1) & s<=5;\n'  # s <= 5 only
    )
    program = storm.parse_program(path).substitute_constants().substitute_formulas()
    index = {"s": 0, "m": 1}
    got = {lab.name: implied_ranges(lab.expression, index) for lab in program.labels}
    assert got["a"] == {0: (7, 7)}
    assert got["b"] == {0: (2, 6)}
    assert got["c"] == {}
    assert got["d"][0][1] == 5 and set(got["d"]) == {0}


@pytest.mark.parametrize("seed", range(25))
def test_random_programs(tmp_path, seed):
    path = tmp_path / f"random{seed}.nm"
    path.write_text(_random_program(np.random.default_rng(seed)))
    ours, storms = _both(path)
    assert_same_model(ours.model, storms.model)


def test_auto_falls_back_to_storm(tmp_path):
    init_block = tmp_path / "init.nm"
    init_block.write_text(
        "mdp\nmodule m\n s : [0..2];\n [] s < 2 -> (s'=s+1);\n [] s = 2 -> true;\nendmodule\ninit s = 0 endinit\n"
    )
    assert load(init_block).builder == "storm"
    with pytest.raises(UnsupportedModelError, match="use --builder storm"):
        load(init_block, builder="mopmc")
    # a property the objectives' parser rejects: its atoms are not known here, Storm's builder adds them
    assert load(files.robot, properties="Pmax=? [X X x=4]").builder == "storm"
    with pytest.raises(UnsupportedModelError):
        load(files.robot, properties="Pmax=? [X X x=4]", builder="mopmc")
    # X is parsed (phi at step 1): its atom becomes a label of mopmc's build
    assert "(x = 4)" in load(files.robot, properties="Pmax=? [X x=4]", builder="mopmc").model.labels
    # a step-bounded one is parsed: its atoms become labels of mopmc's build
    ours = load(files.robot, properties='Pmax=? [x<4 U<=6 x=4]', builder="mopmc")
    storms = load(files.robot, properties='Pmax=? [x<4 U<=6 x=4]', builder="storm")
    assert ours.builder == "mopmc" and "(x = 4)" in ours.model.labels and "(x < 4)" in ours.model.labels
    from mopmc.queries.single import check

    a, b = (check(m.model, m.properties()[0]).value for m in (ours, storms))
    assert a == pytest.approx(b, abs=1e-12) and 0 < a < 1


def test_atomic_expressions_in_properties_are_labels(tmp_path):
    path = tmp_path / "features.nm"
    path.write_text(FEATURES)
    props = 'multi(Pmax=? [F x=3 & "done"], P>=0.1 [ (g<2 | y=0) U b ], R{"r"}<=9 [F !(x=1) & "low"], P>=0.2 [G x+y<5])'
    ours, storms = _both(path, properties=props)
    assert_same_model(ours.model, storms.model)
    assert {"(x = 3)", "!((x = 1))", "((x + y) < 5)"} <= set(ours.model.labels)


def test_auto_leaves_small_programs_to_storm(tmp_path):
    from mopmc.io.explicit import AUTO_MIN_SPACE

    assert load(files.robot).builder == "storm"  # 5 valuations
    wide = tmp_path / "wide.nm"  # few states, but its variables span more than AUTO_MIN_SPACE valuations
    wide.write_text(f"mdp\nmodule m\n s : [0..{AUTO_MIN_SPACE}] init 0;\n [] s < 3 -> (s'=s+1);\n [] s = 3 -> true;\nendmodule\n")
    loaded = load(wide)
    assert loaded.builder == "mopmc" and loaded.model.n_states == 4


def test_errors_are_storms(tmp_path):
    """Models Storm's builder rejects still get Storm's message (the own builder steps aside)."""
    sums = tmp_path / "sums.nm"
    sums.write_text("mdp\nmodule m\n s : [0..2] init 0;\n [] s < 2 -> 0.5 : (s'=s+1) + 0.4 : true;\n [] s = 2 -> true;\nendmodule\n")
    messages = []
    for builder in ("auto", "storm"):
        with pytest.raises(Exception) as err:
            load(sums, builder=builder)
        messages.append((type(err.value), str(err.value)))
    assert messages[0] == messages[1]


def test_unknown_builder():
    from mopmc.errors import ModelFileError

    with pytest.raises(ModelFileError, match="choose one of auto, mopmc, storm"):
        load(files.robot, builder="fast")


def test_assignment_out_of_range_is_an_error_naming_state_and_command(tmp_path):
    """Storm builds such a model without a word unless it builds valuations; ours always says (and
    "auto" asks Storm for valuations where it leaves a model to Storm)."""
    from mopmc.errors import InvalidModelError

    bounds = tmp_path / "bounds.nm"
    bounds.write_text("mdp\nmodule m\n s : [0..2] init 0;\n [] true -> (s'=s+1);\nendmodule\n")
    with pytest.raises(InvalidModelError, match=r"state \[s=2\]: command \(m: .*\) sets s to 3, outside its range \[0..2\]"):
        load(bounds, builder="mopmc")
    # auto leaves this small program to Storm's builder, asked to build valuations, so that it checks
    with pytest.raises(UnsupportedModelError, match="out of range"):
        load(bounds)


@pytest.mark.parametrize("seed", range(3))
def test_hashed_state_numbering_equals_the_dense_one(tmp_path, seed, monkeypatch):
    """Beyond DENSE_MAX valuations the explorer numbers states through its hash table: the same model."""
    from mopmc.io.explicit import program

    path = tmp_path / f"random{seed}.nm"
    path.write_text(_random_program(np.random.default_rng(seed)) if seed else FEATURES)
    dense = load(path, valuations=True, builder="mopmc").model
    monkeypatch.setattr(program, "DENSE_MAX", 0)
    hashed, storms = _both(path)
    assert_same_model(hashed.model, storms.model)
    for name in ("row_groups", "indptr", "targets", "probs"):
        np.testing.assert_array_equal(getattr(hashed.model, name), getattr(dense, name))
