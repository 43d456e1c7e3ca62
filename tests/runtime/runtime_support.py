"""Helpers of the runtime tests (imported by name; ``conftest.py`` re-exports the fixture): a tiny deterministic 1-D world and scheduler builders."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mopmc.runtime.controllers import Command
from mopmc.runtime.scene import Scene, VehicleState


class FakeWorld:
    """Ego behind a leader on one lane; the headway at the end of step k is ``headways[k]``.

    It records every applied action with the time it took effect, so tests can check holds.
    """

    decision_period = 1.0

    def __init__(self, max_steps: int, headways: list[float] | None = None) -> None:
        self.max_steps = max_steps
        self.headways = headways or [10.0] * max_steps
        self.time = 0.0
        self.applied: list[tuple[float, str]] = []

    def reset_world(self, seed: int) -> Any:
        self.time = 0.0
        self.applied = []
        return np.zeros(2)

    def observe(self) -> Any:
        return np.array([self.time, 0.0])

    def scene(self) -> Scene:
        k = min(len(self.headways) - 1, max(0, math.ceil(self.time / self.decision_period - 1e-9) - 1))
        speed = 20.0
        leader = VehicleState(lane=0, s=self.headways[k] * speed + 5.0, speed=speed)
        return Scene(VehicleState(lane=0, s=0.0, speed=speed), (leader,), True, False, self.time)

    def advance(self, seconds: float) -> None:
        self.time += seconds

    def apply_action(self, action: np.ndarray) -> None:
        self.applied.append((round(self.time, 9), "primary"))

    def apply_command(self, command: Command) -> None:
        self.applied.append((round(self.time, 9), "secondary"))

    @property
    def terminated(self) -> bool:
        return False


class ConstantAgent:
    def act(self, observation: Any) -> np.ndarray:
        return np.zeros(2)


PRISM_BINDING: dict[str, Any] = {
    "timestep": "tc",
    "consecutive_calls": "cc",
    "configuration": "conf",
    "locations": {"choose": {"sm": 0}, "exit_check": {"ss": 5}},
    "actions": {"stay": "re_s", "exit": "ex_s"},
    "configurations": [
        {"name": "C1", "t": 0.2, "controller": 1},
        {"name": "C2", "t": 0.1, "controller": 1},
        {"name": "C3", "t": 0.2, "controller": 2},
        {"name": "C4", "t": 0.1, "controller": 2},
    ],
}


def choose_entry(tc: int, probs: dict[int, float]) -> dict[str, Any]:
    """A CHOOSE entry of the reference PRISM model; ``probs`` maps conf value (1..4) to probability."""
    state = {"conf": 0, "sm": 0, "sp": 0, "ss": 0, "cc": 0, "tc": tc}
    choices = [
        {"action": "conf", "successor": {**state, "sm": 1, "conf": c}, "probability": p}
        for c, p in probs.items()
    ]
    return {"state": state, "choices": choices}


def exit_entry(tc: int, cc: int, conf: int, p_exit: float) -> dict[str, Any]:
    """An exit-check entry (ss=5) of the reference model."""
    state = {"conf": conf, "sm": 1, "sp": 0, "ss": 5, "cc": cc, "tc": tc}
    choices = [{"action": "re_s", "successor": None, "probability": 1.0 - p_exit}]
    if cc == PRISM_BINDING.get("min_consecutive_calls", 4) or p_exit > 0:
        choices.append({"action": "ex_s", "successor": None, "probability": p_exit})
    return {"state": state, "choices": choices}


def scheduler_doc(entries: list[dict[str, Any]], *, kind: str = "deterministic", k: int | None = None,
                  binding: dict[str, Any] | None = None) -> dict[str, Any]:
    b = dict(binding or PRISM_BINDING)
    if k is not None:
        b["min_consecutive_calls"] = k
    return {
        "format": "mopmc-scheduler",
        "version": 1,
        "model": {"states": 100, "choices": 120, "variables": ["conf", "sm", "sp", "ss", "cc", "tc"]},
        "kind": kind,
        "objectives": ['R{"ctrl_cost"}min=? [C]'],
        "point": [1.5],
        "binding": b,
        "entries": entries,
    }


@pytest.fixture
def write_json(tmp_path: Path):
    def write(doc: Any, name: str = "sched.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
        return path

    return write
