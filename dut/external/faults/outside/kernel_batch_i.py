"""Outside batch I: a port of a FlashAttention-3 style Hopper persistent kernel driven by a
FlashInfer-style plan/run scheduler, in NumPy, with deliberate faults (fault_01 .. fault_24).

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_i.py:attention

Layout of one call (a prefill, a chunk, or a decode step):
  gather  per request (sequence with rows in this call), the keys the call can see, in "kernel
          units" (FP8: the code values, the descales folded into the softmax scale and the epilogue);
          decode steps store their own K/V first and then read everything from the cache (ring,
          linear or paged; paged pages are gathered whole and trimmed by position);
  plan    work tiles (request, kv head, query tile of Q_TILE = 80 packed rows, kv split): GQA is
          packed into the rows, packed row r = query * group + g; the kv range of a query tile comes
          from its first and last query position and the window's edges; splits are KV_CHUNK = 112
          keys aligned at absolute positions (decode: an adaptive chunk, a multiple of 16, so that
          the few decode tiles fill the CTAs), partial (O, LSE) slots at o_indptr offsets;
  run     a persistent loop of NUM_CTAS CTAs: CTA c takes tile c, then the next one from a tile
          counter (the semaphore the launch zeroes); each tile writes its normalised partial O and
          its natural-log LSE;
  combine per query tile: one split without sinks is the direct epilogue (O * v_descale); else the
          LSE-weighted merge with the sink as one more logit; then GQA unpack into out.
Chunked-prefill calls store their chunk's K/V into the cache after attending.
"""
from dataclasses import dataclass, replace

import numpy as np

Q_TILE = 80       # packed query rows per work tile (kBlockM)
KV_CHUNK = 112    # keys per kv split (kBlockN)
NUM_CTAS = 16     # persistent grid
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Knobs:
    tile_count_unpacked: bool = False       # fault_01
    mask_row_unpacked: bool = False         # fault_02
    qmin_unpacked: bool = False             # fault_03
    qmax_floor: bool = False                # fault_04
    prefill_end_inclusive: bool = False     # fault_05
    max_q_from_chunk: bool = False          # fault_06
    decode_plan_reuse: bool = False         # fault_07
    stale_semaphore: bool = False           # fault_08
    ws_fixed_stride: bool = False           # fault_09
    nsplit_first_tile: bool = False         # fault_10
    lse_log2: bool = False                  # fault_11
    lse_unscaled_max: bool = False          # fault_12
    lse_no_kdescale: bool = False           # fault_13
    combine_weights_fp16: bool = False      # fault_14
    merge_lse_alias: bool = False           # fault_15
    sink_scaled: bool = False               # fault_16
    sink_head_major: bool = False           # fault_17
    fastpath_no_vdescale: bool = False      # fault_18
    kdescale_after_cap: bool = False        # fault_19
    softcap_rescale: bool = False           # fault_20
    page_origin_lo: bool = False            # fault_21
    fp16_epilogue_bf16: bool = False        # fault_22
    fastpath_unnormalised: bool = False     # fault_23
    fetch_add_new_value: bool = False       # fault_24


def describe():
    return {"name": "fa3_persistent_i", "query_tile": Q_TILE, "key_tile": KV_CHUNK}


# ---------------------------------------------------------------- dtypes and FP8
def _fp8_values(kv_format):
    m_bits, bias = (3, 7) if kv_format == "fp8-e4m3" else (2, 15)
    c = np.arange(256)
    e, m = (c & 0x7F) >> m_bits, c & ((1 << m_bits) - 1)
    value = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                     np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
    if kv_format == "fp8-e4m3":
        value = np.where((e == 15) & (m == 7), np.nan, value)
    else:
        value = np.where(e == 31, np.where(m == 0, np.inf, np.nan), value)
    return np.where(c & 0x80, -value, value)


_TABLES = {}


def _table(kv_format):
    if kv_format not in _TABLES:
        _TABLES[kv_format] = _fp8_values(kv_format)
    return _TABLES[kv_format]


def _fp8_encode(x, kv_format):
    table = _table(kv_format)[:0x80]
    finite = table[np.isfinite(table)]
    a = np.minimum(np.abs(x.astype(np.float64)), finite[-1])
    hi = np.clip(np.searchsorted(finite, a), 0, len(finite) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - finite[lo], finite[hi] - a
    code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def _to_float(x, dtype):
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def _store_rows(out, rows, values, dtype, kn):
    """The epilogue: fp32 accumulators converted to the storage dtype (RNE) and stored."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16" or (dtype == "fp16" and kn.fp16_epilogue_bf16):
        bits = values.view(np.uint32).astype(np.uint64)
        rb = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
        if dtype == "bf16":
            out[rows] = rb
        else:                              # the 16-bit converter of the other half type
            out[rows] = (rb.astype(np.uint32) << 16).view(np.float32)
    else:
        out[rows] = values


def _fp8(p):
    return p.kv_format != "dtype"


# ---------------------------------------------------------------- KV cache access
def _slots(cache, b, pos):
    if cache.policy == "paged":
        return cache.page_table[b, pos // cache.page_size], pos % cache.page_size
    if cache.policy == "linear":
        slot = pos
    elif cache.policy == "ring-compact":
        slot = (pos - int(cache.base[b])) % cache.slots
    else:
        slot = pos % cache.slots
    return np.full_like(pos, b), slot


def _units_from_storage(p, k, v):
    """K/V rows of the inputs as the kernel reads them: FP8 quantise-on-load gives code values."""
    k, v = _to_float(k, p.dtype), _to_float(v, p.dtype)
    if _fp8(p):
        t = _table(p.kv_format)
        k = t[_fp8_encode(k / np.float32(p.k_descale), p.kv_format)]
        v = t[_fp8_encode(v / np.float32(p.v_descale), p.kv_format)]
    return k.astype(np.float64), v.astype(np.float64)


def _units_from_cache(p, k, v):
    if p.cache.kv_format != "dtype":
        t = _table(p.cache.kv_format)
        return t[k], t[v]
    return _to_float(k, p.dtype).astype(np.float64), _to_float(v, p.dtype).astype(np.float64)


def _gather_cache(p, b, lo, hi, kn):
    """K/V (kernel units) of positions [lo, hi) of sequence b from the cache."""
    c = p.cache
    hkv, d = p.heads_kv, p.head_size
    if hi <= lo:
        z = np.zeros((0, hkv, d))
        return z, z.copy()
    if c.policy == "paged":
        ps = c.page_size
        first_pg, last_pg = lo // ps, (hi - 1) // ps
        pages = np.asarray(c.page_table[b, first_pg:last_pg + 1]).astype(np.int64)
        k = c.k[pages].reshape(-1, hkv, d)
        v = c.v[pages].reshape(-1, hkv, d)
        origin = lo if kn.page_origin_lo else first_pg * ps
        pos = origin + np.arange(k.shape[0])
        keep = (pos >= lo) & (pos < hi)
        return _units_from_cache(p, k[keep], v[keep])
    pos = np.arange(lo, hi)
    first, second = _slots(c, b, pos)
    return _units_from_cache(p, c.k[first, second], c.v[first, second])


def _write_cache(p, b, begin, end):
    c = p.cache
    if c.policy == "ring-compact" and c.tokens_written[b] == 0:
        c.base[b] = max(0, (end - begin) - c.slots)
    lowest = begin if c.policy in ("linear", "paged") else max(begin, end - c.slots, int(c.base[b]))
    pos = np.arange(lowest, end)
    first, second = _slots(c, b, pos)
    keep = first >= 0
    rows = int(p.seq_offsets[b]) + pos[keep]
    k, v = p.k[rows], p.v[rows]
    if c.kv_format != "dtype":
        k = _fp8_encode(_to_float(k, p.dtype) / np.float32(p.k_descale), c.kv_format)
        v = _fp8_encode(_to_float(v, p.dtype) / np.float32(p.v_descale), c.kv_format)
    c.k[first[keep], second[keep]], c.v[first[keep], second[keep]] = k, v
    c.tokens_written[b] = end


# ---------------------------------------------------------------- requests (gather)
class _Req:
    pass


def _requests(p, kn):
    left = int(p.window_left)
    group = p.heads_q // p.heads_kv
    reqs = []
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        r = _Req()
        r.b, r.begin, r.end = b, begin, end
        r.row0 = int(p.seq_offsets[b])
        if p.cache is None:
            r.kbase, r.kend = 0, int(p.seq_lens[b])
            rows = r.row0 + np.arange(r.kend)
            r.K, r.V = _units_from_storage(p, p.k[rows], p.v[rows])
        else:
            lo = 0 if left < 0 else max(0, begin - left)
            r.kbase, r.kend = lo, end
            if p.call == "decode_step":      # written first: everything from the cache
                r.K, r.V = _gather_cache(p, b, lo, end, kn)
            else:
                ck, cv = _gather_cache(p, b, lo, begin, kn)
                rows = r.row0 + np.arange(begin, end)
                nk, nv = _units_from_storage(p, p.k[rows], p.v[rows])
                r.K, r.V = np.concatenate([ck, nk]), np.concatenate([cv, nv])
        q = _to_float(p.q[r.row0 + begin:r.row0 + end], p.dtype).astype(np.float64)
        q_len = end - begin
        # PackGQA: [q_len, heads_kv, group, D] -> [heads_kv, q_len * group, D]
        r.Qp = q.reshape(q_len, p.heads_kv, group, p.head_size).transpose(1, 0, 2, 3).reshape(
            p.heads_kv, q_len * group, p.head_size)
        reqs.append(r)
    return reqs


# ---------------------------------------------------------------- plan
_PLAN_CACHE = {}


class _QTile:
    __slots__ = ("j", "kvh", "t", "r0", "r1", "splits", "off")


def _plan(p, reqs, kn):
    left, right = int(p.window_left), int(p.window_right)
    group = p.heads_q // p.heads_kv
    if kn.decode_plan_reuse and p.call == "decode_step":
        key = (p.batch, p.heads_q, p.heads_kv, tuple(r.end - r.begin for r in reqs))
        if key in _PLAN_CACHE:
            return _PLAN_CACHE[key]
    # grid height: max q rows of a request in this call (FA3's max_seqlen_q)
    if p.call == "chunked_prefill" and (p.chunk > 0 or kn.max_q_from_chunk):
        max_q = int(p.chunk)
    else:
        max_q = max(r.end - r.begin for r in reqs)
    n_qt = -(-(max_q if kn.tile_count_unpacked else max_q * group) // Q_TILE)
    if p.call == "decode_step":
        n_heads_tiles = len(reqs) * p.heads_kv
        max_kv = max(r.kend - r.kbase for r in reqs)
        want = max(1, NUM_CTAS // n_heads_tiles)
        cs = max(16, -(-(-(-max_kv // want)) // 16) * 16)
    else:
        cs = KV_CHUNK
    qtiles = []
    for j, r in enumerate(reqs):
        n_rows = (r.end - r.begin) * group
        for kvh in range(p.heads_kv):
            for t in range(n_qt):
                r0 = t * Q_TILE
                if r0 >= n_rows:
                    break          # tile past this request's rows: early exit
                r1 = min(r0 + Q_TILE, n_rows)
                qmin = r.begin + (r0 if kn.qmin_unpacked else r0 // group)
                qmax = r.begin + (r1 // group - 1 if kn.qmax_floor else (r1 - 1) // group)
                lo = r.kbase if left < 0 else max(r.kbase, qmin - left)
                kend = r.kend - 1 if (kn.prefill_end_inclusive and p.cache is None) else r.kend
                hi = kend if right < 0 else min(kend, qmax + right + 1)
                splits = []
                if hi > lo:
                    for c in range(lo // cs, (hi - 1) // cs + 1):
                        splits.append((max(lo, c * cs), min(hi, (c + 1) * cs)))
                qt = _QTile()
                qt.j, qt.kvh, qt.t, qt.r0, qt.r1, qt.splits = j, kvh, t, r0, r1, splits
                qtiles.append(qt)
    off = 0
    for qt in qtiles:          # o_indptr
        qt.off = off
        off += len(qt.splits)
    max_splits = max([len(qt.splits) for qt in qtiles] + [1])
    work = [(qi, s) for qi, qt in enumerate(qtiles) for s in range(len(qt.splits))]
    plan = (qtiles, work, off, max_splits)
    if kn.decode_plan_reuse and p.call == "decode_step":
        _PLAN_CACHE[key] = plan
    return plan


# ---------------------------------------------------------------- run (persistent)
_TILE_SEMAPHORE = [0]


def _unit_scale(p):
    return float(p.scale) * (float(p.k_descale) if _fp8(p) else 1.0)


def _run_tile(p, kn, r, qt, klo, khi, group):
    """One work tile: partial O (normalised by its own l) and natural-log LSE per packed row."""
    left, right = int(p.window_left), int(p.window_right)
    a, z = max(klo, r.kbase) - r.kbase, max(min(khi, r.kend) - r.kbase, 0)
    q = r.Qp[qt.kvh, qt.r0:qt.r1]
    k = r.K[a:z, qt.kvh]
    v = r.V[a:z, qt.kvh]
    rows = qt.r0 + np.arange(qt.r1 - qt.r0)
    qpos = r.begin + (rows if kn.mask_row_unpacked else rows // group)
    kpos = r.kbase + a + np.arange(z - a)
    vis = np.ones((len(rows), len(kpos)), dtype=bool)
    if left >= 0:
        vis &= (qpos[:, None] - kpos[None, :]) <= left
    if right >= 0:
        vis &= (kpos[None, :] - qpos[:, None]) <= right
    raw = q @ k.T                              # tensor-core Q.K, unscaled
    unit = _unit_scale(p)
    if p.softcap > 0:
        cap = float(p.softcap)
        if kn.kdescale_after_cap and _fp8(p):
            s = cap * np.tanh(raw * float(p.scale) / cap) * float(p.k_descale)
        else:
            s = cap * np.tanh(raw * unit / cap)
        ue = unit if kn.softcap_rescale else 1.0
    else:
        s = raw
        ue = unit
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=1) if s.shape[1] else np.full(len(rows), -np.inf)
    ms = np.where(np.isfinite(m), m, 0.0)
    pr = np.exp2((s - ms[:, None]) * (ue * LOG2E))
    l = pr.sum(axis=1)
    o = (pr @ v) / np.where(l > 0, l, 1.0)[:, None]
    if kn.fastpath_unnormalised and len(qt.splits) == 1 and p.sinks is None:
        o = pr @ v             # the epilogue is left to divide
    with np.errstate(divide="ignore"):
        if kn.lse_log2:
            lse = ms * ue * LOG2E + np.log2(l)
        elif kn.lse_unscaled_max:
            lse = ms + np.log(l)
        elif kn.lse_no_kdescale and p.softcap <= 0:
            lse = ms * float(p.scale) + np.log(l)
        else:
            lse = ms * ue + np.log(l)
    lse = np.where(l > 0, lse, -np.inf)
    return o, lse


def _persistent_run(p, kn, reqs, plan, group):
    qtiles, work, n_slots, max_splits = plan
    n_ws = max(n_slots, len(qtiles) * max_splits)
    ws_o = np.zeros((n_ws, Q_TILE, p.head_size))
    ws_l = np.full((n_ws, Q_TILE), -np.inf)
    sem = _TILE_SEMAPHORE if kn.stale_semaphore else [0]
    grid = min(len(work), NUM_CTAS)
    for cta in range(grid):
        tile = cta
        while tile < len(work):
            qi, s = work[tile]
            qt = qtiles[qi]
            klo, khi = qt.splits[s]
            o, lse = _run_tile(p, kn, reqs[qt.j], qt, klo, khi, group)
            slot = qi * max_splits + s if kn.ws_fixed_stride else qt.off + s
            n = qt.r1 - qt.r0
            ws_o[slot, :n], ws_l[slot, :n] = o, lse
            if kn.fetch_add_new_value:     # ++counter: the value after the add
                sem[0] += 1
                tile = grid + sem[0]
            else:                          # atomicAdd returns the value before the add
                tile = grid + sem[0]
                sem[0] += 1
    return ws_o, ws_l


# ---------------------------------------------------------------- combine
def _combine(p, kn, reqs, plan, ws_o, ws_l, group):
    qtiles = plan[0]
    vd = float(p.v_descale) if _fp8(p) else 1.0
    outs = [np.zeros((r.end - r.begin, p.heads_q, p.head_size)) for r in reqs]
    first_n = {}
    for qt in qtiles:
        first_n.setdefault((qt.j, qt.kvh), len(qt.splits))
    for qt in qtiles:
        r = reqs[qt.j]
        rows = qt.r0 + np.arange(qt.r1 - qt.r0)
        n = first_n[(qt.j, qt.kvh)] if kn.nsplit_first_tile else len(qt.splits)
        R = len(rows)
        q_len = r.end - r.begin
        heads = qt.kvh * group + rows % group
        if n == 0:
            o = np.zeros((R, p.head_size))
        elif n == 1 and p.sinks is None:      # no split: direct epilogue
            o = ws_o[qt.off, :R] * (1.0 if kn.fastpath_no_vdescale else vd)
        else:                                   # merge_state_in_place over the splits, then the sink
            o = np.zeros((R, p.head_size))
            lse = np.full(R, -np.inf)
            states = [(ws_o[qt.off + i, :R], ws_l[qt.off + i, :R]) for i in range(n)]
            if p.sinks is not None:
                sink = p.sinks[qt.kvh * group + (rows // q_len if kn.sink_head_major else rows % group)]
                sink = sink.astype(np.float64)
                if kn.sink_scaled:
                    sink = sink * (1.0 if p.softcap > 0 else _unit_scale(p))
                states.append((np.zeros((R, p.head_size)), sink))
            for o_i, lse_i in states:
                M = np.maximum(lse, lse_i)
                Ms = np.where(np.isfinite(M), M, 0.0)
                den = np.exp(lse - Ms) + np.exp(lse_i - Ms)
                with np.errstate(divide="ignore"):
                    new_lse = np.where(den > 0, Ms + np.log(np.where(den > 0, den, 1.0)), -np.inf)
                if kn.merge_lse_alias:
                    lse = new_lse                 # the state's lse overwritten before its own scale
                nl = np.where(np.isfinite(new_lse), new_lse, 0.0)
                w_a, w_b = np.exp(lse - nl), np.exp(lse_i - nl)
                if kn.combine_weights_fp16:
                    w_a = w_a.astype(np.float16).astype(np.float64)
                    w_b = w_b.astype(np.float16).astype(np.float64)
                o = o * w_a[:, None] + o_i * w_b[:, None]
                lse = new_lse
            o = o * vd
        outs[qt.j][rows // group, heads] = o
    return outs


# ---------------------------------------------------------------- entry
def _attention(p, kn):
    group = p.heads_q // p.heads_kv
    if p.call == "decode_step":            # the step's own K/V first (write-first)
        for b in range(p.batch):
            begin, end = (int(x) for x in p.positions[b])
            if begin < end:
                _write_cache(p, b, begin, end)
    reqs = _requests(p, kn)
    if reqs:
        plan = _plan(p, reqs, kn)
        ws_o, ws_l = _persistent_run(p, kn, reqs, plan, group)
        outs = _combine(p, kn, reqs, plan, ws_o, ws_l, group)
        for r, o in zip(reqs, outs):
            _store_rows(p.out, slice(r.row0 + r.begin, r.row0 + r.end), o, p.dtype, kn)
    if p.call == "chunked_prefill":
        for r in reqs:
            _write_cache(p, r.b, r.begin, r.end)
    return None


_CORRECT = Knobs()


def attention(p):
    return _attention(p, _CORRECT)


def _f(**kw):
    return replace(_CORRECT, **kw)


def fault_01(p): return _attention(p, _f(tile_count_unpacked=True))
def fault_02(p): return _attention(p, _f(mask_row_unpacked=True))
def fault_03(p): return _attention(p, _f(qmin_unpacked=True))
def fault_04(p): return _attention(p, _f(qmax_floor=True))
def fault_05(p): return _attention(p, _f(prefill_end_inclusive=True))
def fault_06(p): return _attention(p, _f(max_q_from_chunk=True))
def fault_07(p): return _attention(p, _f(decode_plan_reuse=True))
def fault_08(p): return _attention(p, _f(stale_semaphore=True))
def fault_09(p): return _attention(p, _f(ws_fixed_stride=True))
def fault_10(p): return _attention(p, _f(nsplit_first_tile=True))
def fault_11(p): return _attention(p, _f(lse_log2=True))
def fault_12(p): return _attention(p, _f(lse_unscaled_max=True))
def fault_13(p): return _attention(p, _f(lse_no_kdescale=True))
def fault_14(p): return _attention(p, _f(combine_weights_fp16=True))
def fault_15(p): return _attention(p, _f(merge_lse_alias=True))
def fault_16(p): return _attention(p, _f(sink_scaled=True))
def fault_17(p): return _attention(p, _f(sink_head_major=True))
def fault_18(p): return _attention(p, _f(fastpath_no_vdescale=True))
def fault_19(p): return _attention(p, _f(kdescale_after_cap=True))
def fault_20(p): return _attention(p, _f(softcap_rescale=True))
def fault_21(p): return _attention(p, _f(page_origin_lo=True))
def fault_22(p): return _attention(p, _f(fp16_epilogue_bf16=True))
def fault_23(p): return _attention(p, _f(fastpath_unnormalised=True))
def fault_24(p): return _attention(p, _f(fetch_add_new_value=True))


FAULTS = {
    'fault_01': "Plan: the query tiles per request are counted from the unpacked query rows, ceil(max_q / 80), instead of the GQA-packed rows, ceil(max_q * group / 80), so packed rows past the first max_q of each (request, kv head) are never computed and stay NaN (prefill and chunk calls, decode's prompt chunks included, when group > 1 and max_q * group > 80 rounded; decode steps fit one tile).",
    'fault_02': "Run mask: a packed row's query position is taken as begin + r (its packed row index) instead of begin + r // group, so query i of group head g is masked as position begin + i*group + g: it loses the oldest keys of its window and, in prefill, sees later keys of the tile's kv range (every mode whenever group > 1).",
    'fault_03': "Plan: a query tile's first query position is computed from the unpacked row number, begin + t*80, instead of begin + (t*80) // group, so for every query tile after the first (group > 1) the kv range starts too late (qmin - window_left too high) and its rows lose their oldest keys, or all keys once qmin passes qmax.",
    'fault_04': "Plan: a query tile's last query position is r1 // group - 1 instead of (r1 - 1) // group, which drops the query position whose packed rows are split across two tiles when 80 % group != 0 (group 3): that position's rows in the earlier tile lose their own (diagonal) key and any key right of it; groups 1, 2, 4, 8 unaffected.",
    'fault_05': "Prefill only: the kv range end of a query tile is clamped to seq_len - 1 (the last key's index used as an exclusive end) instead of seq_len, so the sequence's last key is in no split: the last row loses its own key (with a two-sided window every row that sees the last key loses it); chunk calls and decode steps unaffected.",
    'fault_06': "Plan grid height (FA3's max_seqlen_q) for chunked-prefill calls taken from p.chunk without the chunk == 0 (whole prompt as one chunk) case, so a decode schedule with chunk 0 plans zero query tiles for its prompt and the prompt rows stay NaN; every chunk >= 1 right.",
    'fault_07': 'Decode steps: the plan is cached keyed by the batch shape (batch, heads, query lengths, all 1) and reused at every later decode step (plan once, run many), so a step reuses the kv splits planned for the first step of that shape: later steps lose their newest keys, their own included (a plan left by an earlier scenario of the same shape is reused too); prefill and chunk calls unaffected.',
    'fault_08': "Persistent scheduler: the tile counter (semaphore) is a module-level buffer that is not zeroed at each launch, so once earlier calls have fetched from it, a call's dynamic fetches start past its last tile: every work tile after the first NUM_CTAS = 16 static ones is skipped in calls with more than 16 tiles (state-dependent: depends on the calls run before in the worker).",
    'fault_09': "Split workspace indexing: the run writes a work tile's partial (O, LSE) at slot qtile * max_splits + split while the combine reads slot o_indptr[qtile] + split; the two agree only while every query tile of the call has the same number of splits, otherwise merges read other tiles' partials or empty slots.",
    'fault_10': "Combine: each query tile's number of kv splits is read from the first query tile of its (request, kv head) instead of its own, so later tiles with more splits drop their last (newest) splits and tiles with fewer read neighbouring tiles' partials.",
    'fault_11': "LSE convention: the run writes each split's LSE in the log2 domain (max * score_unit * log2(e) + log2(l)), as its exp2 softmax keeps it, while the combine merges in natural log (exp(lse_i - lse_new)) with the sink as a natural-log logit: every merged row (more than one split, or a sink) is weighed wrongly.",
    'fault_12': 'LSE convention: the split LSE is stored with the raw row max of the unscaled scores, m + log(l), instead of m * softmax_scale + log(l) (FA3 keeps the max unscaled); merge and sink weights are wrong whenever the scale is not already in the scores, i.e. without soft-cap; soft-cap cases (capped scores already scaled, unit 1) are right.',
    'fault_13': 'FP8 KV without soft-cap: the split LSE uses softmax_scale alone, m * scale + log(l), although the scores are in units of scale * k_descale (the descale folded into the softmax scale), so merge and sink weights are off in FP8 rows with several splits or a sink; non-FP8 and soft-cap cases unaffected.',
    'fault_14': "Combine: the merge's two scale factors exp(lse_a - lse_new) and exp(lse_b - lse_new) are rounded to fp16 (half-precision registers in the merge kernel), a relative error up to 2^-11 in the weights of every merged row (several splits, or a sink); seen in fp32 runs only.",
    'fault_15': "merge_state_in_place aliasing: the running state's LSE is overwritten with the merged LSE before the running output's own scale exp(lse_a - lse_new) is computed, so the running output keeps weight 1: each further split is added on top instead of blended, and merging the sink (a state with O = 0) changes nothing.",
    'fault_16': 'Combine: the sink logit is multiplied by the score unit (softmax_scale, times k_descale with FP8), as if it were a raw q.k score, when soft-cap is off; with soft-cap on (score unit 1) the sink is right.',
    'fault_17': "Combine: the sink of packed row r is looked up for query head kvh * group + r // q_len (a head-major packing) instead of kvh * group + r % group; decode steps (q_len 1) right, prefill and chunk rows use other heads' sinks (sink cases, group > 1).",
    'fault_18': 'FP8 KV: the no-split fast path (a query tile with one kv split and no sinks writes O directly) does not multiply by v_descale, which only the combine kernel applies; rows going through the merge are right.',
    'fault_19': 'FP8 KV with soft-cap: k_descale is applied after the cap, cap * tanh(scale * q.k_code / cap) * k_descale, instead of being folded into the score before it, cap * tanh(scale * k_descale * q.k_code / cap); non-FP8 and uncapped cases unaffected.',
    'fault_20': "Soft-cap: the softmax still multiplies the capped scores by the score unit (softmax_scale, times k_descale with FP8) in its exp2, as the uncapped path does, although the cap's argument already contained it: weights exp(scale * cap * tanh(scale * q.k / cap)) (soft-cap cases, every mode).",
    'fault_21': "PAGED gathers (chunk calls' cached keys and decode steps): the positions of the gathered page rows are numbered from the window's first key lo instead of the first page's start (lo // page_size) * page_size, so when lo % page_size != 0 the rows kept by the position trim are the wrong ones (older keys labelled as newer, newest keys dropped).",
    'fault_22': "fp16 runs only: the output epilogue uses the other 16-bit type's converter, rounding the fp32 result to bf16 (nearest even) and storing that value in the fp16 output, so every fp16 output carries bf16 precision; fp32 and bf16 runs unaffected.",
    'fault_23': 'No-split fast path left unnormalised: when a query tile has a single kv split and no sinks, the run skips its division by the row sum l (expecting the combine to normalise), and the fast path that bypasses the combine stores the unnormalised O.',
    'fault_24': "Persistent loop: the tile counter's fetch-and-add is taken as returning the new value (++counter) instead of the old one, so in every call with more than NUM_CTAS = 16 work tiles the first dynamic tile (index 16) is never run and its split is missing from the merge.",
}
