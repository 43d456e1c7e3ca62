"""Objectives the kernel cannot weigh (an end component whose rewards have both signs) are answered
by the exact LP engine instead, with a note, in single, multi-objective and convex queries; above
``LP_FALLBACK_STATES`` they are refused in one line naming --engine lp, as before."""

from __future__ import annotations

import numpy as np
import pytest

from mopmc.errors import MixedSignError
from mopmc.io.load import load

from support import ZERO_CYCLE  # 0 -a-> 1 -b-> 0 nets 0 on "r"; c leaves to "done"; "spin": b -1, c +1


@pytest.fixture()
def model_path(tmp_path):
    path = tmp_path / "zc.nm"
    path.write_text(ZERO_CYCLE)
    return path


def test_single_objective(model_path):
    from mopmc.queries.single import check

    loaded = load(model_path, properties='R{"r"}min=? [F "done"]; R{"r"}min=? [C]')
    for p in loaded.properties():
        res = check(loaded.model, p)
        lp = check(loaded.model, p, engine="lp")
        assert res.value == lp.value == 0.0
        assert "exact LP engine" in res.note and lp.note is None
        assert res.scheduler is None and res.to_json()["note"] == res.note


def test_multi_objective_pareto_equals_the_lp_engine(model_path):
    from mopmc.queries.dispatch import multi_query

    loaded = load(model_path, properties='multi(R{"r"}min=? [F "done"], R{"spin"}max=? [F "done"])')
    p = loaded.properties()[0]
    res = multi_query(loaded.model, p)
    lp = multi_query(loaded.model, p, engine="lp")
    assert res.note and 'R{"r"}min=? [F "done"]' in res.note and lp.note is None
    np.testing.assert_allclose(np.array(res.points, float), np.array(lp.points, float), atol=1e-9)
    assert res.to_json()["note"] == res.note


def test_convex_query_capped_by_the_axes_gives_valid_bounds(model_path):
    """The cutting direction (-eps, -1) is unbounded (looping lowers spin without bound) and the box
    leaves r open below, yet the axis call bounds r: the query answers with valid bounds (it was
    an error). By hand: a scheduler looping with probability 1/3 reaches (0, 0.5), the optimum
    0.125 of the mean squared distance to the origin within spin >= 0.5."""
    from mopmc.queries.convex import convex_query

    loaded = load(model_path, properties='multi(R{"r"}<=1 [F "done"], R{"spin"}>=0.5 [F "done"])')
    res = convex_query(loaded.model, loaded.properties()[0].objectives, "mse")
    assert res.lower_bound <= 0.125 + 1e-9 <= res.loss + 2e-9
    assert res.point is not None and res.point[1] >= 0.5 - 1e-9
    if res.status == "stalled":
        assert "unbounded in direction" in res.note


def test_large_models_are_still_refused(model_path, monkeypatch):
    from mopmc.queries import dispatch
    from mopmc.queries.single import check

    monkeypatch.setattr(dispatch, "LP_FALLBACK_STATES", 1)
    loaded = load(model_path, properties='R{"r"}min=? [F "done"]; multi(R{"r"}min=? [F "done"], R{"spin"}max=? [F "done"])')
    single, multi = loaded.properties()
    from mopmc.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="--engine lp"):
        check(loaded.model, single)
    with pytest.raises(MixedSignError, match="--engine lp"):
        dispatch.multi_query(loaded.model, multi)


def test_the_cli_says_so_on_stderr(model_path):
    from support import run_mopmc

    r = run_mopmc("check", model_path, "--prop", 'multi(R{"r"}min=? [F "done"], R{"spin"}max=? [F "done"])', "--json")
    assert r.code == 0, r.stderr
    assert r.stderr.startswith("note: multi(") and "exact LP engine" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
