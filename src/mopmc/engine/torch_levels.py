"""Acyclic levels of the torch engine in padded form, and runs of levels replayed as CUDA graphs.

A level (states ``[a, b)`` of one topological level) is laid out as ``n_l x K`` choice slots
(``K``: the most choices a state of the level has) of ``T`` transition slots each: transitions to
*other* states (self-loops go into ``den = 1 - p_self``), ``T`` chosen per level to minimise the
padded size plus the overflow (hybrid ELL/COO: a choice's transitions beyond its first ``T`` are
added by one ``index_add_``). Pad slots point at a zero row (state ``n``) with probability 0. Then
one level is a handful of dense kernels, whatever its shape::

    S = sum_T prob[P, T] * VX[target][P, T, k]       # P = n_l * K slots, k = 1 + m columns
    X = (RR + S) / den                               # RR = [rho | rewards]: every column at once
    K == 1:  VX[a:b] = X                             # no choice to make
    K > 1:   j = argmax(X[:, 0] + neg)  (first maximum, as the CPU engine); VX[a:b] = X[j]

Invalid slots (padding, and choices that only loop on their own state) have ``RR = 0``, ``den =
1`` and ``neg = -inf``, so they are never picked unless nothing else is, and then give 0, as the
CPU engine's "no choice" states. A level whose choice slots would more than double stays in CSR
form (:meth:`TorchEngine._level`), unless it is small (at most ``SMALL`` slots of waste): then its
time is its launches, whatever the padding. When the device is too small for the padded layout,
the engine pads less, then not at all.

:class:`LevelRun` runs consecutive levels; on CUDA it captures them once as a CUDA graph (at the
second direction, so that single-direction queries never pay for it) and replays it for every later
direction: a deep model's thousands of levels cost one launch instead of a few Python dispatches
per kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mopmc import workers

WASTE = 2.0  # a level is padded only when its slots at most double, plus SMALL slots (launches, not bytes, bound small levels)
SMALL = 4096
PAR_MIN = 1 << 20  # (words written) a part of the layout's fill worth a worker thread


class PadLevel(NamedTuple):
    """States ``[a, b)``, ``K`` choice and ``T`` transition slots, offsets ``s0`` (slots) and ``t0``
    (transition slots); overflow transitions ``[o0, o1)`` (a choice's beyond its first ``T``)."""

    a: int
    b: int
    K: int
    T: int
    s0: int
    t0: int
    o0: int
    o1: int


class PaddedLayout(NamedTuple):
    """Host arrays of all padded levels (concatenated in level order)."""

    levels: dict  # index in the step list -> PadLevel
    target: np.ndarray  # (transition slots,) int64, n for padding
    prob: np.ndarray  # (transition slots,) float64
    den: np.ndarray  # (slots,) 1 - p_self, 1 for invalid slots
    neg: np.ndarray  # (slots,) 0 or -inf
    RR: np.ndarray  # (slots, 1 + m): column 0 for rho (set per direction), then the rewards; 0 for invalid slots
    choice: np.ndarray  # (slots,) the global choice, -1 for invalid slots
    slot_base: np.ndarray  # (n,) first slot of each state of a padded level, -1 elsewhere
    over_slot: np.ndarray  # (overflow,) the slot (within its level) of each overflow transition
    over_target: np.ndarray
    over_prob: np.ndarray

    @property
    def nbytes(self) -> int:
        arrays = (self.target, self.prob, self.den, self.neg, self.RR, self.choice, self.slot_base,
                  self.over_slot, self.over_target, self.over_prob)
        return sum(a.nbytes for a in arrays)


def pad_levels(p, steps, self_only: np.ndarray, den: np.ndarray, waste: float = WASTE, small: int = SMALL) -> PaddedLayout:
    """The padded layout of every ``("level", L)`` in ``steps`` whose ``n_l x K`` choice slots are
    at most ``waste`` times its choices plus ``small`` (states with many choices beside many states
    with one would blow a large level's grid up; a small level's time is its launches either way).
    Two compiled passes (:func:`~mopmc.engine.numba_kernels.pad_plan`, ``pad_fill``): a deep model
    has thousands of levels."""
    from mopmc.engine import numba_kernels as nk

    where = [i for i, (kind, _) in enumerate(steps) if kind == "level"]
    bounds = np.array([(steps[i][1].a, steps[i][1].b) for i in where], np.int64).reshape(-1, 2)
    K, T, over, padded = nk.pad_plan(p.row_groups, p.indptr, p.targets, bounds, float(waste), int(small))
    keep = np.flatnonzero(padded)
    bounds, K, T, over = bounds[keep], K[keep], T[keep], over[keep]
    n_slots = (bounds[:, 1] - bounds[:, 0]) * K
    s0, t0, o0 = (np.cumsum(x) - x for x in (n_slots, n_slots * T, over))  # offsets: exclusive sums
    m = p.rewards.shape[1]
    arrays = nk.pad_arrays(p.n_states, m, int(n_slots.sum()), int((n_slots * T).sum()), int(over.sum()))
    args = (p.row_groups, p.indptr, p.targets, p.probs, p.rewards, self_only, den, bounds, K, T, s0, t0, o0)
    # levels in parallel, cut by the words they write (2 per transition slot, m + 4 per slot)
    workers.over_weighted(n_slots * (2 * T + m + 4), lambda i0, i1: nk.pad_fill(*arrays, *args, i0, i1), PAR_MIN)
    chosen = {where[j]: PadLevel(int(bounds[r, 0]), int(bounds[r, 1]), int(K[r]), int(T[r]), int(s0[r]), int(t0[r]),
                                 int(o0[r]), int(o0[r] + over[r]))
              for r, j in enumerate(keep)}
    return PaddedLayout(chosen, *arrays)


class DevicePadded:
    """The padded layout on the device, with ``RR = [rho | rewards]`` refreshed per direction."""

    def __init__(self, torch, layout: PaddedLayout, device):
        from mopmc.engine.torch_engine import to_device

        def put(a, dtype):
            return to_device(torch, a, dtype, device)

        self.torch = torch
        self.levels = layout.levels
        self.target = put(layout.target, torch.int64)
        self.prob = put(layout.prob, torch.float64)
        self.den = put(layout.den, torch.float64)[:, None]
        self.neg = put(layout.neg, torch.float64)
        self.choice = put(layout.choice, torch.int64)
        self.slot_base = put(layout.slot_base, torch.int64)
        self.over_slot = put(layout.over_slot, torch.int64)
        self.over_target = put(layout.over_target, torch.int64)
        self.over_prob = put(layout.over_prob, torch.float64)[:, None]
        self.RR = put(layout.RR, torch.float64)

    def set_direction(self, w) -> None:
        """``RR[:, 0] = rewards @ w`` (invalid slots stay 0)."""
        self.RR[:, 0] = self.RR[:, 1:] @ w

    def level(self, P: PadLevel, VX, arg) -> None:
        """One padded level: ``VX[a:b]`` and, when ``K > 1``, the picked slot per state in ``arg[a:b]``."""
        torch = self.torch
        a, b, K, T, s0, t0, o0, o1 = P
        n_l, slots, k = b - a, (b - a) * K, VX.shape[1]
        G = VX.index_select(0, self.target[t0:t0 + slots * T]).view(slots, T, k)
        G.mul_(self.prob[t0:t0 + slots * T].view(slots, T, 1))
        S = G.sum(1) if T > 1 else G.view(slots, k)
        if o1 > o0:  # the hybrid format's overflow, in COO form
            S.index_add_(0, self.over_slot[o0:o1], VX.index_select(0, self.over_target[o0:o1]).mul_(self.over_prob[o0:o1]))
        S.add_(self.RR[s0:s0 + slots])
        if K == 1:
            torch.div(S, self.den[s0:s0 + slots], out=VX[a:b])
            return
        S.div_(self.den[s0:s0 + slots])
        j = (S[:, 0] + self.neg[s0:s0 + slots]).view(n_l, K).argmax(1)
        arg[a:b] = j
        torch.gather(S.view(n_l, K, k), 1, j.view(n_l, 1, 1).expand(n_l, 1, k), out=VX[a:b].view(n_l, 1, k))

    def choices(self, arg, choice) -> None:
        """The chosen global choice of every state of a padded level into ``choice`` (in place)."""
        torch = self.torch
        base = self.slot_base
        picked = self.choice.index_select(0, (base + arg).clamp_(min=0))
        choice.copy_(torch.where(base >= 0, picked, choice))


class LevelRun:
    """Consecutive level steps; on CUDA (``graphs``) captured as one CUDA graph after two eager runs."""

    def __init__(self, engine, steps: list, graphs: bool):
        self.engine = engine
        self.steps = steps
        self.graphs = graphs
        self.graph = None
        self.error: str | None = None
        self.calls = 0
        #: the steps as run: with the Triton kernel (set by the engine once the run is complete)
        #: padded levels become ``("grid" | "flat", L, programs, KMAX, TMAX)`` or ``("chain", L0, L1)`` launches
        #: (:meth:`mopmc.engine.triton_levels.TritonLevels.launches`)
        self.launches: list | None = None

    def eager(self) -> None:
        eng = self.engine
        for kind, *step in self.launches or self.steps:
            if kind == "pad":
                eng.padded.level(step[0], eng.VX, eng.arg)
            elif kind == "chain":
                eng.triton.launch(eng.VX, eng.arg, step[0], step[1], 1)
            elif kind == "grid":
                eng.triton.launch(eng.VX, eng.arg, step[0], step[0] + 1, *step[1:])
            elif kind == "flat":
                eng.triton.launch_flat(eng.VX, eng.arg, *step)
            else:
                eng._level(step[0], eng.rho, eng.VX, eng.choice)

    def run(self) -> None:
        if self.graph is not None:
            self.graph.replay()
            return
        self.eager()
        self.calls += 1
        # captured after a second direction: a single-direction query never pays for the capture
        if self.graphs and self.error is None and self.calls >= 2:
            self._capture()

    def _capture(self) -> None:
        """Record :meth:`eager` after a warm-up run on the capture stream; on failure stay eager."""
        torch = self.engine.torch
        try:
            s = self.engine.capture_stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):  # warm-up on the capture stream (the levels are idempotent)
                self.eager()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.engine.graph_pool(), stream=s):
                self.eager()
            self.graph = g
        except Exception as exc:  # noqa: BLE001 - any capture failure: keep the (correct) eager path
            self.error = f"{type(exc).__name__}: {exc}"
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - no CUDA at all: nothing to wait for
                pass
