"""mopmc: design and multi-objective probabilistic model checking of fault-tolerant real-time DRL systems.

Importing mopmc is cheap: heavy dependencies (stormpy, numba, cvxpy, torch, highway-env) load on first use.

>>> import mopmc
>>> model = mopmc.load_model(mopmc.examples.files.dice)  # doctest: +SKIP
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load": "mopmc.io.load",  # a model with property text: .model, .properties()
    "load_model": "mopmc.io.load",
    "save_umb": "mopmc.io.umb",  # alias of write_umb
    "SparseMDP": "mopmc.model.sparse_mdp",
    "validate": "mopmc.model.validate",
    "parse_properties": "mopmc.properties.parse",
    "examples": "mopmc.examples",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mopmc' has no attribute {name!r}")
    mod = import_module(module)
    if module == f"mopmc.{name}":  # a subpackage (examples)
        return mod
    return getattr(mod, "write_umb" if name == "save_umb" else name)
