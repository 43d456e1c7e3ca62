"""The weighted-optimisation kernel on a PyTorch device (CUDA, or CPU PyTorch in CI).

:class:`TorchEngine` reuses the CPU :class:`~mopmc.engine.kernel.Engine`'s preprocessing (goal
memory, worthless states, infinite-reward check, zero-reward end-component collapse, proper states,
SCC plan, renumbered problem) by composition and solves each direction on the device in float64:

* **Acyclic levels.** States are renumbered in processing order, so one topological level of the
  plan is a contiguous range of states, choices and transitions. Most levels are laid out padded
  (:mod:`mopmc.engine.torch_levels`: ``n_l x K`` choice slots of ``T`` transition slots, hybrid
  ELL/COO): one gather, a product and a sum give ``P [V | X]`` (the weighted value and all m
  objective values of the successors) for every choice, ``(RR + S) / den`` their values with
  self-loops solved in closed form (exact), and an ``argmax`` over the ``K`` slots (first maximum,
  as the CPU engine) the best choice: 4 to 9 kernels a level. Levels whose padding would more than
  double stay in CSR form: ``index_add_`` and a segmented max over row groups
  (``scatter_reduce('amax')``).
* **CUDA graphs.** On CUDA each run of consecutive levels is captured once as a CUDA graph (at the
  second direction) and replayed for every later direction, on static device buffers; a capture
  that fails leaves its run eager (``graph_errors`` says why) with the same results.
* **Cyclic SCC blocks** by policy iteration on the device (:mod:`mopmc.engine.torch_cyclic`): dense
  LU for blocks up to ``dense_limit`` states, sparse LU on the host (SuperLU, as the CPU engine)
  up to ``sparse_limit``, larger blocks whose transitions are narrowly banded by subtraction-free
  band elimination on the host (:mod:`mopmc.engine.banded`, as the CPU engine; all three exact up
  to rounding, error bound 0), otherwise an
  iterative evaluation with a sound bound, its convergence tested on the device every
  ``check_every`` sweeps only, and the optimum certified by an optimistic upper bound. The
  ``error_bound`` means what the CPU engine's means: every value is within it of the returned
  scheduler's exact value, and no scheduler beats ``w . point`` by more than it times ``|w|_1``.
* **Warm starts**: a previous result's policy starts the cyclic blocks' policy iteration.
* **Memory** is planned from the model size before anything is copied; a device that is too small
  is a :class:`DeviceError` naming the sizes.

This is the only module that imports torch (lazily: ``import mopmc`` stays torch-free).

Example:
    >>> eng = TorchEngine(model, objectives, device="cpu")  # doctest: +SKIP
    >>> r = eng.optimise([1.0, 0.5]); r.values, r.scheduler  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple, Sequence

import numpy as np

from mopmc.engine.banded import BAND_BUDGET
from mopmc.engine.kernel import Engine, KernelResult
from mopmc.errors import DependencyError, InfiniteValueError, MopmcError

DEFAULT_PRECISION = 1e-6
DEFAULT_DENSE_LIMIT = 256
DEFAULT_SPARSE_LIMIT = 100_000  # as the CPU engine's exact blocks (Engine's size_limit)


class DeviceError(MopmcError):
    """The requested device is unavailable or too small for the model."""


def load_torch():
    """``torch``, or a :class:`~mopmc.errors.DependencyError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise DependencyError('the torch engine needs PyTorch: pip install "mopmc[gpu]"') from None
    return torch


def to_device(torch, a, dtype, device):
    """A host array on ``device`` as ``dtype``: one transfer to a GPU; on the CPU no copy when ``a``
    is already a writable contiguous array of that type (the engine never writes into its inputs),
    so a large model's upload does not fault in fresh pages for a second copy of every array."""
    host = {torch.float64: np.float64, torch.int64: np.int64, torch.bool: np.bool_}[dtype]
    a = np.ascontiguousarray(a, dtype=host)
    if not a.flags.writeable:  # a memory-mapped model file: torch wants writable memory
        a = a.copy()
    return torch.from_numpy(a).to(device)


def check_device_name(device: str | None) -> None:
    """Fail fast without importing torch (1.5-3 s that the warm-up thread spends while the model is
    built instead): PyTorch installed and ``device`` spelled ``cpu``, ``cuda`` or ``cuda:N``.
    Whether CUDA is there is :func:`resolve_device`'s to say, when the engine is built."""
    import importlib.util
    import re

    if importlib.util.find_spec("torch") is None:
        load_torch()  # the DependencyError naming the extra
    if device is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise DeviceError(f"--device {device!r}: not a device; use cuda, cuda:N or cpu")


def resolve_device(device: str | None = None):
    """``device`` as a ``torch.device``; ``None``: ``cuda`` when available, else ``cpu``."""
    torch = load_torch()
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError(f"--device {device!r}: not a device; use cuda, cuda:N or cpu") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"--device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu")
    if dev.type not in ("cuda", "cpu"):
        raise DeviceError(f"--device {device}: only cuda and cpu are supported")
    return dev


class MemoryPlan(NamedTuple):
    """Bytes the engine needs on the device (``needed``), and what the device has free."""

    needed: int
    free: int
    device: str

    @property
    def fits(self) -> bool:
        return self.needed <= 0.9 * self.free


def plan_memory(problem, m: int, max_level: tuple[int, int], max_block: tuple[int, int, int], dense_limit: int, device,
                padded: int = 0, csr: bool = True) -> MemoryPlan:
    """Estimate device bytes: the CSR (int64 targets and local indices, float64 probabilities), the
    rewards, ``[V | X]``, per-level SpMM scratch, the largest cyclic block's workspace and the
    padded levels' layout (``padded`` bytes; their scratch is at most twice the CSR level's).

    ``max_level = (choices, transitions)`` of the largest level, ``max_block = (states, choices,
    transitions)`` of the largest cyclic block.
    """
    n, nc, nnz = problem.n_states, problem.n_choices, len(problem.targets)
    k = m + 1
    # targets, local choice index, probabilities, probabilities without self-loops (only when used)
    csr = nnz * (8 + 8 + 8 + 8) if csr else 0
    choices = nc * (8 * m + 8 * 4 + 1)  # rewards, rho, den (1 - p_self), local owner, global index, self-only flag
    states = n * (8 * k + 8 * 2)
    lc, lk = max_level
    level = lk * k * 8 * 2 + lc * k * 8 * 3
    bn, bc, bk = max_block
    block = bk * 8 * 6 + bc * k * 8 * 3 + bn * k * 8 * 4
    if 0 < bn <= dense_limit:
        block += bn * bn * 8 * 2
    needed = csr + choices + states + 2 * level + block + padded
    return MemoryPlan(int(needed), _free_bytes(device), str(device))


def _free_bytes(device) -> int:
    torch = load_torch()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # no sysconf: do not block on an unknown size
        return 1 << 62


class _Level(NamedTuple):
    """One topological level: states ``[a, b)``, choices ``[c0, c1)``, transitions ``[k0, k1)``."""

    a: int
    b: int
    c0: int
    c1: int
    k0: int
    k1: int


class TorchEngine:
    """The kernel of :class:`~mopmc.engine.kernel.Engine` on a torch device; see the module docstring.

    Args:
        model, objectives, allow_stay, choice_mask: as for :class:`~mopmc.engine.kernel.Engine`.
        device: ``cuda``, ``cuda:N`` or ``cpu``; default ``cuda`` when available, else ``cpu``.
        precision: relative precision of iterative block evaluations (blocks above ``dense_limit``).
        dense_limit: cyclic blocks with at most this many states are solved by dense LU on the device (exact).
        sparse_limit: larger cyclic blocks up to this many states by sparse LU on the host (SuperLU,
            exact, as the CPU engine); blocks above it by band elimination on the host when their
            factors fit ``band_budget`` numbers (:mod:`mopmc.engine.banded`; 0: never), by SuperLU
            on the host when grid-like (``n b <= LU_GATE``; not with ``band_budget`` 0), else by
            iterative evaluation on the device.
        check_every: iterative sweeps between convergence checks (each check is one host sync).
        engine: an already prepared CPU engine for the same model and objectives (skips preprocessing).
        padded: acyclic levels in padded dense form (:mod:`mopmc.engine.torch_levels`) where that at
            most doubles a large level's size (small levels always); ``False``: all in CSR form.
        graphs: capture runs of levels as CUDA graphs (default: on CUDA); ``graph_errors`` lists
            captures that failed (those runs stay eager, with the same results).
        kernels: ``"triton"``: padded levels by the fused Triton kernel
            (:mod:`mopmc.engine.triton_levels`; on the CPU only in Triton's interpreter);
            ``"torch"``: by torch operations; default: ``"triton"`` on CUDA when triton is
            installed, else ``"torch"`` (the environment variable ``MOPMC_TORCH_KERNELS`` sets it
            too). ``kernels_note`` says why the default fell back (triton missing, or its kernel
            failed to compile or run here).
        triton: options of :class:`~mopmc.engine.triton_levels.TritonLevels` (``chain_rows``,
            ``block``, ``warps``).
    """

    def __init__(
        self,
        model,
        objectives: Sequence,
        device: str | None = None,
        *,
        allow_stay: bool = True,
        choice_mask: np.ndarray | None = None,
        precision: float = DEFAULT_PRECISION,
        dense_limit: int = DEFAULT_DENSE_LIMIT,
        sparse_limit: int = DEFAULT_SPARSE_LIMIT,
        band_budget: int = BAND_BUDGET,
        check_every: int = 32,
        engine: Engine | None = None,
        padded: bool = True,
        graphs: bool | None = None,
        kernels: str | None = None,
        triton: dict | None = None,
    ):
        t0 = time.perf_counter()
        if not (0.0 < precision < 1.0):
            raise MopmcError(f"precision {precision!r}: must lie in (0, 1)")
        torch = load_torch()
        self.torch = torch
        self.device = resolve_device(device)
        kernels = kernels or os.environ.get("MOPMC_TORCH_KERNELS") or None
        self.cpu = engine or Engine(model, objectives, allow_stay=allow_stay, choice_mask=choice_mask, renumber="always")
        # the CPU preprocessing ran beside a warm-up; its device work must be done before ours starts
        from mopmc.engine import warmup

        warm_wait = warmup.join_device()
        if not self.cpu.contiguous:
            raise ValueError("the torch engine needs an Engine built with renumber='always' (contiguous plan steps)")
        self.model = model
        self.m = self.cpu.m
        self.orientation = self.cpu.orientation
        self.precision = float(precision)
        self.dense_limit = int(dense_limit)
        self.sparse_limit = int(sparse_limit)
        self.band_budget = int(band_budget)
        self.check_every = max(1, int(check_every))
        self.padded_levels = bool(padded)
        self.graphs = (self.device.type == "cuda") if graphs is None else bool(graphs)
        if self.graphs and self.device.type != "cuda":
            raise DeviceError(f"graphs=True needs a CUDA device, not {self.device}")
        self._pool = self._stream = None
        self.kernels, self.kernels_note = self._kernels(kernels)
        self.triton = None
        self._triton_options = dict(triton or {})
        self._kernels_asked = kernels
        self.timings = {"preprocess": time.perf_counter() - t0 - warm_wait, "warm_wait": warm_wait}
        self.memory = None
        self.steps: list = []  # filled by the upload: runs of levels and cyclic blocks
        if self.cpu.trivial:
            return
        self._upload()
        self.timings["upload"] = time.perf_counter() - t0 - self.timings["preprocess"] - warm_wait

    def _kernels(self, kernels: str | None) -> tuple[str, str | None]:
        """``(kernels, note)``: the padded levels' kernels, and why the default is not Triton's
        (triton is imported only where it may run: CUDA, or the CPU when asked for)."""
        from mopmc.engine import triton_levels

        if kernels not in (None, "torch", "triton"):
            raise MopmcError(f"kernels {kernels!r}: use torch or triton")
        if kernels == "torch" or (kernels is None and self.device.type != "cuda"):
            return "torch", None
        why = triton_levels.available(self.device)
        if why and kernels == "triton":
            raise DependencyError(f"kernels='triton': {why}")
        return ("torch", why) if why else ("triton", None)

    # ------------------------------------------------------------------ device data
    def _upload(self) -> None:
        from mopmc.engine.torch_cyclic import DeviceBlock
        from mopmc.engine.torch_levels import SMALL, DevicePadded, LevelRun, pad_levels

        torch, dev = self.torch, self.device
        p = self.cpu.problem
        steps = self._steps(p)
        den = self.cpu.den  # (1 - p_self per choice, as the CPU engine divides: mopmc.engine.problem.denominators)
        max_level = max(((L.c1 - L.c0, L.k1 - L.k0) for kind, L in steps if kind == "level"), default=(0, 0))
        max_block = max(((L.b - L.a, L.c1 - L.c0, L.k1 - L.k0) for kind, L in steps if kind == "block"), default=(0, 0, 0))
        # padded levels (small ones even where padding is wasteful), else fewer, else none: the first that fits
        for small in ((SMALL, 64, None) if self.padded_levels else (None,)):
            layout = None if small is None else pad_levels(p, steps, self.cpu.self_only, den, small=small)
            pads = layout.levels if layout is not None else {}
            # the CSR form is needed for cyclic blocks and levels left unpadded only
            csr = any(kind == "block" or i not in pads for i, (kind, _) in enumerate(steps))
            extra = 8 * (len(layout.den) + 1) if layout is not None and self.kernels == "triton" else 0  # the overflow CSR
            self.memory = plan_memory(p, self.m, max_level, max_block, self.dense_limit, dev, layout.nbytes + extra if layout else 0, csr)
            if self.memory.fits:
                break
        if not self.memory.fits:
            raise DeviceError(
                f"{self.model.source}: the torch engine needs about {self.memory.needed / 2**30:.2f} GiB on {dev}, "
                f"but only {self.memory.free / 2**30:.2f} GiB are free ({p.n_states} states, {p.n_choices} choices, "
                f"{len(p.targets)} transitions, {self.m} objectives); use a larger device or --device cpu"
            )

        def put(a, dtype):
            return to_device(torch, a, dtype, dev)

        if csr:
            soc, cot = p.state_of_choice(), p.choice_of_transition()
            self_loop = p.targets == soc[cot]
            # local indices: a choice's state within its level/block, a transition's choice within it
            first_state = np.zeros(p.n_states, np.int64)
            first_choice = np.zeros(p.n_choices, np.int64)
            for _, L in steps:
                first_state[L.a:L.b] = L.a
                first_choice[L.c0:L.c1] = L.c0
            self.targets = put(p.targets, torch.int64)
            self.loc = put(cot - first_choice[cot], torch.int64)
            self.probs = put(p.probs, torch.float64)
            self.probs_noself = put(np.where(self_loop, 0.0, p.probs), torch.float64)
            self.den = put(den, torch.float64)
            self.own = put(soc - first_state[soc], torch.int64)
            self.arange = torch.arange(p.n_choices, device=dev, dtype=torch.int64)
            self.self_only = put(self.cpu.self_only, torch.bool)
        self.rewards = put(p.rewards, torch.float64)
        level_self_only = np.zeros(p.n_choices, bool)
        for kind, L in steps:
            if kind == "level":
                level_self_only[L.c0:L.c1] = self.cpu.self_only[L.c0:L.c1]
        self.pass_self_only = put(level_self_only, torch.bool)
        # static buffers (CUDA graphs replay on fixed addresses); VX has a zero row n for padding
        k = self.m + 1
        self.w_dev = torch.zeros(self.m, device=dev, dtype=torch.float64)
        self.rho = torch.zeros(p.n_choices, device=dev, dtype=torch.float64)
        self.VX = torch.zeros((p.n_states + 1, k), device=dev, dtype=torch.float64)
        self.choice = torch.full((p.n_states,), -1, device=dev, dtype=torch.int64)
        self.arg = torch.zeros(p.n_states, device=dev, dtype=torch.int64)
        self.padded = DevicePadded(torch, layout, dev) if pads else None
        if self.padded is not None and self.kernels == "triton":
            self._start_triton(layout, k)
        # runs of consecutive levels (one CUDA graph each), and the cyclic blocks between them
        for i, (kind, L) in enumerate(steps):
            if kind == "block":
                self.steps.append(("block", DeviceBlock(self, L, p)))
                continue
            step = ("pad", pads[i]) if i in pads else ("level", L)
            if not self.steps or self.steps[-1][0] != "run":
                self.steps.append(("run", LevelRun(self, [], self.graphs)))
            self.steps[-1][1].steps.append(step)
        if self.triton is not None:
            for run in self.runs:
                run.launches = self.triton.launches(run.steps)
            self._probe_variants()

    def _probe_variants(self) -> None:
        """Compile and run once every kernel variant the runs use (chain, grid and flat launches per
        unrolled shape), on its first level (overwritten by every direction): a variant that fails
        to compile falls back to torch operations here (:meth:`_triton_failed`) instead of failing
        the first query."""
        seen, variant = set(), None
        try:
            for run in self.runs:
                for kind, *step in run.launches:
                    variant = (kind, *step[2:]) if kind in ("grid", "flat") else (kind,)
                    if kind not in ("chain", "grid", "flat") or variant in seen:
                        continue
                    seen.add(variant)
                    if kind == "chain":
                        self.triton.launch(self.VX, self.arg, step[0], step[0] + 1, 1)
                    elif kind == "grid":
                        self.triton.launch(self.VX, self.arg, step[0], step[0] + 1, *step[1:])
                    else:
                        self.triton.launch_flat(self.VX, self.arg, *step)
            if self.device.type == "cuda":
                self.torch.cuda.synchronize(self.device)
        except Exception as exc:  # noqa: BLE001 - a compiler or driver failure: the torch form is equal
            self._triton_failed(f"a Triton kernel variant {variant}", exc)
            for run in self.runs:
                run.launches = None

    def _start_triton(self, layout, k: int) -> None:
        """The fused Triton kernel for the padded levels (compiled per variant by
        :meth:`_probe_variants` once the runs are known)."""
        from mopmc.engine.triton_levels import TritonLevels

        try:
            self.triton = TritonLevels(self.torch, self.padded, layout, self.device, k, **self._triton_options)
        except Exception as exc:  # noqa: BLE001 - triton's import or set-up failed: the torch form is equal
            self._triton_failed("the Triton kernel", exc)

    def _triton_failed(self, what: str, exc: Exception) -> None:
        """``what`` failed here: the default falls back to torch operations (``kernels_note`` says
        why), an explicit ``kernels="triton"`` is an error."""
        text = str(exc).strip()
        why = f"{what} failed here ({type(exc).__name__}: {text.splitlines()[0][:200] if text else ''})"
        if self._kernels_asked == "triton":
            raise DependencyError(f"kernels='triton': {why}") from exc
        self.kernels, self.kernels_note, self.triton = "torch", f"{why}; torch operations instead", None

    def graph_pool(self):
        """One memory pool shared by all captured runs (replayed in capture order, never concurrently)."""
        if self._pool is None:
            self._pool = self.torch.cuda.graph_pool_handle()
        return self._pool

    def capture_stream(self):
        if self._stream is None:
            self._stream = self.torch.cuda.Stream(self.device)
        return self._stream

    @property
    def runs(self) -> list:
        """The runs of consecutive levels (:class:`~mopmc.engine.torch_levels.LevelRun`), in order."""
        return [r for kind, r in self.steps if kind == "run"]

    @property
    def levels(self) -> int:
        return len(self.level_steps)

    @property
    def level_steps(self) -> list:
        """Every level in order: ``("pad", PadLevel)`` (padded form) or ``("level", _Level)`` (CSR form)."""
        return [step for r in self.runs for step in r.steps]

    @property
    def graph_errors(self) -> list[str]:
        """Why captures failed (their runs stay eager); empty when all ran as graphs or graphs are off."""
        return [r.error for r in self.runs if r.error]

    def _steps(self, p) -> list[tuple[str, _Level]]:
        """The plan as contiguous ranges: every level of a pass step, and every cycles step."""
        rg, ip = p.row_groups, p.indptr
        level = self.cpu.plan.level
        out: list[tuple[str, _Level]] = []

        def rng(a, b):
            return _Level(a, b, int(rg[a]), int(rg[b]), int(ip[rg[a]]), int(ip[rg[b]]))

        for kind, states in self.cpu.plan.steps:
            if not len(states):
                continue
            a, b = int(states[0]), int(states[-1]) + 1
            if b - a != len(states) or np.any(np.diff(states) != 1):
                raise MopmcError("internal: the plan's steps are not contiguous after renumbering")
            if kind == "cycles":
                out.append(("block", rng(a, b)))
                continue
            lv = level[a:b]
            cuts = np.flatnonzero(np.diff(lv)) + 1
            bounds = np.concatenate(([0], cuts, [b - a])) + a
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                out.append(("level", rng(int(lo), int(hi))))
        return out

    # ------------------------------------------------------------------ the kernel
    def optimise(self, w: Sequence[float], warm: KernelResult | None = None) -> KernelResult:
        """Maximise ``w . point`` (preferred space, as :meth:`Engine.optimise`); ``warm``: a previous result."""
        t0 = time.perf_counter()
        w = np.asarray(w, np.float64).reshape(self.m)
        if self.cpu.trivial:
            return self._result(w, np.zeros(self.m), np.zeros(0, np.int64), 0.0, t0)
        torch = self.torch
        p = self.cpu.problem
        self.w_dev.copy_(torch.from_numpy(np.ascontiguousarray(w)))
        torch.mv(self.rewards, self.w_dev, out=self.rho)
        rho, VX, choice = self.rho, self.VX, self.choice
        VX.zero_()
        choice.fill_(-1)
        self.arg.zero_()
        if self.padded is not None:
            self.padded.set_direction(self.w_dev)
        infinite = (self.pass_self_only & (rho > 0)).any()
        use_warm = warm is not None and warm.engine is self.cpu and len(warm.policy) == p.n_states
        start = warm.policy if use_warm else self.cpu.proper
        check = bool((w < 0).any())
        gap = error = 0.0
        for kind, step in self.steps:
            if kind == "run":
                step.run()
            else:
                g, e = step.solve(rho, VX, choice, start, check)
                gap, error = gap + g, error + e
        if self.padded is not None:
            self.padded.choices(self.arg, choice)
        if bool(infinite):
            raise InfiniteValueError("the weighted optimum is infinite: this direction rewards staying forever in an end component")
        u = VX[p.initial, 1:].to("cpu", copy=True).numpy()  # copies: VX and choice are reused
        # errors add up along the processing order (expectations with mass <= 1); as the CPU engine:
        # values within ``bound`` of the returned scheduler's, which no proper one beats by > bound * |w|_1
        norm = float(np.abs(w).sum())
        bound = max(error, gap / norm if norm > 0 else 0.0)
        return self._result(w, u, choice.to("cpu", copy=True).numpy(), bound, t0)

    # Gathers use ``index_select``: advanced indexing ``t[idx]`` with a slice of a long index tensor
    # took milliseconds per call on CPU PyTorch 2.13 (index_select: microseconds).

    def _level(self, L: _Level, rho, VX, choice) -> None:
        """One topological level: best choice per state and its weighted and objective values."""
        torch = self.torch
        a, b, c0, c1, k0, k1 = L
        n_l = b - a
        S = VX.new_zeros((c1 - c0, VX.shape[1]))
        if k1 > k0:
            S.index_add_(0, self.loc[k0:k1], self.probs_noself[k0:k1, None] * VX.index_select(0, self.targets[k0:k1]))
        den = self.den[c0:c1]
        q = ((rho[c0:c1] + S[:, 0]) / den).masked_fill(self.self_only[c0:c1], -np.inf)
        own = self.own[c0:c1]
        best = torch.full((n_l,), -np.inf, device=q.device, dtype=q.dtype).scatter_reduce_(0, own, q, "amax")
        big = torch.iinfo(torch.int64).max
        cand = torch.where(q >= best.index_select(0, own), self.arange[c0:c1], big)
        first = torch.full((n_l,), big, device=q.device, dtype=torch.int64).scatter_reduce_(0, own, cand, "amin")
        ok = best > -np.inf
        pick = torch.where(ok, first, c0)
        x = (self.rewards.index_select(0, pick) + S.index_select(0, pick - c0)[:, 1:]) / self.den.index_select(0, pick)[:, None]
        VX[a:b, 0] = torch.where(ok, best, 0.0)
        VX[a:b, 1:] = torch.where(ok[:, None], x, 0.0)
        choice[a:b] = torch.where(ok, first, -1)

    def _result(self, w, u, policy, error, t0) -> KernelResult:
        ori = self.orientation
        values = ori.offset + ori.direction * u
        point = ori.direction * values
        return KernelResult(w, values, point, float(w @ point), float(error), policy, time.perf_counter() - t0, self.cpu)

    def scheduler(self, policy: np.ndarray):
        """The scheduler on the model of an internal policy (the CPU engine's mapping)."""
        return self.cpu.scheduler(policy)


def torch_oracle(model, objectives, *, device: str | None = None, engine: TorchEngine | None = None, **options):
    """The multi-objective queries' oracle (weights in original units, warm-started) on a torch device."""
    from mopmc.engine.oracle import kernel_oracle

    return kernel_oracle(model, objectives, engine=engine or TorchEngine(model, objectives, device, **options))
