"""Regenerate ``reference_values.json``: single-objective values computed by Storm in exact mode.

Run from the repository root (needs stormpy and ../shared/benchmarks)::

    python tests/engine/make_reference_values.py

Each model gets its chosen properties plus automatically generated ones over its reward models and
labels (min/max total reward, reachability, until, globally, reachability reward). Rows where Storm
refuses the property (e.g. negative total rewards) are left out and listed on stderr. Values are
rationals from Storm's exact engine, stored as float (and as the exact fraction when it is short);
``inf`` is stored as the string ``"inf"``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from fractions import Fraction
from pathlib import Path

import stormpy

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1].parent / "shared" / "benchmarks"
OUT = HERE / "reference_values.json"

SKIP_LABELS = {"init", "deadlock"}


def multi_objectives(path: Path) -> list[str]:
    """The objectives of a ``multi(...)`` property file, as single queries (both senses)."""
    text = " ".join(path.read_text().split())
    inner = text[text.index("multi(") + 6 : text.rindex(")")]
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(inner[last:i].strip())
            last = i + 1
    parts.append(inner[last:].strip())
    out = []
    for p in parts:
        for sense in ("min", "max"):
            out.append(re.sub(r"(\}|^P)\s*(<=|>=|<|>)\s*[0-9.]+\s*", rf"\1{sense}=? ", p, count=1))
    return out


def auto_properties(labels: list[str], rewards: list[str], max_labels: int = 4) -> list[str]:
    out = []
    for r in rewards:
        out += [f'R{{"{r}"}}min=? [C]', f'R{{"{r}"}}max=? [C]']
    labels = labels[:max_labels]
    for lab in labels:
        out += [f'Pmin=? [F "{lab}"]', f'Pmax=? [F "{lab}"]', f'Pmin=? [G !"{lab}"]', f'Pmax=? [G !"{lab}"]']
        if rewards:
            out += [f'R{{"{rewards[0]}"}}min=? [F "{lab}"]', f'R{{"{rewards[0]}"}}max=? [F "{lab}"]']
    if len(labels) >= 2:
        a, b = labels[:2]
        out += [f'Pmin=? [!"{a}" U "{b}"]', f'Pmax=? [!"{a}" U "{b}"]', f'Pmax=? ["{a}" U "{b}"]']
    return out


# (model relative to SHARED, constants, explicit properties, auto properties?)
MODELS: list[tuple[str, dict[str, str], list[str], bool]] = [
    ("peer-tests/storm/multiobj_consensus2_3_2.nm", {}, ['Pmax=? [F "one_proc_err"]', 'Pmin=? [G "one_coin_ok"]'], True),
    ("peer-tests/storm/multiobj_scheduler05.nm", {}, [], True),
    ("peer-tests/storm/multiobj_memory.prism", {"p": "1/4"}, [], True),
    ("peer-tests/storm/multiobj_team3.nm", {}, ['Pmax=? [F "task1_compl"]', 'Pmax=? [F "task1_compl" & "task2_compl"]'], True),
    ("peer-tests/storm/multiobj_zeroconf4.nm", {}, [], True),
    ("peer-tests/storm/uav.prism", {"COUNTER": "3", "Unf": "0", "B": "0"}, [], True),
    ("peer-tests/storm/tiny_rewards_negative.nm", {}, [], True),
    ("team-formation/team_3.nm", {}, multi_objectives(SHARED / "team-formation/team_3_props/obj_10.pctl"), False),
    ("team-formation/team_4.nm", {}, multi_objectives(SHARED / "team-formation/team_4_props/obj_10.pctl"), False),
    ("dive-and-rise/dive_and_rise_action_rewards.nm", {},
     [f'R{{"target_{i}"}}{s}=? [C]' for i in (0, 33, 66, 99) for s in ("min", "max")], False),
    ("switch-table3/switch_model.prism", {},
     [f'R{{"{r}"}}{s}=? [C]' for r in ("ctrl_cost", "headway_cost", "lane_dep_cost", "ttc_cost") for s in ("min", "max")], False),
    *[(f"switch-scaling/switch_model_{n}.prism", {},
       [f'R{{"{r}"}}min=? [C]' for r in ("ctrl_cost", "headway_cost", "ttc_cost", "onlane_cost")], False) for n in (20, 40)],
]


def prism_models() -> list[tuple[str, dict[str, str], list[str], bool]]:
    found = sorted((SHARED / "peer-tests/prism").rglob("*.nm"))
    seen, out = set(), []
    for p in found:
        text = p.read_text()
        if text in seen:  # multi-pareto repeats multi-general
            continue
        seen.add(text)
        out.append((str(p.relative_to(SHARED)), {}, [], True))
    return out


def exact_rows(rel: str, constants: dict[str, str], explicit: list[str], auto: bool) -> list[dict]:
    path = SHARED / rel
    prog = stormpy.parse_prism_program(str(path))
    if constants:
        defs = ",".join(f"{k}={v}" for k, v in constants.items())
        prog, _ = stormpy.instantiate_constants(prog, defs)
    texts = list(explicit)
    if auto:
        probe = stormpy.build_model(prog)
        labels = sorted(set(probe.labeling.get_labels()) - SKIP_LABELS)
        texts += auto_properties(labels, sorted(probe.reward_models))
    texts = list(dict.fromkeys(texts))
    props = stormpy.parse_properties(";".join(texts), prog)
    start = time.perf_counter()
    model = stormpy.build_model[stormpy.Rational](prog, props)
    print(f"{rel}: {model.nr_states} states, {model.nr_choices} choices, built in {time.perf_counter() - start:.1f}s",
          file=sys.stderr)
    rows = []
    for text, prop in zip(texts, props):
        start = time.perf_counter()
        try:
            res = stormpy.model_checking(model, prop, environment=stormpy.environments.exact())
        except Exception as exc:  # Storm refuses some properties (negative rewards, ...): skip them
            print(f"  skipped {text}: {str(exc).splitlines()[0][:120]}", file=sys.stderr)
            continue
        v = res.get_value(model.initial_states[0])
        if isinstance(v, float):
            value, exact = ("inf" if v > 0 else "-inf"), None
        else:
            frac = Fraction(str(v))
            value, exact = float(frac), (str(frac) if len(str(frac)) <= 60 else None)
        row = {"model": rel, "constants": constants, "property": text, "value": value,
               "states": model.nr_states, "storm_seconds": round(time.perf_counter() - start, 3)}
        if exact is not None:
            row["exact"] = exact
        rows.append(row)
    return rows


def main() -> None:
    rows = []
    for rel, consts, explicit, auto in [*MODELS, *prism_models()]:
        rows += exact_rows(rel, consts, explicit, auto)
    OUT.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
