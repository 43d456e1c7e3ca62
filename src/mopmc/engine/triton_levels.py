"""Padded acyclic levels in one fused Triton kernel: the only module that imports triton.

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
    global _KERNEL
    with _LAUNCH:
        if _KERNEL is None:
            _KERNEL = _define()
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


def _define():
    import triton
    import triton.language as tl

    if os.environ.get("TRITON_INTERPRET") == "1":
        _interpreter_numpy2()

    @triton.jit(do_not_specialize=["L0", "L1", "k"])
    def levels(desc, L0, L1, VX, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               KP: tl.constexpr, BLOCK: tl.constexpr, GATHER: tl.constexpr):
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        cols = tl.arange(0, KP)
        cmask = cols < k
        col0 = cols == 0
        lanes = tl.arange(0, BLOCK)
        for L in range(L0, L1):
            d = desc + L * 8
            a = tl.load(d + 0)
            n_l = tl.load(d + 1)
            K = tl.load(d + 2)
            T = tl.load(d + 3)
            s0 = tl.load(d + 4)
            t0 = tl.load(d + 5)
            om = tl.load(d + 6)
            for r0 in range(pid * BLOCK, n_l, nprog * BLOCK):
                rows = r0 + lanes
                rmask = rows < n_l
                m2 = rmask[:, None] & cmask[None, :]
                best_v = tl.full((BLOCK,), float("-inf"), tl.float64)
                best_x = tl.zeros((BLOCK, KP), tl.float64)
                best_j = tl.zeros((BLOCK,), tl.int64)
                for c in range(K):
                    local = rows.to(tl.int64) * K + c
                    slot = s0 + local
                    x = tl.load(RR + slot[:, None] * k + cols[None, :], mask=m2, other=0.0)
                    tb = t0 + local * T
                    for t in range(T):
                        tg = tl.load(target + tb + t, mask=rmask, other=0)
                        p = tl.load(prob + tb + t, mask=rmask, other=0.0)
                        g = tl.load(VX + tg[:, None] * k + cols[None, :], mask=m2, other=0.0, cache_modifier=GATHER)
                        x += p[:, None] * g
                    if om > 0:
                        e0 = tl.load(optr + slot, mask=rmask, other=0)
                        e1 = tl.load(optr + slot + 1, mask=rmask, other=0)
                        for e in range(om):
                            idx = e0 + e
                            em = rmask & (idx < e1)
                            tg = tl.load(otarget + idx, mask=em, other=0)
                            p = tl.load(oprob + idx, mask=em, other=0.0)
                            g = tl.load(VX + tg[:, None] * k + cols[None, :], mask=em[:, None] & cmask[None, :], other=0.0,
                                        cache_modifier=GATHER)
                            x += p[:, None] * g
                    dn = tl.load(den + slot, mask=rmask, other=1.0)
                    x = x / dn[:, None]
                    v = tl.sum(tl.where(col0[None, :], x, 0.0), axis=1) + tl.load(neg + slot, mask=rmask, other=0.0)
                    better = (v > best_v) | (c == 0)
                    best_v = tl.where(better, v, best_v)
                    best_x = tl.where(better[:, None], x, best_x)
                    best_j = tl.where(better, c, best_j)
                state = a + rows.to(tl.int64)
                tl.store(VX + state[:, None] * k + cols[None, :], best_x, mask=m2)
                tl.store(arg + state, best_j, mask=rmask & (K > 1))
            tl.debug_barrier()

    return levels


def block_rows(k: int) -> tuple[int, int]:
    """``(KP, BLOCK)``: the columns padded to a power of two, and rows per program: 32 (the best
    measured on an H200 for 5 columns, against 64, 128 and 512), 16 where a state-by-column tile
    would exceed 2048 values (the best measured for 101 columns, against 32)."""
    kp = 1 << max(0, int(k - 1).bit_length())
    return kp, int(min(32, max(16, 2048 // kp)))


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
    cache modifier of the gathers of ``[V | X]`` rows."""

    def __init__(self, torch, padded, layout, device, k: int, chain_rows: int | None = None, block: int | None = None,
                 warps: int = 8, stages: int | None = None, gather: str = ".cg"):
        levels = sorted(layout.levels.values(), key=lambda P: P.s0)
        self.row = {P.s0: i for i, P in enumerate(levels)}
        n_slots = len(layout.den)
        optr, otarget, oprob, most = overflow_csr(levels, layout.over_slot, layout.over_target, layout.over_prob, n_slots)
        desc = np.zeros((max(len(levels), 1), DESC), np.int64)
        for i, P in enumerate(levels):
            desc[i, :7] = (P.a, P.b - P.a, P.K, P.T, P.s0, P.t0, most[i])

        def put(a, dtype):
            return torch.from_numpy(np.ascontiguousarray(a)).to(device=device, dtype=dtype)

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
        self.gather = gather
        self.kernel = _kernel()

    def launches(self, steps: list) -> list:
        """A run's steps with its padded levels grouped: ``("chain", L0, L1)`` for consecutive small
        levels, ``("grid", L, programs)`` for a large one; other steps pass through."""
        out: list = []
        for kind, step in steps:
            if kind != "pad":
                out.append((kind, step))
                continue
            i, n_l = self.row[step.s0], step.b - step.a
            if n_l > self.chain_rows:
                out.append(("grid", i, -(-n_l // self.BLOCK)))
            elif out and out[-1][0] == "chain" and out[-1][2] == i:
                out[-1] = ("chain", out[-1][1], i + 1)
            else:
                out.append(("chain", i, i + 1))
        return out

    def launch(self, VX, arg, L0: int, L1: int, programs: int) -> None:
        d = self.padded
        with _LAUNCH:
            self.kernel[(programs,)](self.desc, L0, L1, VX, d.target, d.prob, d.RR, d.den, d.neg, arg, self.optr,
                                     self.otarget, self.oprob, self.k, KP=self.KP, BLOCK=self.BLOCK, GATHER=self.gather,
                                     enable_fp_fusion=False, num_warps=self.warps, **({} if self.stages is None else {"num_stages": self.stages}))
