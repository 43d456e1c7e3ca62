"""The reference-value table: single-objective values from Storm's exact engine.

The numbers live in ``reference_values.json`` (regenerate with ``make_reference_values.py``); this
module loads them and the models they belong to, so that every engine runs the same table::

    @pytest.mark.parametrize("ref", REFERENCES, ids=ref_id)
    def test_my_engine(ref):
        model, objective = reference_case(ref)
        assert my_value(model, objective) == pytest.approx(ref.value, rel=1e-6, abs=1e-6)
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from support import SHARED, shared_model

TABLE = Path(__file__).resolve().with_name("reference_values.json")

#: Models on which the LP oracle is too slow for the default run: HiGHS needs 17-64 s per
#: dive-and-rise row on 2 cores (a 15k-state cyclic model; the simplex takes ~50k iterations),
#: 6-7 s per consensus_multi5 row.
#: Their rows are ``heavy``; run them with ``MOPMC_HEAVY_TESTS=1``. Other engines may run them always.
HEAVY_FOR_LP = frozenset({"dive-and-rise/dive_and_rise_action_rewards.nm",
                          # 141k states, 6-7 s a row; the kernel still checks it against Storm every run
                          "peer-tests/prism/multi-general/consensus_multi5.nm"})


class Reference(NamedTuple):
    """One row: ``model`` is relative to ``../shared/benchmarks``; ``value`` may be ``inf``."""

    model: str
    constants: tuple[tuple[str, str], ...]
    prop: str
    value: float
    exact: str | None
    states: int

    @property
    def heavy(self) -> bool:
        """Too slow for the LP oracle in the default test run (see :data:`HEAVY_FOR_LP`)."""
        return self.model in HEAVY_FOR_LP

    def close_to(self, value: float, rel: float = 1e-6) -> bool:
        """``value`` within ``rel * max(1, |reference|)`` (infinities must match exactly)."""
        if math.isinf(self.value) or math.isinf(value):
            return value == self.value
        return abs(value - self.value) <= rel * max(1.0, abs(self.value))


def _row(d: dict) -> Reference:
    value = float(d["value"])  # "inf"/"-inf" parse too
    return Reference(d["model"], tuple(sorted(d["constants"].items())), d["property"], value, d.get("exact"), d["states"])


REFERENCES: tuple[Reference, ...] = tuple(_row(d) for d in json.loads(TABLE.read_text()))


def ref_id(ref: Reference) -> str:
    return f"{ref.model}:{ref.prop}"


@lru_cache(maxsize=2)
def _loaded(model: str, constants: tuple[tuple[str, str], ...]):
    from mopmc.io.load import load

    path = shared_model(model)
    props = [r.prop for r in REFERENCES if r.model == model and r.constants == constants]
    loaded = load(path, dict(constants), properties=";\n".join(props))
    return loaded.model, {p: parsed for p, parsed in zip(props, loaded.properties())}


def reference_case(ref: Reference):
    """The loaded model (cached, built with all of its table properties) and the row's objective.

    Skips visibly when ``../shared/benchmarks`` is absent.
    """
    if not SHARED.exists():
        import pytest

        pytest.skip(f"reference models not found under {SHARED}")
    model, props = _loaded(ref.model, ref.constants)
    return model, props[ref.prop].objectives[0]


def reference_property(ref: Reference):
    """The loaded model and the row's whole :class:`~mopmc.properties.objectives.Property`."""
    reference_case(ref)  # skips visibly without the shared models
    model, props = _loaded(ref.model, ref.constants)
    return model, props[ref.prop]
