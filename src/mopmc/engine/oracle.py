"""The kernel as the multi-objective queries' oracle (weights in original units, warm-started)."""

from __future__ import annotations

import numpy as np

from mopmc.engine.kernel import Engine


def kernel_oracle(model, objectives, *, engine: Engine | None = None):
    """``weights -> Vertex``: maximise ``weights . x`` (original units) with one prepared :class:`Engine`.

    The vertex's ``scheduler`` is the :class:`~mopmc.engine.kernel.KernelResult` (its ``.scheduler``
    is built on first access); ``error`` is the kernel's bound on ``weights . point``.
    """
    from mopmc.queries.oracle import Vertex

    eng = engine or Engine(model, objectives)
    last: dict = {}

    def call(weights: np.ndarray):
        w = np.asarray(weights, dtype=float)
        res = eng.optimise(w * eng.orientation.direction, warm=last.get("r"))
        last["r"] = res
        return Vertex(res.values.copy(), float(res.error_bound * np.abs(w).sum()), res)

    def many(weights: np.ndarray):
        """``[call(w) for w in weights]``, the same vertices, in fewer passes (:meth:`Engine.optimise_many`)."""
        W = np.asarray(weights, dtype=float)
        res = eng.optimise_many(W * eng.orientation.direction, warm=last.get("r"))
        last["r"] = res[-1]
        return [Vertex(r.values.copy(), float(r.error_bound * np.abs(w).sum()), r) for w, r in zip(W, res)]

    call.engine = eng  # (its ``timings``, for reports)
    if hasattr(eng, "optimise_many"):  # (the CPU engine; the torch engine asks one by one)
        call.many = many
    return call
