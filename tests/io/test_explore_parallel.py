"""The explorer's worker threads: where they generate chunks of known states while the calling thread
numbers the chunks before, the model is the sequential exploration's bit for bit, and so are its
errors. Chunks are made tiny here so that every model goes through them."""

from __future__ import annotations

import numpy as np
import pytest

from mopmc import workers
from mopmc.errors import ConfigError, MopmcError
from mopmc.examples import files
from mopmc.io.explicit import explore as ex
from mopmc.io.explicit import program
from mopmc.io.load import load

from explicit_compare import assert_same_model
from test_explicit import FEATURES, _random_program

pytest.importorskip("stormpy")


def _load(path, monkeypatch, threads: int, **kw):
    """``load`` with the own builder and ``threads`` workers (tiny chunks); the number of chunks."""
    monkeypatch.setenv("MOPMC_BUILD_THREADS", str(threads))
    chunks = []
    submit = workers.submit

    def counted(fn, *args):
        chunks.append(fn)
        return submit(fn, *args)

    with monkeypatch.context() as m:
        m.setattr(ex, "CHUNK", 3)
        m.setattr(ex, "MIN_CHUNK", 1)
        m.setattr(workers, "MIN_RANGE", 2)
        m.setattr(workers, "submit", counted)
        loaded = load(path, valuations=True, builder="mopmc", **kw)
    return loaded.model, sum(fn is ex._generate_chunk for fn in chunks)


def _identical(a, b):
    for name in ("row_groups", "indptr", "targets", "probs", "actions"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.action_names == b.action_names
    assert a.rewards.keys() == b.rewards.keys() and a.labels.keys() == b.labels.keys()
    for name in a.rewards:
        assert np.array_equal(a.rewards[name].view(np.uint64), b.rewards[name].view(np.uint64)), name
    for name in a.labels:
        assert np.array_equal(a.labels[name], b.labels[name]), name
    assert np.array_equal(a.valuations.values, b.valuations.values)


def _programs():
    cases = [("features", FEATURES)] + [(f"random{seed}", _random_program(np.random.default_rng(seed))) for seed in range(10)]
    return cases


@pytest.mark.parametrize("name, text", _programs(), ids=[c[0] for c in _programs()])
@pytest.mark.parametrize("dense", [True, False], ids=["dense", "hashed"])
def test_chunks_give_the_sequential_model_bit_for_bit(tmp_path, monkeypatch, name, text, dense):
    if not dense:
        monkeypatch.setattr(program, "DENSE_MAX", 0)
    path = tmp_path / f"{name}.nm"
    path.write_text(text)
    sequential, none = _load(path, monkeypatch, 0)
    parallel, chunks = _load(path, monkeypatch, 3)
    assert none == 0 and (chunks > 0 or sequential.n_states < 10)  # a short chain never has two states waiting
    _identical(parallel, sequential)


@pytest.mark.parametrize("name", sorted(files.ALL) + ["sw2"])
def test_examples_and_the_design_layers_switch(tmp_path, monkeypatch, name):
    if name == "sw2":
        from mopmc.design.explore import convert
        from mopmc.design.params import load_parameters
        from mopmc.design.prism_export import save_prism
        from mopmc.design.spec import switch_design

        d = switch_design(load_parameters("table3").with_n(7))
        path = save_prism(convert(d.network, d.provider), tmp_path / "sw2.prism")
    else:
        path = getattr(files, name)
    sequential, _ = _load(path, monkeypatch, 0)
    parallel, chunks = _load(path, monkeypatch, 2)
    assert chunks > 0
    _identical(parallel, sequential)


# four modules synchronising on one action with four updates each: 256 successors per choice, and a
# state with 64 unlabelled choices, so that every buffer of the exploration grows while it runs
WIDE = "mdp\n" + "".join(
    f"module m{i}\n  x{i} : [0..3] init 0;\n"
    + "".join(f"  [] x{i} = {v} -> (x{i}'={(v + 1) % 4});\n" for v in range(4))
    + f"  [a] true -> 0.25 : (x{i}'=0) + 0.25 : (x{i}'=1) + 0.25 : (x{i}'=2) + 0.25 : (x{i}'=3);\n"
    + f"  [b] x{i} < 2 -> 0.5 : (x{i}'=x{i}+1) + 0.5 : (x{i}'=x{i}+2);\n"
    + "".join(f"  [c] x{i} = 0 -> (x{i}'={v});\n" for v in range(4))
    + "endmodule\n"
    for i in range(4)
) + 'rewards "r"\n  [a] true : 1;\n  x0 = 1 : x1 + 0.5;\nendrewards\nlabel "corner" = x0 = 3 & x3 = 3;\n'


def test_wide_distributions_and_many_choices(tmp_path, monkeypatch):
    path = tmp_path / "wide.nm"
    path.write_text(WIDE)
    sequential, _ = _load(path, monkeypatch, 0)
    parallel, chunks = _load(path, monkeypatch, 3)
    assert chunks > 0 and int(np.max(np.diff(sequential.indptr))) == 256
    assert int(np.max(np.diff(sequential.row_groups))) == 4 + 1 + 1 + 4**4
    _identical(parallel, sequential)
    storms = load(path, valuations=True, builder="storm")
    assert_same_model(sequential, storms.model)


def _outcome(path, monkeypatch, threads):
    try:
        model, _ = _load(path, monkeypatch, threads)
    except MopmcError as err:
        return type(err), str(err)
    return model.n_states, model.n_choices


@pytest.mark.parametrize(
    "text",
    [
        # an assignment out of range at a state found late (after many chunks)
        "mdp\nmodule m\n s : [0..40] init 0;\n t : [0..3] init 0;\n"
        " [] s < 40 -> 0.5 : (s'=s+1) + 0.5 : (s'=s+1) & (t'=mod(s, 4));\n [] s = 40 & t = 3 -> (t'=t+1);\nendmodule\n",
        # probabilities that do not sum to one in one state among many
        "mdp\nmodule m\n s : [0..40] init 0;\n [] s < 40 -> (s=30 ? 0.4 : 0.5) : (s'=s+1) + 0.5 : true;\nendmodule\n",
        # a DTMC with two enabled commands in one state
        "dtmc\nmodule m\n s : [0..40] init 0;\n [] s < 40 -> (s'=s+1);\n [] s = 33 -> true;\nendmodule\n",
    ],
    ids=["out-of-range", "not-one", "nondeterministic-dtmc"],
)
def test_errors_are_the_sequential_explorations(tmp_path, monkeypatch, text):
    path = tmp_path / "bad.nm"
    path.write_text(text)
    sequential = _outcome(path, monkeypatch, 0)
    assert isinstance(sequential[0], type) and issubclass(sequential[0], MopmcError)
    assert _outcome(path, monkeypatch, 3) == sequential


def test_too_many_states_is_the_same_stop(tmp_path, monkeypatch):
    path = tmp_path / "wide.nm"
    path.write_text(WIDE)
    monkeypatch.setattr(program, "MAX_STATES", 40)
    sequential = _outcome(path, monkeypatch, 0)
    assert _outcome(path, monkeypatch, 3) == sequential
    assert isinstance(sequential[0], type)


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("MOPMC_BUILD_THREADS", "5")
    assert workers.count() == 5
    monkeypatch.setenv("MOPMC_BUILD_THREADS", "-2")
    assert workers.count() == 0
    monkeypatch.setenv("MOPMC_BUILD_THREADS", "many")
    with pytest.raises(ConfigError, match="MOPMC_BUILD_THREADS='many': expected a whole number"):
        workers.count()
    monkeypatch.delenv("MOPMC_BUILD_THREADS")
    import os

    for cpus, expected in ((1, 0), (2, 1), (4, 3), (16, 15)):  # one thread per CPU, this one included
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)), raising=False)
        assert workers.count() == expected


def test_the_gil_is_handed_over_quickly_while_exploring(tmp_path, monkeypatch):
    """Another thread busy in Python would otherwise keep this one waiting up to 5 ms after every
    chunk (Model A n=200: 10 s instead of 0.4 s); the interval comes back afterwards."""
    import sys

    path = tmp_path / "wide.nm"
    path.write_text(WIDE)
    seen = []
    real = ex._generate_chunk
    monkeypatch.setattr(ex, "_generate_chunk", lambda *a: seen.append(sys.getswitchinterval()) or real(*a))
    before = sys.getswitchinterval()
    _, chunks = _load(path, monkeypatch, 2)
    assert chunks > 0 and seen == pytest.approx([ex._SWITCH_INTERVAL] * len(seen)) and sys.getswitchinterval() == before


def test_over_ranges_covers_every_state_once(monkeypatch):
    monkeypatch.setenv("MOPMC_BUILD_THREADS", "3")
    monkeypatch.setattr(workers, "MIN_RANGE", 5)
    seen = np.zeros(23, np.int64)
    workers.over_ranges(23, lambda a, b: np.add.at(seen, np.arange(a, b), 1))
    assert seen.tolist() == [1] * 23


def test_a_forked_child_starts_its_own_workers(monkeypatch):
    """A child forked after the pool started has none of its threads: it must not queue work there."""
    import multiprocessing

    assert workers.submit(int, "7").result() == 7  # the parent's pool is running
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as children:
        assert children.apply(_submit_in_child) == 7


def _submit_in_child():
    return workers.submit(int, "7").result(timeout=30)


def test_a_bad_thread_count_is_the_users_error_not_a_fallback(tmp_path, monkeypatch):
    """The builder steps aside for models it cannot build; a malformed MOPMC_BUILD_THREADS must
    not look like one of those (it was 'mopmc's builder does not cover this model')."""
    path = tmp_path / "wide.nm"
    path.write_text(WIDE)
    monkeypatch.setenv("MOPMC_BUILD_THREADS", "two")
    with pytest.raises(ConfigError, match="MOPMC_BUILD_THREADS='two'"):
        load(path, builder="mopmc")
