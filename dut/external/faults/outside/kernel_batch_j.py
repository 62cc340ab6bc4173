"""Outside batch J: a sliding-window attention kernel laid out like an Ascend/ATB-style port.

    swa-harness run scenarios/ci.yaml --dut python:$PWD/dut/external/faults/outside/kernel_batch_j.py:attention

Written by a team that saw only the public docs (dut_v2.h, dut/python/README.md, the numpy example,
the golden model's manual without its readings section, shared/seeds) and, to avoid repeating them,
the FAULTS answer keys of batches C-I.

Organisation (what a ported NPU kernel of this shape does, in NumPy):
- Query blocks of QB = 56 rows counted from the call's first row; every GQA query head of the call
  in one block (the kv heads expanded per block).
- Key blocks of KB = 72 positions, aligned to the query block's window start (max of the stage's
  first position and first_row - window_left), walked oldest to newest.
- Two stages per call: stage A over the keys read back from the KV cache (chunked prefill: the
  positions before the chunk; decode: the whole window, after the step's own token is written),
  stage B over the call's own keys from the inputs (prefill: the whole sequence; chunked prefill:
  the chunk). One online softmax state runs through both stages.
- The softmax state (m, l, acc) is double-buffered: each key block reads one buffer and writes the
  other (ping-pong), the epilogue reads the buffer of the last block.
- exp is evaluated as exp2 with log2(e) folded in; the sink seeds the state (m = sink, l = 1).
- Fully visible key blocks (no mask, every pair inside the band) take a fast path without the
  visibility select.
- The SWA_NORM mask is read inside the key blocks the band picks (it decides alone there);
  SWA_COMPRESS and no mask use the band.
- Caches: ring writes as two contiguous segment copies (the tail, then the wrapped head), linear
  by position, paged through the page table; an arithmetic OCP FP8 codec (frexp based).

attention is the correct kernel. fault_01 .. fault_24 each change one thing (a flag in Cfg);
FAULTS is the answer key.
"""
import numpy as np

QB = 56  # query rows per block
KB = 72  # keys per block
LOG2E = 1.4426950408889634
LOG2E_BF16 = 1.4453125  # log2(e) rounded to bf16
SEQ_GROUP = 16  # sequences per launch group


class Cfg:
    def __init__(self, **kw):
        self.prefill_skip_single = False
        self.half_block_big_d = False
        self.two_sided_hi_excl = False
        self.epilogue_buf0 = False
        self.mask_prefetch_pos = False
        self.fastpath_no_cap = False
        self.log2e_bf16 = False
        self.sink_first_block_only = False
        self.decode_state_carry = False
        self.stage_a_fp16_spill = False
        self.mask_negative_only = False
        self.kblock_end_short = False
        self.ring_wrap_slot1 = False
        self.compact_stale_base = False
        self.paged_decode_stale_row = False
        self.paged_pow2_shift = False
        self.decode_kv_swapped = False
        self.fp8_twos_complement = False
        self.fp8_decode_descale_bf16 = False
        self.fp8_prefill_v_raw = False
        self.softcap_pade = False
        self.stage_a_inclusive = False
        self.cache_row_mod_group = False
        self.decode_qpos_after_write = False
        for k, v in kw.items():
            if not hasattr(self, k):
                raise ValueError(k)
            setattr(self, k, v)


def describe():
    return {"name": "batch_j_atb56x72", "query_tile": QB, "key_tile": KB}


# ---------------------------------------------------------------------------------------------
# dtype helpers

def _to_float(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def _bf16_round(x):
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint32) << 16).view(np.float32)


def _store(out, rows, vals, dtype, cfg):
    """vals [n, Hq, D] float64 -> out rows in the storage dtype (round to nearest even)."""
    v32 = vals.astype(np.float32)
    if dtype == "bf16":
        bits = np.ascontiguousarray(v32).view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    else:
        out[rows] = v32


# ---------------------------------------------------------------------------------------------
# FP8 codec (OCP e4m3fn / e5m2), arithmetic

_FMT = {"fp8-e4m3": (3, 7, 448.0), "fp8-e5m2": (2, 15, 57344.0)}


def _fp8_table(fmt):
    m_bits, bias, _ = _FMT[fmt]
    c = np.arange(256)
    e = (c & 0x7F) >> m_bits
    m = c & ((1 << m_bits) - 1)
    val = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                   np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
    if fmt == "fp8-e4m3":
        val = np.where((e == 15) & (m == 7), np.nan, val)
    else:
        val = np.where(e == 31, np.where(m == 0, np.inf, np.nan), val)
    return np.where(c & 0x80, -val, val)


_TABLES = {f: _fp8_table(f) for f in _FMT}


def _fp8_encode(x, fmt, cfg):
    """Codes of x (float64): nearest, ties to even, saturating."""
    m_bits, bias, largest = _FMT[fmt]
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), largest)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    _, ex = np.frexp(a)
    e = np.maximum(ex - 1, 1 - bias)
    q = np.rint(np.ldexp(a, (m_bits - e)))
    mag = ((e + bias - 1) * (1 << m_bits) + q).astype(np.int64)
    mag = np.where(nan, 0x7F, mag)
    neg = np.signbit(x)
    if cfg.fp8_twos_complement:
        code = np.where(neg, (256 - mag) & 0xFF, mag)
    else:
        code = np.where(neg, mag | 0x80, mag)
    return code.astype(np.uint8)


def _quantise(x, fmt, descale, cfg):
    """fp8(x / descale) * descale as attention reads it (float64)."""
    codes = _fp8_encode(x.astype(np.float64) / np.float64(descale), fmt, cfg)
    return _TABLES[fmt][codes] * np.float64(descale)


# ---------------------------------------------------------------------------------------------
# KV cache

def _cache_row(b, cfg):
    return b % SEQ_GROUP if cfg.cache_row_mod_group else b


def _page_loc(c, cb, pos, cfg, table_row=None):
    P = int(c.page_size)
    row = c.page_table[cb] if table_row is None else table_row
    if cfg.paged_pow2_shift:
        sh = int(np.log2(P))
        lp, off = pos >> sh, pos & (P - 1)
    else:
        lp, off = pos // P, pos % P
    lp = np.clip(lp, 0, c.page_table.shape[1] - 1)  # bounds check of the table read
    return row[lp].astype(np.int64), off


def _ring_slot(c, cb, pos, base=None):
    W = int(c.slots)
    if c.policy == "ring-compact":
        bs = int(c.base[cb]) if base is None else base
        return (pos - bs) % W
    return pos % W


def _read_cache(p, b, pos, cfg, decode=False, table_row=None):
    """K, V (float64 [n, Hkv, D]) of positions pos of sequence b from the cache."""
    c = p.cache
    cb = _cache_row(b, cfg)
    if c.policy == "paged":
        pg, off = _page_loc(c, cb, pos, cfg, table_row)
        k, v = c.k[pg, off], c.v[pg, off]
    elif c.policy == "linear":
        k, v = c.k[cb, pos], c.v[cb, pos]
    else:
        s = _ring_slot(c, cb, pos)
        k, v = c.k[cb, s], c.v[cb, s]
    if c.kv_format != "dtype":
        t = _TABLES[c.kv_format]
        kd, vd = np.float32(p.k_descale), np.float32(p.v_descale)
        if decode and cfg.fp8_decode_descale_bf16:
            kd, vd = _bf16_round(np.array([kd]))[0], _bf16_round(np.array([vd]))[0]
        return t[k] * np.float64(kd), t[v] * np.float64(vd)
    return _to_float(k, p.dtype).astype(np.float64), _to_float(v, p.dtype).astype(np.float64)


def _encode_rows(p, rows, cfg):
    k, v = p.k[rows], p.v[rows]
    if p.cache.kv_format != "dtype":
        k = _fp8_encode(_to_float(k, p.dtype).astype(np.float64) / np.float64(p.k_descale),
                        p.cache.kv_format, cfg)
        v = _fp8_encode(_to_float(v, p.dtype).astype(np.float64) / np.float64(p.v_descale),
                        p.cache.kv_format, cfg)
    return k, v


def _write_cache(p, b, begin, end, cfg, swap=False):
    """Stores positions [begin, end) of sequence b (input rows) into the cache."""
    c = p.cache
    cb = _cache_row(b, cfg)
    off = int(p.seq_offsets[b])
    if c.policy == "paged":
        pos = np.arange(begin, end)
        pg, o = _page_loc(c, cb, pos, cfg)
        keep = pg >= 0
        if keep.any():
            k, v = _encode_rows(p, off + pos[keep], cfg)
            if swap:
                k, v = v, k
            c.k[pg[keep], o[keep]] = k
            c.v[pg[keep], o[keep]] = v
    elif c.policy == "linear":
        k, v = _encode_rows(p, np.arange(off + begin, off + end), cfg)
        if swap:
            k, v = v, k
        c.k[cb, begin:end] = k
        c.v[cb, begin:end] = v
    else:
        W = int(c.slots)
        base_now = int(c.base[cb])
        if c.policy == "ring-compact" and int(c.tokens_written[cb]) == 0:
            c.base[cb] = max(0, (end - begin) - W)
            if not cfg.compact_stale_base:
                base_now = int(c.base[cb])
        lo = max(begin, end - W)
        if c.policy == "ring-compact":
            lo = max(lo, int(c.base[cb]))
        n = end - lo
        if n > 0:
            k, v = _encode_rows(p, np.arange(off + lo, off + end), cfg)
            if swap:
                k, v = v, k
            s0 = int(_ring_slot(c, cb, lo, base_now))
            n1 = min(n, W - s0)
            c.k[cb, s0:s0 + n1] = k[:n1]
            c.v[cb, s0:s0 + n1] = v[:n1]
            if n > n1:
                w0 = 1 if cfg.ring_wrap_slot1 else 0
                c.k[cb, w0:w0 + n - n1] = k[n1:]
                c.v[cb, w0:w0 + n - n1] = v[n1:]
    c.tokens_written[cb] = end


def _fresh_kv(p, rows, cfg, prefill=False):
    """The call's own K/V from the inputs, as attention reads them (float64)."""
    k = _to_float(p.k[rows], p.dtype).astype(np.float64)
    v = _to_float(p.v[rows], p.dtype).astype(np.float64)
    if p.kv_format != "dtype":
        k = _quantise(k, p.kv_format, p.k_descale, cfg)
        if not (prefill and cfg.fp8_prefill_v_raw):
            v = _quantise(v, p.kv_format, p.v_descale, cfg)
    return k, v


# ---------------------------------------------------------------------------------------------
# the tiled kernel

def _cap(s, cap, cfg):
    x = s / cap
    if cfg.softcap_pade:
        x2 = x * x
        t = np.clip(x * (27.0 + x2) / (27.0 + 9.0 * x2), -1.0, 1.0)
        return cap * t
    return cap * np.tanh(x)


def _seed(p, nrows, cfg, with_sink):
    H, D = p.heads_q, p.head_size
    m = np.full((H, nrows), -np.inf)
    l = np.zeros((H, nrows))
    acc = np.zeros((H, nrows, D))
    if p.sinks is not None and with_sink:
        m[:] = np.asarray(p.sinks, dtype=np.float64)[:, None]
        l[:] = 1.0
    return [m, l, acc]


def _block_update(st, q, qpos, kblk, vblk, kpos, mpos, p, cfg, left, right, log2e):
    """One key block: returns the new state (m, l, acc). q [H, R, D], kblk/vblk [K, H, D]."""
    m, l, acc = st
    s = np.einsum("hrd,khd->hrk", q, kblk) * np.float64(p.scale)
    use_mask = p.mask is not None and p.mask_format == "swa-norm"
    d = qpos[:, None] - kpos[None, :]
    full = not use_mask
    if full:
        if left >= 0 and d.max() > left:
            full = False
        if right >= 0 and (-d).max() > right:
            full = False
    if p.softcap > 0 and not (full and cfg.fastpath_no_cap):
        s = _cap(s, np.float64(p.softcap), cfg)
    if not full:
        if use_mask:
            rows = np.minimum(qpos, p.mask.shape[0] - 1)
            cols = np.minimum(mpos, p.mask.shape[1] - 1)
            mk = p.mask[rows][:, cols]
            vis = ~(mk < 0) if cfg.mask_negative_only else (mk == 0)
        else:
            dm = qpos[:, None] - mpos[None, :]
            vis = np.ones(dm.shape, dtype=bool)
            if left >= 0:
                vis &= dm <= left
            if right >= 0:
                vis &= -dm <= right
        s = np.where(vis[None], s, -np.inf)
    bm = s.max(axis=2)
    m_new = np.maximum(m, bm)
    shift = np.where(np.isfinite(m_new), m_new, 0.0)
    alpha = np.exp2((m - shift) * log2e)
    w = np.exp2((s - shift[:, :, None]) * log2e)
    l_new = alpha * l + w.sum(axis=2)
    acc_new = alpha[:, :, None] * acc + np.einsum("hrk,khd->hrd", w, vblk)
    return [m_new, l_new, acc_new]


def _attend(p, q_all, qpos_all, stages, cfg, chunked=False, init=None):
    """q_all [R, Hq, D] float64 for query positions qpos_all (ascending, contiguous); stages: list
    of (k [n, Hkv, D], v, kpos) with contiguous ascending kpos. Returns (out [R, Hq, D], last state)."""
    R = len(qpos_all)
    H, D = p.heads_q, p.head_size
    group = H // p.heads_kv
    kvh = np.arange(H) // group
    left, right = int(p.window_left), int(p.window_right)
    log2e = LOG2E_BF16 if cfg.log2e_bf16 else LOG2E
    out = np.zeros((R, H, D))
    qb_rows = QB // 2 if (cfg.half_block_big_d and D > 192) else QB
    last = None
    for bi, r0 in enumerate(range(0, R, QB)):
        r1 = min(R, r0 + qb_rows)
        qpos = qpos_all[r0:r1]
        q = np.transpose(q_all[r0:r1], (1, 0, 2))
        qf, ql = int(qpos[0]), int(qpos[-1])
        if init is not None:
            st0 = [x.copy() for x in init]
        else:
            st0 = _seed(p, r1 - r0, cfg, with_sink=(bi == 0 or not cfg.sink_first_block_only))
        bufs = [st0, None]
        t = 0
        for si, (ks, vs, kp) in enumerate(stages):
            if len(kp) == 0:
                continue
            s_lo, s_hi = int(kp[0]), int(kp[-1]) + 1
            klo = s_lo if left < 0 else max(s_lo, qf - left)
            if right < 0:
                khi = s_hi
            elif right > 0 and cfg.two_sided_hi_excl:
                khi = min(s_hi, ql + right)
            else:
                khi = min(s_hi, ql + right + 1)
            starts = list(range(klo, khi, KB))
            for ji, k0 in enumerate(starts):
                k1 = min(khi, k0 + KB - 1) if cfg.kblock_end_short else min(khi, k0 + KB)
                i0, i1 = k0 - s_lo, k1 - s_lo
                kpos = kp[i0:i1]
                mpos = kpos
                if cfg.mask_prefetch_pos and ji + 1 < len(starts):
                    mpos = kpos + KB
                kblk = ks[i0:i1][:, kvh]
                vblk = vs[i0:i1][:, kvh]
                bufs[(t + 1) % 2] = _block_update(bufs[t % 2], q, qpos, kblk, vblk, kpos, mpos,
                                                  p, cfg, left, right, log2e)
                t += 1
            if chunked and si == 0 and cfg.stage_a_fp16_spill and t > 0:
                cur = bufs[t % 2]
                cur[2] = cur[2].astype(np.float16).astype(np.float64)
        fin = bufs[0] if cfg.epilogue_buf0 else bufs[t % 2]
        if fin is None:
            fin = st0
        m, l, acc = fin
        o = acc / np.where(l > 0, l, 1.0)[:, :, None]
        out[r0:r1] = np.transpose(o, (1, 0, 2))
        last = fin
    return out, last


def _q(p, rows):
    return _to_float(p.q[rows], p.dtype).astype(np.float64)


def _prefill(p, cfg):
    for b in range(p.batch):
        n = int(p.seq_lens[b])
        if n <= 0 or (cfg.prefill_skip_single and n <= 1):
            continue
        off = int(p.seq_offsets[b])
        rows = np.arange(off, off + n)
        k, v = _fresh_kv(p, rows, cfg, prefill=True)
        pos = np.arange(n)
        o, _ = _attend(p, _q(p, rows), pos, [(k, v, pos)], cfg)
        _store(p.out, slice(off, off + n), o, p.dtype, cfg)


def _chunk(p, cfg):
    left = int(p.window_left)
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        off = int(p.seq_offsets[b])
        lowest = 0 if left < 0 else max(0, begin - left)
        a_end = begin + 1 if cfg.stage_a_inclusive else begin
        old = np.arange(lowest, a_end)
        if len(old):
            ok, ov = _read_cache(p, b, old, cfg)
        else:
            ok = ov = np.zeros((0, p.heads_kv, p.head_size))
        newpos = np.arange(begin, end)
        nk, nv = _fresh_kv(p, off + newpos, cfg)
        o, _ = _attend(p, _q(p, off + newpos), newpos, [(ok, ov, old), (nk, nv, newpos)], cfg,
                       chunked=True)
        _store(p.out, slice(off + begin, off + end), o, p.dtype, cfg)
        _write_cache(p, b, begin, end, cfg)


def _decode(p, cfg):
    left = int(p.window_left)
    work = []
    row = None
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        _write_cache(p, b, begin, end, cfg, swap=cfg.decode_kv_swapped)
        if p.cache.policy == "paged":
            row = p.cache.page_table[_cache_row(b, cfg)]
        work.append((b, begin, end))
    carry = None
    for b, begin, end in work:
        off = int(p.seq_offsets[b])
        lo = 0 if left < 0 else max(0, begin - left)
        pos = np.arange(lo, end)
        trow = row if (cfg.paged_decode_stale_row and p.cache.policy == "paged") else None
        k, v = _read_cache(p, b, pos, cfg, decode=True, table_row=trow)
        qpos = np.arange(begin, end)
        if cfg.decode_qpos_after_write:
            qpos = qpos + 1
        init = carry if cfg.decode_state_carry else None
        o, last = _attend(p, _q(p, off + np.arange(begin, end)), qpos, [(k, v, pos)], cfg,
                          init=init)
        carry = last
        _store(p.out, slice(off + begin, off + end), o, p.dtype, cfg)


def _run(p, cfg):
    if p.call == "prefill":
        _prefill(p, cfg)
    elif p.call == "chunked_prefill":
        _chunk(p, cfg)
    else:
        _decode(p, cfg)
    return None


def attention(p):
    return _run(p, Cfg())


# ---------------------------------------------------------------------------------------------
# faults

_FAULT_FLAGS = {
    "fault_01": "prefill_skip_single",
    "fault_02": "half_block_big_d",
    "fault_03": "two_sided_hi_excl",
    "fault_04": "epilogue_buf0",
    "fault_05": "mask_prefetch_pos",
    "fault_06": "fastpath_no_cap",
    "fault_07": "log2e_bf16",
    "fault_08": "sink_first_block_only",
    "fault_09": "decode_state_carry",
    "fault_10": "stage_a_fp16_spill",
    "fault_11": "mask_negative_only",
    "fault_12": "kblock_end_short",
    "fault_13": "ring_wrap_slot1",
    "fault_14": "compact_stale_base",
    "fault_15": "paged_decode_stale_row",
    "fault_16": "paged_pow2_shift",
    "fault_17": "decode_kv_swapped",
    "fault_18": "fp8_twos_complement",
    "fault_19": "fp8_decode_descale_bf16",
    "fault_20": "fp8_prefill_v_raw",
    "fault_21": "softcap_pade",
    "fault_22": "stage_a_inclusive",
    "fault_23": "cache_row_mod_group",
    "fault_24": "decode_qpos_after_write",
}


def _make(flag):
    def f(p):
        return _run(p, Cfg(**{flag: True}))
    f.__name__ = flag
    return f


for _name, _flag in _FAULT_FLAGS.items():
    globals()[_name] = _make(_flag)
del _name, _flag

FAULTS = {
    "fault_01": "Prefill only: the per-sequence loop skips a sequence with `seq_len <= 1` (meant to skip empty ones), so a one-token sequence's output row is never written and stays NaN; chunked-prefill calls and decode steps (their own loops) are unaffected.",
    "fault_02": "Head sizes above 192 (D = 256) only, every call with more than 28 rows (in practice prefill): the query block is halved to 28 rows to fit the on-chip buffer, but the block loop still strides by QB = 56 rows, so rows 28..55 of every 56-row query block are never computed and stay NaN.",
    "fault_03": "Two-sided windows (prefill, window_right > 0) only: a query block's key-range end is min(seq_len, last_row + window_right) used as an exclusive end (the + 1 missing in the two-sided branch; the causal branch is right), so the last row of every 56-row query block loses its rightmost visible key (position last_row + window_right).",
    "fault_04": "Double-buffered softmax state: the epilogue always reads ping-pong buffer 0 (as if every key walk had an even number of key blocks) instead of the buffer the last block wrote, so a row whose walk (cache stage plus input stage) visits an odd number of 72-key blocks outputs the state before its last block (one block: the empty seed state, i.e. 0), in every mode.",
    "fault_05": "Key blocks that have a successor in their stage's walk (not the last block): the visibility (band, or SWA_NORM mask columns, clamped to the mask's last column) is computed from the position vector of the block being prefetched (kpos + 72) instead of the current block's, so those blocks are masked with the next block's positions (mostly hidden) and rows lose their keys there; walks of a single key block (most decode steps, short windows) are right.",
    "fault_06": "Soft-cap skipped on the fully-visible fast path: key blocks in which every (query, key) pair lies inside the band and no mask is given use the raw scaled scores (no cap * tanh(s / cap)); boundary blocks cap correctly. Mostly decode steps (one row, its window in one block) and wide-window rows; soft-cap cases only.",
    "fault_07": "exp2-based softmax with log2(e) taken as its bf16 value 1.4453125 instead of 1.4426950408889634 (the constant passed to the kernel as a half scalar), in every mode: every weight is exp((s - m) * 1.0018), a softmax temperature off by 0.18%, and sink weights are off the same way.",
    "fault_08": "Sinks (sink cases only, any mode but in practice prefill): the softmax state is seeded with the sink (m = sink, l = 1) only for the first 56-row query block of a call; later query blocks start from the empty state (-inf, 0), so rows 56.. of a call get the no-sink result.",
    "fault_09": "Decode steps only: the softmax state is not re-initialised between the sequences of a step; each sequence's single row starts from the previous sequence's final (m, l, acc) instead of the sink/empty seed, so every sequence after the first mixes in the previous sequence's keys and values (the first sequence of each step is right).",
    "fault_10": "Chunked-prefill calls (decode's prompt chunks included): between the cache stage and the chunk's own stage the partial accumulator acc is spilled to an fp16 workspace (rounded to fp16) and read back, in every dtype; l and m stay exact; rows that saw no cached key are unaffected; fp32 runs (and fp16 at large |acc|) see it.",
    "fault_11": "SWA_NORM mask read as hidden only where the mask value is negative (mask < 0, the fp16 -inf/-65536 fill reading) instead of wherever it is nonzero: the bf16 mask's +1 fill hides nothing, so with a bf16 SWA_NORM mask the future keys and keys below the window inside the picked key blocks become visible (prefill, chunk calls and ATB decode with that mask); fp16 masks right.",
    "fault_12": "Key-block slice end off by one: a block starting at k0 covers keys [k0, min(end, k0 + 71)) while the walk still steps by 72, so the last key of every full 72-key block (position k0 + 71) is never visited, in every mode; walks that fit in one partial block (short windows, early rows) are right.",
    "fault_13": "Ring caches (modulo and compact), chunk writes that wrap past the ring's end: the write is two contiguous copies and the wrapped segment is copied to slots starting at 1 instead of 0, so the wrapped rows land one slot late (overwriting a still-visible position, leaving slot 0 stale); later calls read the wrong keys and the cache check fails; decode-step writes (one row, never split) unaffected.",
    "fault_14": "RING_COMPACT first write of more than W tokens: base[b] is stored correctly (max(0, k - W)), but the slots of that first write are computed with the base read before it was set (0), i.e. slot p mod W instead of (p - base) mod W; later writes and all reads use the new base, so the first write's rows sit in the wrong slots (cache check; later reads get other positions' K/V) whenever base mod W != 0.",
    "fault_15": "Decode steps with a PAGED cache only: the gather translates positions through the page-table row left over from the write loop (the last sequence with work) instead of the sequence's own row, so every sequence but the last reads its window from another sequence's pages; writes are right.",
    "fault_16": "PAGED cache (reads and writes, chunk calls and decode steps): the page index and offset are computed with a shift and a mask, pos >> floor(log2(page_size)) and pos & (page_size - 1), assuming power-of-two page sizes; exact for page sizes 1, 4, 16, 64, 4096, wrong for 3 and 5 (positions land in wrong pages and offsets).",
    "fault_17": "Decode steps only: the step's own token is written into the cache with K and V swapped (its K into cache.v, its V into cache.k), on every cache policy; the step then reads its own key/value swapped and later steps read those positions swapped too; the cache check fails; prompt chunks unaffected.",
    "fault_18": "FP8 encoder (every mode, FP8 cases: quantise on load and cache writes): a negative value's code is formed as the two's complement of the magnitude code ((256 - code) & 0xFF, int8 negation) instead of setting the sign bit (code | 0x80), so every negative K/V value is stored and read as an unrelated FP8 value.",
    "fault_19": "FP8 KV, decode steps only: the cache read path of the decode kernel takes k_descale and v_descale as bf16 scalars (rounded to nearest bf16) when it dequantises the codes; prefill, chunk calls and the cache bytes are right; the descales are never bf16 values, so every decoded K/V is off by up to 2^-9 relative.",
    "fault_20": "FP8 KV, prefill only: the quantise-on-load is applied to K but not to V (V is used in the storage dtype instead of fp8(v / v_descale) * v_descale); chunk calls' own rows and everything read from the cache are right.",
    "fault_21": "Soft-cap (soft-cap cases, every mode): tanh is replaced by the fast Pade approximation x(27 + x^2) / (27 + 9x^2) clamped to [-1, 1], so capped scores are wrong by up to about 2% of the cap near |s / cap| ~ 1..3 (exact only near 0).",
    "fault_22": "Chunked-prefill calls (decode's prompt chunks included): the cache stage reads positions [lowest, begin] (inclusive end) instead of [lowest, begin), so position begin, not yet written, is also read from the cache (zeros, a ring slot's older position, or a recycled page) under the label begin, and counted in addition to the chunk's own key at begin.",
    "fault_23": "Chunk calls and decode steps in batches of more than 16 sequences: the cache row (ring/linear row, base, tokens_written and the page-table row) is taken as b % 16, the sequence's index within its launch group of 16, instead of b, so sequence 16 and later read and write sequence b - 16's cache; prefill and batches of up to 16 unaffected.",
    "fault_24": "Decode steps only: the query position used for the band (and the SWA_NORM mask row) is taken after the step's cache write, pos + 1, instead of pos, so with a bounded window the oldest key of the window (pos - window_left) is hidden; unbounded windows are unaffected.",
}
