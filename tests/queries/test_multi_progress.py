"""Progress of multi-objective queries: ``progress(calls, gap)`` before every oracle call after the
first ones (what ``mopmc check`` shows in its spinner on a terminal while a long query runs).

One report per such call, in order; every reported gap is still open (above the precision, in its
units), and the query ends within it; the answers are the same with and without a callback."""

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from mopmc.examples.scalable import cube
from mopmc.queries.dispatch import make_oracle, multi_query
from mopmc.queries.multi import achievability, numerical, pareto

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
import test_multi_precision as precision_tests  # noqa: E402
from test_spinner import _run_with_terminal_stderr  # noqa: E402

FRONT, SECOND, _query = precision_tests.FRONT, precision_tests.SECOND, precision_tests.query
walk = precision_tests.walk  # (the fixture: the walk on the 4^3 cube with a second reward in the thousands)


def _reports():
    seen: list[tuple[int, float]] = []
    return seen, lambda calls, gap: seen.append((calls, gap))


def _same_points(a, b) -> bool:
    return len(a.points) == len(b.points) and np.allclose(np.array(a.points), np.array(b.points), rtol=0, atol=0)


@pytest.mark.parametrize("precision, precision_type", [(1e-2, "abs"), (1e-3, "reldiff")])
def test_pareto_reports_each_call_with_its_open_gap(walk, precision, precision_type):
    model, p = _query(walk, FRONT)
    m = len(p.objectives)
    seen, progress = _reports()
    res = pareto(make_oracle(model, p.objectives), p.objectives, precision=precision,
                 precision_type=precision_type, progress=progress)
    assert res.status == "optimal"
    assert [c for c, _ in seen] == list(range(res.iterations - m)), "one report per call after the unit ones"
    assert len(seen) >= 3 and all(gap > precision for _, gap in seen)
    assert seen[0][1] > seen[-1][1], "the gap closes"
    plain = pareto(make_oracle(model, p.objectives), p.objectives, precision=precision, precision_type=precision_type)
    assert _same_points(res, plain) and res.iterations == plain.iterations


def test_pareto_with_thresholds_counts_on_from_the_decision(walk):
    model, p = _query(walk, 'multi(R{"r"}min=? [F "goal"], R{"s"}<=40000 [F "goal"])')
    seen, progress = _reports()
    res = pareto(make_oracle(model, p.objectives), p.objectives, precision=1e-2, progress=progress)
    assert res.status == "optimal" and res.points
    assert [c for c, _ in seen] == list(range(res.iterations - 2))


def test_achievability_and_numerical_report_the_gap_between_their_bounds(walk):
    model, p = _query(walk, 'multi(R{"r"}<=50 [F "goal"], R{"s"}<=40000 [F "goal"])')
    seen, progress = _reports()
    res = achievability(make_oracle(model, p.objectives), p.objectives, tight=True, precision=1e-6,
                        precision_type="reldiff", progress=progress)
    assert [c for c, _ in seen] == list(range(res.iterations - 2))
    assert seen and all(gap > 1e-6 for _, gap in seen)
    assert res.achievable and res.margin_upper - res.margin <= 1e-6  # (range units)

    model, p = _query(walk, 'multi(R{"r"}min=? [F "goal"], R{"s"}<=40000 [F "goal"])')
    seen, progress = _reports()
    res = numerical(make_oracle(model, p.objectives), p.objectives, precision=1e-6, progress=progress)
    assert res.status == "optimal" and res.upper - res.lower <= 1e-6
    assert [c for c, _ in seen] == list(range(res.iterations - 2))
    assert seen and all(gap > 1e-6 for _, gap in seen) and np.isfinite(seen[-1][1])


def test_multi_query_passes_it_on(walk):
    model, p = _query(walk, FRONT)
    seen, progress = _reports()
    res = multi_query(model, p, precision=1e-2, progress=progress)
    assert len(seen) == res.iterations - 2 > 0


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_check_shows_the_oracle_calls_on_a_terminal(tmp_path):
    # the 22^3 cube: about 0.15 s a call, long enough for the spinner to draw the calls
    path = tmp_path / "cube.nm"
    path.write_text(cube(21).replace("endrewards\n", "endrewards\n" + SECOND, 1))
    code, out, term = _run_with_terminal_stderr("check", str(path), "--prop", FRONT, "--precision", "1e-2",
                                                "--precision-type", "reldiff")
    assert code == 0, term
    shown = re.findall(r"oracle call (\d+)/500, gap (\S+) \(precision 0\.01 of the ranges\)", term)
    assert shown, term[-2000:]
    assert all(float(gap) > 0.01 for _, gap in shown)
    assert "│" in out  # the front's table
