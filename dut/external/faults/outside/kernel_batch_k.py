"""Batch K: a TPU/Pallas "splash attention"-style port of sliding-window attention, in NumPy.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_k.py:attention

Organisation (as the device kernel is laid out):

* Block-sparse grid. Query blocks of BLOCK_Q = 16 rows and key blocks of BLOCK_KV = 32 keys, both
  aligned to absolute positions (multiples of the block from position 0) and clipped to the rows of
  the call and to the key stream. Before the kernel runs, a "mask info" plan is built on the host for
  every (query block, key block) pair: EMPTY (skipped, never loaded), FULL (no element mask) or
  PARTIAL (element mask: the band, or the ATB mask tensor). Each query block gets a fixed-capacity
  list of its non-empty key blocks (the kernel's static grid size). Plans are memoised across calls
  by their geometry, as a serving stack keeps the mask info of each shape; likewise the ATB mask
  tensor is uploaded to the device once per mask geometry and reused.
* GQA packing: per KV head the query heads of its group are stacked into one [group * rows, D]
  operand; K is held transposed ([Hkv, D, keys]) so a block's scores are one batched matmul.
* Two-pass softmax per query block: pass 1 walks the block list for the row maximum (the sink joins
  it), pass 2 walks it again for the row sum and P.V at that fixed maximum; fp32 throughout.
* KV cache: rings are read and written as at most two contiguous slot segments (before and after the
  wrap), linear as one, paged through the page table one page run at a time. FP8 codes come from a
  float32 bit-manipulation encoder (RNE on the bits, saturating) and a 256-entry decode table.

`attention` is the correct kernel; `fault_01` .. `fault_27` each change one thing (see FAULTS).
"""
import numpy as np

BLOCK_Q = 16
BLOCK_KV = 32

EMPTY, PARTIAL, FULL = 0, 1, 2

# format: (mantissa bits, exponent bias, largest finite code)
_FP8 = {"fp8-e4m3": (3, 7, 0x7E), "fp8-e5m2": (2, 15, 0x7B)}
_FP8_TABLES = {}
_PLAN_CACHE = {}


def describe():
    return {"name": "batch_k_splash", "query_tile": BLOCK_Q, "key_tile": BLOCK_KV}


# ---------------------------------------------------------------------------------------------
# dtype and FP8 codecs


def _to_f32(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def _store(out, r0, r1, values, dtype):
    if dtype == "bf16":
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        out[r0:r1] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    elif dtype == "fp16":
        out[r0:r1] = values.astype(np.float16)
    else:
        out[r0:r1] = values


def _fp8_table(fmt):
    t = _FP8_TABLES.get(fmt)
    if t is None:
        m, bias, _ = _FP8[fmt]
        c = np.arange(256)
        e = (c >> m) & ((1 << (7 - m)) - 1)
        f = c & ((1 << m) - 1)
        mag = np.where(e == 0, f * 2.0 ** (1 - bias - m), (1.0 + f / 2.0 ** m) * 2.0 ** (e.astype(np.float64) - bias))
        if fmt == "fp8-e4m3":
            mag = np.where((c & 0x7F) == 0x7F, np.nan, mag)
        else:
            mag = np.where(e == 31, np.where(f == 0, np.inf, np.nan), mag)
        t = np.where(c & 0x80, -mag, mag)
        _FP8_TABLES[fmt] = t
    return t


def _fp8_encode(x32, fmt, fault=None):
    """FP8 codes of float32 values: round to nearest even on the float32 bits, saturating."""
    m, bias, maxcode = _FP8[fmt]
    table = _fp8_table(fmt)
    sat_code = 0x7B if fault == 20 else maxcode
    largest = np.float32(table[sat_code])
    a = np.minimum(np.abs(x32.astype(np.float32)), largest)
    bits = a.view(np.uint32).astype(np.int64)
    shift = 23 - m
    rounded = (bits + ((1 << (shift - 1)) - 1) + ((bits >> shift) & 1)) >> shift
    normal = rounded - ((127 - bias) << m)
    sub = np.rint(a.astype(np.float64) * 2.0 ** (bias - 1 + m)).astype(np.int64)
    code = np.where(a < np.float32(2.0 ** (1 - bias)), sub, normal)
    code = np.minimum(code, sat_code)
    return (code | np.where(np.signbit(x32), 0x80, 0)).astype(np.uint8)


def _fp8_decode(codes, fmt, descale):
    return (_fp8_table(fmt)[codes] * float(descale)).astype(np.float32)


def _quantise(p, k32, v32, fault):
    """Codes of K and V as the cache stores them."""
    kc = _fp8_encode(k32 / np.float32(p.k_descale), p.kv_format, fault)
    vc = _fp8_encode(v32 / np.float32(p.v_descale), p.kv_format, fault)
    return kc, vc


def _load_kv(p, r0, r1, fault, fresh=False):
    """K and V of packed rows [r0, r1) as attention reads them (through FP8 when the format says)."""
    k32, v32 = _to_f32(p.k[r0:r1], p.dtype), _to_f32(p.v[r0:r1], p.dtype)
    if p.kv_format == "dtype" or (fault == 21 and fresh):
        return k32, v32
    kc, vc = _quantise(p, k32, v32, fault)
    return _fp8_decode(kc, p.kv_format, p.k_descale), _fp8_decode(vc, p.kv_format, p.v_descale)


# ---------------------------------------------------------------------------------------------
# KV cache: rings as two contiguous segments, linear as one, paged as page runs


def _ring_segments(start, n, slots, fault):
    """n consecutive ring slots from `start` as (slot_begin, slot_end, stream_offset) pieces."""
    first = min(n, slots - start)
    if fault == 9 and n > first:
        first -= 1
    pieces = [(start, start + first, 0)]
    if n > first:
        pieces.append((0, n - first, first))
    return pieces


def _cache_decode(p, kc, vc):
    c = p.cache
    if c.kv_format != "dtype":
        return _fp8_decode(kc, c.kv_format, p.k_descale), _fp8_decode(vc, c.kv_format, p.v_descale)
    return _to_f32(kc, p.dtype), _to_f32(vc, p.dtype)


def _read_cache(p, b, lo, hi, fault):
    """K and V (float32, [hi - lo, Hkv, D]) of positions [lo, hi) of sequence b from the cache."""
    c = p.cache
    n = hi - lo
    shape = (n, p.heads_kv, p.head_size)
    if n <= 0:
        return np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    if c.policy == "linear":
        return _cache_decode(p, c.k[b, lo:hi], c.v[b, lo:hi])
    if c.policy in ("ring-modulo", "ring-compact"):
        slots = int(c.slots)
        base = int(c.base[b]) if c.policy == "ring-compact" else 0
        kc = np.empty(shape, c.k.dtype)
        vc = np.empty(shape, c.v.dtype)
        for s0, s1, off in _ring_segments((lo - base) % slots, n, slots, fault):
            kc[off:off + s1 - s0] = c.k[b, s0:s1]
            vc[off:off + s1 - s0] = c.v[b, s0:s1]
        return _cache_decode(p, kc, vc)
    # paged: one run per page
    P = int(c.page_size)
    kc = np.empty(shape, c.k.dtype)
    vc = np.empty(shape, c.v.dtype)
    pos = lo
    while pos < hi:
        page = int(c.page_table[b, pos // P])
        off = pos % P
        if fault == 13:
            run = min(P, hi - pos)
            idx = (off + np.arange(run)) % P
            kc[pos - lo:pos - lo + run] = c.k[page, idx]
            vc[pos - lo:pos - lo + run] = c.v[page, idx]
        else:
            run = min(P - off, hi - pos)
            kc[pos - lo:pos - lo + run] = c.k[page, off:off + run]
            vc[pos - lo:pos - lo + run] = c.v[page, off:off + run]
        pos += run
    return _cache_decode(p, kc, vc)


def _gather_positions(p, b, pos):
    """K and V of positions pos of sequence b, one slot index per position (the generic gather)."""
    c = p.cache
    if c.policy == "linear":
        first, second = np.full_like(pos, b), pos
    elif c.policy in ("ring-modulo", "ring-compact"):
        base = int(c.base[b]) if c.policy == "ring-compact" else 0
        first, second = np.full_like(pos, b), (pos - base) % int(c.slots)
    else:
        P = int(c.page_size)
        first, second = c.page_table[b, pos // P], pos % P
    return _cache_decode(p, c.k[first, second], c.v[first, second])


def _write_cache(p, b, s, e, fault):
    """Stores positions [s, e) of sequence b (rows of p.k / p.v) into the cache."""
    c = p.cache
    row0 = int(p.seq_offsets[b])
    k = p.k[row0 + s:row0 + e]
    v = p.v[row0 + s:row0 + e]
    if c.kv_format != "dtype":
        k, v = _quantise(p, _to_f32(k, p.dtype), _to_f32(v, p.dtype), fault)
    if c.policy == "linear":
        c.k[b, s:e] = k
        c.v[b, s:e] = v
        c.tokens_written[b] = e
        return
    if c.policy in ("ring-modulo", "ring-compact"):
        slots = int(c.slots)
        if c.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
            c.base[b] = (e - s) - slots if fault == 11 else max(0, (e - s) - slots)
        base = int(c.base[b]) if c.policy == "ring-compact" else 0
        if fault == 10 and e - s > slots:
            lowest, top = s, s + slots
        else:
            lowest, top = max(s, e - slots, base), e
        n = top - lowest
        if n > 0:
            for s0, s1, off in _ring_segments((lowest - base) % slots, n, slots, None):
                src = lowest - s + off
                c.k[b, s0:s1] = k[src:src + s1 - s0]
                c.v[b, s0:s1] = v[src:src + s1 - s0]
        c.tokens_written[b] = e
        return
    # paged: one run per page; a row whose page is -1 is not stored
    P = int(c.page_size)
    pos = s
    stored = 0
    while pos < e:
        page = int(c.page_table[b, pos // P])
        off = pos % P
        run = min(P - off, e - pos)
        if page >= 0 or fault == 14:
            c.k[page, off:off + run] = k[pos - s:pos - s + run]
            c.v[page, off:off + run] = v[pos - s:pos - s + run]
            stored += run
        pos += run
    if fault == 15:
        c.tokens_written[b] = int(c.tokens_written[b]) + stored
    else:
        c.tokens_written[b] = e


# ---------------------------------------------------------------------------------------------
# host side: the block mask info ("plan")


def _kv_capacity(left, right, n_keys):
    """Most key blocks one query block can touch (the static grid's kv dimension)."""
    if left < 0 or right < 0:
        return (n_keys + BLOCK_KV - 1) // BLOCK_KV + 1
    span = left + right + BLOCK_Q
    return (span - 1 + BLOCK_KV - 1) // BLOCK_KV + 1


def _classify(qa, qb, ka, kb, left, right, fault):
    mind = qa - (kb - 1)  # smallest i - j in the tile
    maxd = (qb - 1) - ka  # largest i - j
    if left >= 0 and (mind >= left if fault == 2 else mind > left):
        return EMPTY
    if right >= 0 and (maxd < 0 if fault == 4 else maxd < -right):
        return EMPTY
    lower_ok = left < 0 or maxd <= left
    if fault == 3:
        upper_ok = right < 0 or qa - ka >= -right
    else:
        upper_ok = right < 0 or mind >= -right
    return FULL if (lower_ok and upper_ok) else PARTIAL


def _build_plan(q_lo, q_hi, k_lo, k_hi, left, right, fault):
    """Per query block: (qa, qb, [(ka, kb, kind, aligned_start)]), relative to q_lo and k_lo."""
    cap = _kv_capacity(left, right, k_hi - k_lo)
    if fault == 5 and left >= 0 and right >= 0:
        cap = (left + right + BLOCK_Q + BLOCK_KV - 1) // BLOCK_KV
    plan = []
    qs = (q_lo // BLOCK_Q) * BLOCK_Q
    while qs < q_hi:
        qa, qb = max(qs, q_lo), min(qs + BLOCK_Q, q_hi)
        blocks = []
        ks = (k_lo // BLOCK_KV) * BLOCK_KV
        while ks < k_hi:
            ka, kb = max(ks, k_lo), min(ks + BLOCK_KV, k_hi)
            kind = _classify(qa, qb, ka, kb, left, right, fault)
            if kind != EMPTY:
                blocks.append((ka - k_lo, kb - k_lo, kind, ks - k_lo))
            ks += BLOCK_KV
        if len(blocks) > cap:
            if fault != 5:
                raise RuntimeError(f"block list of {len(blocks)} past the grid's {cap}")
            blocks = blocks[len(blocks) - cap:]
        plan.append((qa - q_lo, qb - q_lo, blocks))
        qs += BLOCK_Q
    return plan


def _plan(q_lo, q_hi, k_lo, k_hi, left, right, fault):
    key = (q_lo % BLOCK_Q, k_lo % BLOCK_KV, q_lo - k_lo, q_hi - q_lo, k_hi - k_lo, left, right, fault)
    plan = _PLAN_CACHE.get(key)
    if plan is None:
        if len(_PLAN_CACHE) > 20000:
            _PLAN_CACHE.clear()
        plan = _build_plan(q_lo, q_hi, k_lo, k_hi, left, right, fault)
        _PLAN_CACHE[key] = plan
    return plan


# ---------------------------------------------------------------------------------------------
# element masks for PARTIAL blocks


_MASK_UPLOADS = {}


def _device_mask(p, fault):
    """The ATB mask as uploaded to the device: one copy per mask geometry, reused across calls."""
    if fault == 6:
        key = (p.mask_format, int(p.mask_rows), p.dtype)
    else:
        key = (p.mask_format, int(p.mask_rows), p.dtype, int(p.window_left), int(p.mask_block),
               int(p.mask_effective_window))
    m = _MASK_UPLOADS.get(key)
    if m is None:
        if len(_MASK_UPLOADS) > 64:
            _MASK_UPLOADS.clear()
        m = np.array(p.mask, dtype=np.float32, copy=True)
        _MASK_UPLOADS[key] = m
    return m


def _visibility(p, row_base, fault):
    """A function (i, j) -> bool array: which (query, key) position pairs are visible."""
    left, right = int(p.window_left), int(p.window_right)
    if p.mask_format == "none" or p.mask is None:
        def band(i, j):
            vis = np.ones(np.broadcast(i, j).shape, bool)
            if left >= 0:
                vis &= i - j <= left
            if right >= 0:
                vis &= j - i <= right
            return vis
        return band
    mask = _device_mask(p, fault)

    def shown(x):
        return x >= 0 if fault == 24 else x == 0

    if p.mask_format == "swa-norm":
        def norm(i, j):
            rows = i - row_base if fault == 25 else i
            rows = np.broadcast_to(rows, np.broadcast(i, j).shape)
            cols = np.broadcast_to(j, rows.shape)
            ok = (rows >= 0) & (cols >= 0)
            return ok & shown(mask[np.clip(rows, 0, mask.shape[0] - 1), np.clip(cols, 0, mask.shape[1] - 1)])
        return norm

    B = int(p.mask_block)
    W = left + 1
    T = int(p.mask_effective_window)
    shortening = (W - 1 - T) if fault == 26 else (W - T)

    def compress(i, j):
        i, j = np.broadcast_arrays(i, j)
        qt, kt = i // B, j // B
        r, c = i % B, j % B
        d = (qt - kt) * B
        hidden = (kt > qt) | (d - (B - 1) >= W)
        diag = qt == kt
        if fault == 27:
            full = (~diag) & (d + B - 1 <= W)
        else:
            full = (~diag) & (d + B - 1 < W)
        rows = np.where(diag, r, d - shortening + r)
        rows = np.clip(rows, 0, mask.shape[0] - 1)
        read = shown(mask[rows, np.clip(c, 0, mask.shape[1] - 1)])
        return np.where(hidden, False, np.where(full, True, read))
    return compress


# ---------------------------------------------------------------------------------------------
# the device kernel: block-sparse, GQA-packed, two-pass softmax


def _attend(p, qf, q_lo, kf, vf, k_lo, plan, visible, fault):
    nq, Hq, D = qf.shape
    Hkv = p.heads_kv
    group = Hq // Hkv
    if fault == 22:
        kf = kf.astype(np.float16).astype(np.float32)
    kT = np.ascontiguousarray(kf.transpose(1, 2, 0))  # [Hkv, D, keys]
    vv = np.ascontiguousarray(vf.transpose(1, 0, 2))  # [Hkv, keys, D]
    scale = np.float32(p.scale)
    cap = np.float32(p.softcap) if p.softcap > 0 else None
    sinks = None if p.sinks is None else np.asarray(p.sinks, np.float32)
    out = np.empty((nq, Hq, D), np.float32)
    for qa, qb, blocks in plan:
        nr = qb - qa
        qblk = qf[qa:qb]
        if fault == 1:
            Qp = qblk.reshape(nr, group, Hkv, D).transpose(2, 1, 0, 3).reshape(Hkv, group * nr, D)
        else:
            Qp = qblk.reshape(nr, Hkv, group, D).transpose(1, 2, 0, 3).reshape(Hkv, group * nr, D)
        i_pos = np.arange(q_lo + qa, q_lo + qb)

        def scores(ka, kb, kind, ks):
            s = np.matmul(Qp, kT[:, :, ka:kb])
            if cap is not None:
                if fault == 19:
                    s = cap * np.tanh(s / cap) * scale
                else:
                    s = s * scale
                    s = cap * np.tanh(s / cap)
            else:
                s = s * scale
            if kind == PARTIAL:
                if fault == 7:
                    j_pos = np.arange(k_lo + ks, k_lo + ks + (kb - ka))
                else:
                    j_pos = np.arange(k_lo + ka, k_lo + kb)
                vis = np.tile(visible(i_pos[:, None], j_pos[None, :]), (group, 1))
                s = np.where(vis[None], s, np.float32(-np.inf))
            return s.astype(np.float32)

        if sinks is not None:
            if fault == 18:
                sink_rows = np.repeat(sinks[:Hkv][:, None], group * nr, axis=1)
            else:
                sink_rows = np.repeat(sinks.reshape(Hkv, group), nr, axis=1)
        # pass 1: the row maximum
        m = np.full((Hkv, group * nr), 0.0 if fault == 23 else -np.inf, np.float32)
        for ka, kb, kind, ks in blocks:
            m = np.maximum(m, scores(ka, kb, kind, ks).max(axis=-1))
        if sinks is not None:
            m = np.maximum(m, sink_rows)
        m_safe = np.where(np.isfinite(m), m, np.float32(0))
        # pass 2: the row sum and P.V at the fixed maximum
        l = np.zeros((Hkv, group * nr), np.float32)
        acc = np.zeros((Hkv, group * nr, D), np.float32)
        for ka, kb, kind, ks in blocks:
            e = np.exp(scores(ka, kb, kind, ks) - m_safe[..., None])
            l += e.sum(axis=-1)
            acc += np.matmul(e, vv[:, ka:kb])
        if sinks is not None:
            l += np.exp(sink_rows) if fault == 17 else np.exp(sink_rows - m_safe)
        o = np.where(l[..., None] > 0, acc / np.where(l > 0, l, 1)[..., None], 0).astype(np.float32)
        if fault == 1:
            out[qa:qb] = o.reshape(Hkv, group, nr, D).transpose(2, 1, 0, 3).reshape(nr, Hq, D)
        else:
            out[qa:qb] = o.reshape(Hkv, group, nr, D).transpose(2, 0, 1, 3).reshape(nr, Hq, D)
    return out


# ---------------------------------------------------------------------------------------------
# the host loop over calls


def _kernel(p, fault=None):
    left, right = int(p.window_left), int(p.window_right)
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        row0 = int(p.seq_offsets[b])
        if p.call == "prefill":
            k_lo, k_hi = 0, int(p.seq_lens[b])
            kf, vf = _load_kv(p, row0, row0 + k_hi, fault)
        elif p.call == "chunked_prefill":
            if left < 0:
                k_lo = 0
            elif fault == 8:
                k_lo = min(begin, max(0, end - 1 - left))
            else:
                k_lo = max(0, begin - left)
            k_hi = end
            if fault == 12:
                _write_cache(p, b, begin, end, fault)
                kf, vf = _gather_positions(p, b, np.arange(k_lo, end))
            else:
                ck, cv = _read_cache(p, b, k_lo, begin, fault)
                nk, nv = _load_kv(p, row0 + begin, row0 + end, fault, fresh=True)
                kf, vf = np.concatenate([ck, nk]), np.concatenate([cv, nv])
        else:  # decode_step: write first, then attend to the cache alone
            _write_cache(p, b, begin, end, fault)
            if left < 0:
                k_lo = 0
            elif fault == 16 and p.cache.policy in ("ring-modulo", "ring-compact"):
                k_lo = begin - left
            else:
                k_lo = max(0, begin - left)
            k_hi = end
            kf, vf = _read_cache(p, b, k_lo, k_hi, fault)
        qf = _to_f32(p.q[row0 + begin:row0 + end], p.dtype)
        plan = _plan(begin, end, k_lo, k_hi, left, right, fault)
        visible = _visibility(p, begin, fault)
        o = _attend(p, qf, begin, kf, vf, k_lo, plan, visible, fault)
        _store(p.out, row0 + begin, row0 + end, o, p.dtype)
        if p.call == "chunked_prefill" and fault != 12:
            _write_cache(p, b, begin, end, fault)
    return None


def attention(p):
    """The correct kernel."""
    return _kernel(p, None)


def fault_01(p):
    """GQA packing stacks query heads as (group, Hkv), so query head h reads kv head h % Hkv."""
    return _kernel(p, 1)


def fault_02(p):
    """The EMPTY test skips a key block whose nearest pair sits exactly at distance window_left."""
    return _kernel(p, 2)


def fault_03(p):
    """The FULL test for the causal side compares the query block start with the key block start."""
    return _kernel(p, 3)


def fault_04(p):
    """The EMPTY test for the right side ignores window_right (skips blocks right of the diagonal)."""
    return _kernel(p, 4)


def fault_05(p):
    """The static kv-grid capacity forgets the misaligned extra block; the oldest block is dropped."""
    return _kernel(p, 5)


def fault_06(p):
    """The uploaded ATB mask is cached by format, size and dtype only; another window's mask is reused."""
    return _kernel(p, 6)


def fault_07(p):
    """A PARTIAL first key block labels its keys from the aligned block start, not its first key."""
    return _kernel(p, 7)


def fault_08(p):
    """Chunked prefill reads the cache from the chunk's last row's window, not its first row's."""
    return _kernel(p, 8)


def fault_09(p):
    """Ring reads that wrap take one slot too few before the wrap (the stream shifts by one)."""
    return _kernel(p, 9)


def fault_10(p):
    """A chunk longer than the ring keeps its first W keys, not its last W."""
    return _kernel(p, 10)


def fault_11(p):
    """RING_COMPACT base is first_write - W without the clamp at 0 (negative base)."""
    return _kernel(p, 11)


def fault_12(p):
    """Chunked prefill writes the chunk into the cache first and reads its own keys back from it."""
    return _kernel(p, 12)


def fault_13(p):
    """The paged gather takes page_size keys from a mid-page offset, wrapping inside the same page."""
    return _kernel(p, 13)


def fault_14(p):
    """A paged row whose page is -1 is written anyway, into the pool's last page (index -1)."""
    return _kernel(p, 14)


def fault_15(p):
    """A paged write counts tokens_written by the rows stored, not by the end position."""
    return _kernel(p, 15)


def fault_16(p):
    """Ring decode reads a full W-key window without clamping at position 0."""
    return _kernel(p, 16)


def fault_17(p):
    """The sink's term in the row sum is exp(sink), not exp(sink - m)."""
    return _kernel(p, 17)


def fault_18(p):
    """Query head h takes the sink of index h // group (the kv head) instead of h."""
    return _kernel(p, 18)


def fault_19(p):
    """The soft-cap is applied to the unscaled dot product, and the scale after it."""
    return _kernel(p, 19)


def fault_20(p):
    """The FP8 encoder saturates e4m3 at e5m2's largest code 0x7B (352), not 0x7E (448)."""
    return _kernel(p, 20)


def fault_21(p):
    """Chunked prefill reads the chunk's own keys unquantised instead of through the FP8 codec."""
    return _kernel(p, 21)


def fault_22(p):
    """The transposed K buffer is half precision, rounding every key to fp16."""
    return _kernel(p, 22)


def fault_23(p):
    """The max pass starts the row maximum at 0 instead of -inf."""
    return _kernel(p, 23)


def fault_24(p):
    """The ATB mask is read as visible where it is >= 0 (bf16's +1 fill shows)."""
    return _kernel(p, 24)


def fault_25(p):
    """The SWA_NORM mask rows are indexed relative to the call's first row, not the absolute position."""
    return _kernel(p, 25)


def fault_26(p):
    """The SWA_COMPRESS rule-4 row shortening uses window_left - T instead of (window_left + 1) - T."""
    return _kernel(p, 26)


def fault_27(p):
    """The SWA_COMPRESS fully-visible test admits tiles reaching distance W."""
    return _kernel(p, 27)


FAULTS = {
    "fault_01": "GQA packing stacks query heads as (group, Hkv), so query head h reads kv head h % Hkv instead of h // group.",
    "fault_02": "The empty-block test uses mind >= window_left, skipping a key block whose nearest pair is at exactly distance window_left (a visible key).",
    "fault_03": "The full-block test on the causal side compares the query block start with the key block start, so diagonal blocks are unmasked and future keys leak in.",
    "fault_04": "The empty-block test for the right side uses maxd < 0 instead of maxd < -window_right, skipping visible keys right of the query in two-sided windows.",
    "fault_05": "The static kv-grid capacity is ceil((L+R+BQ)/BK) without the misalignment block; the oldest visible key block is dropped when the window straddles one more block.",
    "fault_06": "The device copy of the ATB mask is cached across calls/scenarios keyed only by mask format, size and dtype, so a mask built for another window (and effective window) is reused.",
    "fault_07": "In a partial first key block clipped at the key stream's start, key positions are labelled from the aligned block start, shifting their mask labels.",
    "fault_08": "Chunked prefill reads cached keys from end-1-window_left instead of begin-window_left, so early rows of a chunk miss their oldest keys.",
    "fault_09": "A ring read that wraps takes one slot too few before the wrap, so later keys are read one slot off.",
    "fault_10": "A ring write of a chunk longer than the ring keeps the chunk's first W positions instead of its last W.",
    "fault_11": "RING_COMPACT's base is set to first_write_len - W without clamping at 0 (cache layout and base wrong for short first writes).",
    "fault_12": "Chunked prefill writes the chunk's K/V into the cache before attending and reads the chunk's own keys back from the cache (overwritten ring slots, unstored paged rows).",
    "fault_13": "The paged gather reads a run of page_size keys from a mid-page offset within one physical page, wrapping around that page instead of moving to the next page.",
    "fault_14": "A paged write does not skip rows whose page is -1 and stores them into the pool's last page (negative index).",
    "fault_15": "A paged write advances tokens_written by the number of rows stored instead of setting it to the chunk's end.",
    "fault_16": "Ring decode reads window_left+1 keys ending at the query without clamping at position 0, so unwritten (zero) slots are attended as negative positions.",
    "fault_17": "The sink's term in the softmax denominator is exp(sink) instead of exp(sink - m).",
    "fault_18": "Query head h uses sink h // group (indexed by kv head) instead of sink h.",
    "fault_19": "The soft-cap tanh is applied to the unscaled dot product and the scale is applied after it.",
    "fault_20": "The FP8 encoder saturates e4m3 at code 0x7B (352, e5m2's largest code) instead of 0x7E (448).",
    "fault_21": "Chunked prefill uses the chunk's own K/V unquantised instead of as the FP8 cache would return them.",
    "fault_22": "The transposed K buffer is fp16, rounding every key to half precision (wrong for fp32 and out-of-range bf16 keys).",
    "fault_23": "The max pass initialises the row maximum to 0 instead of -inf, so rows whose scores are all very negative underflow.",
    "fault_24": "The ATB mask is treated as visible where it is >= 0 instead of == 0, so bf16's +1 fill leaves hidden keys visible.",
    "fault_25": "SWA_NORM mask rows are indexed by the row's offset within the call instead of its absolute position (chunked prefill only).",
    "fault_26": "The SWA_COMPRESS boundary-tile row offset uses window_left - T instead of (window_left + 1) - T, reading one mask row off.",
    "fault_27": "The SWA_COMPRESS fully-visible tile test uses d + B - 1 <= W instead of < W, admitting keys at distance W.",
}
