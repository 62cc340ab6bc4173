"""Sliding-window attention for the swa-harness python: DUT, plus planted faults.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_c.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_c.py:fault_07

The correct kernel is written the way a ported device kernel is organised, so that each planted
fault has a realistic place to live:
  * prefill / chunked prefill: query blocks of 64 rows, key tiles of 16 positions, an online
    (FlashAttention-style) softmax in the base-2 domain (log2(e) folded into the scores), scores
    and accumulators in fp64, exp2 evaluated in fp32 (as a device's exp2 unit);
  * decode: split-KV (flash-decoding): the step's keys are split in up to 4 partitions, each gives a
    partial (max, denominator, accumulator), and the partials are merged;
  * the KV cache (ring-modulo, ring-compact, linear, paged) written/read by position, FP8 KV through
    an OCP e4m3/e5m2 codec with per-tensor descales.
Every fault_NN entry runs the same code with ONE change (see FAULTS, the answer key).
NumPy only.
"""
import numpy as np

FAULTS = {
    "fault_01": "Soft-cap applied before the scale (all modes, soft-cap cases only): s = scale * cap * tanh((q.k) / cap) instead of cap * tanh(scale * q.k / cap).",
    "fault_02": "Scale computed from the head size padded to the MMA tile width (next power of two: 80/96 -> 128, 160/192 -> 256) as 1/sqrt(padded) instead of using p.scale, in every mode; exact for power-of-two head sizes.",
    "fault_03": "Soft-cap skipped in the cache path: chunked-prefill calls and decode steps (including decode's prompt chunks) use uncapped scores; whole-prompt prefill caps correctly.",
    "fault_04": "Sinks indexed by the KV head instead of the query head (sinks[h // group] instead of sinks[h]), in every mode; identical when heads_q == heads_kv.",
    "fault_05": "Sink logit not converted to the base-2 domain: the softmax runs in exp2 with log2(e) folded into the scores, but the sink enters the max and the denominator as exp2(sink - m) instead of exp2(sink*log2(e) - m) (all modes, sink cases).",
    "fault_06": "Decode split-KV only: each KV split adds the sink to its own partial denominator, so the merged denominator counts exp(sink - m) once per split (up to 4 times) instead of once.",
    "fault_07": "Decode split-KV merge only: partial outputs (each normalised by its own denominator) are combined with weights exp(m_i - M) instead of l_i * exp(m_i - M), i.e. the splits' denominators are dropped from the merge weights.",
    "fault_08": "Online-softmax tiling bug (prefill and chunked-prefill calls, decode's prompt chunks included; key tiles of 16): when a later key tile raises the running max, the accumulator is rescaled by exp(m_old - m_new) but the running denominator l is not.",
    "fault_09": "Decode steps only: the kernel does not mask by position and reads window_left + 1 keys back (positions [pos - window_left - 1, pos], W + 1 keys); on a ring the extra slot is the current token's own slot, so that token is counted twice, on a linear/paged cache one key past the window's lower edge is included.",
    "fault_10": "Chunked prefill (and decode's prompt chunks): the range of cached keys is computed from the chunk's LAST row (lowest = end - 1 - window_left) instead of its first row, so the chunk's earlier rows miss their oldest cached keys.",
    "fault_11": "Chunked prefill (and decode's prompt chunks) write-before-read: the chunk's K/V are stored into the cache before its attention and the older keys are then re-read from the cache; on a ring (modulo or compact) every cached position p with p + W inside the chunk has already been overwritten by key p + W, which is then used as key p (chunks of 2+ rows); linear and paged caches are unaffected.",
    "fault_12": "Decode read-before-write: the decode step reads positions [pos - window_left, pos] from the cache before storing its own token, so its own key/value is whatever that slot held (ring: position pos - W, or zeros early on; linear: zeros; paged: zeros or a previous owner's data).",
    "fault_13": "RING_COMPACT base off by one: at the first write of k tokens base = max(0, k - (W - 1)) instead of max(0, k - W) (only W - 1 positions kept, every slot shifted by one); outputs stay right, the cache layout is wrong.",
    "fault_14": "Ring caches (modulo and compact), a chunk write with more than W storable rows: the FIRST W of them (from max(begin, base)) are stored instead of the LAST W, so later calls read stale keys; a RING_COMPACT first write is unaffected (its base already drops the early rows).",
    "fault_15": "LINEAR cache addressed with the sequence's own length as the batch stride (flat slot b * seq_lens[b] + p instead of b * slots + p), on both reads and writes; sequences of unequal length overlap.",
    "fault_16": "PAGED cache write: a row whose page_table entry is -1 is not skipped; -1 is used as a page index (NumPy/C pointer arithmetic), so the row lands in the pool's last physical page, corrupting whoever holds it.",
    "fault_17": "PAGED cache read (chunked prefill and decode): only the first key's logical page is translated through page_table; later keys are assumed to lie in physically consecutive pages (flat pool row = table[first] * page_size + (p - first * page_size), wrapping in the pool).",
    "fault_18": "PAGED cache: tokens_written is advanced by the number of rows actually stored (skipping rows whose page is -1) instead of to the end position of the call.",
    "fault_19": "GQA head mapping interleaved: query head h reads KV head h % heads_kv instead of h // (heads_q / heads_kv), in every mode.",
    "fault_20": "FP8 encoder rounds ties away from zero instead of to the even code (the cache bytes and every K/V value read through FP8, all modes); data-dependent: only values exactly halfway between two FP8 values differ.",
    "fault_21": "FP8 e4m3 implemented as the FNUZ variant (bias 8, largest 240, AMD-style) instead of OCP e4m3fn (bias 7, largest 448), in every mode (quantise on load, cache bytes, cache decode): the grid is one binade lower, so cache bytes differ and values beyond 240*descale saturate at 240*descale; e5m2 unaffected.",
    "fault_22": "FP8 KV in chunked-prefill calls (including decode's prompt chunks): the chunk's own K/V are used in the storage dtype (not passed through fp8(x/descale)*descale), while keys read back from the cache are FP8 as required; prefill and decode steps unaffected.",
    "fault_23": "P.V precision: the probabilities are cast to bf16 before the P.V product in every dtype (fp32 and fp16 too), as if the tensor-core MMA were always bf16; the denominator uses the unrounded P.",
    "fault_24": "fp32 runs only, every mode: both matmuls run in TF32 (Q, K, P and V rounded to 10 explicit mantissa bits, nearest even, before Q.K and P.V; products accumulated in fp32/fp64), as with allow_tf32 tensor cores; fp16/bf16 runs unaffected.",
    "fault_25": "Two-sided window (prefill only): the right edge is exclusive, query i sees keys j with j - i < window_right instead of <= window_right.",
    "fault_26": "Decode steps only: the step's Q/K/V are taken from the sequence's LAST packed row (seq_offsets[b+1] - 1) instead of row prompt + step; only the last step is right.",
    "fault_27": "Running row max initialised to 0 instead of -inf in the online softmax (prefill and chunked-prefill calls, decode's prompt chunks included): the fp32 exp2 of (s - 0) is used as the weight, so a row whose scores all lie far below 0 (large-logit inputs) underflows to a zero denominator and outputs 0 (or only the sink's share); data-dependent.",
    "fault_28": "PAGED cache layout: the page pool is addressed as [pages, heads_kv, page_size, head_size] (head-major pages, as in some serving stacks) instead of [pages, page_size, heads_kv, head_size], consistently on reads and writes; outputs right, the pool's bytes wrong whenever heads_kv > 1 and page_size > 1.",
    "fault_29": "With a SWA_NORM mask (prefill and chunked-prefill calls, decode's prompt chunks included), the mask is added to the scaled scores as an additive bias instead of being read as visibility (0 = visible, nonzero = hidden), and the band is not applied inside the loaded key range; the bf16 mask's fill is +1, so hidden keys in that range (future keys within the 64-row query block, keys just below the window for its later rows) stay visible with weight e^1; a large negative fill (fp16: -65536) hides them correctly.",
}

QUERY_BLOCK = 64      # query rows per work block
KEY_TILE = 16         # keys per tile of the online softmax (tiles start at multiples of 16)
MAX_SPLITS = 4        # decode: KV splits per step
LOG2E = 1.4426950408889634


def describe():
    return {"name": "outside_batch"}


# ----------------------------------------------------------------------------- dtype helpers
def _to_float(x, dtype):
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def _round_bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint32)


def _bf16_value(x):
    return (_round_bf16(x) << 16).view(np.float32).astype(np.float64)


def _tf32(x):
    """x rounded to TF32 (10 explicit mantissa bits, nearest even), as float64."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def _round_array(x, dtype):
    """x rounded to the storage dtype (nearest even), as float64; fp32 kept as is."""
    if dtype == "bf16":
        return _bf16_value(x.astype(np.float32))
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float64)
    return x


def _store_rows(out, rows, values, dtype):
    if dtype == "bf16":
        out[rows] = _round_bf16(values).astype(np.uint16)
    else:
        out[rows] = values


# ----------------------------------------------------------------------------- FP8 codec
def _fp8_values(fmt):
    """Value of each of the 256 codes. fmt: fp8-e4m3, fp8-e5m2, or 'fnuz' (e4m3 FNUZ, fault 21)."""
    if fmt == "fnuz":
        m_bits, bias = 3, 8
    else:
        m_bits, bias = (3, 7) if fmt == "fp8-e4m3" else (2, 15)
    c = np.arange(256)
    e, m = (c & 0x7F) >> m_bits, c & ((1 << m_bits) - 1)
    value = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                     np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
    if fmt == "fp8-e4m3":
        value = np.where((e == 15) & (m == 7), np.nan, value)
    elif fmt == "fp8-e5m2":
        value = np.where(e == 31, np.where(m == 0, np.inf, np.nan), value)
    value = np.where(c & 0x80, -value, value)
    if fmt == "fnuz":
        value[0x80] = np.nan
    return value


def _fp8_encode(x, fmt, ties_away=False):
    table = _fp8_values(fmt)[:0x80]
    finite = table[np.isfinite(table)]
    a = np.minimum(np.abs(x.astype(np.float64)), finite[-1])  # saturating
    hi = np.clip(np.searchsorted(finite, a), 0, len(finite) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - finite[lo], finite[hi] - a
    if ties_away:
        code = np.where(d_lo < d_hi, lo, hi)
    else:
        code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi)
    sign = np.where(np.signbit(x), 0x80, 0)
    if fmt == "fnuz":
        sign = np.where(code == 0, 0, sign)  # FNUZ has no negative zero (0x80 is NaN)
    return (code | sign).astype(np.uint8)


def _kv_fmt(kv_format, fault):
    if fault == 21 and kv_format == "fp8-e4m3":
        return "fnuz"
    return kv_format


def _quantise(x, descale, kv_format, fault):
    """fp8(x / descale) * descale, exact in fp64."""
    fmt = _kv_fmt(kv_format, fault)
    codes = _fp8_encode(x / np.float32(descale), fmt, ties_away=(fault == 20))
    return _fp8_values(fmt)[codes] * np.float64(descale)


# ----------------------------------------------------------------------------- KV cache
def _slot(p, b, pos, fault):
    """(first index, second index) into cache.k for positions pos of sequence b."""
    c = p.cache
    if c.policy == "paged":
        return c.page_table[b, pos // c.page_size].astype(np.int64), pos % c.page_size
    if c.policy == "linear":
        slot = pos
    else:
        slot = (pos - (int(c.base[b]) if c.policy == "ring-compact" else 0)) % c.slots
    return np.full_like(pos, b), slot


def _flat_linear(c, p, b, pos):
    """fault 15: the linear cache seen as one [batch * slots] array, batch stride = seq_lens[b]."""
    k = c.k.reshape((-1,) + c.k.shape[2:])
    v = c.v.reshape((-1,) + c.v.shape[2:])
    return k, v, b * int(p.seq_lens[b]) + pos


def _head_major_pool(c):
    """fault 28: the page pool seen as [pages, heads_kv, page_size, head_size] (head-major pages)."""
    shape = (c.k.shape[0], c.k.shape[2], c.k.shape[1], c.k.shape[3])
    return c.k.reshape(shape), c.v.reshape(shape)


def _read_cache(p, b, pos, fault):
    c = p.cache
    if fault == 15 and c.policy == "linear":
        kf, vf, idx = _flat_linear(c, p, b, pos)
        k, v = kf[idx], vf[idx]
    elif fault == 17 and c.policy == "paged" and len(pos):
        first_page = int(pos[0]) // c.page_size
        base_row = int(c.page_table[b, first_page]) * c.page_size
        flat = (base_row + pos - first_page * c.page_size) % (c.pages * c.page_size)
        k, v = c.k[flat // c.page_size, flat % c.page_size], c.v[flat // c.page_size, flat % c.page_size]
    elif fault == 28 and c.policy == "paged":
        first, second = _slot(p, b, pos, fault)
        kk, vv = _head_major_pool(c)
        k, v = kk[first, :, second], vv[first, :, second]
    else:
        first, second = _slot(p, b, pos, fault)
        k, v = c.k[first, second], c.v[first, second]
    if c.kv_format != "dtype":
        table = _fp8_values(_kv_fmt(c.kv_format, fault))
        return table[k] * np.float64(p.k_descale), table[v] * np.float64(p.v_descale)
    return _to_float(k, p.dtype).astype(np.float64), _to_float(v, p.dtype).astype(np.float64)


def _write_cache(p, b, begin, end, src_rows, fault):
    """Stores positions [begin, end) of sequence b (their K/V from packed rows src_rows[pos-begin])."""
    c = p.cache
    slots = c.slots
    if c.policy == "ring-compact" and c.tokens_written[b] == 0:
        keep = slots - 1 if fault == 13 else slots
        c.base[b] = max(0, (end - begin) - keep)
    if c.policy in ("linear", "paged"):
        lowest = begin
        pos = np.arange(lowest, end)
    elif fault == 14 and end - max(begin, int(c.base[b])) > slots:
        lo = max(begin, int(c.base[b]))
        pos = np.arange(lo, lo + slots)
    else:
        lowest = max(begin, end - slots, int(c.base[b]))
        pos = np.arange(lowest, end)
    rows = src_rows[pos - begin]
    k, v = p.k[rows], p.v[rows]
    if c.kv_format != "dtype":
        fmt = _kv_fmt(c.kv_format, fault)
        k = _fp8_encode(_to_float(k, p.dtype) / np.float32(p.k_descale), fmt, ties_away=(fault == 20))
        v = _fp8_encode(_to_float(v, p.dtype) / np.float32(p.v_descale), fmt, ties_away=(fault == 20))
    if fault == 15 and c.policy == "linear":
        kf, vf, idx = _flat_linear(c, p, b, pos)
        kf[idx], vf[idx] = k, v
    else:
        first, second = _slot(p, b, pos, fault)
        keep = first >= 0
        if fault == 16:
            keep = np.ones_like(keep)  # -1 used as a page index
        if fault == 28 and c.policy == "paged":
            kk, vv = _head_major_pool(c)
            kk[first[keep], :, second[keep]], vv[first[keep], :, second[keep]] = k[keep], v[keep]
        else:
            c.k[first[keep], second[keep]], c.v[first[keep], second[keep]] = k[keep], v[keep]
        stored = int(keep.sum())
    if fault == 18 and c.policy == "paged":
        c.tokens_written[b] = int(c.tokens_written[b]) + stored
    else:
        c.tokens_written[b] = end


def _fresh_kv(p, rows, fault, quantise=True):
    k = _to_float(p.k[rows], p.dtype).astype(np.float64)
    v = _to_float(p.v[rows], p.dtype).astype(np.float64)
    if p.kv_format != "dtype" and quantise:
        k = _quantise(k, p.k_descale, p.kv_format, fault)
        v = _quantise(v, p.v_descale, p.kv_format, fault)
    return k, v


# ----------------------------------------------------------------------------- scores & softmax
def _scores(p, q, k, kv_head, qpos, kpos, fault, use_band=True):
    """Base-2 scores [H, R, N] (log2(e) folded in), -inf where hidden."""
    if fault == 24 and p.dtype == "fp32":
        q, k = _tf32(q), _tf32(k)
    raw = np.einsum("rhd,nhd->hrn", q, k[:, kv_head])
    cap = p.softcap if not (fault == 3 and p.cache is not None) else 0.0
    scale = np.float64(p.scale)
    if fault == 2:  # scale from the head size padded to the MMA tile (a power of two)
        padded = 1 << (int(p.head_size) - 1).bit_length()
        scale = np.float64(np.float32(1.0 / np.sqrt(padded)))
    if fault == 1 and cap > 0:
        s = scale * cap * np.tanh(raw / cap)
    else:
        s = raw * scale
        if cap > 0:
            s = cap * np.tanh(s / cap)
    if fault == 29 and p.mask_format == "swa-norm" and p.mask is not None \
            and max(qpos.max(), kpos.max(initial=0)) < p.mask.shape[0]:
        s = s + np.asarray(p.mask, dtype=np.float64)[np.ix_(qpos, kpos)][None]
        use_band = False
    s = s * LOG2E
    if use_band:
        i, j = qpos[:, None], kpos[None, :]
        visible = np.ones((len(qpos), len(kpos)), dtype=bool)
        if p.window_left >= 0:
            visible &= i - j <= p.window_left
        if p.window_right >= 0:
            if fault == 25 and p.window_right > 0:
                visible &= j - i < p.window_right
            else:
                visible &= j - i <= p.window_right
        s = np.where(visible[None], s, -np.inf)
    return s


def _exp2(x):
    """exp2 evaluated in fp32, as the device's exp2 unit does (arguments formed in higher precision)."""
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        return np.exp2(np.asarray(x, dtype=np.float32)).astype(np.float64)


def _online(s, v, kpos, fault, dtype):
    """Online softmax over key tiles of KEY_TILE positions. s [H,R,N] base 2, v [N,H,D].
    Returns running max m [H,R], denominator l [H,R], accumulator acc [H,R,D] (not normalised)."""
    H, R, N = s.shape
    D = v.shape[2]
    m = np.full((H, R), 0.0 if fault == 27 else -np.inf)
    l = np.zeros((H, R))
    acc = np.zeros((H, R, D))
    if N == 0:
        return m, l, acc
    tile_id = kpos // KEY_TILE
    cuts = np.flatnonzero(np.diff(tile_id)) + 1
    starts = np.concatenate([[0], cuts])
    stops = np.concatenate([cuts, [N]])
    for t0, t1 in zip(starts, stops):
        st = s[:, :, t0:t1]
        m_new = np.maximum(m, st.max(axis=2))
        m_use = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.where(np.isfinite(m), _exp2(m - m_use), 0.0)
        pt = _exp2(st - m_use[..., None])
        pv, vt = pt, v[t0:t1]
        if fault == 23:
            pv = _bf16_value(pt.astype(np.float32))
        if fault == 24 and dtype == "fp32":
            pv, vt = _tf32(pt), _tf32(vt)
        if fault == 8:
            l = l + pt.sum(axis=2)
        else:
            l = l * alpha + pt.sum(axis=2)
        acc = acc * alpha[..., None] + np.einsum("hrn,nhd->hrd", pv, vt)
        m = m_new
    return m, l, acc


def _finalise(m, l, acc, sink2, fault):
    """Adds the sink (base 2, [H]) and normalises. A row with no key gives 0."""
    if sink2 is not None:
        M = np.maximum(m, sink2[:, None])
        corr = np.where(np.isfinite(m), _exp2(m - M), 0.0)
        l = l * corr + _exp2(sink2[:, None] - M)
        acc = acc * corr[..., None]
    return acc / np.where(l > 0, l, 1.0)[..., None]


def _split_kv(s, v, sink2, fault, dtype):
    """Decode: flash-decoding over up to MAX_SPLITS partitions of the keys, then a merge."""
    H, R, N = s.shape
    nsplit = max(1, min(MAX_SPLITS, N))
    parts = []
    for idx in np.array_split(np.arange(N), nsplit):
        st = s[:, :, idx]
        m = st.max(axis=2) if len(idx) else np.full((H, R), -np.inf)
        m_use = np.where(np.isfinite(m), m, 0.0)
        pt = _exp2(st - m_use[..., None])
        pv, vt = pt, v[idx]
        if fault == 23:
            pv = _bf16_value(pt.astype(np.float32))
        if fault == 24 and dtype == "fp32":
            pv, vt = _tf32(pt), _tf32(vt)
        l = pt.sum(axis=2)
        acc = np.einsum("hrn,nhd->hrd", pv, vt)
        if fault == 6 and sink2 is not None:
            m2 = np.maximum(m, sink2[:, None])
            corr = np.where(np.isfinite(m), _exp2(m - m2), 0.0)
            l = l * corr + _exp2(sink2[:, None] - m2)
            acc = acc * corr[..., None]
            m = m2
        parts.append((m, l, acc))
    M = np.max([pm for pm, _, _ in parts], axis=0)
    if sink2 is not None:
        M = np.maximum(M, sink2[:, None])
    M_use = np.where(np.isfinite(M), M, 0.0)
    L = np.zeros((H, R))
    ACC = np.zeros_like(parts[0][2])
    for pm, pl, pacc in parts:
        w = np.where(np.isfinite(pm), _exp2(pm - M_use), 0.0)
        if fault == 7:
            o_i = pacc / np.where(pl > 0, pl, 1.0)[..., None]
            L += w
            ACC += w[..., None] * o_i
        else:
            L += w * pl
            ACC += w[..., None] * pacc
    if sink2 is not None and fault != 6:
        L += _exp2(sink2[:, None] - M_use)
    return ACC / np.where(L > 0, L, 1.0)[..., None]


# ----------------------------------------------------------------------------- the kernel
def _attend_rows(p, q, qpos, k, v, kpos, kv_head, sink2, fault, decode, use_band=True):
    """Output [R, Hq, D] (float64) for query rows at positions qpos against keys at kpos."""
    out = np.zeros((len(qpos), p.heads_q, p.head_size))
    if decode:
        s = _scores(p, q, k, kv_head, qpos, kpos, fault, use_band)
        o = _split_kv(s, v[:, kv_head], sink2, fault, p.dtype)
        return np.transpose(o, (1, 0, 2))
    left, right = p.window_left, p.window_right
    for r0 in range(0, len(qpos), QUERY_BLOCK):
        r1 = min(len(qpos), r0 + QUERY_BLOCK)
        lo_pos = kpos[0] if left < 0 else qpos[r0] - left
        hi_pos = kpos[-1] if right < 0 else qpos[r1 - 1] + right
        sel = np.flatnonzero((kpos >= lo_pos) & (kpos <= hi_pos))
        s = _scores(p, q[r0:r1], k[sel], kv_head, qpos[r0:r1], kpos[sel], fault, use_band)
        m, l, acc = _online(s, v[sel][:, kv_head], kpos[sel], fault, p.dtype)
        o = _finalise(m, l, acc, sink2, fault)
        out[r0:r1] = np.transpose(o, (1, 0, 2))
    return out


def _kernel(p, fault):
    group = p.heads_q // p.heads_kv
    if fault == 19:
        kv_head = np.arange(p.heads_q) % p.heads_kv
    else:
        kv_head = np.arange(p.heads_q) // group
    sink2 = None
    if p.sinks is not None:
        sinks = np.asarray(p.sinks, dtype=np.float64)
        if fault == 4:
            sinks = sinks[np.arange(p.heads_q) // group]
        sink2 = sinks if fault == 5 else sinks * LOG2E
    left = p.window_left
    decode = p.call == "decode_step"
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        first_row = int(p.seq_offsets[b])
        src_rows = first_row + np.arange(begin, end)
        if decode and fault == 26:
            src_rows = np.full(end - begin, int(p.seq_offsets[b + 1]) - 1)
        qpos = np.arange(begin, end)
        q = _to_float(p.q[src_rows], p.dtype).astype(np.float64)
        use_band = True
        if p.cache is None:  # whole-prompt prefill
            kpos = np.arange(int(p.seq_lens[b]))
            k, v = _fresh_kv(p, first_row + kpos, fault)
        elif decode:
            if fault == 9 and left >= 0:
                lowest = max(0, begin - left - 1)
                use_band = False
            else:
                lowest = 0 if left < 0 else max(0, begin - left)
            kpos = np.arange(lowest, end)
            if fault == 12:
                k, v = _read_cache(p, b, kpos, fault)
                _write_cache(p, b, begin, end, src_rows, fault)
            else:
                _write_cache(p, b, begin, end, src_rows, fault)
                k, v = _read_cache(p, b, kpos, fault)
        else:  # a chunk: cached keys before it, its own keys from the inputs
            if fault == 10 and left >= 0:
                lowest = max(0, end - 1 - left)
            else:
                lowest = 0 if left < 0 else max(0, begin - left)
            lowest = min(lowest, begin)
            old = np.arange(lowest, begin)
            if fault == 11:
                _write_cache(p, b, begin, end, src_rows, fault)
            ok, ov = _read_cache(p, b, old, fault)
            nk, nv = _fresh_kv(p, src_rows, fault, quantise=(fault != 22))
            kpos = np.arange(lowest, end)
            k, v = np.concatenate([ok, nk]), np.concatenate([ov, nv])
        o = _attend_rows(p, q, qpos, k, v, kpos, kv_head, sink2, fault, decode, use_band)
        with np.errstate(invalid="ignore", over="ignore"):
            o32 = o.astype(np.float32)
        _store_rows(p.out, slice(first_row + begin, first_row + end), o32, p.dtype)
        if p.cache is not None and not decode and fault != 11:
            _write_cache(p, b, begin, end, src_rows, fault)


def attention(p):
    _kernel(p, None)


def _make_fault(n):
    def entry(p):
        _kernel(p, n)
    entry.__name__ = f"fault_{n:02d}"
    entry.__doc__ = FAULTS[entry.__name__]
    return entry


for _n in range(1, len(FAULTS) + 1):
    globals()[f"fault_{_n:02d}"] = _make_fault(_n)
del _n
