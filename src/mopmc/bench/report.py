"""Table 5 from the per-cell records: CSV, markdown, a rich table and two PNG plots."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

COLUMNS = (
    "family", "param", "states", "choices", "transitions", "objectives",
    "storm_status", "storm_e2e", "storm_build", "storm_check", "storm_peak_mib", "storm_result",
    "ach_status", "ach_e2e", "ach_load", "ach_check", "ach_peak_mib", "ach_result", "ach_iterations",
    "convex_status", "convex_e2e", "convex_load", "convex_check", "convex_peak_mib", "convex_iterations",
    "convex_lower", "convex_result", "convex_query_status",
    "check_speedup", "e2e_ratio",
)
_PREFIX = {"storm": "storm", "achievability": "ach", "convex": "convex"}
_FIELDS = ("status", "e2e", "build", "load", "check", "peak_mib", "result", "iterations", "lower", "query_status")


def rows(records: list[dict], order: list[str]) -> list[dict]:
    """One row per cell (in ``order``), merging its three records; ratios where both sides ran."""
    by_cell: dict[str, dict] = {}
    for rec in records:
        row = by_cell.setdefault(rec["cell"], {"family": rec["family"], "param": rec["param"], "objectives": rec["objectives"]})
        prefix = _PREFIX[rec["query"]]
        for f in _FIELDS:
            key = f"{prefix}_{f}"
            if key in COLUMNS and rec.get(f) is not None:
                row[key] = rec[f]
        for size in ("states", "choices", "transitions"):
            if rec.get(size) is not None:
                row.setdefault(size, rec[size])
    for row in by_cell.values():
        if row.get("storm_status") == "ok" and row.get("ach_status") == "ok":
            if row.get("ach_check"):
                row["check_speedup"] = row["storm_check"] / row["ach_check"]
            row["e2e_ratio"] = row["ach_e2e"] / row["storm_e2e"]
    return [by_cell[k] for k in order if k in by_cell]


def _fmt(value, key: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if key.endswith("peak_mib"):
            return f"{value:.0f}"
        if key in ("check_speedup",):
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1e-3 else f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def write_csv(table: list[dict], path: Path) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in table:
        writer.writerow({k: _fmt(row.get(k), k) for k in COLUMNS})
    atomic_write(path, buf.getvalue())


def _time(row: dict, prefix: str) -> str:
    status = row.get(f"{prefix}_status")
    if status is None:
        return ""
    if status != "ok":
        return status
    return _fmt(row.get(f"{prefix}_e2e"), "e2e")


def display_rows(table: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The columns people read: sizes, Storm, ours (split load/check), convex, ratios."""
    head = ["model", "param", "states", "obj", "Storm s", "Storm check s", "Storm MiB", "ours s", "ours load s",
            "ours check s", "ours MiB", "check speedup", "e2e ratio", "result", "convex s", "convex iters", "convex loss"]
    body = []
    for r in table:
        agree = ""
        if r.get("storm_result") is not None and r.get("ach_result") is not None:
            agree = f"{r['ach_result']}" + ("" if r["storm_result"] == r["ach_result"] else f" (Storm {r['storm_result']})")
        elif r.get("ach_result") is not None:
            agree = str(r["ach_result"])
        body.append([
            r["family"], r["param"], _fmt(r.get("states"), "states"), str(r["objectives"]),
            _time(r, "storm"), _fmt(r.get("storm_check"), "x"), _fmt(r.get("storm_peak_mib"), "storm_peak_mib"),
            _time(r, "ach"), _fmt(r.get("ach_load"), "x"), _fmt(r.get("ach_check"), "x"), _fmt(r.get("ach_peak_mib"), "ach_peak_mib"),
            _fmt(r.get("check_speedup"), "check_speedup"), _fmt(r.get("e2e_ratio"), "x"), agree,
            _time(r, "convex"), _fmt(r.get("convex_iterations"), "x"), _fmt(r.get("convex_result"), "x"),
        ])
    return head, body


def write_markdown(table: list[dict], path: Path, note: str = "") -> None:
    head, body = display_rows(table)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in body]
    atomic_write(path, (note + "\n\n" if note else "") + "\n".join(lines) + "\n")


def print_table(table: list[dict], console=None, runs: str = "best of 2") -> None:
    from rich.console import Console
    from rich.table import Table

    head, body = display_rows(table)
    t = Table(title=f"Table 5: mopmc vs Storm (seconds end to end, {runs}; t.o. = timeout)")
    for h in head:
        t.add_column(h, justify="right" if h not in ("model", "result") else "left")
    for row in body:
        t.add_row(*row)
    (console or Console(width=max(200, Console().width))).print(t)


def write_plots(table: list[dict], folder: Path) -> list[Path]:
    """``time_vs_states.png`` (Models A and C) and ``time_vs_objectives.png`` (Model B)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = (("storm", "Storm achievability", "o-"), ("ach", "mopmc achievability", "s-"), ("convex", "mopmc convex", "^-"))
    out = []
    for name, xkey, families, xlabel in (
        ("time_vs_states.png", "states", ("A", "C"), "states"),
        ("time_vs_objectives.png", "objectives", ("B",), "objectives"),
    ):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for fam in families:
            for prefix, label, style in series:
                pts = sorted(
                    (r[xkey], r[f"{prefix}_e2e"]) for r in table
                    if r["family"] == fam and r.get(xkey) is not None and r.get(f"{prefix}_status") == "ok" and r.get(f"{prefix}_e2e")
                )
                if pts:
                    ax.plot(*zip(*pts), style if fam != "C" else style[0], label=f"{label} (Model {fam})", markersize=4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds, end to end")
        ax.set_yscale("log")
        if xkey == "states":
            ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = folder / name
        tmp = path.with_name(path.name + ".tmp.png")
        fig.savefig(tmp, dpi=120)
        plt.close(fig)
        os.replace(tmp, path)
        out.append(path)
    return out


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
