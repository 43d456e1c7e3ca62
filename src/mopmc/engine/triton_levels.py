"""Padded acyclic levels in one fused Triton kernel (its source: :mod:`mopmc.engine.triton_kernels`,
imported only when it runs).

The torch form of a padded level (:mod:`mopmc.engine.torch_levels`) is 5 to 9 kernels, and a deep
model's level loop is bound by their launches: on an H200 a graph replay still costs 22-35 us a
level (``benchmarks/results/gpu_check_cuda.csv``) against well under a microsecond of memory
traffic. Here one kernel does a level's whole work, per state row and all ``1 + m`` columns at
once::

    for each choice slot c (first maximum wins, as torch.argmax and the CPU engine):
        x = RR[slot] + sum_t prob[slot, t] * VX[target[slot, t]]  (+ the slot's overflow transitions)
        x = x / den[slot];  v = x[0] + neg[slot]
    VX[state] = x of the best slot;  arg[state] = its index (K > 1)

and it walks several levels in one launch: a level is a row of the descriptor table ``desc``
(``a, n_l, K, T, s0, t0, OM``: states, choice and transition slots, and the most overflow
transitions of one slot). A *chain* launch (off by default: slower on an H200, see :data:`CHAIN_ROWS`) is one program that processes levels ``[L0, L1)`` in
order with a block barrier between them (its stores are visible to its own threads after the
barrier; the gathers read through L2, ``.cg``), so a run of small levels costs one launch; a large
level gets a grid of programs, one per block of rows. Overflow transitions (the hybrid layout's
COO part) are read per slot through ``optr`` (CSR over all slots).

Column 0 (the weighted value, which picks the choice) is computed in the CPU engine's order
(``rho``, then each transition's ``p * v`` in the model's order, then the division) and without
fused multiply-adds (``enable_fp_fusion=False``), so it rounds as the CPU engine does (up to the
weighted rewards ``rewards @ w``, a BLAS product on each side) and ties
between equally good choices break alike (Model B under equal weights has 14,950 tied states; with
FMA contraction the kernel picked other, equally good, choices there).

:meth:`TritonLevels.sweep` runs the same per-row work as one Jacobi Bellman sweep over every
padded level at once (``[V | X]`` read from one buffer, written to another; one launch per level
shape): value iteration's bandwidth-bound unit, which ``benchmarks/gpu_check.py`` measures against
the memory floor.

The same kernel runs in Triton's interpreter on the CPU (``TRITON_INTERPRET=1`` set before triton
is imported), which is how CI tests it against the torch form.
"""

from __future__ import annotations

import os
import threading

import numpy as np

#: levels with at most this many states go into chain launches (one program walks them in order);
#: 0: every level its own grid launch (measured faster on an H200: a chain's single program waits
#: on each level's dependent loads in turn, benchmarks/results/triton_sweep_cuda.csv)
CHAIN_ROWS = 0
#: with ``unroll``, ``K`` or ``T`` above this stays a loop
UNROLL_MAX = 16
#: descriptor columns: a, n_l, K, T, s0, t0, most overflow of one slot, (unused)
DESC = 8


def available(device) -> str | None:
    """Why the Triton kernels cannot run on ``device`` (None: they can)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed"
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        return "on the CPU Triton runs only in its interpreter (TRITON_INTERPRET=1, for tests)"
    if device.type not in ("cpu", "cuda"):
        return f"no Triton kernels for {device.type}"
    return None


_KERNEL = None
#: one launch at a time: the warm-up thread (mopmc.engine.warmup) may compile and launch while the
#: main thread does; Triton's compiler cache and its interpreter's patching of triton.language are
#: not for concurrent use
_LAUNCH = threading.Lock()


def _kernel():
    """The compiled kernel's handle (Triton's interpreter when ``TRITON_INTERPRET=1``)."""
    global _KERNEL
    with _LAUNCH:
        if _KERNEL is None:
            if os.environ.get("TRITON_INTERPRET") == "1":
                _interpreter_numpy2()
            from mopmc.engine import triton_kernels

            _KERNEL = triton_kernels
    return _KERNEL


def _interpreter_numpy2() -> None:
    """Triton's interpreter converts a scalar (a one-element array there) to an index with
    ``int(array)``, which NumPy 2 refuses for arrays of one dimension: ``range(n)`` over a kernel
    argument fails. Its tensor patch gets an ``__index__`` that takes the one element."""
    from triton.runtime import interpreter

    if getattr(interpreter, "_mopmc_index", False) or not hasattr(interpreter, "_patch_lang_tensor"):
        return
    original = interpreter._patch_lang_tensor

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch
    interpreter._mopmc_index = True


def block_rows(k: int) -> tuple[int, int]:
    """``(KP, BLOCK)``: the columns padded to a power of two, and rows per program: 32 (the best
    measured on an H200 for 5 columns, against 64, 128 and 512), 16 where a state-by-column tile
    would exceed 2048 values (the best measured for 101 columns, against 32)."""
    kp = _pow2(k)
    return kp, int(min(32, max(16, 2048 // kp)))


def _pow2(x: int) -> int:
    """The least power of two >= ``x`` (1 for ``x <= 1``)."""
    return 1 << max(0, int(x - 1).bit_length())


def overflow_csr(levels: list, over_slot: np.ndarray, over_target: np.ndarray, over_prob: np.ndarray, n_slots: int):
    """The overflow transitions as CSR over all slots (``optr``, targets, probabilities) and the
    most of one slot per level (in ``levels``' order)."""
    src = np.concatenate([np.arange(P.o0, P.o1, dtype=np.int64) for P in levels] + [np.zeros(0, np.int64)])
    gslot = np.repeat(np.array([P.s0 for P in levels], np.int64), [P.o1 - P.o0 for P in levels]) + over_slot[src]
    order = np.argsort(gslot, kind="stable")
    counts = np.bincount(gslot, minlength=n_slots).astype(np.int64)
    optr = np.zeros(n_slots + 1, np.int64)
    np.cumsum(counts, out=optr[1:])
    most = np.array([counts[P.s0:P.s0 + (P.b - P.a) * P.K].max() if P.o1 > P.o0 else 0 for P in levels], np.int64)
    return optr, over_target[src[order]], over_prob[src[order]], most


class TritonLevels:
    """The padded levels of a :class:`~mopmc.engine.torch_levels.DevicePadded` run by the fused kernel.

    ``chain_rows``: levels of at most this many states go into chain launches (default
    :data:`CHAIN_ROWS`); ``block``: rows per program (default :func:`block_rows`); ``warps``:
    warps per program; ``stages``: Triton's ``num_stages`` (software pipelining); ``gather``: the
    cache modifier of the gathers of ``[V | X]`` rows; ``unroll`` (default): grid launches with a
    level's choice and transition slots unrolled (a compiled variant per power of two of ``K`` and
    ``T``), so that all their loads issue at once instead of a dependent pair per slot (the same
    arithmetic in the same order; 4-9 % faster per kernel call than the loops on an H200 for Models
    A, B and SW2, ``benchmarks/results/gpu_check_cuda.csv`` and ``gpu_check_cuda_unrolled.csv``);
    ``lanes`` (a power of two >= ``k``; default off): grid launches by the flat kernel
    (``triton_kernels.level_flat``: one lane per row and column, ``lanes // k`` rows per program,
    no padded columns) where a level's slots unroll; the same arithmetic in the same order; not yet
    measured on a GPU."""

    def __init__(self, torch, padded, layout, device, k: int, chain_rows: int | None = None, block: int | None = None,
                 warps: int = 8, stages: int | None = None, gather: str = ".cg", unroll: bool = True, lanes: int | None = None):
        levels = sorted(layout.levels.values(), key=lambda P: P.s0)
        self.row = {P.s0: i for i, P in enumerate(levels)}
        n_slots = len(layout.den)
        optr, otarget, oprob, most = overflow_csr(levels, layout.over_slot, layout.over_target, layout.over_prob, n_slots)
        desc = np.zeros((max(len(levels), 1), DESC), np.int64)
        for i, P in enumerate(levels):
            desc[i, :7] = (P.a, P.b - P.a, P.K, P.T, P.s0, P.t0, most[i])

        from mopmc.engine.torch_engine import to_device

        def put(a, dtype):
            return to_device(torch, a, dtype, device)

        self.desc = put(desc, torch.int64)
        self.optr = put(optr, torch.int64)
        self.otarget = put(otarget if len(otarget) else np.zeros(1, np.int64), torch.int64)
        self.oprob = put(oprob if len(oprob) else np.zeros(1), torch.float64)
        self.padded = padded
        self.k = int(k)
        self.KP, self.BLOCK = block_rows(self.k)
        if block is not None:
            if block < 1 or block & (block - 1):
                raise ValueError(f"block {block}: rows per program must be a power of two")
            self.BLOCK = int(block)
        self.chain_rows = CHAIN_ROWS if chain_rows is None else int(chain_rows)
        self.warps = int(warps)
        self.stages = stages
        self.unroll = bool(unroll)
        self.lanes = None if lanes is None else self._lanes(lanes)
        self.gather = gather
        self.kernels = _kernel()
        self.kernel = self.kernels.levels
        self._levels = levels
        self._tables: dict = {}
        self._target32 = None

    def launches(self, steps: list) -> list:
        """A run's steps with its padded levels grouped: ``("chain", L0, L1)`` for consecutive small
        levels, ``("grid", L, programs, KMAX, TMAX)`` for a large one (``"flat"`` with ``lanes``);
        other steps pass through."""
        out: list = []
        for kind, step in steps:
            if kind != "pad":
                out.append((kind, step))
                continue
            i, n_l = self.row[step.s0], step.b - step.a
            shape = self._unrolled(step.K, step.T) if self.unroll or self.lanes else (0, 0)
            if n_l > self.chain_rows and self.lanes and 0 not in shape:
                out.append(("flat", i, -(-n_l // (self.lanes // self.k)), *shape))
            elif n_l > self.chain_rows:
                out.append(("grid", i, -(-n_l // self.BLOCK), *(shape if self.unroll else (0, 0))))
            elif out and out[-1][0] == "chain" and out[-1][2] == i:
                out[-1] = ("chain", out[-1][1], i + 1)
            else:
                out.append(("chain", i, i + 1))
        return out

    def _unrolled(self, K: int, T: int) -> tuple[int, int]:
        """``(KMAX, TMAX)`` of an unrolled launch: ``K`` and ``T`` rounded up to powers of two (one
        compiled variant each), 0 (a loop) above :data:`UNROLL_MAX`."""
        return tuple(u if u <= UNROLL_MAX else 0 for u in (_pow2(K), _pow2(T)))

    def _lanes(self, lanes: int) -> int:
        if lanes < self.k or lanes & (lanes - 1):
            raise ValueError(f"lanes {lanes}: must be a power of two of at least k = {self.k} (columns)")
        return int(lanes)

    def _options(self, kmax: int, tmax: int, evict: str = "", warps: int | None = None) -> dict:
        """The compile-time arguments every kernel here takes (no FMA: column 0 rounds as the CPU engine's)."""
        return {"GATHER": self.gather, "KMAX": kmax, "TMAX": tmax, "EVICT": evict, "enable_fp_fusion": False,
                "num_warps": self.warps if warps is None else int(warps), **({} if self.stages is None else {"num_stages": self.stages})}

    def launch(self, VX, arg, L0: int, L1: int, programs: int, kmax: int = 0, tmax: int = 0) -> None:
        d = self.padded
        with _LAUNCH:
            self.kernel[(programs,)](self.desc, L0, L1, VX, d.target, d.prob, d.RR, d.den, d.neg, arg, self.optr,
                                     self.otarget, self.oprob, self.k, KP=self.KP, BLOCK=self.BLOCK, **self._options(kmax, tmax))

    def launch_flat(self, VX, arg, L: int, programs: int, kmax: int, tmax: int) -> None:
        """Level ``L`` in place by the flat kernel (``programs`` of ``lanes // k`` rows)."""
        d = self.padded
        with _LAUNCH:
            self.kernels.level_flat[(programs,)](self.desc, L, VX, d.target, d.prob, d.RR, d.den, d.neg, arg, self.optr,
                                                 self.otarget, self.oprob, self.k, LANES=self.lanes, **self._options(kmax, tmax))

    def sweep(self, VX, OUT, arg, block: int | None = None, warps: int | None = None, unroll: bool | None = None,
              idx32: bool = False, evict: str = "", lanes: int | None = None) -> int:
        """One Jacobi Bellman sweep over all padded levels, no level order: each padded state's
        best ``[v | x]`` from ``VX`` into ``OUT`` and its slot into ``arg``. The bandwidth-bound
        unit of value iteration, measured against the memory floor by ``benchmarks/gpu_check.py``
        (the level order needs a launch per level instead). One launch per level shape: with
        ``unroll`` (default: as the level launches') levels are grouped by ``K`` and ``T`` rounded
        up to powers of two, and each group's slots are unrolled to its own shape; without, one
        launch with loops. ``block``, ``warps``: as the level launches' (default: theirs);
        ``idx32``: the transition targets as int32 (half their bytes; fewer than 2**31 states);
        ``evict``: the eviction policy of the streamed loads (``"evict_first"``, meant to keep L2
        for the gathers of ``[V | X]``, measured slower on an H200); ``lanes`` (a power of two >=
        ``k``): the flat kernel instead (``triton_kernels.sweep_flat``: one lane per row and
        column, ``lanes // k`` rows per program, no padded columns; slots always unrolled, levels
        with ``K`` or ``T`` above :data:`UNROLL_MAX` by the tile kernel; not yet measured on a GPU).
        Returns the number of programs launched. On the H200 the default shape sweeps Model A n=200 in 0.26 ms, 2.7x the time to
        stream its CSR arrays once (cuSPARSE: 8x; ``benchmarks/results/gpu_check_cuda_unrolled.csv``)."""
        torch = self.padded.torch
        block = self.BLOCK if block is None else int(block)
        if block < 1 or block & (block - 1):
            raise ValueError(f"block {block}: rows per program must be a power of two")
        if evict not in ("", "evict_first", "evict_last"):
            raise ValueError(f"evict {evict!r}: use '', 'evict_first' or 'evict_last'")
        unroll = self.unroll if unroll is None else bool(unroll)
        groups = [(shape, table, False) for shape, table in self._sweep_tables(block, unroll)]
        if lanes is not None:
            lanes = self._lanes(lanes)
            flat = [(shape, table, True) for shape, table in self._sweep_tables(lanes // self.k, True) if 0 not in shape]
            groups = flat + [(shape, table, False) for shape, table in self._sweep_tables(block, True) if 0 in shape]
        target = self.padded.target
        if idx32:
            if self._target32 is None:
                if VX.numel() >= 2**31:
                    raise ValueError("idx32: [V | X] has 2**31 values or more (int32 offsets would overflow)")
                self._target32 = target.to(torch.int32)
            target = self._target32
        d = self.padded
        programs = 0
        with _LAUNCH:
            for (kmax, tmax), table, flat in groups:
                args = (table, self.desc, VX, OUT, target, d.prob, d.RR, d.den, d.neg, arg, self.optr, self.otarget, self.oprob, self.k)
                options = self._options(kmax, tmax, evict, warps)
                if flat:
                    self.kernels.sweep_flat[(len(table),)](*args, LANES=lanes, **options)
                else:
                    self.kernels.sweep[(len(table),)](*args, KP=self.KP, BLOCK=block, **options)
                programs += len(table)
        return programs

    def _sweep_tables(self, block: int, unroll: bool) -> list:
        """``[((KMAX, TMAX), table)]``: per launch, the device table of its programs' ``(level, first
        row)``, ``block`` rows per program (any positive number: the flat kernel's ``lanes // k``)."""
        key = (block, unroll)
        if key not in self._tables:
            from mopmc.engine.torch_engine import to_device

            groups: dict = {}
            for i, P in enumerate(self._levels):
                shape = self._unrolled(P.K, P.T) if unroll else (0, 0)
                groups.setdefault(shape, []).extend((i, r0) for r0 in range(0, P.b - P.a, block))
            torch = self.padded.torch
            self._tables[key] = [(shape, to_device(torch, np.array(pairs, np.int64), torch.int64, self.desc.device))
                                 for shape, pairs in sorted(groups.items()) if pairs]
        return self._tables[key]

    def sweep_bytes(self, idx32: bool = False) -> int:
        """Bytes one :meth:`sweep` streams at least: every transition slot's target and probability,
        every choice slot's ``RR``, ``den``, ``neg``, the overflow CSR, and each padded state's
        ``[v | x]`` read once and written once, with its ``arg``."""
        d = self.padded
        slots, tslots = d.den.shape[0], d.target.shape[0]
        states = sum(P.b - P.a for P in self._levels)
        return (tslots * ((4 if idx32 else 8) + 8) + slots * (8 * self.k + 16) + 8 * (slots + 1)
                + 16 * (self.otarget.shape[0]) + states * (16 * self.k + 8))
