"""The engine warm-up that runs beside Storm's build: it exercises the real paths and changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from mopmc.engine import warmup
from mopmc.engine.lp import lp_convex
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.queries.convex import convex_query, make_loss, soft_target
from mopmc.queries.dispatch import make_oracle
from mopmc.queries.multi import achievability


def test_the_tiny_model_runs_the_real_paths_and_gets_the_right_answers():
    model, objectives = warmup._tiny()
    res = convex_query(model, objectives, "mse", soft=True)
    exact = lp_convex(model, objectives, make_loss("mse", 2, soft_target(objectives), None).expression)
    assert res.status == "optimal" and res.loss == pytest.approx(exact.loss, abs=1e-7)
    kernel = achievability(make_oracle(model, objectives, "kernel"), objectives)
    lp = achievability(make_oracle(model, objectives, "lp"), objectives)
    assert kernel.achievable == lp.achievable and kernel.margin == pytest.approx(lp.margin, abs=1e-6)
    warmup.warm("check")
    warmup.warm("convex")  # never raises


def test_load_with_warm_up_gives_the_same_model():
    text = 'multi(P>=0.5 [F "goal"], P<=0.2 [F "hazard"])'
    plain = load(files.robot, properties=text)
    warmed = load(files.robot, properties=text, warm="check")
    for a, b in ((plain.model.targets, warmed.model.targets), (plain.model.probs, warmed.model.probs)):
        np.testing.assert_array_equal(a, b)
    threads = [t for t in __import__("threading").enumerate() if t.name == "mopmc-warmup"]
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive()


@pytest.mark.parametrize("builder", ["mopmc", "storm"])
def test_load_starts_the_warm_up_once_where_the_build_releases_the_gil(monkeypatch, builder):
    """With mopmc's builder, after the explorer's kernels are loaded (their loading holds the GIL,
    like the warm-up's imports) and just before the exploration; with Storm's, before its build."""
    from mopmc.io import storm
    from mopmc.io.explicit import explore as ex
    from mopmc.io.explicit import kernels

    from mopmc.engine import numba_kernels as nk

    monkeypatch.setattr(nk, "PY_WORK", 0)  # (else the robot is small enough for plain Python kernels: no warm-up)
    events = []
    monkeypatch.setattr(warmup, "start", lambda *a: events.append(("warm-up", a, "_step" in kernels._compiled)))
    real_explore = ex.explore
    monkeypatch.setattr(ex, "explore", lambda *a: events.append(("explore",)) or real_explore(*a))
    real_build = storm.build
    monkeypatch.setattr(storm, "build", lambda *a, **k: events.append(("storm build",)) or real_build(*a, **k))
    text = 'multi(P>=0.5 [F "goal"], P<=0.2 [F "hazard"])'
    loaded = load(files.robot, properties=text, warm="check", builder=builder)
    assert loaded.builder == builder
    build = "explore" if builder == "mopmc" else "storm build"
    assert [e[0] for e in events] == ["warm-up", build]
    assert events[0][1] == ("check", "kernel", None)
    if builder == "mopmc":
        assert events[0][2]  # the explorer's kernels were loaded before


def test_the_torch_engine_waits_for_a_torch_warm_up_before_its_device_work(monkeypatch):
    """The warm-up's device work (CUDA graph captures among it) must never overlap the real
    query's: the torch engine joins it after its CPU preprocessing, before its upload."""
    pytest.importorskip("torch")
    import threading
    import time

    from mopmc.engine import numba_kernels as nk
    from mopmc.engine.torch_engine import TorchEngine

    monkeypatch.setattr(nk, "PY_WORK", 0)  # (else the robot is small enough for plain Python kernels: no warm-up)

    text = 'multi(P>=0.5 [F "goal"], P<=0.2 [F "hazard"])'
    started = threading.Event()
    real = warmup.warm

    def slow(*args):  # a warm-up still busy when the load returns
        started.set()
        time.sleep(1.0)
        real(*args)

    warmup.warm = slow
    try:
        warmed = load(files.robot, properties=text, warm="convex", warm_engine="torch", warm_device="cpu")
    finally:
        warmup.warm = real
    assert started.wait(10) and any(t.name == "mopmc-warmup" and t.is_alive() for t in threading.enumerate())
    engine = TorchEngine(warmed.model, warmed.properties()[0].objectives, "cpu")
    assert not any(t.name == "mopmc-warmup" and t.is_alive() for t in threading.enumerate())
    assert engine.timings["warm_wait"] > 0 and warmup.join_device() < 0.1


def test_a_torch_warm_up_inside_itself_does_not_wait_for_itself():
    pytest.importorskip("torch")
    thread = warmup.start("convex", "torch", "cpu")
    thread.join(timeout=300)
    assert not thread.is_alive()  # its own TorchEngine did not join it (that would never end)


@pytest.mark.parametrize("builder", ["storm", "mopmc"])
def test_the_warm_up_compiles_the_goal_memory_search_as_the_real_call_uses_it(builder):
    """Reachability objectives with distinct targets need the product search; the warm-up calls it
    with the types of a loaded model, so the real call finds it compiled (one signature)."""
    from mopmc.engine import numba_kernels as nk
    from mopmc.engine.reductions import goal_memory

    warmup._goal_memory(warmup._tiny()[0])
    loaded = load(files.robot, properties='multi(P>=0.5 [F "goal"], P<=0.2 [F "hazard"])', builder=builder)
    problem, pmap, _ = goal_memory.apply(loaded.model, loaded.properties()[0].objectives)
    assert not pmap.identity and len(pmap.decided) == 2
    assert len(nk.product_bfs.compiled.signatures) == 1


def test_no_warm_up_where_the_kernels_run_as_plain_python(monkeypatch):
    """A program whose variables span a few hundred valuations runs its kernels as plain Python
    (mopmc.engine.numba_kernels.PY_WORK): a warm-up would only import numba for nothing."""
    events = []
    monkeypatch.setattr(warmup, "start", lambda *a: events.append(a))
    load(files.robot, properties='Pmax=? [F "goal"]', warm="check")
    assert events == []
