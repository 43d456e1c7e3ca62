"""The differential harness (benchmarks/differential.py) on a few programs: every check agrees with
Storm's exact engine, programs are reproducible from (seed, index), and a rerun resumes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "differential.py"
SEED = 3  # programs 0-2: two DTMCs (one of two modules, Storm-built) and an MDP, sinks, extreme exits, multi(...)


@pytest.fixture(scope="module")
def differential():
    spec = importlib.util.spec_from_file_location("differential", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["differential"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("differential", None)


def test_programs_are_reproducible(differential):
    a, b = differential.generate(5, 17), differential.generate(5, 17)
    assert a == b and a.text != differential.generate(5, 18).text
    assert {c.kind.split(" (")[0] for i in range(20) for c in differential.generate(5, i).checks} >= {
        "Pmax F", "Pmin G", "Rmin C", "Rmax F", "P F", "R LRA", "multi num", "multi ach"}


def test_three_programs_agree_with_storm(differential, tmp_path):
    summary = differential.run_campaign(3, SEED, tmp_path, engines=("kernel",), jobs=0, progress=False)
    assert summary.total("agree") >= 30
    bad = [f for f in summary.findings if f["status"] in ("mismatch", "crash")]
    assert not bad, bad
    assert summary.total("refused") == 0, summary.counts
    # a rerun finds every result recorded and checks nothing again
    again = differential.run_campaign(3, SEED, tmp_path, engines=("kernel",), jobs=0, progress=False)
    assert again.counts == summary.counts
