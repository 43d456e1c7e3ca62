"""Storm's and PRISM's own multi-objective tests on their models, against both engines.

The table (``peer_tests.json`` beside this file) lists each query with the value the peer suite
asserts and the source file and lines it comes from; ``excluded`` lists what we leave out and why
(long-run average, step bounds, LTL). Values agree within the table's tolerance (1e-4); for Pareto
queries every expected vertex lies within 1e-4 of one of ours, and the kernel's scheduler behind
each of our vertices is evaluated independently (its induced chain) and must give that vertex.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from support import shared_model
from mopmc.engine.evaluate import evaluate
from mopmc.io.load import load
from mopmc.queries.dispatch import multi_query

TABLE = json.loads((Path(__file__).with_name("peer_tests.json")).read_text())
TOL = TABLE["tolerance"]
HEAVY = os.environ.get("MOPMC_HEAVY_TESTS") == "1"


def _num(text) -> float:
    return float(Fraction(str(text)))


@lru_cache(maxsize=None)
def _loaded(model: str, constants: tuple, prop: str):
    loaded = load(shared_model(model), dict(constants), properties=prop)
    (p,) = loaded.properties()
    return loaded.model, p


def _params():
    out = []
    for i, case in enumerate(TABLE["cases"]):
        label = f"{i}-{Path(case['model']).stem}"
        out.append(pytest.param(case, "kernel", id=f"{label}-kernel"))
        marks = []
        if case.get("lp") == "heavy" and not HEAVY:
            marks.append(pytest.mark.skip(reason="LP engine slow on this model; set MOPMC_HEAVY_TESTS=1"))
        out.append(pytest.param(case, "lp", id=f"{label}-lp", marks=marks))
    return out


def test_table_is_well_formed():
    assert len(TABLE["cases"]) >= 40
    for case in TABLE["cases"]:
        assert case["source"].split()[0].split("@")[0] in ("moves-rwth/storm", "prismmodelchecker/prism")
        assert ":" in case["source"], case  # file:lines
    for ex in TABLE["excluded"]:
        assert ex["reason"]


@pytest.mark.parametrize("case, engine", _params())
def test_peer_case(case, engine):
    model, p = _loaded(case["model"], tuple(sorted(case["constants"].items())), case["property"])
    res = multi_query(model, p, engine=engine, precision=case.get("precision", TOL))
    expected = case["expected"]
    if isinstance(expected, bool):
        assert res.kind == "achievability"
        assert res.achievable is expected, (res.margin, case["source"])
        assert res.near_boundary is (abs(res.margin) <= res.precision)
    elif expected == "infeasible":
        assert res.kind == "numerical" and res.status == "infeasible"
        assert res.certificate["required"] > res.certificate["bound"]
    elif isinstance(expected, str):
        assert res.kind == "numerical" and res.status == "optimal"
        v = _num(expected)
        assert abs(res.value - v) <= TOL, (res.value, v, case["source"])
        assert res.lower - 1e-9 <= res.value <= res.upper + 1e-9
        assert res.upper - res.lower <= TOL
    else:
        assert res.kind == "pareto" and res.status == "optimal"  # converged, no iteration limit
        ours = np.array(res.points)
        for point in expected:
            e = np.array([_num(x) for x in point])
            dist = np.min(np.max(np.abs(ours - e), axis=1))
            assert dist <= TOL, (e.tolist(), ours.tolist(), case["source"])
        if engine == "kernel":
            assert len(res.schedulers) == len(res.points)
            for point, sched in zip(res.points, res.schedulers):
                values = evaluate(model, sched.scheduler, p.objectives).values
                np.testing.assert_allclose(values, point, atol=1e-9)
