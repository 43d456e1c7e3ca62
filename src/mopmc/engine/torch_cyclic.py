"""Policy iteration on a torch device for one block of cyclic SCCs (Howard 1960).

The block's successors outside it are solved already. As the CPU engine's
:class:`~mopmc.engine.policy_iteration.CyclicBlock`, each round evaluates the current policy,
computes every choice's one-step value ``q = rho + P_out V_out + P_in V_block`` (one SpMV), takes a
segmented max over row groups and switches a state only to a choice *strictly* better by a relative
margin, so policies stay proper (they leave the block almost surely) and the first maximum breaks
ties, as on the CPU. Where the evaluation is exact, each round first tries the greedy policy of
:data:`~mopmc.engine.policy_iteration.LOOKAHEAD` Bellman sweeps on the device, kept where it is
proper, as the CPU engine does (see :mod:`mopmc.engine.policy_iteration`). Evaluation:

* blocks of at most ``dense_limit`` states: ``I - P_pi`` built densely on the device and solved by
  LU (``torch.linalg.lu_factor_ex``), the m objectives afterwards with the same factors (exact up to
  rounding; error bound 0, as the CPU engine's sparse LU);
* blocks of up to ``sparse_limit`` states: ``I - P_pi`` sparse on the host, factorised by SuperLU
  as the CPU engine does (exact; error bound 0). Each round moves the policy and one value vector
  across (``n`` numbers each way), while the choices' one-step values and the segmented max stay on
  the device. A dense LU costs ``n^3``: at zeroconf's block of 3,324 states and 80 rounds it took
  32 s on a 2-core CPU, SuperLU 0.2 s;
* larger blocks whose transitions are narrowly banded (``band_budget``), and blocks up to
  ``sparse_limit`` states where that is cheap: the same on the host by subtraction-free band
  elimination (:class:`~mopmc.engine.banded.BandBlock`, as the CPU engine); larger grid-like
  blocks (``n b <= LU_GATE``) by SuperLU on the host, as the CPU engine;
* other larger blocks: the iteration ``x <- b + P_pi x`` from ``x_0`` (the previous round's values, else
  0) together with ``y <- P_pi y`` from 1 (the probability of still being in the block after k
  steps). Since ``V - x_k = P_pi^k (V - x_0)``, ``|V - x_k| <= |y_k| |x_k - x_0| / (1 - |y_k|)`` (max
  norms, ``P_pi >= 0``): a sound bound, tested on the
  device every ``check_every`` sweeps (one host sync per test) until it is below ``precision`` times
  ``max(1, |x|)``. A switch then needs an improvement above twice that bound. At the end the
  optimum is certified as in optimistic value iteration (Hartmanns & Kaminski 2020): an upper
  guess ``U`` above the values is iterated with the Bellman operator until ``T U <= U``, which
  bounds every proper policy's value; the block fails loudly when that does not happen quickly.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, diags
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.linalg import splu

from mopmc.engine.banded import (BAND_BUDGET, RESCUE_FLOPS, TORCH_LU_ITERATE, block_solver, conserving_split,
                                 grid_like, iterate_rather, sums_dd)
from mopmc.engine.policy_iteration import GREEDY_ROUNDS, LOOKAHEAD, NOISE, SOLVED, hopeless
from mopmc.engine.problem import exit_mass
from mopmc.engine.refine import refine
from mopmc.engine.torch_engine import to_device
from mopmc.errors import InfiniteValueError, MopmcError

_IMPROVE = 1e-12  # relative margin for a strict improvement (as the CPU engine)
_MAX_ROUNDS = 10_000
_MAX_SWEEPS = 10_000_000
_INFINITE = "the weighted optimum is infinite: this direction rewards staying forever in an end component"


class DeviceBlock:
    """A cyclic block: states ``[a, b)``, choices ``[c0, c1)``, transitions ``[k0, k1)`` of the engine's problem."""

    def __init__(self, engine, L, problem):
        torch = engine.torch
        self.engine = engine
        self.torch = torch
        self.L = L
        a, b, c0, c1, k0, k1 = L
        self.n = b - a
        self.nc = c1 - c0
        dev = engine.device
        tg = problem.targets[k0:k1]
        rows = engine.loc[k0:k1].cpu().numpy()
        inside = (tg >= a) & (tg < b)
        self.dense = self.n <= engine.dense_limit
        self.sparse = not self.dense and self.n <= engine.sparse_limit
        self.banded = None
        put = lambda x, dt: to_device(torch, x, dt, dev)  # noqa: E731
        self.in_rows = put(rows[inside], torch.int64)
        self.in_cols = put(tg[inside] - a, torch.int64)
        self.in_vals = put(problem.probs[k0:k1][inside], torch.float64)
        self.out_rows = put(rows[~inside], torch.int64)
        self.out_tgt = put(tg[~inside], torch.int64)
        self.out_vals = put(problem.probs[k0:k1][~inside], torch.float64)
        self.own = engine.own[c0:c1]
        self.in_owner = self.own.index_select(0, self.in_rows)
        self.first = put(problem.row_groups[a:b] - c0, torch.int64)
        # host copies for the properness check (only with negative weights, as the CPU engine) and
        # the sparse LU: each inside transition's choice, target and probability
        self._host_in = (rows[inside], tg[inside] - a)
        leaves = np.zeros(self.nc, bool)
        leaves[rows[~inside]] = True
        self._leaves = leaves | problem.exits[c0:c1]
        owner = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(problem.row_groups[a:b + 1]))
        probs = problem.probs[k0:k1]
        P_in = csr_matrix((probs[inside], (rows[inside], tg[inside] - a)), shape=(self.nc, self.n))
        out, out_lo = sums_dd(rows[~inside], probs[~inside], self.nc)
        self._band_args = (P_in, owner, out, exit_mass(problem)[c0:c1])  # (numbers: banded.leave_mass)
        self._band_tried = False  # (the rescue's budget, RESCUE_FLOPS, is above any tried here)
        if not self.dense and engine.band_budget > 0:  # (as the CPU engine's blocks)
            self.banded, width = block_solver(*self._band_args, engine.band_budget, self.sparse)
            if self.banded is None and iterate_rather(self.n, width, TORCH_LU_ITERATE):
                self.sparse = False  # three-dimensional and dear to factor: iterated (banded.TORCH_LU_ITERATE)
            elif self.banded is None and not self.sparse and grid_like(self.n, width):
                self.sparse = True  # SuperLU on the host (see mopmc.engine.banded.LU_GATE)
        # exact solves factor D - P_off on the host, as the CPU engine's blocks (mopmc.engine.refine)
        self._P_off, self._diag, self._diag_lo = conserving_split(*self._band_args, out_lo)
        self.exact = self.dense or self.sparse or self.banded is not None
        self._settled = True  # (whether the last exact solve's refinement settled)

    # ------------------------------------------------------------------ one direction
    def solve(self, rho, VX, choice, start_policy: np.ndarray, check_proper: bool) -> tuple[float, float]:
        """Optimise the block in place (``VX``, ``choice``); return ``(gap, error)``: bounds on how much
        a proper policy beats the weighted value, and on the values' distance to the returned policy's."""
        torch = self.torch
        a, b, c0, c1, _, _ = self.L
        eng = self.engine
        out = VX.new_zeros((self.nc, VX.shape[1]))
        if len(self.out_rows):
            out.index_add_(0, self.out_rows, self.out_vals[:, None] * VX.index_select(0, self.out_tgt))
        out_v = rho[c0:c1] + out[:, 0]
        if self.exact:  # (what q sums, in size: its rounding's scale; policy_iteration.NOISE)
            size = VX.new_zeros(self.nc)
            if len(self.out_rows):
                size.index_add_(0, self.out_rows, self.out_vals * VX[:, 0].abs().index_select(0, self.out_tgt))
            out_size = rho[c0:c1].abs() + size
        pol = torch.tensor(np.asarray(start_policy[a:b]) - c0, device=eng.device, dtype=torch.int64)
        local = torch.arange(self.nc, device=eng.device, dtype=torch.int64)
        rounds = 0
        vb = None
        while True:
            rounds += 1
            solver = self._evaluator(pol)
            vb, err = solver(out_v.index_select(0, pol)[:, None], None if vb is None else vb[:, None])
            vb = vb[:, 0]
            q, best = self._q(out_v, vb)
            cur = q.index_select(0, pol)
            if self.exact and self._settled:  # (values exact to a few ulp, refined on the host: a margin over q's rounding)
                margin = NOISE * self._q(out_size, vb.abs())[1] + SOLVED * float(vb.abs().max())
            else:
                margin = torch.clamp(_IMPROVE * torch.clamp(cur.abs(), min=1.0), min=2.0 * float(err[0]))
            better = best > cur + margin
            if not bool(better.any()) or rounds >= _MAX_ROUNDS:
                break
            pol_new = torch.where(better, self._first_max(q, best, local), pol)
            if LOOKAHEAD and self.exact and rounds <= GREEDY_ROUNDS:  # (the greedy policy's values bound only from exact ones)
                greedy = self._lookahead(out_v, vb, local)
                if self._proper(greedy.cpu().numpy()):
                    pol_new = greedy
            pol = pol_new
            if check_proper:
                self._check_proper(pol.cpu().numpy())
        rhs = eng.rewards.index_select(0, c0 + pol) + out.index_select(0, pol)[:, 1:]
        xb, errx = solver(rhs)
        VX[a:b, 0] = vb
        VX[a:b, 1:] = xb
        choice[a:b] = c0 + pol
        error = float(errx.max()) if len(errx) else 0.0
        gap = 0.0 if self.exact else self._certify(out_v, vb, float(err[0]))
        return gap, error

    def _q(self, out_v, v):
        """Every choice's one-step value from the block's values ``v``, and the best per state."""
        q = out_v.index_add(0, self.in_rows, self.in_vals * v.index_select(0, self.in_cols))
        best = self.torch.full((self.n,), -np.inf, device=q.device, dtype=q.dtype).scatter_reduce_(0, self.own, q, "amax")
        return q, best

    def _first_max(self, q, best, local):
        """Per state, its first choice whose ``q`` reaches ``best`` (the CPU engine's tie rule)."""
        torch = self.torch
        big = torch.iinfo(torch.int64).max
        cand = torch.where(q >= best.index_select(0, self.own), local, big)
        return torch.full((self.n,), big, device=q.device, dtype=torch.int64).scatter_reduce_(0, self.own, cand, "amin")

    def _lookahead(self, out_v, v, local):
        """The greedy policy of :data:`LOOKAHEAD` Bellman sweeps from ``v`` (as the CPU engine)."""
        for _ in range(LOOKAHEAD):
            v = self.torch.maximum(self._q(out_v, v)[1], v)
        q, best = self._q(out_v, v)
        return self._first_max(q, best, local)

    def _certify(self, out_v, vb, err: float) -> float:
        """A certified bound on how much any proper policy beats ``vb`` (optimistic verification).

        ``U = vb + err + precision * max(1, |vb|)`` is iterated with the Bellman operator ``T`` until
        ``T U <= U``; then every proper policy's value is at most ``U`` (``V_sigma = lim T_sigma^k U <= U``).
        """
        torch = self.torch
        eng = self.engine
        own = self.own
        U = vb + err + eng.precision * torch.clamp(vb.abs(), min=1.0)
        for _ in range(64):
            for _ in range(eng.check_every):
                q = out_v.index_add(0, self.in_rows, self.in_vals * U.index_select(0, self.in_cols))
                TU = torch.full((self.n,), -np.inf, device=q.device, dtype=q.dtype).scatter_reduce_(0, own, q, "amax")
                if bool((TU <= U).all()):
                    return float((U - vb).max()) + err
                U = TU
        raise MopmcError(
            f"torch engine: could not certify the optimum of a cyclic block of {self.n} states to precision "
            f"{eng.precision:g}; raise dense_limit above {self.n} to solve it exactly"
        )

    # ------------------------------------------------------------------ policy evaluation
    def _evaluator(self, pol):
        """``rhs (n x k) -> (solution, error bound per column)`` for ``(I - P_pi) x = rhs``."""
        torch = self.torch
        if self.dense:
            host_pol = pol.cpu().numpy()
            p_off, d = self._host_policy(host_pol)
            M = torch.from_numpy(np.diag(d[0]) - p_off.toarray()).to(pol.device)
            lu, piv, info = torch.linalg.lu_factor_ex(M)
            if int(info) != 0:
                raise InfiniteValueError(_INFINITE)
            def solve_host(r):
                r2 = torch.from_numpy(np.ascontiguousarray(r).reshape(self.n, -1)).to(pol.device)
                return torch.linalg.lu_solve(lu, piv, r2).cpu().numpy().reshape(np.shape(r))

            if hopeless(solve_host, self.n) and self._to_band():  # (staying too long for the LU: as the CPU engine)
                return self._sparse_lu(pol)

            def dense(rhs, x0=None):
                x = torch.linalg.lu_solve(lu, piv, rhs)
                x = self._refined(solve_host, p_off, d, rhs.cpu().numpy(), x.cpu().numpy(), host_pol)
                return torch.from_numpy(x).to(pol.device), torch.zeros(rhs.shape[1], dtype=torch.float64)

            return dense
        if self.sparse or self.banded is not None:
            return self._sparse_lu(pol)
        chosen = torch.zeros(self.nc, device=pol.device, dtype=torch.bool)
        chosen[pol] = True
        vals = self.in_vals * chosen.index_select(0, self.in_rows)  # (the policy's transitions, on the device)

        def iterative(rhs, x0=None):
            return self._iterate(vals, rhs, x0)

        return iterative

    def _sparse_lu(self, pol):
        """The solver of ``(I - P_pi) x = rhs`` on the host, by SuperLU or band elimination (as the
        CPU engine's blocks)."""
        torch = self.torch
        dev = pol.device
        host_pol = pol.cpu().numpy()
        p_off = d = None
        if self.banded is None:
            p_off, d = self._host_policy(host_pol)
            try:
                lu = splu((diags(d[0]) - p_off).tocsc())
                if hopeless(lu.solve, self.n) and self._to_band():  # (as the CPU engine's blocks)
                    p_off = None
            except RuntimeError:  # a zero pivot: by cancellation, or the policy never leaves the block
                if not self._to_band():
                    raise InfiniteValueError(_INFINITE) from None
                p_off = None
        if p_off is None:
            try:
                lu = self.banded.factor(host_pol)
            except RuntimeError:  # exactly singular: the policy never leaves the block
                raise InfiniteValueError(_INFINITE) from None

        def sparse(rhs, x0=None):
            b = np.ascontiguousarray(rhs.cpu().numpy())
            x = lu.solve(b).reshape(rhs.shape)
            if p_off is not None:
                x = self._refined(lu.solve, p_off, d, b, x, host_pol)
            else:
                self._settled = True  # (band elimination is subtraction-free: accurate as it is)
            return torch.from_numpy(x).to(dev), torch.zeros(rhs.shape[1], dtype=torch.float64)

        return sparse

    def _refined(self, solve, p_off, d, b: np.ndarray, x: np.ndarray, host_pol: np.ndarray) -> np.ndarray:
        """``x`` (the LU's ``solve`` of ``(D - P_off) x = b``) refined (:mod:`mopmc.engine.refine`),
        or where refinement does not settle and band elimination fits, band elimination's solution;
        records in ``_settled`` whether the result is exact to a few ulp."""
        x, settled = refine(solve, p_off, d, b, x)
        if not settled and self._to_band():  # too ill-conditioned for the LU: eliminate without subtractions
            x = self.banded.factor(host_pol).solve(np.ascontiguousarray(b)).reshape(b.shape)
            settled = True
        self._settled = settled
        return x

    def _host_policy(self, pol: np.ndarray):
        """``(P_off, (D, D_lo))`` of the policy ``pol`` (local choices) on the host: its transitions to
        other states of the block (CSR) and its diagonal, the mass each state sends elsewhere, as a
        double-double (:func:`mopmc.engine.banded.conserving_split`)."""
        return self._P_off[pol], (self._diag[pol], self._diag_lo[pol])

    def _to_band(self) -> bool:
        """Band elimination for this block where it fits the default budgets (SuperLU failed it)."""
        if self.banded is None and not self._band_tried:
            self._band_tried = True
            self.banded, _ = block_solver(*self._band_args, BAND_BUDGET, False, RESCUE_FLOPS)
        return self.banded is not None

    def _iterate(self, vals, rhs, x0=None):
        torch = self.torch
        eng = self.engine
        owner, cols = self.in_owner, self.in_cols

        def step(x):
            return x.new_zeros(x.shape).index_add_(0, owner, vals[:, None] * x.index_select(0, cols))

        x0 = torch.zeros_like(rhs) if x0 is None else x0
        x = x0
        y = torch.ones((self.n, 1), device=rhs.device, dtype=torch.float64)
        sweeps = 0
        while True:
            for _ in range(eng.check_every):
                x = rhs + step(x)
                y = step(y)
            sweeps += eng.check_every
            ny = y.max()
            nx = x.abs().max(dim=0).values
            moved = (x - x0).abs().max(dim=0).values
            bound = torch.where(ny < 1.0, ny * moved / torch.clamp(1.0 - ny, min=1e-300), torch.full_like(nx, np.inf))
            done = (bound <= eng.precision * torch.clamp(nx, min=1.0)).all()
            if bool(done):  # the one host sync per check_every sweeps
                return x, bound.cpu()
            if sweeps >= _MAX_SWEEPS:
                raise MopmcError(
                    f"torch engine: policy evaluation of a cyclic block of {self.n} states did not reach precision "
                    f"{eng.precision:g} in {sweeps} sweeps (bound {float(bound.max()):.3g}); raise dense_limit "
                    f"above {self.n} to solve it exactly"
                )

    def _check_proper(self, pol: np.ndarray) -> None:
        if not self._proper(pol):
            raise InfiniteValueError(_INFINITE)

    def _proper(self, pol: np.ndarray) -> bool:
        """Whether the block's policy ``pol`` (local choices, on the host) leaves the block almost surely."""
        rows, cols = self._host_in
        n = self.n
        chosen = np.zeros(self.nc, bool)
        chosen[pol] = True
        sel = chosen[rows]
        owner = self.own.cpu().numpy()
        src = owner[rows[sel]]
        leave = np.flatnonzero(self._leaves[pol])
        # reverse graph: who reaches the terminal (node n)
        r = np.concatenate((cols[sel], np.full(len(leave), n)))
        c = np.concatenate((src, leave))
        G = csr_matrix((np.ones(len(r), np.int8), (r, c)), shape=(n + 1, n + 1))
        reached = breadth_first_order(G, n, directed=True, return_predecessors=False)
        return len(reached) == n + 1

