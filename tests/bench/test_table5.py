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
    # --repeat 1: the note and the title say so (they said "best of 2" whatever was run)
    assert result.runs == "best of 1" and "best of 1," in result.markdown.read_text()
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
    from mopmc.bench.table5 import timeout_label

    assert timeout_label([first]) == "timeout 0.05 s"


def test_the_runs_label_reads_the_records():
    from mopmc.bench.table5 import runs_label

    assert runs_label([{"walls": [1.0, 2.0]}, {"walls": [1.0, 2.0]}]) == "best of 2"
    assert runs_label([{"walls": [1.0]}, {"walls": [1.0, 2.0, 3.0]}, {}]) == "best of 1-3"
    assert runs_label([{}]) == "best of the runs"


def test_select_rejects_bad_sizes_and_filters():
    cells = [Cell("A", "20", files.tradeoff, files.tradeoff, 4), Cell("A", "40", files.tradeoff, files.tradeoff, 4),
             Cell("B", "2", files.tradeoff, files.tradeoff, 2)]
    assert [c.key for c in select(cells, sizes="A:30-40")] == ["A-40", "B-2"]
    assert [c.key for c in select(cells, families="b")] == ["B-2"]
    with pytest.raises(BenchInputError, match="--sizes"):
        select(cells, sizes="A:20..40")
    # a size no cell can have matched nothing: "no benchmark cell matches" did not say which
    with pytest.raises(BenchInputError, match=r"--sizes 'A:abc': bad size 'abc' for family A; expected a number"):
        select(cells, sizes="A:abc")
    with pytest.raises(BenchInputError, match=r"bad size '3' for family C; expected TEAMxOBJECTIVES"):
        select(cells, sizes="C:3")
    assert [c.key for c in select(cells, sizes="20")] == ["A-20"]


def test_bad_option_is_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mopmc", "bench", "--families", "Z", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--families 'Z'" in done.stderr
    done = subprocess.run([sys.executable, "-m", "mopmc", "bench", "--models", str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no reference-model folder" in done.stderr
    for args, words in ((["--families", "Z", "--report-only"], "--families 'Z'"),  # was exit 0
                        (["--queries", "storm,,convex"], "--queries 'storm,,convex': an entry is empty"),
                        (["--sizes", "A:abc", "--families", "A"], "--sizes 'A:abc': bad size 'abc'")):
        done = subprocess.run([sys.executable, "-m", "mopmc", "bench", *args, "--out", str(tmp_path / "out")],
                              capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def _fake_measure(calls):
    def measure(cell, query, *, repeat, timeout, nice):
        calls.append((cell.key, query))
        return {"cell": cell.key, "family": cell.family, "param": cell.param, "objectives": cell.objectives,
                "query": query, "status": "ok", "e2e": 1.0, "result": True}
    return measure


def test_a_damaged_record_is_measured_again(tmp_path, cell, monkeypatch):
    from mopmc.bench import table5

    calls: list = []
    monkeypatch.setattr(table5, "measure", _fake_measure(calls))
    out = tmp_path / "out"
    run_table5([cell], out, queries=("storm",), repeat=1, progress=lambda _: None)
    assert len(calls) == 1
    path = record_path(out, cell, "storm")
    for damaged in (b'{"trunc', b"[1]", b"{}", b"\xff\xfe", b'{"cell": "A-1", "query": "storm"}'):
        path.write_bytes(damaged)  # each was an "internal error" (JSONDecodeError, KeyError, ...) on resuming
        lines: list[str] = []
        result = run_table5([cell], out, queries=("storm",), repeat=1, progress=lines.append)
        assert "damaged; measuring again" in lines[0], lines
        assert json.loads(path.read_text())["status"] == "ok" and result.rows[0]["storm_status"] == "ok"
    assert len(calls) == 6


def test_report_only_names_a_foreign_record_and_an_empty_folder(tmp_path):
    from support import assert_one_line_error, run_mopmc

    empty = run_mopmc("bench", "--report-only", "--out", tmp_path / "none")
    assert_one_line_error(empty, "no records under")  # was an empty table, written without a word
    cells = tmp_path / "out" / "cells"
    cells.mkdir(parents=True)
    (cells / "zzz.json").write_text("{bad")
    assert_one_line_error(run_mopmc("bench", "--report-only", "--out", tmp_path / "out"), "zzz.json: not a Table 5 record")
    (tmp_path / "afile").write_text("x")
    assert_one_line_error(run_mopmc("bench", "--out", tmp_path / "afile"), "--out", "afile: is a file, not a folder")
    models = tmp_path / "models" / "switch-scaling"  # one (unread) cell, so that the run gets as far as the folder
    models.mkdir(parents=True)
    (models / "switch_model_1.prism").write_text("")
    (models / "switch_prop_achievable.props").write_text(PROP)
    assert_one_line_error(run_mopmc("bench", "--models", models.parent, "--out", tmp_path / "afile" / "sub"),
                          "--out", "cannot make the folder")
    for bad in ("nan", "inf"):
        assert_one_line_error(run_mopmc("bench", "--timeout", bad, "--out", tmp_path / "o"), f"--timeout {bad}")


def test_a_foreign_or_incomplete_record_is_measured_again(tmp_path, cell, monkeypatch):
    """A record of another cell copied over this one's stood in for its measurement (the table lost
    the cell); one without ``objectives`` or with a text for a time passed and then failed as an
    internal error (KeyError, ValueError) in the summary line or the table."""
    from mopmc.bench import table5

    calls: list = []
    monkeypatch.setattr(table5, "measure", _fake_measure(calls))
    out = tmp_path / "out"
    other = cell._replace(param="2")
    run_table5([cell, other], out, queries=("storm",), repeat=1, progress=lambda _: None)
    assert len(calls) == 2
    path = record_path(out, cell, "storm")
    good = json.loads(path.read_text())
    damaged = [record_path(out, other, "storm").read_text(),
               json.dumps({k: v for k, v in good.items() if k != "objectives"}),
               json.dumps({**good, "e2e": "1.0"}),
               json.dumps({**good, "peak_mib": "big"}),
               json.dumps({**good, "cell": "A-7"})]
    for text in damaged:
        path.write_text(text)
        lines: list[str] = []
        result = run_table5([cell, other], out, queries=("storm",), repeat=1, progress=lines.append)
        assert "damaged; measuring again" in lines[0], lines
        assert [(r["family"], r["param"]) for r in result.rows] == [("A", "1"), ("A", "2")]
    assert len(calls) == 2 + len(damaged)
    # --report-only names a record that is not where record_path puts it
    (out / "cells" / "A-3.storm.json").write_text(path.read_text())
    with pytest.raises(BenchInputError, match=r"A-3.storm.json: not a Table 5 record"):
        table5.write_outputs(out)


def test_the_shipped_table5_records_are_records(tmp_path):
    """The records under benchmarks/results/table5 pass the resume check and rebuild the table."""
    import shutil
    from pathlib import Path

    from mopmc.bench.table5 import read_record, write_outputs

    cells = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "table5" / "cells"
    if not cells.is_dir():
        pytest.skip("no shipped Table 5 records here")
    assert all(read_record(p) is not None for p in cells.glob("*.json"))
    shutil.copytree(cells, tmp_path / "cells")
    assert len(write_outputs(tmp_path).rows) > 10
