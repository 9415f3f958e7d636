"""Triton kernels of ``toeplitz_attention.py``: flash attention whose additive bias depends only
on key index minus query index (bias[h, i, j] = table[h, j - i + N - 1]), with the table's gradient.

Imported only where they run (a CUDA device with Triton, or Triton's interpreter on the CPU,
``TRITON_INTERPRET=1``, which the tests use), so the plugin imports without Triton.

Layout: q, k, v, out, do are [B, H, N, D] with any strides but a unit one on D. The passes read
the bias expanded, [H, N, N] in the inputs' dtype with a row stride ``sbn`` (a multiple of 16: rows
start aligned), one copy for the whole batch (6 MB at 12 x 512 x 512: it stays in L2). A tile of it
is then a few 16-byte loads a thread; gathered from the table by distance it was one 4-byte load
a cell, staged through shared memory (sm_90 SASS: ~30% more instructions in each pass). The
gradient's table row of head h holds distances 1-N .. N-1 (key minus query) at 0 .. 2N-2. Scores
are kept in base 2 (exp2), the row statistic ``L`` is the base-2 log-sum-exp.

The table's gradient is the sum of dS over the batch and along each diagonal of the [N, N]
score matrix. The dK/dV pass has each dS tile [BN keys, BM queries] at hand and sums its diagonals
with two products by one-hot matrices (tensor-core work, a few percent of the tile's), then adds
the sums to the table's gradient by 15 x WA atomic adds (not one per cell: flex's way, slow), into
a copy of the table per batch row (``DT`` [B, H, 2N-1], summed over B by the caller): programs of
different rows do not contend for the same addresses.
Worked example, a tile of 16 keys j = 8a + b' by 16 queries i = 8c + e, so j - i = 8(a - c) + (b' - e):
    cells  = dS^T regrouped as rows (a, c), columns (b', e)             [4, 64]
    cells @ one_be: each row's 64 cells summed by b' - e (+7)           [4, 16]
    transposed @ one_ac: the 4 rows summed by a - c (+1)                [16, 4]
    entry (b' - e + 7, a - c + 1) holds the dS of every cell at j - i = 8(a - c) + (b' - e);
    several entries share a distance (8*0 + 1 = 8*1 - 7): each is added to it.
The first product reads dS in the inputs' precision (fp16/bf16, what SDPA's gradient reads too),
both accumulate in fp32 (the second reads the first's sums as tf32 on a GPU).
"""
import triton
import triton.language as tl

# exp(x) = exp2(x * log2(e)): scores are scaled by log2(e) = 1.4426950408889634 below


@triton.jit
def _bias_tile(Bh, sbn, offs_q, offs_k, valid):
    """The bias of (query, key) pairs as a [len(offs_q), len(offs_k)] fp32 tile (0 where not ``valid``)."""
    return tl.load(Bh + offs_q[:, None] * sbn + offs_k[None, :], mask=valid, other=0.0).to(tl.float32)


@triton.jit
def _query_block(Q, sqb, sqh, sqn, H, N, D: tl.constexpr, BM: tl.constexpr):
    """This program's (batch x head) index, its query rows, which of them are < N, and their q."""
    pid_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    m_ok = offs_m < N
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + tl.arange(0, D)[None, :], mask=m_ok[:, None],
                other=0.0)
    return bh, b, h, offs_m, m_ok, q


@triton.jit
def _key_tile(q, Kb, Vb, Bh, skn, svn, sbn, offs_m, m_ok, start_n, N, qk_scale, D: tl.constexpr, BN: tl.constexpr):
    """Keys and values start_n .. start_n+BN-1 (zeros past N) and the base-2 scores of the queries
    ``q`` (rows ``offs_m``) against them, the bias included; ``valid``: the pairs inside [N, N]."""
    offs_n = start_n + tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    n_ok = offs_n < N
    k = tl.load(Kb + offs_n[:, None] * skn + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    v = tl.load(Vb + offs_n[:, None] * svn + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    valid = m_ok[:, None] & n_ok[None, :]
    s = tl.dot(q, tl.trans(k)) * qk_scale + _bias_tile(Bh, sbn, offs_m, offs_n, valid) * 1.4426950408889634
    return k, v, s, valid, n_ok


@triton.jit
def _keep(seed, rows, start_k, N, p_drop, BK: tl.constexpr):
    """Attention dropout's keep mask of query ``rows`` (bh * N + query: one Philox stream for the
    call, the head in the counter) x keys start_k .. start_k+BK-1 (start_k a multiple of 8): the same
    draw in every pass (the dK/dV pass transposes it). One Philox call
    (4 x 32 bits) draws 8 keys' 16-bit uniforms, as fused attention kernels do (a call per pair cost
    ~100 integer operations each: more than the tile's matmuls); dropped where below p (to 1/65536)."""
    group = start_k // 8 + tl.arange(0, BK // 8)
    r0, r1, r2, r3 = tl.randint4x(seed, rows[:, None] * ((N + 7) // 8) + group[None, :])
    r0, r1 = r0.to(tl.uint32, bitcast=True), r1.to(tl.uint32, bitcast=True)
    r2, r3 = r2.to(tl.uint32, bitcast=True), r3.to(tl.uint32, bitcast=True)
    u = tl.join(tl.join(tl.join(r0 & 0xFFFF, r0 >> 16), tl.join(r1 & 0xFFFF, r1 >> 16)),
                tl.join(tl.join(r2 & 0xFFFF, r2 >> 16), tl.join(r3 & 0xFFFF, r3 >> 16)))  # [BQ, BK/8, 2, 2, 2]
    return tl.reshape(u, (rows.shape[0], BK)).to(tl.float32) >= p_drop * 65536.0


@triton.jit(do_not_specialize=["seed"])  # a new seed each call: one kernel version for all
def toeplitz_attention_fwd(Q, K, V, BIAS, Out, L, seed, sm_scale, p_drop,
               sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, sbh, sbn, H, N,
               D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DROPOUT: tl.constexpr):
    bh, b, h, offs_m, m_ok, q = _query_block(Q, sqb, sqh, sqn, H, N, D, BM)
    offs_d = tl.arange(0, D)
    Kb, Vb, Bh = K + b * skb + h * skh, V + b * svb + h * svh, BIAS + h * sbh
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    for start_n in range(0, N, BN):
        k, v, s, valid, n_ok = _key_tile(q, Kb, Vb, Bh, skn, svn, sbn, offs_m, m_ok, start_n, N, qk_scale, D, BN)
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if DROPOUT:
            p = tl.where(_keep(seed, bh * N + offs_m, start_n, N, p_drop, BN), p / (1.0 - p_drop), 0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(Out + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :], o.to(Out.dtype.element_ty),
             mask=m_ok[:, None])
    tl.store(L + bh * N + offs_m, m_i + tl.log2(l_i), mask=m_ok)


@triton.jit(do_not_specialize=["seed"])  # a new seed each call: one kernel version for all
def toeplitz_attention_bwd_dkdv(Q, K, V, BIAS, DO, L, DELTA, DK, DV, DT, seed, sm_scale, p_drop,
                    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, sob, soh, son, sbh, sbn, stb, sth, H, N,
                    D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, WA: tl.constexpr, DROPOUT: tl.constexpr):
    """dK, dV (laid out as the output: strides ``so*``) of one key block, looping over the query
    blocks (after the dQ pass, which wrote DELTA); the table's gradient on the way: each dS tile's
    diagonal sums by two one-hot products (module docstring), 15 x WA atomic adds."""
    pid_n, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // H, bh % H
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    n_ok = offs_n < N
    k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :], mask=n_ok[:, None], other=0.0)
    Qb, DOb, Bh, DTb = Q + b * sqb + h * sqh, DO + b * sdb + h * sdh, BIAS + h * sbh, DT + b * stb + h * sth
    dk = tl.zeros([BN, D], tl.float32)
    dv = tl.zeros([BN, D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    # key j = 8a + b', query i = 8c + e in the tile: j - i = 8 (a - c) + (b' - e). one_be sums the
    # 64 (b', e) cells into b' - e + 7 (16 columns, the last empty), one_ac the (a, c) rows into
    # a - c + BM/8 - 1 (WA columns, a power of two >= BN/8 + BM/8 - 1)
    be = tl.arange(0, 64)[:, None]
    one_be = ((be // 8 - be % 8 + 7) == tl.arange(0, 16)[None, :]).to(K.dtype.element_ty)
    ac = tl.arange(0, BN * BM // 64)[:, None]
    one_ac = ((ac // (BM // 8) - ac % (BM // 8) + BM // 8 - 1) == tl.arange(0, WA)[None, :]).to(tl.float32)
    fine = tl.arange(0, 16)[:, None]  # b' - e + 7
    coarse = tl.arange(0, WA)[None, :]  # a - c + BM/8 - 1
    diagonal = 8 * (coarse - (BM // 8 - 1)) + fine - 7  # j - i within the tile, [16, WA]
    for start_m in range(0, N, BM):
        offs_m = start_m + tl.arange(0, BM)
        m_ok = offs_m < N
        q = tl.load(Qb + offs_m[:, None] * sqn + offs_d[None, :], mask=m_ok[:, None], other=0.0)
        do = tl.load(DOb + offs_m[:, None] * sdn + offs_d[None, :], mask=m_ok[:, None], other=0.0)
        lse = tl.load(L + bh * N + offs_m, mask=m_ok, other=0.0)
        delta = tl.load(DELTA + bh * N + offs_m, mask=m_ok, other=0.0)
        valid = n_ok[:, None] & m_ok[None, :]  # [BN keys, BM queries]: the transposed tile, read as such
        bias_t = tl.load(Bh + offs_m[None, :] * sbn + offs_n[:, None], mask=valid, other=0.0).to(tl.float32)
        s_t = tl.dot(k, tl.trans(q)) * qk_scale + bias_t * 1.4426950408889634
        p_t = tl.where(valid, tl.exp2(s_t - lse[None, :]), 0.0)
        dp_t = tl.dot(v, tl.trans(do))
        if DROPOUT:
            keep_t = tl.trans(_keep(seed, bh * N + offs_m, pid_n * BN, N, p_drop, BN))
            dv += tl.dot(tl.where(keep_t, p_t / (1.0 - p_drop), 0.0).to(do.dtype), do)
            dp_t = tl.where(keep_t, dp_t / (1.0 - p_drop), 0.0)
        else:
            dv += tl.dot(p_t.to(do.dtype), do)
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)  # dS in the inputs' precision, as SDPA's
        dk += tl.dot(ds_t, q)
        cells = tl.reshape(tl.permute(tl.reshape(ds_t, (BN // 8, 8, BM // 8, 8)), (0, 2, 1, 3)), (BN * BM // 64, 64))
        sums = tl.dot(tl.trans(tl.dot(cells, one_be)), one_ac)  # [16, WA]: the tile's diagonal sums
        idx = pid_n * BN - start_m + diagonal + N - 1
        in_tile = (fine < 15) & (coarse < (BN + BM) // 8 - 1)
        tl.atomic_add(DTb + idx, sums, mask=in_tile & (idx >= 0) & (idx < 2 * N - 1))
    out = b * sob + h * soh + offs_n[:, None] * son + offs_d[None, :]
    tl.store(DK + out, (dk * sm_scale).to(DK.dtype.element_ty), mask=n_ok[:, None])
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=n_ok[:, None])


@triton.jit(do_not_specialize=["seed"])  # a new seed each call: one kernel version for all
def toeplitz_attention_bwd_dq(Q, K, V, BIAS, DO, Out, L, DELTA, DQ, seed, sm_scale, p_drop,
                  sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, sob, soh, son, sbh, sbn, H, N,
                  D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DROPOUT: tl.constexpr):
    """dQ (laid out as the output: strides ``so*``) of one query block, looping over the key
    blocks; first its rows' delta = rowsum(dO * O), which it writes for the dK/dV pass (launched
    after it): no separate pass over O and dO."""
    bh, b, h, offs_m, m_ok, q = _query_block(Q, sqb, sqh, sqn, H, N, D, BM)
    offs_d = tl.arange(0, D)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :], mask=m_ok[:, None], other=0.0)
    out = b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :]
    o = tl.load(Out + out, mask=m_ok[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh * N + offs_m, delta, mask=m_ok)
    lse = tl.load(L + bh * N + offs_m, mask=m_ok, other=0.0)
    Kb, Vb, Bh = K + b * skb + h * skh, V + b * svb + h * svh, BIAS + h * sbh
    dq = tl.zeros([BM, D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    for start_n in range(0, N, BN):
        k, v, s, valid, _ = _key_tile(q, Kb, Vb, Bh, skn, svn, sbn, offs_m, m_ok, start_n, N, qk_scale, D, BN)
        p = tl.where(valid, tl.exp2(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v))
        if DROPOUT:
            dp = tl.where(_keep(seed, bh * N + offs_m, start_n, N, p_drop, BN), dp / (1.0 - p_drop), 0.0)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + out, (dq * sm_scale).to(DQ.dtype.element_ty), mask=m_ok[:, None])
