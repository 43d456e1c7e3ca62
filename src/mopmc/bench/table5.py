"""Table 5: every selected cell measured with Storm and mopmc side by side, resumably.

Each (cell, query) record is one JSON file under ``<out>/cells/``, written atomically; a rerun skips
the records already there unless ``force``. After a timeout in Model A or B (where the cells grow
monotonically), the larger cells of that family and query are recorded as ``t.o.`` without a run
(``"skipped": true``) unless ``skip_after_timeout`` is off.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable, NamedTuple

from mopmc.bench import report
from mopmc.bench.cells import BenchInputError, Cell
from mopmc.bench.runs import QUERIES, measure

MONOTONE = ("A", "B")

NOTE = """Seconds end to end (a fresh process each, interpreter start and imports included), {runs},
{timeout} (t.o.). Storm: `parse_prism_program` + `build_model(program, properties)` +
`model_checking`, default options (its check column is `model_checking` alone). mopmc: `mopmc check
--props FILE --json` (achievability) and `mopmc convex --prop P --soft --json` (convex), load and
check split from their JSON `timings`. MiB: peak resident memory of the process, measured from
outside (GNU time). check speedup = Storm check / mopmc check; e2e ratio = mopmc / Storm end to end.
Load average when this file was written: {load} (other jobs shared the 2 cores)."""


class Table5(NamedTuple):
    """What a run produced: the merged rows and the files written."""

    rows: list[dict]
    csv: Path
    markdown: Path
    plots: list[Path]
    runs: str = "best of 2"  # (runs_label: what each time is the best of)


def record_path(out: Path, cell: Cell, query: str) -> Path:
    return out / "cells" / f"{cell.key}.{query}.json"


def _progress(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def _summary(rec: dict) -> str:
    if rec["status"] != "ok":
        return rec["status"] + (f": {rec['message']}" if rec.get("message") else "")
    parts = [f"{rec['e2e']:.2f} s"]
    if rec.get("check") is not None:
        parts.append(f"check {rec['check']:.2f} s")
    if rec.get("peak_mib") is not None:
        parts.append(f"{rec['peak_mib']:.0f} MiB")
    parts.append(f"result {rec.get('result')}")
    return ", ".join(parts)


def run_table5(
    cells: list[Cell],
    out: Path,
    *,
    queries: tuple[str, ...] = QUERIES,
    repeat: int = 2,
    timeout: float = 300.0,
    force: bool = False,
    skip_after_timeout: bool = True,
    nice: int = 0,
    progress: Callable[[str], None] = _progress,
) -> Table5:
    """Measure every (cell, query) not yet recorded, then write CSV, markdown and plots under ``out``."""
    timed_out: dict[tuple[str, str], str] = {}
    total, done = len(cells) * len(queries), 0
    for cell in cells:
        for query in queries:
            done += 1
            path = record_path(out, cell, query)
            tag = f"[{done}/{total}] {cell.key} {query}"
            rec = read_record(path) if path.exists() and not force else None
            if path.exists() and not force and rec is None:
                progress(f"{tag}: the record {path} is damaged; measuring again")
            if rec is not None:
                progress(f"{tag}: recorded earlier ({_summary(rec)})")
            elif skip_after_timeout and (cell.family, query) in timed_out:
                rec = {"cell": cell.key, "family": cell.family, "param": cell.param, "objectives": cell.objectives,
                       "query": query, "status": "t.o.", "skipped": True,
                       "message": f"not run: timed out at {timed_out[(cell.family, query)]}"}
                report.atomic_write(path, json.dumps(rec, indent=1) + "\n")
                progress(f"{tag}: t.o. (not run, timed out at {timed_out[(cell.family, query)]})")
            else:
                progress(f"{tag}: running (best of {repeat}, timeout {timeout:g} s)")
                rec = measure(cell, query, repeat=repeat, timeout=timeout, nice=nice)
                rec["model"], rec["props"] = str(cell.model), str(cell.props)
                report.atomic_write(path, json.dumps(rec, indent=1) + "\n")
                progress(f"{tag}: {_summary(rec)}")
            if rec["status"] == "t.o." and cell.family in MONOTONE:
                timed_out.setdefault((cell.family, query), cell.param)
    return write_outputs(out)


#: the measured times and sizes a record may hold: numbers (or null); the summary line and the ratios compute with them
_NUMBERS = ("e2e", "build", "load", "check", "peak_mib", "states", "choices", "transitions")


def read_record(path: Path) -> dict | None:
    """The (cell, query) record at ``path``, or ``None`` where the file is not one: damaged, or
    foreign (a record of another cell or query, which would stand in for this one's measurement)."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("status"), str) or rec.get("query") not in QUERIES:
        return None
    family, param = rec.get("family"), rec.get("param")
    if not isinstance(family, str) or not isinstance(param, str) or rec.get("cell") != f"{family}-{param}":
        return None
    if path.name != f"{rec['cell']}.{rec['query']}.json":  # as record_path names it
        return None
    if not isinstance(rec.get("objectives"), int) or isinstance(rec["objectives"], bool):
        return None
    if any(rec.get(k) is not None and (isinstance(rec[k], bool) or not isinstance(rec[k], (int, float))) for k in _NUMBERS):
        return None
    if rec["status"] == "ok" and rec.get("e2e") is None:
        return None
    return rec


def load_records(out: Path) -> list[dict]:
    """Every record under ``out/cells``; a damaged or foreign file there is an error naming it."""
    folder = out / "cells"
    records = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        rec = read_record(p)
        if rec is None:
            raise BenchInputError(f"{p}: not a Table 5 record (damaged or foreign); delete it and run mopmc bench again")
        records.append(rec)
    return records


def _order(records: list[dict]) -> list[str]:
    fam = {"A": 0, "B": 1, "C": 2}

    def key(cell: str):
        f, p = cell.split("-", 1)
        return (fam.get(f, 9), int(p) if p.isdigit() else 0, p)

    return sorted({r["cell"] for r in records}, key=key)


def runs_label(records: list[dict]) -> str:
    """How many runs each time is the best of, read off the records (``--repeat``, or fewer where an
    earlier run timed out or failed): "best of 2", "best of 1-2"."""
    counts = sorted({len(r["walls"]) for r in records if isinstance(r.get("walls"), list) and r["walls"]})
    if not counts:
        return "best of the runs"
    return f"best of {counts[0]}" if len(counts) == 1 else f"best of {counts[0]}-{counts[-1]}"


def timeout_label(records: list[dict]) -> str:
    """The timeout the timed-out records ran under ("timeout 300 s"), or just "timeout"."""
    limits = sorted({r["timeout"] for r in records if r.get("status") == "t.o." and isinstance(r.get("timeout"), (int, float))})
    return f"timeout {', '.join(f'{t:g}' for t in limits)} s" if limits else "timeout"


def write_outputs(out: Path) -> Table5:
    """(Re)build ``table5.csv``, ``table5.md`` and the plots from every record under ``out``."""
    records = load_records(out)
    if not records:
        raise BenchInputError(f"{out}: no records under {out / 'cells'}; run mopmc bench (without --report-only) first")
    table = report.rows(records, _order(records))
    csv_path, md_path = out / "table5.csv", out / "table5.md"
    try:
        report.write_csv(table, csv_path)
        note = NOTE.format(runs=runs_label(records), timeout=timeout_label(records),
                           load=", ".join(f"{x:.1f}" for x in os.getloadavg()))
        report.write_markdown(table, md_path, note)
        plots = report.write_plots(table, out)
    except OSError as e:
        raise BenchInputError(f"{e.filename2 or e.filename or out}: cannot write ({e.strerror})") from None
    return Table5(table, csv_path, md_path, plots, runs_label(records))
