"""Table 5 end to end on one tiny cell: Storm and mopmc run in fresh processes, files are written."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from mopmc.bench.cells import BenchInputError, Cell, count_objectives, select
from mopmc.bench.table5 import record_path, run_table5
from mopmc.examples import files

PROP = 'multi(R{"time"}<=3.5 [C], R{"energy"}<=4 [C])\n'


@pytest.fixture()
def cell(tmp_path):
    props = tmp_path / "tradeoff.props"
    props.write_text(PROP)
    return Cell("A", "1", files.tradeoff, props, count_objectives(PROP))


def test_one_cell_end_to_end(tmp_path, cell):
    out = tmp_path / "out"
    lines: list[str] = []
    result = run_table5([cell], out, queries=("storm", "achievability", "convex"), repeat=1, timeout=120, progress=lines.append)
    storm = json.loads(record_path(out, cell, "storm").read_text())
    ours = json.loads(record_path(out, cell, "achievability").read_text())
    assert storm["status"] == "ok" and ours["status"] == "ok", (storm, ours)
    # Both tools decide the query the same way (Storm is the oracle here); sizes come from Storm.
    assert storm["result"] is True and ours["result"] is True
    assert (storm["states"], storm["choices"], storm["transitions"]) == (4, 5, 9)
    assert ours["load"] > 0 and ours["check"] > 0 and ours["peak_mib"] > 0 and storm["peak_mib"] > 0
    convex = json.loads(record_path(out, cell, "convex").read_text())
    assert convex["status"] in ("ok", "n/a (convex not available)"), convex
    rows = list(csv.DictReader(result.csv.open()))
    assert [(r["family"], r["param"], r["states"], r["ach_result"]) for r in rows] == [("A", "1", "4", "True")]
    assert result.markdown.read_text().count("\n") >= 3
    for plot in result.plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A rerun resumes: nothing is measured again.
    lines.clear()
    run_table5([cell], out, queries=("storm",), repeat=1, progress=lines.append)
    assert lines == [lines[0]] and "recorded earlier" in lines[0]


def test_timeout_is_recorded_and_later_cells_skipped(tmp_path, cell):
    out = tmp_path / "out"
    bigger = cell._replace(param="2")
    run_table5([cell, bigger], out, queries=("storm",), repeat=2, timeout=0.05, progress=lambda _: None)
    first = json.loads(record_path(out, cell, "storm").read_text())
    second = json.loads(record_path(out, bigger, "storm").read_text())
    assert first["status"] == "t.o." and not first.get("skipped")
    assert second["status"] == "t.o." and second["skipped"] and "timed out at 1" in second["message"]


def test_select_rejects_bad_sizes_and_filters():
    cells = [Cell("A", "20", files.tradeoff, files.tradeoff, 4), Cell("A", "40", files.tradeoff, files.tradeoff, 4),
             Cell("B", "2", files.tradeoff, files.tradeoff, 2)]
    assert [c.key for c in select(cells, sizes="A:30-40")] == ["A-40", "B-2"]
    assert [c.key for c in select(cells, families="b")] == ["B-2"]
    with pytest.raises(BenchInputError, match="--sizes"):
        select(cells, sizes="A:20..40")


def test_bad_option_is_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mopmc", "bench", "--families", "Z", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--families 'Z'" in done.stderr
    done = subprocess.run([sys.executable, "-m", "mopmc", "bench", "--models", str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no reference-model folder" in done.stderr
