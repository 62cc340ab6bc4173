"""Sliding-window attention for the swa-harness python: DUT (outside batch D), plus planted faults.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_d.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_d.py:fault_07

Written from the public docs only (dut_v2.h, dut/python/README.md, the example kernels, the harness
and golden READMEs, ci.yaml, the seeds), the way a team porting a serving stack's SWA attention
(Mistral / Qwen / Gemma 2 / gpt-oss layers; FlashAttention-2 varlen forward, FlashInfer's cascade
merge, a vLLM-style decode kernel, the ATB SelfAttention masks) would lay it out, so that each
planted fault has a realistic place to live:

  * one tiled attention routine (`_attend`) for prefill and for both halves of a chunk: query
    blocks of BLOCK_M = 32 rows of the call, key tiles of BLOCK_N = 32 positions aligned to absolute
    multiples of 32; the tiles a block visits are picked from the band (lowest key of its first
    row, highest key of its last row), the band (and an ATB mask, when given) decides each pair
    inside a tile; an online softmax (running max, rescaled denominator and accumulator, a guard
    for rows that have seen no key yet); the result is a normalised partial output plus its
    log-sum-exp, per head ([heads_q, rows, head_size] buffers);
  * chunked prefill (and decode's prompt chunks) as cascade attention: a PREFIX state over the keys
    the cache holds (positions [first visible key of the chunk's first row, chunk begin)) and a
    SUFFIX state over the chunk's own keys (causal inside the chunk), merged by log-sum-exp
    (FlashInfer's merge_state); the chunk's K/V are written into the cache after its attention;
  * decode steps: the step writes its token into the cache first, then one query row attends to a
    gather of the cache: for a ring, all W slots in SLOT order with the position each slot holds
    (the ring-cache patent's order-free argument: attention masks by position), for a linear or
    paged cache, the window's positions through the slot / page table; a single-pass softmax;
  * score features: soft-cap per score after the scale (cap * tanh(s / cap)); the gpt-oss sink as
    one more log-sum-exp term folded into the final normalisation (no value row, not capped);
  * ATB masks in prefill/chunk calls: SWA_NORM read at absolute (query, key) positions, SWA_COMPRESS
    decoded per pair by the documented tile-walk rule with B = mask_block, T = mask_effective_window
    (tiles of B from position 0, which holds for chunk rows too since positions are absolute);
    decode steps use the band alone;
  * FP8 KV: an arithmetic OCP e4m3/e5m2 encoder (saturating, round to nearest even, subnormals) and a
    256-entry decode table; values read are fp8(x / descale) * descale in every mode.
Accumulation is in fp64 (NumPy's stand-in for a device's fp32 accumulators). NumPy only.

Every fault_NN(p) runs the same code with ONE change; FAULTS is the answer key.
"""
import numpy as np

FAULTS = {
    "fault_01": "Key-tile range rounding (prefill calls and both halves of chunked-prefill calls, decode's prompt chunks included): the first key tile a query block visits is ceil((first_row - window_left) / 32) instead of floor(...), so the partially visible lowest tile is skipped and the block's early rows lose their oldest keys (positions from first_row - window_left up to the next multiple of 32); decode steps unaffected, unbounded-left windows unaffected.",
    "fault_02": "Online softmax without the guard for a row that has seen no visible key yet (prefill and chunked-prefill calls, decode's prompt chunks included): when a key tile is wholly hidden for a row whose running max is still -inf, exp(-inf - (-inf)) = NaN is used as the rescale factor and as the weights, so that row's output is NaN (happens whenever a block's lowest picked tile lies wholly below some later row's window, or a two-sided tile is wholly hidden); decode steps unaffected.",
    "fault_03": "Unbounded left window (window_left < 0, the sweep's window 0) not special-cased in the lowest-key arithmetic: the first visible key of row i is taken as i - window_left = i + 1 instead of 0, in every mode (key tiles picked for a prefill block start at the tile of first_row + 1; a chunk reads no cached key; a decode step gathers nothing and outputs 0); the per-pair band test itself is right.",
    "fault_04": "Two-sided windows (prefill only): the key-tile loop of a query block stops at the tile of the block's last row (the causal bound) instead of the tile of last_row + window_right, so keys right of the query that lie in a later 32-key tile are never visited (rows near the end of each 32-row block lose keys after them); one-sided windows unaffected.",
    "fault_05": "Two-sided windows (prefill only, window_right > 0): the window is read as a symmetric radius, query i sees key j iff |i - j| <= window_right, i.e. the left bound window_left is replaced by window_right (and a bounded left edge is applied even when window_left is unbounded).",
    "fault_06": "Chunked prefill (and decode's prompt chunks): the suffix attention over the chunk's own keys is not causal, every row of a chunk sees every key of its chunk, later rows included (only the window's left edge is applied); rows of a 1-row chunk and prefill/decode steps unaffected (an ATB mask, where given, still hides the future keys).",
    "fault_07": "Chunked prefill (and decode's prompt chunks): when the prefix (cache) state of a row is empty (no cached key visible: every row of chunk 0, and rows whose window starts inside the chunk), it is initialised with lse = 0 instead of -inf, so the LSE merge gives the empty prefix weight exp(0 - M) with a zero output: such rows come out multiplied by exp(lse_suffix) / (1 + exp(lse_suffix)) instead of unchanged.",
    "fault_08": "Soft-cap folded as FlashAttention folds it but without multiplying back by the cap: scores are tanh(scale * q.k / cap) instead of cap * tanh(scale * q.k / cap), in every mode (soft-cap cases only).",
    "fault_09": "The sink is capped with the scores: with soft-cap on, the sink enters the softmax as cap * tanh(sink / cap) instead of sink (as if the sink were concatenated to the logits before the cap), in every mode; only cases with both sinks and soft-cap.",
    "fault_10": "Sink added to the normalisation without the max shift: the final denominator is exp(lse - M) + exp(sink) instead of exp(lse - M) + exp(sink - M) with M = max(lse, sink), in every mode (sink cases only): the sink's weight is off by a factor exp(M).",
    "fault_11": "Decode steps only: the query is pre-scaled by scale when it is loaded (vLLM-style) and the shared score code multiplies by scale again, so decode scores are scale^2 * q.k instead of scale * q.k; prefill and chunk calls unaffected.",
    "fault_12": "Decode steps only: the number of cached keys to gather is taken from tokens_written BEFORE the step writes its own token, ctx = min(tokens_written_before, W) (unbounded left: tokens_written_before), and the step attends to positions [pos - ctx + 1, pos]: one key short while pos < W (position 0 is dropped; with an unbounded left window it is always dropped); steps with pos >= W are right.",
    "fault_13": "Decode steps on a LINEAR cache only: the decode gather reads every position [0, pos] and ignores the window (the causal decode kernel reused for CACHE_TYPE_NORM), so steps with pos > window_left attend to keys below the window; rings, paged caches and chunk calls unaffected.",
    "fault_14": "Decode steps on a RING_COMPACT cache only: the step's own token is written to slot pos mod W (the RING_MODULO rule, ignoring base[b]) instead of (pos - base[b]) mod W; whenever base[b] mod W != 0 it overwrites a slot holding a still-visible key and leaves its own slot holding position pos - W, which the gather (right rule) then reads as position pos; prompt chunks and the other policies unaffected.",
    "fault_15": "Decode steps only: tokens_written[b] is set to the step's position pos instead of pos + 1 (the end of what is written); outputs are right, only the cache check (tokens_written) sees it.",
    "fault_16": "Decode steps only: the output row is taken from tokens_written[b] after the step's own cache write (seq_offsets[b] + pos + 1) instead of seq_offsets[b] + pos: each step's output lands one row late (the first decode row of each sequence is left NaN, rows prompt+1.. hold the previous step's output, and the last step overwrites the next sequence's first row; for the batch's last sequence the slice is past the tensor and the call raises).",
    "fault_17": "RING_COMPACT base recomputed at every cache write (each chunk and each decode step) as max(0, end - W) instead of being set once at the sequence's first write; from the second write on, base and every slot of the layout shift, and earlier positions are read back (by the new base) from the wrong slots; the first write is right.",
    "fault_18": "Cache indexed by the sequence's rank among the sequences that have work in this call instead of by its batch index b (ring/linear cache row, base, tokens_written and the page-table row): in a chunked-prefill call after a shorter prompt has finished (chunked_prefill mode and decode's prompt chunks), every later sequence reads and writes the cache row (page-table row, counters) of a sequence before it; decode steps (every sequence active) index rightly but read what the prompt chunks stored in the wrong rows.",
    "fault_19": "PAGED cache writes (chunks and decode steps): the offset inside the page is counted from the call's first row, (pos - begin) % page_size, instead of pos % page_size (the page itself is right: page_table[b, pos // page_size]); wrong whenever a call does not start on a page boundary, e.g. every decode step writes offset 0; reads use the right offset.",
    "fault_20": "FP8 descale read as a quantisation scale, in every mode and cache (fp8 cases only): K/V are encoded as fp8(x * k_descale) and decoded as code_value / k_descale (v with v_descale) instead of fp8(x / k_descale) and code_value * k_descale; the cache bytes and every value read are on the wrong grid (mostly deep subnormals or zero).",
    "fault_21": "FP8 encoder rounds toward zero (drops the bits below the mantissa: truncation) instead of to nearest, ties to even, in every mode (fp8 cases only): most non-exact values get the code one step closer to zero, in the cache bytes and in every K/V value read; saturation kept.",
    "fault_22": "SWA_NORM mask (prefill and chunk calls, decode's prompt chunks included): the mask ROW is indexed by the packed query row (seq_offsets[b] + position, the Q tensor's row) instead of the query's position within the sequence (the column, the key position, is right; rows past the mask's end clamp to its last row); the first sequence is right, every later one reads its queries' rows seq_offsets[b] too far down the band.",
    "fault_23": "SWA_COMPRESS tile walk with W = window_left (the keys-excluding-self reading) instead of W = window_left + 1, in the tile classification (rules 1 and 3) and in rule 4's row offset d - (W - T): the boundary tiles read the compressed mask one row off (and tiles at distance W are wrongly hidden/visible); prefill and chunk calls with SWA_COMPRESS only.",
    "fault_24": "Output layout (prefill and chunked-prefill calls, decode's prompt chunks included): the per-head result buffer [heads_q, rows, head_size] is stored with a reshape to [rows, heads_q, head_size] instead of a transpose, scrambling rows and heads of every call with more than one row and more than one query head; decode steps (one row) unaffected.",
}

BLOCK_M = 32   # query rows per block
BLOCK_N = 32   # keys per tile, tiles aligned to absolute multiples of 32
_FP8 = {"fp8-e4m3": (3, 7, 448.0), "fp8-e5m2": (2, 15, 57344.0)}


def describe():
    return {
        "name": "outside_batch_d",
        "dtypes": ["fp32", "fp16", "bf16"],
        "modes": ["prefill", "chunked_prefill", "decode"],
        "cache_policies": ["ring-modulo", "ring-compact", "linear", "paged"],
        "kv_formats": ["dtype", "fp8-e4m3", "fp8-e5m2"],
        "mask_formats": ["none", "swa-norm", "swa-compress"],
        "features": ["sinks", "softcap", "two-sided"],
        "query_tile": BLOCK_M,
        "key_tile": BLOCK_N,
    }


# ---------------------------------------------------------------- dtypes and FP8

def _to_f64(x, dtype):
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _store(out, rows, values, dtype):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    else:
        out[rows] = values


_TABLES = {}


def _fp8_table(fmt):
    if fmt not in _TABLES:
        m_bits, bias, _ = _FP8[fmt]
        c = np.arange(256)
        e, m = (c & 0x7F) >> m_bits, c & ((1 << m_bits) - 1)
        val = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                       np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
        if fmt == "fp8-e4m3":
            val = np.where((e == 15) & (m == 7), np.nan, val)
        else:
            val = np.where(e == 31, np.where(m == 0, np.inf, np.nan), val)
        _TABLES[fmt] = np.where(c & 0x80, -val, val)
    return _TABLES[fmt]


def _fp8_encode(x, fmt, fault):
    """OCP FP8 codes of x (float64): saturating, nearest, ties to even, with subnormals."""
    m_bits, bias, largest = _FP8[fmt]
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), largest)
    _, ex = np.frexp(np.where(a > 0, a, 1.0))
    e = np.maximum(ex - 1, 1 - bias)                      # binade (subnormals share the lowest)
    quantum = np.ldexp(1.0, e - m_bits)
    n = np.trunc(a / quantum) if fault == "fault_21" else np.rint(a / quantum)
    r = n * quantum                                       # the FP8 value (may carry to the next binade)
    fr, ex2 = np.frexp(np.where(r > 0, r, 1.0))
    normal = r >= np.ldexp(1.0, 1 - bias)
    exp_field = np.where(normal, ex2 - 1 + bias, 0)
    mant = np.where(normal, r / np.ldexp(1.0, ex2 - 1) - 1.0, r / np.ldexp(1.0, 1 - bias))
    mant = np.rint(mant * (1 << m_bits)).astype(np.int64)
    code = (exp_field.astype(np.int64) << m_bits) | mant
    code = np.where(np.signbit(x), code | 0x80, code)
    code = np.where(np.isnan(x), 0x7F, code)
    return code.astype(np.uint8)


def _fp8_quant(x32, descale, fmt, fault):
    """Storage-dtype values (float32 array) -> FP8 codes."""
    if fault == "fault_20":
        return _fp8_encode(x32 * np.float32(descale), fmt, fault)
    return _fp8_encode(x32 / np.float32(descale), fmt, fault)


def _fp8_value(codes, descale, fmt, fault):
    t = _fp8_table(fmt)[codes]
    if fault == "fault_20":
        return t / np.float64(descale)
    return t * np.float64(descale)


def _fresh_kv(p, rows, fault):
    """K and V of packed rows [n, Hkv, D] as attention reads them (FP8 round trip when asked)."""
    if p.dtype == "bf16":
        k32 = (p.k[rows].astype(np.uint32) << 16).view(np.float32)
        v32 = (p.v[rows].astype(np.uint32) << 16).view(np.float32)
    else:
        k32, v32 = p.k[rows].astype(np.float32), p.v[rows].astype(np.float32)
    if p.kv_format != "dtype":
        k = _fp8_value(_fp8_quant(k32, p.k_descale, p.kv_format, fault), p.k_descale, p.kv_format, fault)
        v = _fp8_value(_fp8_quant(v32, p.v_descale, p.kv_format, fault), p.v_descale, p.kv_format, fault)
        return k, v
    return k32.astype(np.float64), v32.astype(np.float64)


# ---------------------------------------------------------------- window and masks

def _lowest_key(p, i, fault):
    """First key position row i may see (not clamped at 0)."""
    if p.window_left < 0 and fault != "fault_03":
        return 0
    return i - p.window_left


def _band(p, i, j, fault, causal_only_left=False):
    """Pairwise visibility by the band. i [n,1], j [1,m] absolute positions."""
    left, right = p.window_left, p.window_right
    if fault == "fault_05" and right > 0:
        left = right
    vis = np.ones((i.shape[0], j.shape[1]), dtype=bool)
    if left >= 0:
        vis &= i - j <= left
    if not causal_only_left and right >= 0:
        vis &= j - i <= right
    return vis


def _mask_visible(p, b, i, j, fault):
    """ATB mask visibility (True = visible) for absolute positions i [n,1], j [1,m]."""
    if p.mask is None or p.mask_format == "none":
        return None
    mask = np.asarray(p.mask)
    if p.mask_format == "swa-norm":
        rows, cols = i, j
        if fault == "fault_22":
            off = int(p.seq_offsets[b])
            rows = i + off
        n = int(p.mask_rows)
        m2 = mask.reshape(-1)[: n * n].reshape(n, n)
        rows = np.clip(rows, 0, n - 1)
        cols = np.clip(cols, 0, n - 1)
        return m2[rows, cols] == 0
    # SWA_COMPRESS: the tile walk of dut_v2.h, per pair
    B = int(p.mask_block)
    W = int(p.window_left) + (0 if fault == "fault_23" else 1)
    T = int(p.mask_effective_window)
    m2 = mask.reshape(-1)[: 512 * 512].reshape(512, 512)
    qt, kt = i // B, j // B
    r, c = i - qt * B, j - kt * B
    d = (qt - kt) * B
    dmin, dmax = d - (B - 1), d + (B - 1)
    hidden = (kt > qt) | (dmin >= W)
    diag = qt == kt
    full = (~hidden) & (~diag) & (dmin >= 0) & (dmax < W)
    edge = (~hidden) & (~diag) & (~full)
    vis = np.zeros(np.broadcast(i, j).shape, dtype=bool)
    vis |= full
    rr, cc = np.broadcast_arrays(r, c)
    dd = np.broadcast_to(d, rr.shape)
    if diag.any():
        dg = np.broadcast_to(diag, rr.shape)
        vis[dg] = m2[rr[dg], cc[dg]] == 0
    if edge.any():
        eg = np.broadcast_to(edge, rr.shape)
        rows = np.clip(dd[eg] - (W - T) + rr[eg], 0, 511)
        vis[eg] = m2[rows, cc[eg]] == 0
    return vis


# ---------------------------------------------------------------- scores

def _cap(p, s, fault):
    if p.softcap > 0:
        if fault == "fault_08":
            return np.tanh(s / p.softcap)
        return p.softcap * np.tanh(s / p.softcap)
    return s


def _kv_heads(p):
    return np.arange(p.heads_q) // (p.heads_q // p.heads_kv)


def _attend(p, b, q, qpos, k, v, kpos0, fault, causal=True):
    """Tiled online-softmax attention of rows qpos (q [n,Hq,D]) to keys at positions
    [kpos0, kpos0 + len(k)) (k, v [m,Hkv,D]). Returns o [Hq,n,D] (normalised) and lse [Hq,n]."""
    n, Hq, D = q.shape
    o = np.zeros((Hq, n, D))
    lse = np.full((Hq, n), -np.inf)
    nk = k.shape[0]
    if nk == 0 or n == 0:
        return o, lse
    kend = kpos0 + nk
    heads = _kv_heads(p)
    kh = np.transpose(k[:, heads], (1, 0, 2))   # [Hq, m, D]
    vh = np.transpose(v[:, heads], (1, 0, 2))
    qh = np.transpose(q, (1, 0, 2))              # [Hq, n, D]
    for m0 in range(0, n, BLOCK_M):
        ib = qpos[m0:m0 + BLOCK_M]
        qb = qh[:, m0:m0 + BLOCK_M]
        nb = len(ib)
        lo = max(kpos0, _lowest_key(p, int(ib[0]), fault))
        if not causal or (p.window_right < 0):
            hi = kend - 1
        elif fault == "fault_04":
            hi = min(kend - 1, int(ib[-1]))
        else:
            hi = min(kend - 1, int(ib[-1]) + p.window_right)
        if lo > hi:
            continue
        t_lo = -(-lo // BLOCK_N) if fault == "fault_01" else lo // BLOCK_N
        t_hi = hi // BLOCK_N
        m_run = np.full((Hq, nb), -np.inf)
        l_run = np.zeros((Hq, nb))
        acc = np.zeros((Hq, nb, D))
        for t in range(t_lo, t_hi + 1):
            a = max(t * BLOCK_N, kpos0) - kpos0
            z = min((t + 1) * BLOCK_N, kend) - kpos0
            if a >= z:
                continue
            jpos = np.arange(a, z) + kpos0
            s = np.einsum("hnd,hmd->hnm", qb, kh[:, a:z]) * np.float64(p.scale)
            s = _cap(p, s, fault)
            vis = _band(p, ib[:, None], jpos[None, :], fault, causal_only_left=not causal)
            mv = _mask_visible(p, b, ib[:, None], jpos[None, :], fault)
            if mv is not None:
                vis &= mv
            s = np.where(vis[None], s, -np.inf)
            m_new = np.maximum(m_run, s.max(axis=2))
            if fault == "fault_02":
                with np.errstate(invalid="ignore"):
                    alpha = np.exp(m_run - m_new)
                    w = np.exp(s - m_new[..., None])
            else:
                seen = np.isfinite(m_new)
                m_safe = np.where(seen, m_new, 0.0)
                alpha = np.where(seen, np.exp(np.where(np.isfinite(m_run), m_run, -np.inf) - m_safe), 1.0)
                w = np.exp(s - m_safe[..., None])
            l_run = l_run * alpha + w.sum(axis=2)
            acc = acc * alpha[..., None] + np.einsum("hnm,hmd->hnd", w, vh[:, a:z])
            m_run = m_new
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = l_run > 0
            if fault == "fault_02":
                ok = ok | np.isnan(l_run)
            o[:, m0:m0 + nb] = np.where(ok[..., None], acc / np.where(ok, l_run, 1.0)[..., None], 0.0)
            lse[:, m0:m0 + nb] = np.where(ok, m_run + np.log(np.where(ok, l_run, 1.0)), -np.inf)
    return o, lse


def _merge(o1, lse1, o2, lse2):
    """LSE merge of two normalised partial states (FlashInfer merge_state)."""
    M = np.maximum(lse1, lse2)
    Ms = np.where(np.isfinite(M), M, 0.0)
    w1, w2 = np.exp(lse1 - Ms), np.exp(lse2 - Ms)
    tot = w1 + w2
    safe = np.where(tot > 0, tot, 1.0)
    o = (o1 * w1[..., None] + o2 * w2[..., None]) / safe[..., None]
    lse = np.where(tot > 0, Ms + np.log(safe), -np.inf)
    return o, lse


def _finish(p, o, lse, fault):
    """Fold the sink (one more logit, no value row) into a normalised state o [Hq,n,D]."""
    if p.sinks is None:
        return o
    sink = np.asarray(p.sinks, dtype=np.float64)[:, None] * np.ones_like(lse)
    if fault == "fault_09" and p.softcap > 0:
        sink = p.softcap * np.tanh(sink / p.softcap)
    M = np.maximum(lse, sink)
    w = np.exp(lse - M)
    ws = np.exp(sink) if fault == "fault_10" else np.exp(sink - M)
    return o * (w / (w + ws))[..., None]


def _store_call(p, b, begin, end, o, fault):
    rows = slice(int(p.seq_offsets[b]) + begin, int(p.seq_offsets[b]) + end)
    n = end - begin
    if fault == "fault_24":
        vals = o.reshape(n, p.heads_q, p.head_size)
    else:
        vals = np.transpose(o, (1, 0, 2))
    _store(p.out, rows, vals, p.dtype)


# ---------------------------------------------------------------- the KV cache

def _cache_row(p, b, fault):
    if fault == "fault_18":
        active = [x for x in range(p.batch) if p.positions[x][0] < p.positions[x][1]]
        return active.index(b)
    return b


def _slots_of(p, cb, pos, fault=None):
    """(first index, second index) of positions pos of cache row cb."""
    c = p.cache
    if c.policy == "paged":
        return c.page_table[cb, pos // c.page_size], pos % c.page_size
    if c.policy == "linear":
        return np.full_like(pos, cb), pos
    base = int(c.base[cb]) if c.policy == "ring-compact" else 0
    return np.full_like(pos, cb), (pos - base) % c.slots


def _read_cache(p, first, second, fault):
    c = p.cache
    k, v = c.k[first, second], c.v[first, second]
    if c.kv_format != "dtype":
        return (_fp8_value(k, p.k_descale, c.kv_format, fault), _fp8_value(v, p.v_descale, c.kv_format, fault))
    return _to_f64(k, p.dtype), _to_f64(v, p.dtype)


def _write_cache(p, b, cb, begin, end, fault):
    c = p.cache
    if c.policy == "ring-compact" and (c.tokens_written[cb] == 0 or fault == "fault_17"):
        c.base[cb] = max(0, (end - begin) - c.slots) if fault != "fault_17" else max(0, end - c.slots)
    if c.policy in ("linear", "paged"):
        lowest = begin
    else:
        lowest = max(begin, end - int(c.slots), int(c.base[cb]))
    pos = np.arange(lowest, end)
    first, second = _slots_of(p, cb, pos)
    if c.policy == "ring-compact" and fault == "fault_14" and p.call == "decode_step":
        second = pos % c.slots
    if c.policy == "paged" and fault == "fault_19":
        second = (pos - begin) % c.page_size
    keep = first >= 0
    rows = int(p.seq_offsets[b]) + pos[keep]
    k, v = p.k[rows], p.v[rows]
    if c.kv_format != "dtype":
        if p.dtype == "bf16":
            k32 = (k.astype(np.uint32) << 16).view(np.float32)
            v32 = (v.astype(np.uint32) << 16).view(np.float32)
        else:
            k32, v32 = k.astype(np.float32), v.astype(np.float32)
        k = _fp8_quant(k32, p.k_descale, c.kv_format, fault)
        v = _fp8_quant(v32, p.v_descale, c.kv_format, fault)
    c.k[first[keep], second[keep]] = k
    c.v[first[keep], second[keep]] = v
    if fault == "fault_15" and p.call == "decode_step":
        c.tokens_written[cb] = end - 1
    else:
        c.tokens_written[cb] = end


# ---------------------------------------------------------------- the three calls

def _q_rows(p, b, begin, end):
    off = int(p.seq_offsets[b])
    return _to_f64(p.q[off + begin:off + end], p.dtype)


def _prefill(p, b, begin, end, fault):
    off = int(p.seq_offsets[b])
    L = int(p.seq_lens[b])
    k, v = _fresh_kv(p, np.arange(off, off + L), fault)
    o, lse = _attend(p, b, _q_rows(p, b, begin, end), np.arange(begin, end), k, v, 0, fault)
    _store_call(p, b, begin, end, _finish(p, o, lse, fault), fault)


def _chunk(p, b, begin, end, fault):
    cb = _cache_row(p, b, fault)
    off = int(p.seq_offsets[b])
    q = _q_rows(p, b, begin, end)
    qpos = np.arange(begin, end)
    # prefix: what the cache holds
    lowest = max(0, _lowest_key(p, begin, fault))
    if fault == "fault_03" and p.window_left < 0:
        lowest = min(begin, lowest)
    cpos = np.arange(lowest, begin)
    first, second = _slots_of(p, cb, cpos)
    ck, cv = _read_cache(p, first, second, fault)
    o1, lse1 = _attend(p, b, q, qpos, ck, cv, lowest, fault)
    if fault == "fault_07":
        lse1 = np.where(np.isfinite(lse1), lse1, 0.0)
    # suffix: the chunk's own keys
    nk, nv = _fresh_kv(p, np.arange(off + begin, off + end), fault)
    o2, lse2 = _attend(p, b, q, qpos, nk, nv, begin, fault, causal=(fault != "fault_06"))
    o, lse = _merge(o1, lse1, o2, lse2)
    _store_call(p, b, begin, end, _finish(p, o, lse, fault), fault)
    _write_cache(p, b, cb, begin, end, fault)


def _decode(p, b, pos, fault):
    cb = _cache_row(p, b, fault)
    c = p.cache
    written_before = int(c.tokens_written[cb])
    _write_cache(p, b, cb, pos, pos + 1, fault)        # the step's token first
    W = int(c.slots) if c.policy in ("ring-modulo", "ring-compact") else None
    if W is not None:   # ring: every slot, in slot order, labelled with the position it holds
        s = np.arange(W)
        base = int(c.base[cb]) if c.policy == "ring-compact" else 0
        kpos = pos - ((pos - base - s) % W)
        valid = kpos >= (int(c.base[cb]) if c.policy == "ring-compact" else 0)
        first, second = np.full(W, cb), s
    else:
        if c.policy == "linear" and fault == "fault_13":
            lowest = 0
        else:
            lowest = max(0, _lowest_key(p, pos, fault))
        kpos = np.arange(lowest, pos + 1)
        valid = np.ones(len(kpos), dtype=bool)
        first, second = _slots_of(p, cb, kpos)
        valid &= first >= 0
        first, second = np.where(valid, first, 0), np.where(valid, second, 0)
    if p.window_left >= 0 and not (c.policy == "linear" and fault == "fault_13"):
        valid &= pos - kpos <= p.window_left
    if fault == "fault_03" and p.window_left < 0:
        valid &= kpos >= pos + 1
    if fault == "fault_12":
        ctx = written_before if p.window_left < 0 else min(written_before, p.window_left + 1)
        valid &= kpos >= pos - ctx + 1
    k, v = _read_cache(p, first, second, fault)
    heads = _kv_heads(p)
    q = _q_rows(p, b, pos, pos + 1)[0]                  # [Hq, D]
    if fault == "fault_11":
        q = q * np.float64(p.scale)
    s = np.einsum("hd,mhd->hm", q, k[:, heads]) * np.float64(p.scale)
    s = _cap(p, s, fault)
    s = np.where(valid[None], s, -np.inf)
    m = s.max(axis=1) if s.shape[1] else np.full(p.heads_q, -np.inf)
    ms = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(s - ms[:, None])
    l = w.sum(axis=1)
    o = np.einsum("hm,mhd->hd", w, v[:, heads])
    ok = l > 0
    o = np.where(ok[:, None], o / np.where(ok, l, 1.0)[:, None], 0.0)
    lse = np.where(ok, ms + np.log(np.where(ok, l, 1.0)), -np.inf)
    o = _finish(p, o[:, None, :], lse[:, None], fault)
    row = int(c.tokens_written[cb]) if fault == "fault_16" else pos
    _store_call(p, b, row, row + 1, o, fault)


def _run(p, fault=None):
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        if p.call == "prefill":
            _prefill(p, b, begin, end, fault)
        elif p.call == "chunked_prefill":
            _chunk(p, b, begin, end, fault)
        else:
            for pos in range(begin, end):
                _decode(p, b, pos, fault)
    return None


def attention(p):
    return _run(p)


def _make(name):
    def fault(p):
        return _run(p, name)
    fault.__name__ = name
    fault.__doc__ = FAULTS[name]
    return fault


for _name in FAULTS:
    globals()[_name] = _make(_name)
del _name
