"""Warm the engine up while Storm builds the model: compiled kernels and solver imports off the clock.

Storm's sparse builder releases the GIL, so a thread can meanwhile import numba, load the kernels'
compiled code from numba's cache (``cache=True``), and for convex queries import the convex query
and its QP solver (Clarabel). The thread runs the real code paths on a tiny cyclic MDP and a tiny
acyclic one with two total-reward objectives (the arrays have the dtypes and flags of a loaded
model, so the kernels' cached signatures are the ones the real call uses). On the small models of
Table 5 this is all GIL-bound work beside the main thread's and gains nothing measurable (Model A
n=20 and n=100, C team 3: within noise with and without it, 2026-12-06); it pays where the main
thread leaves the GIL for long, in Storm's builder or mopmc's explorer on large models. It only
ever saves time: any failure is ignored and the real call does the work itself.

>>> thread = start("convex")   # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import threading
import time

import numpy as np


def _tiny():
    from mopmc.model.sparse_mdp import SparseMDP
    from mopmc.properties.objectives import Objective

    # 0 -a-> {1, 2}; 0 -b-> 0 (a zero-reward cycle); 1 -> {0, 3}; 2 -> 3; 3 -> 3 (a sink)
    model = SparseMDP.from_arrays(
        np.array([0, 2, 3, 4, 5], np.int64), np.array([0, 2, 3, 5, 6, 7], np.int64),
        np.array([1, 2, 0, 0, 3, 3, 3], np.int64), np.array([0.5, 0.5, 1.0, 0.5, 0.5, 1.0, 1.0]),
        rewards={"a": np.array([1.0, 0.0, 2.0, 0.5, 0.0]), "b": np.array([0.0, 0.0, 0.0, 1.0, 0.0])},
    )
    objectives = tuple(
        Objective(i, f'R{{"{r}"}}<={t} [C]', "total_reward", "min", r, comparison="<=", threshold=t)
        for i, (r, t) in enumerate((("a", 1.5), ("b", 0.3)))
    )
    return model, objectives


def _tiny_acyclic():
    """A tiny model without cycles (most switch models are such): the engine's one-pass path and
    the convex query's batched axis directions (their kernels differ from the cyclic model's)."""
    from mopmc.model.sparse_mdp import SparseMDP

    # 0 -a-> {1, 2}; 0 -b-> 2; 1 -> {1, 2} (a self-loop); 2 -> 2 (a sink)
    return SparseMDP.from_arrays(
        np.array([0, 2, 3, 4], np.int64), np.array([0, 2, 3, 5, 6], np.int64),
        np.array([1, 2, 2, 1, 2, 2], np.int64), np.array([0.5, 0.5, 1.0, 0.5, 0.5, 1.0]),
        rewards={"a": np.array([1.0, 0.0, 2.0, 0.0]), "b": np.array([0.0, 1.0, 0.5, 0.0])},
    )


def _goal_memory(model) -> None:
    """The goal-memory product's search (reachability objectives with distinct targets; the tiny
    model's total rewards never need it), called as :func:`mopmc.engine.reductions.goal_memory.apply`
    calls it."""
    from mopmc.engine import numba_kernels as nk

    n = model.n_states
    nk.product_bfs(model.row_groups, model.indptr, model.targets, np.ones(model.n_choices, bool), n,
                   np.zeros(n, np.int64), model.initial, True, 1, np.zeros(2 * n, np.int64))


def warm(kind: str = "check", engine: str = "kernel", device: str | None = None) -> None:
    """Run the engine (and for ``kind="convex"`` the convex query) once on the tiny model; with
    ``engine="torch"`` on ``device`` (importing torch and starting CUDA: about 1-2 s more). Its
    kernel calls compile (:func:`mopmc.engine.numba_kernels.compiling`): on the tiny model they
    would otherwise run as plain Python and load nothing."""
    from mopmc.engine import numba_kernels as nk

    with nk.compiling():
        _warm(kind, engine, device)


def _warm(kind: str, engine: str, device: str | None) -> None:
    try:
        model, objectives = _tiny()
        _goal_memory(model)
        if kind == "convex":
            from mopmc.queries.convex import convex_query

            def query(m):
                convex_query(m, objectives, "mse", soft=True, engine=engine, device=device)
        else:
            from mopmc.queries.dispatch import make_oracle
            from mopmc.queries.multi import achievability

            def query(m):
                achievability(make_oracle(m, objectives, engine, device), objectives)
        # (the torch warm-up keeps its one model: its device work delays the query's, see join_device)
        for m in (model, _tiny_acyclic()) if engine == "kernel" else (model,):
            query(m)
    except Exception:  # an optimisation only: the real call will do (and report) the work
        pass


_device_warmups: list[threading.Thread] = []
_device_lock = threading.Lock()


def start(kind: str = "check", engine: str = "kernel", device: str | None = None) -> threading.Thread:
    """Start :func:`warm` in a daemon thread and return it; the interpreter waits for it at exit
    (a compiler thread cut off at shutdown aborts the process). A torch warm-up is registered for
    :func:`join_device`."""
    thread = threading.Thread(target=warm, args=(kind, engine, device), name="mopmc-warmup", daemon=True)
    if engine == "torch":
        with _device_lock:
            _device_warmups.append(thread)
    thread.start()
    atexit.register(thread.join)
    return thread


def join_device() -> float:
    """Wait for the torch warm-ups in flight (not the calling one's own); the seconds waited.

    The torch engine calls it before its first work on the device, after its CPU preprocessing:
    the warm-up's device work (CUDA graph captures among it) must never overlap the real query's
    (a capture fails on another thread's launches), while the preprocessing may run beside it."""
    t = time.perf_counter()
    me = threading.current_thread()
    with _device_lock:
        pending = [th for th in _device_warmups if th is not me]
    for th in pending:
        th.join()
    with _device_lock:
        _device_warmups[:] = [th for th in _device_warmups if th.is_alive() or th is me]
    return time.perf_counter() - t
