import numpy as np
import pytest

from mopmc.design.expressions import conj, parse, resolve
from mopmc.design.guards import Guard
from mopmc.errors import ConfigError


def test_eval_is_vectorised_and_prints_back():
    e = parse("x + 1 >= 3 & (b | !c)")
    env = {"x": np.array([1, 2, 3]), "b": np.array([0, 0, 1]), "c": np.array([0, 1, 1])}
    assert e.eval(env).tolist() == [False, False, True]
    assert parse(e.to_prism()).eval(env).tolist() == [False, False, True]


def test_syntax_errors_name_the_place():
    with pytest.raises(ConfigError, match="edge a->b"):
        parse("x < ", "edge a->b")
    with pytest.raises(ConfigError, match="unexpected"):
        parse("x < 3 )")


def test_location_names_resolve_against_their_variable():
    e = resolve(parse("A_loc = wait & x = 1"), {"A_loc", "x"}, {"A_loc": ("idle", "wait")}, "here")
    assert e.to_prism() == "A_loc = 1 & x = 1"
    with pytest.raises(ConfigError, match="not a location of A_loc"):
        resolve(parse("A_loc = nowhere"), {"A_loc"}, {"A_loc": ("idle",)}, "here")
    with pytest.raises(ConfigError, match="unknown variable 'y'"):
        resolve(parse("y = 1"), {"A_loc"}, {"A_loc": ("idle",)}, "here")


def test_conj_drops_duplicates_and_true():
    assert conj(parse("true"), parse("x = 1"), parse("x = 1")).to_prism() == "x = 1"


@pytest.mark.parametrize(
    "a, b, relation",
    [
        (["z < 0.2"], ["z >= 0.2"], "exclusive"),
        (["z < 0.2"], ["z < 0.2"], "equivalent"),
        (["z < 0.1"], ["z < 0.2"], "overlapping"),
        (["z <= 0.2"], ["z >= 0.2"], "overlapping"),
        (["z < 0.2", "z < 0.3"], ["z < 0.2"], "equivalent"),
        ([], [], "equivalent"),
    ],
)
def test_clock_guards_are_decided_symbolically(a, b, relation):
    assert Guard.parse(a).relation(Guard.parse(b)) == relation


def test_events_and_clocks_combine():
    assert Guard.parse(events=["ok"]).relation(Guard.parse(events=["!ok"])) == "exclusive"
    assert Guard.parse(["z < 1"], ["ok"]).relation(Guard.parse(["z < 1"], ["!ok"])) == "exclusive"
    assert Guard.parse(["z < 1"], ["ok"]).relation(Guard.parse(["z < 1"])) == "overlapping"
    assert Guard.parse(["z >= 0.2"], ["!ok"]).text() == "z >= 0.2 & !ok"
