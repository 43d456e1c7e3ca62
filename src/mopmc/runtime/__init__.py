"""Real-time runtime: delayed highway environment, metrics, secondary controllers, switch runtime.

Importing this package is cheap and has no side effects; highway-env, gymnasium and
stable-baselines3 load only through :mod:`mopmc.runtime.highway_adapter` (the ``drl`` extra).

>>> from mopmc.runtime import parse_delay_spec
>>> parse_delay_spec("exp:0.2:1.0").spec
'exp:0.2:1.0'
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "parse_delay_spec": "mopmc.runtime.delay",
    "Scene": "mopmc.runtime.scene",
    "VehicleState": "mopmc.runtime.scene",
    "StepMetrics": "mopmc.runtime.metrics",
    "step_metrics": "mopmc.runtime.metrics",
    "SecondaryController": "mopmc.runtime.controllers",
    "CONTROLLER_1": "mopmc.runtime.controllers",
    "CONTROLLER_2": "mopmc.runtime.controllers",
    "SwitchMachine": "mopmc.runtime.switch",
    "Configuration": "mopmc.runtime.switch",
    "load_scheduler": "mopmc.runtime.scheduler",
    "run_episode": "mopmc.runtime.episode",
    "summarise": "mopmc.runtime.aggregate",
    "RuntimeConfig": "mopmc.runtime.config",
    "load_config": "mopmc.runtime.config",
    "simulate": "mopmc.runtime.simulate",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mopmc.runtime' has no attribute {name!r}")
    return getattr(import_module(module), name)
