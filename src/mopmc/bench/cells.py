"""The cells of Table 5: Model A (switch scaling), Model B (dive and rise), Model C (team formation)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from mopmc.errors import MopmcError

FAMILIES = ("A", "B", "C")
#: The subset ``--quick`` selects: one small cell per family.
QUICK = {"A": ("20",), "B": ("2", "3"), "C": ("3x02",)}


class BenchInputError(MopmcError):
    """A bad benchmark option or a missing reference-model folder."""


class Cell(NamedTuple):
    """One row of Table 5: a model file and a property file with one ``multi(...)`` property."""

    family: str
    param: str
    model: Path
    props: Path
    objectives: int

    @property
    def key(self) -> str:
        return f"{self.family}-{self.param}"


def default_models_dir() -> Path:
    """``$MOPMC_BENCH_MODELS``, else ``../shared/benchmarks`` beside the checkout (found from the
    source tree of an editable install, else from the working directory, for a non-editable one)."""
    env = os.environ.get("MOPMC_BENCH_MODELS")
    if env:
        return Path(env)
    candidates = [Path(__file__).resolve().parents[4], Path.cwd().resolve().parent, Path.cwd().resolve()]
    for top in candidates:
        if (top / "shared" / "benchmarks").is_dir():
            return top / "shared" / "benchmarks"
    return candidates[0] / "shared" / "benchmarks"


def count_objectives(prop_text: str) -> int:
    """Objectives of the first ``multi(...)``: the top-level commas inside it, plus one."""
    start = prop_text.find("multi(")
    if start < 0:
        return 0
    depth, count = 0, 1
    for ch in prop_text[start + len("multi(") :]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return count
            depth -= 1
        elif ch == "," and depth == 0:
            count += 1
    return count


def _cell(family: str, param: str, model: Path, props: Path) -> Cell:
    return Cell(family, param, model, props, count_objectives(props.read_text()))


def all_cells(root: Path) -> list[Cell]:
    """Every cell whose files exist under ``root``, in table order."""
    if not root.is_dir():
        raise BenchInputError(f"{root}: no reference-model folder; pass --models DIR or set MOPMC_BENCH_MODELS")
    cells: list[Cell] = []
    a = root / "switch-scaling"
    for model in sorted(a.glob("switch_model_*.prism"), key=lambda p: int(p.stem.rsplit("_", 1)[1])):
        cells.append(_cell("A", model.stem.rsplit("_", 1)[1], model, a / "switch_prop_achievable.props"))
    b = root / "dive-and-rise"
    props = sorted(b.glob("dive_and_rise_prop_*.props"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    for prop in props:
        cells.append(_cell("B", prop.stem.rsplit("_", 1)[1], b / "dive_and_rise_action_rewards.nm", prop))
    c = root / "team-formation"
    for model in sorted(c.glob("team_*.nm")):
        for prop in sorted((c / f"{model.stem}_props").glob("obj_*.pctl")):
            team, obj = model.stem.split("_")[1], prop.stem.split("_")[1]
            cells.append(_cell("C", f"{team}x{obj}", model, prop))
    return cells


def select(cells: list[Cell], families: str | None = None, sizes: str | None = None, quick: bool = False) -> list[Cell]:
    """Filter by ``families`` ("A,B"), ``sizes`` ("A:20-100,B:2-10,C:3x02" or plain "20,40"), ``quick``."""
    chosen = cells
    if families:
        wanted = [f.strip().upper() for f in families.split(",") if f.strip()]
        bad = [f for f in wanted if f not in FAMILIES]
        if bad:
            raise BenchInputError(f"--families {families!r}: unknown family {bad[0]!r}; use A, B and/or C")
        chosen = [c for c in chosen if c.family in wanted]
    if quick:
        chosen = [c for c in chosen if c.param in QUICK[c.family]]
    if sizes:
        chosen = [c for c in chosen if _size_matches(c, _parse_sizes(sizes))]
    return chosen


def _parse_sizes(text: str) -> list[tuple[str | None, str, str]]:
    specs = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(?:([ABCabc]):)?(\w+)(?:-(\w+))?", part)
        if not m:
            raise BenchInputError(f"--sizes {text!r}: bad entry {part!r}; use e.g. A:20-100,B:2-10,C:3x02")
        fam, lo, hi = m.group(1), m.group(2), m.group(3) or m.group(2)
        for size in (lo, hi):  # A and B are sized by a number, C by TEAMxOBJECTIVES: another size matched no cell
            if not (size.isdigit() if fam and fam.upper() in "AB" else
                    re.fullmatch(r"\d+x\d+", size) if fam else re.fullmatch(r"\d+(x\d+)?", size)):
                shape = {"A": "a number, e.g. A:20-100", "B": "a number, e.g. B:2-10",
                         "C": "TEAMxOBJECTIVES, e.g. C:3x02"}.get(fam.upper() if fam else "", "a number or TEAMxOBJECTIVES")
                raise BenchInputError(f"--sizes {text!r}: bad size {size!r}{f' for family {fam.upper()}' if fam else ''}; "
                                      f"expected {shape}")
        specs.append((fam.upper() if fam else None, lo, hi))
    return specs


def _size_matches(cell: Cell, specs) -> bool:
    """A family no entry names is kept whole; otherwise the cell must fall in one of its ranges."""
    relevant = [(lo, hi) for fam, lo, hi in specs if fam in (None, cell.family)]
    if not relevant:
        return True
    for lo, hi in relevant:
        if lo.isdigit() and hi.isdigit() and cell.param.isdigit():
            if int(lo) <= int(cell.param) <= int(hi):
                return True
        elif lo <= cell.param <= hi:
            return True
    return False
