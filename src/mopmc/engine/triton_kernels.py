"""The fused level kernel's Triton source (see :mod:`mopmc.engine.triton_levels`, which imports
this module only when the kernel is used; ``TRITON_INTERPRET=1`` must be set before, for the
interpreter). Triton resolves a kernel's helpers among its module's globals, hence a module."""

import triton
import triton.language as tl


@triton.jit
def add_transition(x, tptr, pptr, mask, VX, k, cols, cmask, GATHER: tl.constexpr, EVICT: tl.constexpr):
    """``x + p * VX[target]`` of one transition slot per row (``mask``: rows that have it);
    ``EVICT``: the eviction policy of the streamed loads (``""``, ``"evict_first"``)."""
    tg = tl.load(tptr, mask=mask, other=0, eviction_policy=EVICT)
    p = tl.load(pptr, mask=mask, other=0.0, eviction_policy=EVICT)
    g = tl.load(VX + tg[:, None] * k + cols[None, :], mask=mask[:, None] & cmask[None, :], other=0.0, cache_modifier=GATHER)
    return x + p[:, None] * g


@triton.jit
def descriptor(desc, L):
    """Level ``L``'s row of the descriptor table: ``a, n_l, K, T, s0, t0, om``."""
    d = desc + L * 8
    return tl.load(d + 0), tl.load(d + 1), tl.load(d + 2), tl.load(d + 3), tl.load(d + 4), tl.load(d + 5), tl.load(d + 6)


@triton.jit
def pick(c, K, x, v, best_v, best_x, best_j):
    """Keep choice slot ``c`` where it beats the best so far (the first maximum; ``c >= K``: none)."""
    better = ((v > best_v) | (c == 0)) & (c < K)
    return tl.where(better, v, best_v), tl.where(better[:, None], x, best_x), tl.where(better, c, best_j)


@triton.jit
def choice_value(c, rows, rmask, cmask, cols, K, T, s0, t0, om, VX, target, prob, RR, den, neg, optr, otarget, oprob, k,
                 GATHER: tl.constexpr, TMAX: tl.constexpr, EVICT: tl.constexpr):
    """``(RR + sum_t p * VX[target]) / den`` of choice slot ``c`` of the rows (``rmask``), and
    its weighted value plus ``neg``; ``TMAX > 0``: the transition slots unrolled up to ``TMAX``
    (masked beyond ``T``), so their loads issue together; 0: a loop over ``T``."""
    local = rows.to(tl.int64) * K + c
    slot = s0 + local
    m2 = rmask[:, None] & cmask[None, :]
    x = tl.load(RR + slot[:, None] * k + cols[None, :], mask=m2, other=0.0, eviction_policy=EVICT)
    tb = t0 + local * T
    if TMAX > 0:
        for t in tl.static_range(TMAX):
            x = add_transition(x, target + tb + t, prob + tb + t, rmask & (t < T), VX, k, cols, cmask, GATHER, EVICT)
    else:
        for t in range(T):
            x = add_transition(x, target + tb + t, prob + tb + t, rmask, VX, k, cols, cmask, GATHER, EVICT)
    if om > 0:
        e0 = tl.load(optr + slot, mask=rmask, other=0)
        e1 = tl.load(optr + slot + 1, mask=rmask, other=0)
        for e in range(om):
            x = add_transition(x, otarget + e0 + e, oprob + e0 + e, rmask & (e0 + e < e1), VX, k, cols, cmask, GATHER, EVICT)
    x = x / tl.load(den + slot, mask=rmask, other=1.0, eviction_policy=EVICT)[:, None]
    v = tl.sum(tl.where((cols == 0)[None, :], x, 0.0), axis=1) + tl.load(neg + slot, mask=rmask, other=0.0, eviction_policy=EVICT)
    return x, v


@triton.jit
def rows_block(rows, rmask, a, K, T, s0, t0, om, VX, OUT, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               cols, cmask, KP: tl.constexpr, BLOCK: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr,
               EVICT: tl.constexpr):
    """One block of a padded level's rows (``rmask``), read from ``VX``: the best choice slot's
    ``[v | x]`` into ``OUT`` (``VX`` itself in the level order), its index into ``arg`` (``K > 1``)."""
    best_v = tl.full((BLOCK,), float("-inf"), tl.float64)
    best_x = tl.zeros((BLOCK, KP), tl.float64)
    best_j = tl.zeros((BLOCK,), tl.int64)
    if KMAX > 0:  # choice slots unrolled (masked beyond K): every slot's loads issue together
        for c in tl.static_range(KMAX):
            x, v = choice_value(c, rows, rmask & (c < K), cmask, cols, K, T, s0, t0, om, VX, target, prob, RR, den, neg,
                                optr, otarget, oprob, k, GATHER, TMAX, EVICT)
            best_v, best_x, best_j = pick(c, K, x, v, best_v, best_x, best_j)
    else:
        for c in range(K):
            x, v = choice_value(c, rows, rmask, cmask, cols, K, T, s0, t0, om, VX, target, prob, RR, den, neg,
                                optr, otarget, oprob, k, GATHER, TMAX, EVICT)
            best_v, best_x, best_j = pick(c, K, x, v, best_v, best_x, best_j)
    state = a + rows.to(tl.int64)
    tl.store(OUT + state[:, None] * k + cols[None, :], best_x, mask=rmask[:, None] & cmask[None, :])
    tl.store(arg + state, best_j, mask=rmask & (K > 1))


@triton.jit(do_not_specialize=["L0", "L1", "k"])
def levels(desc, L0, L1, VX, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
           KP: tl.constexpr, BLOCK: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr,
           EVICT: tl.constexpr):
    """Levels ``[L0, L1)`` in order, in place in ``VX`` (each program a strided share of a level's row blocks)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, KP)
    cmask = cols < k
    lanes = tl.arange(0, BLOCK)
    for L in range(L0, L1):
        a, n_l, K, T, s0, t0, om = descriptor(desc, L)
        for r0 in range(pid * BLOCK, n_l, nprog * BLOCK):
            rows = r0 + lanes
            rows_block(rows, rows < n_l, a, K, T, s0, t0, om, VX, VX, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
                       cols, cmask, KP, BLOCK, GATHER, KMAX, TMAX, EVICT)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["k"])
def sweep(table, desc, VX, OUT, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
          KP: tl.constexpr, BLOCK: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr,
          EVICT: tl.constexpr):
    """One Jacobi Bellman sweep over every padded level at once: program ``i`` does row block
    ``table[i] = (level, first row)``, reading ``VX`` and writing ``OUT`` (no level order)."""
    pid = tl.program_id(0).to(tl.int64)
    a, n_l, K, T, s0, t0, om = descriptor(desc, tl.load(table + 2 * pid))
    rows = tl.load(table + 2 * pid + 1) + tl.arange(0, BLOCK)
    cols = tl.arange(0, KP)
    rows_block(rows, rows < n_l, a, K, T, s0, t0, om, VX, OUT, target, prob, RR, den, neg, arg, optr, otarget, oprob, k, cols, cols < k, KP, BLOCK, GATHER, KMAX, TMAX,
               EVICT)


@triton.jit
def flat_choice(c, rows, rmask, col, K, T, s0, t0, om, VX, target, prob, RR, den, neg, optr, otarget, oprob, k,
                GATHER: tl.constexpr, TMAX: tl.constexpr, EVICT: tl.constexpr, WEIGHTED: tl.constexpr):
    """A lane's column ``col`` of choice slot ``c`` of its row, ``(RR + sum_t p * VX[target]) / den``,
    and (``WEIGHTED``: the rows have more than one choice) the row's weighted value plus ``neg``,
    which each of the row's lanes computes itself in the same order as :func:`choice_value`."""
    local = rows.to(tl.int64) * K + c
    slot = s0 + local
    x = tl.load(RR + slot * k + col, mask=rmask, other=0.0, eviction_policy=EVICT)
    x0 = x
    if WEIGHTED:
        x0 = tl.load(RR + slot * k, mask=rmask, other=0.0, eviction_policy=EVICT)
    tb = t0 + local * T
    for t in tl.static_range(TMAX):
        m = rmask & (t < T)
        tg = tl.load(target + tb + t, mask=m, other=0, eviction_policy=EVICT)
        p = tl.load(prob + tb + t, mask=m, other=0.0, eviction_policy=EVICT)
        x = x + p * tl.load(VX + tg * k + col, mask=m, other=0.0, cache_modifier=GATHER)
        if WEIGHTED:
            x0 = x0 + p * tl.load(VX + tg * k, mask=m, other=0.0, cache_modifier=GATHER)
    if om > 0:
        e0 = tl.load(optr + slot, mask=rmask, other=0)
        e1 = tl.load(optr + slot + 1, mask=rmask, other=0)
        for e in range(om):
            m = rmask & (e0 + e < e1)
            tg = tl.load(otarget + e0 + e, mask=m, other=0)
            p = tl.load(oprob + e0 + e, mask=m, other=0.0)
            x = x + p * tl.load(VX + tg * k + col, mask=m, other=0.0, cache_modifier=GATHER)
            if WEIGHTED:
                x0 = x0 + p * tl.load(VX + tg * k, mask=m, other=0.0, cache_modifier=GATHER)
    d = tl.load(den + slot, mask=rmask, other=1.0, eviction_policy=EVICT)
    x = x / d
    v = x
    if WEIGHTED:
        v = x0 / d + tl.load(neg + slot, mask=rmask, other=0.0, eviction_policy=EVICT)
    return x, v


@triton.jit
def flat_block(L, r0, desc, VX, OUT, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               LANES: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr, EVICT: tl.constexpr):
    """Rows ``r0 ..`` of level ``L``, one lane per (row, column): ``LANES // k`` rows with no padded
    columns, a row's ``k`` lanes reading its ``k`` values side by side; every slot unrolled
    (``KMAX``, ``TMAX`` > 0, masked beyond the level's ``K`` and ``T``); each of a row's lanes
    picks the row's choice alike. Reads ``VX``, writes ``OUT`` (``VX`` itself in the level order)."""
    a, n_l, K, T, s0, t0, om = descriptor(desc, L)
    lane = tl.arange(0, LANES)
    per = LANES // k
    rows = r0 + lane // k
    col = lane % k
    rmask = (lane < per * k) & (rows < n_l)
    best_v = tl.full((LANES,), float("-inf"), tl.float64)
    best_x = tl.zeros((LANES,), tl.float64)
    best_j = tl.zeros((LANES,), tl.int64)
    for c in tl.static_range(KMAX):
        x, v = flat_choice(c, rows, rmask & (c < K), col, K, T, s0, t0, om, VX, target, prob, RR, den, neg, optr, otarget, oprob, k,
                           GATHER, TMAX, EVICT, KMAX > 1)
        better = ((v > best_v) | (c == 0)) & (c < K)  # the first maximum, as pick
        best_v = tl.where(better, v, best_v)
        best_x = tl.where(better, x, best_x)
        best_j = tl.where(better, c, best_j)
    state = a + rows.to(tl.int64)
    tl.store(OUT + state * k + col, best_x, mask=rmask)
    tl.store(arg + state, best_j, mask=rmask & (col == 0) & (K > 1))


@triton.jit(do_not_specialize=["k"])
def sweep_flat(table, desc, VX, OUT, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               LANES: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr, EVICT: tl.constexpr):
    """:func:`sweep` by :func:`flat_block`: program ``i`` does ``table[i] = (level, first row)``."""
    pid = tl.program_id(0).to(tl.int64)
    flat_block(tl.load(table + 2 * pid), tl.load(table + 2 * pid + 1), desc, VX, OUT, target, prob, RR, den, neg, arg, optr,
               otarget, oprob, k, LANES, GATHER, KMAX, TMAX, EVICT)


@triton.jit(do_not_specialize=["L", "k"])
def level_flat(desc, L, VX, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               LANES: tl.constexpr, GATHER: tl.constexpr, KMAX: tl.constexpr, TMAX: tl.constexpr, EVICT: tl.constexpr):
    """Level ``L`` in place by :func:`flat_block`, ``LANES // k`` rows per program."""
    pid = tl.program_id(0).to(tl.int64)
    flat_block(L, pid * (LANES // k), desc, VX, VX, target, prob, RR, den, neg, arg, optr, otarget, oprob, k,
               LANES, GATHER, KMAX, TMAX, EVICT)
