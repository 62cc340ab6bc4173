"""Outside batch E: a sliding-window attention kernel in NumPy, laid out like a Triton/vLLM port.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_e.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_e.py:fault_07

Written from the public docs only (swa/dut_v2.h, dut/python/README.md, the numpy example,
harness/README.md, golden/README.md, the seeds). `attention` is the correct kernel; `fault_01` ..
`fault_24` run the same code with one change each; `FAULTS` is the answer key.

How it is organised (every accumulator is np.float32, as on the device):
- One tiled kernel, `_tiled`, serves whole-prompt prefill and every chunked-prefill call. Query
  tiles are 64 rows counted from the CALL's first row (not from position 0), and key tiles are 64
  keys counted from the first key the call can see (`kbase`: 0 in prefill, begin - window_left in a
  chunk), in one gathered key buffer: cached keys [kbase, begin) then the chunk's own keys. Each
  query tile picks the key tiles between its first row's lowest visible key and its last row's
  highest one; a tile is loaded padded with zeros (Triton's other=0) and masked by bounds, band and
  (where given) the ATB mask. With a mask the mask alone decides visibility inside a tile: SWA_NORM
  by absolute positions, SWA_COMPRESS by the tile walk of dut_v2.h (whole-prompt prefill only; in
  chunks the band decides).
- Online softmax in natural exp. The sink is a virtual key column that seeds the running state
  (m = sink, l = 1, acc = 0), so a row that sees no key still outputs 0.
- Decode is FlashDecoding: the step writes its own K/V first, then the visible keys [pos - wl, pos]
  are gathered and cut into NUM_SPLITS = 4 equal splits, each reduced to (m, l, acc) with the GQA
  group packed into the rows of one KV head (Hkv x group), then merged by log-sum-exp, where the
  sink joins the merge once.
- Every cache kind goes through one vLLM-style slot mapping: a flat row of the cache viewed as
  [-1, heads_kv, head_size] (b * slots + slot for the rings and LINEAR, page * page_size + offset
  for PAGED through the block table); the store is reshape_and_cache over that mapping.
- FP8: an arithmetic OCP codec (frexp exponent, rint mantissa, saturation), quotient in fp32.
"""
import numpy as np

Q_TILE = 64
K_TILE = 64
NUM_SPLITS = 4

FAULTS = {
    "fault_01": "Chunked-prefill calls (decode's prompt chunks included): the query positions used by the tile walk, the band test and the SWA_NORM mask rows are the rows' indices within the call (0..n-1) instead of begin + index, so from chunk 1 on every row is placed at the chunk's start of the sequence (keys picked and masked for the wrong positions, most rows see nothing or too little); chunk 0, prefill and decode steps unaffected.",
    "fault_02": "Key-tile range of a query tile computed in absolute key positions (first_key // 64 .. last_key // 64) instead of relative to the gathered buffer's first key kbase ((key - kbase) // 64); right in prefill (kbase 0), wrong in chunked-prefill calls once kbase = begin - window_left reaches 64 (tiles past the buffer come back empty: rows lose keys or see none and output 0); unbounded-left windows keep kbase 0 and are unaffected.",
    "fault_03": "Key-tile upper bound of a query tile taken from its FIRST row (first_row + window_right) instead of its last row: rows whose highest visible key lies in a later 64-key tile lose those keys (their own diagonal keys in chunks where window_left + chunk rows cross a 64-key tile of the buffer; keys right of the query in two-sided prefill for the last rows of each 64-row tile).",
    "fault_04": "Band test of the tiled kernel with an exclusive left edge, i - j < window_left instead of <= (W - 1 keys, the oldest dropped), in prefill and chunked-prefill calls without a mask (with a mask the mask decides); decode steps (gather by range) and unbounded-left windows unaffected; with W = 1 every row sees nothing and outputs 0 (or only the sink share).",
    "fault_05": "Padded key tile not bounds-masked: the last, partial 64-key tile is loaded with zeros past the buffer's end (Triton other=0) but the `index < n_keys` mask is omitted, so padded slots count as keys with score 0 and value 0 at positions past the end; only visible where the band lets a row see past the sequence's end: two-sided prefill (rows within window_right of the end), and the last row of the longest sequence with a SWA_NORM mask (the clamped mask column is its diagonal).",
    "fault_06": "Online-softmax rescale factor with its sign flipped, alpha = exp(m_new - m_old) instead of exp(m_old - m_new), applied to l and acc in the tiled kernel (prefill and chunk calls): wrong whenever a later key tile (or the first tile over a sink's seeded max) raises the running max; single-tile rows without sinks unaffected, decode splits unaffected.",
    "fault_07": "SWA_NORM mask read transposed, mask[key, query] instead of mask[query, key] (a column-major view of the row-major tensor), in prefill and chunked-prefill calls with mask swa-norm: future keys of the picked tiles become visible and past window keys hidden; decode (band only) unaffected.",
    "fault_08": "SWA_COMPRESS tile walk (whole-prompt prefill): rule 3 (fully visible, no mask read) tested with the tile's MINIMUM pair distance (d - (B - 1) < W) instead of its maximum (d + B - 1 < W), so every window-boundary tile is taken as fully visible and keys up to B - 1 positions beyond the window are attended.",
    "fault_09": "Running max taken over the UNCAPPED scores while the exponentials use the capped ones (every mode: tiles and decode splits): exact while the shift stays small, but with large logits the uncapped max exceeds the capped scores by hundreds, every exp underflows and the row outputs 0 (or only the sink share); soft-cap cases with large-logit inputs only.",
    "fault_10": "Soft-cap reciprocal 1/cap held in fp16 (the kernel takes it as a half argument) and multiplied in: scores are cap * tanh(s * fp16(1/cap)) in every mode; a relative error of ~2e-4 in the scores, seen in fp32 soft-cap runs (hidden by rounding in bf16, mostly in fp16).",
    "fault_11": "Sink as a virtual key column seeded with l = 0 instead of l = exp(sink - sink) = 1 (prefill and chunked-prefill calls): the sink still sets the running max but never enters the denominator, so rows give the no-sink result; decode steps (merge adds the sink) unaffected; sink cases only.",
    "fault_12": "FlashDecoding merge (decode steps only) without the sink: the splits' log-sum-exp merge forgets the sink in the max and the denominator, so decode rows give the no-sink result; prefill and chunk calls right; sink cases only.",
    "fault_13": "FlashDecoding split size n // 4 (floor) instead of ceil(n / 4) (decode steps only): the last n mod 4 gathered keys, the newest ones including the step's own token, are in no split; a step with fewer than 4 visible keys sees none and outputs 0 (or only the sink).",
    "fault_14": "PAGED decode-step write: the slot of the step's token is computed from the page of the last written position (page_table[b, (pos - 1) // page_size]) and the new offset pos % page_size, so a step that opens a new page writes into offset 0 of the previous page (overwriting position pos - page_size) and reads its own key from the new page, which holds zeros or a previous owner's data; paged decode with a step at pos % page_size == 0 (every step for page_size 1).",
    "fault_15": "RING_COMPACT slot mapping uses base[0] (the first sequence's base) for every sequence, on reads and writes alike: outputs stay right (one consistent ring per sequence) but slots hold positions shifted by base[b] - base[0]; only the cache check sees it, in ring-compact batches whose bases differ mod W.",
    "fault_16": "RING_COMPACT base at the first write computed from the whole prompt length (seq_lens[b] minus decode steps) instead of the number of tokens of that first write (the first chunk): base = max(0, prompt - W); whenever the prompt goes through more than one chunk and is longer than W, chunk rows below base are never stored and every slot is shifted (the cache check fails, later reads come back from the wrong slots).",
    "fault_17": "Ring and LINEAR caches addressed as [slots, batch] (flat row slot * batch + b) instead of [batch, slots] (b * slots + slot), consistently on reads and writes: outputs right, every batch of more than one sequence leaves its K/V at the wrong places (cache check only); paged unaffected.",
    "fault_18": "LINEAR cache write restricted to the ring's storable range, the last window_left + 1 rows of each call (lowest = max(begin, end - W) as for a ring) instead of every row: outputs right with a window (older rows are never read again) but the cache check finds unwritten slots whenever a call has more than W rows; with an unbounded window (W = 0) nothing is stored and later calls read zeros.",
    "fault_19": "FP8 encoder without saturation (every mode, FP8 cases): a quotient beyond the largest finite value becomes NaN (e4m3, code 0x7f) or inf (e5m2) instead of +-largest; only the scenarios whose descales clip the largest keys (the saturating seeds) see it, as NaN outputs and wrong cache bytes.",
    "fault_20": "FP8 cache read path: V codes read back from the cache are decoded with k_descale instead of v_descale (chunk calls' cached keys and every decode step); the quantise-on-load of prefill and of the chunk's own rows, and the cache bytes, are right.",
    "fault_21": "Chunked-prefill calls (decode's prompt chunks included): the K/V pointer of the chunk is not advanced by the chunk's start (rows seq_offsets[b] + 0..n-1 instead of seq_offsets[b] + begin..end-1) while Q and O are, so from chunk 1 on the chunk attends to, and stores into the cache, the first rows' K/V; chunk 0, prefill and decode steps' own token unaffected.",
    "fault_22": "PAGED chunk write: whether to store is decided once per call from the first row's page (page_table[b, begin // page_size] < 0 skips the whole chunk) instead of row by row; a chunk longer than the window whose first rows fall in untaken pages stores none of its rows, so later calls read zeros or a previous owner's data and the cache check fails.",
    "fault_23": "SWA_NORM mask in chunked-prefill calls: the mask column is the key's index in the gathered buffer (position - kbase, relative to the call's first visible key) instead of its absolute position; prefill (kbase 0) unaffected, chunks from the point where begin - window_left > 0 read the band at shifted columns.",
    "fault_24": "GQA unpacking of the FlashDecoding result (decode steps only): the [heads_kv, group, D] result is transposed to [group, heads_kv, D] before it is flattened, so query head kv * group + g's output lands at head g * heads_kv + kv; identical when heads_kv == 1 or group == 1.",
}


def describe():
    return {"name": "kernel_batch_e", "query_tile": Q_TILE, "key_tile": K_TILE}


# ---------------------------------------------------------------------------------------------
# storage dtypes
def _load(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def _store(out, rows, values, dtype):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    elif dtype == "fp16":
        out[rows] = values.astype(np.float16)
    else:
        out[rows] = values


# ---------------------------------------------------------------------------------------------
# FP8 (OCP e4m3fn / e5m2), arithmetic codec
_FMT = {"fp8-e4m3": (3, 7, 448.0), "fp8-e5m2": (2, 15, 57344.0)}
_GRIDS = {}


def _grid(fmt):
    if fmt not in _GRIDS:
        mb, bias, _ = _FMT[fmt]
        c = np.arange(256)
        e, m = (c >> mb) & ((1 << (7 - mb)) - 1), c & ((1 << mb) - 1)
        val = np.where(e == 0, m * 2.0 ** (1 - bias - mb), (1.0 + m / 2.0 ** mb) * np.exp2(e - bias))
        if fmt == "fp8-e4m3":
            val = np.where((e == 15) & (m == 7), np.nan, val)
        else:
            val = np.where(e == 31, np.where(m == 0, np.inf, np.nan), val)
        _GRIDS[fmt] = np.where(c & 0x80, -val, val)
    return _GRIDS[fmt]


def _fp8_encode(x, fmt, fault=None):
    """Codes of x (float32 quotients): nearest, ties to even, saturating."""
    mb, bias, largest = _FMT[fmt]
    with np.errstate(all="ignore"):
        a = np.abs(x.astype(np.float64))
        if fault != "fault_19":
            a = np.minimum(a, largest)
        _, e = np.frexp(a)
        ex = np.maximum(e - 1, 1 - bias)
        quantum = np.ldexp(1.0, ex - mb)
        r = np.rint(a / quantum) * quantum
        if fault != "fault_19":
            r = np.minimum(r, largest)
        _, e2 = np.frexp(r)
        ex2 = e2 - 1
        sub = ex2 < 1 - bias
        field = np.where(sub, 0, ex2 + bias)
        mant = np.where(sub, r / 2.0 ** (1 - bias - mb), r / np.ldexp(1.0, ex2 - mb) - (1 << mb))
        code = np.where(r == 0, 0, (field << mb) | np.nan_to_num(mant).astype(np.int64))
        bad = ~np.isfinite(r) | (r > largest)
        code = np.where(bad, 0x7F if fmt == "fp8-e4m3" else 0x7C, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def _fp8_decode(codes, fmt, descale):
    return (_grid(fmt)[codes] * np.float64(descale)).astype(np.float32)


def _quantise(x, p, which, fault):
    """x (float32) as attention reads it: fp8(x / descale) * descale, or x itself."""
    if p.kv_format == "dtype":
        return x
    d = p.k_descale if which == "k" else p.v_descale
    return _fp8_decode(_fp8_encode(x / np.float32(d), p.kv_format, fault), p.kv_format, d)


# ---------------------------------------------------------------------------------------------
# KV cache: one slot mapping for every policy
def _slot_mapping(p, b, pos, fault, page_of=None):
    """Flat cache rows (cache viewed as [-1, heads_kv, head_size]) of positions pos; -1: no page."""
    c = p.cache
    pos = np.asarray(pos, dtype=np.int64)
    if c.policy == "paged":
        ps = int(c.page_size)
        lp = pos // ps if page_of is None else page_of
        page = c.page_table[b, lp].astype(np.int64)
        return np.where(page >= 0, page * ps + pos % ps, -1)
    slots = int(c.slots)
    if c.policy == "linear":
        s = pos
    elif c.policy == "ring-modulo":
        s = pos % slots
    else:
        base = int(c.base[0]) if fault == "fault_15" else int(c.base[b])
        s = (pos - base) % slots
    if fault == "fault_17":
        return s * c.k.shape[0] + b
    return b * slots + s


def _rows_of(cache_t, flat):
    d1 = cache_t.shape[1]
    return flat // d1, flat % d1


def _cache_gather(p, b, pos, fault):
    c = p.cache
    first, second = _rows_of(c.k, _slot_mapping(p, b, pos, fault))
    k, v = c.k[first, second], c.v[first, second]
    if c.kv_format != "dtype":
        vd = p.k_descale if fault == "fault_20" else p.v_descale
        return _fp8_decode(k, c.kv_format, p.k_descale), _fp8_decode(v, c.kv_format, vd)
    return _load(k, p.dtype), _load(v, p.dtype)


def _reshape_and_cache(p, b, begin, end, rows, fault, page_of=None):
    """Stores positions [begin, end) of sequence b (input rows `rows`) into the cache."""
    c = p.cache
    if c.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
        first = end - begin
        if fault == "fault_16":
            first = int(p.seq_lens[b]) - (int(p.decode_steps) if p.mode == "decode" else 0)
        c.base[b] = max(0, first - int(c.slots))
    if c.policy in ("ring-modulo", "ring-compact"):
        lowest = max(begin, end - int(c.slots), int(c.base[b]))
    elif c.policy == "linear" and fault == "fault_18":
        lowest = max(begin, end - (p.window_left + 1))
    else:
        lowest = begin
    pos = np.arange(lowest, end)
    src = rows[lowest - begin:]
    flat = _slot_mapping(p, b, pos, fault, page_of)
    keep = flat >= 0
    if fault == "fault_22" and c.policy == "paged" and len(flat):
        keep = np.full(len(flat), bool(flat[0] >= 0))
    if keep.any():
        first, second = _rows_of(c.k, flat[keep])
        k, v = p.k[src[keep]], p.v[src[keep]]
        if c.kv_format != "dtype":
            k = _fp8_encode(_load(k, p.dtype) / np.float32(p.k_descale), c.kv_format, fault)
            v = _fp8_encode(_load(v, p.dtype) / np.float32(p.v_descale), c.kv_format, fault)
        c.k[first, second] = k
        c.v[first, second] = v
    c.tokens_written[b] = end


# ---------------------------------------------------------------------------------------------
# scores and softmax pieces
def _cap(s, p, fault):
    if p.softcap > 0:
        inv = np.float32(1.0 / p.softcap)
        if fault == "fault_10":
            inv = np.float32(np.float16(1.0 / p.softcap))
        s = np.float32(p.softcap) * np.tanh(s * inv)
    return s


def _compress_visible(p, ip, jp, fault):
    B, T, W = int(p.mask_block), int(p.mask_effective_window), p.window_left + 1
    qt, kt = ip[:, None] // B, jp[None, :] // B
    r, c = ip[:, None] % B, jp[None, :] % B
    d = (qt - kt) * B
    hidden = (kt > qt) | (d - (B - 1) >= W)
    diag = qt == kt
    if fault == "fault_08":
        full = ~diag & (d - (B - 1) < W)
    else:
        full = ~diag & (d + B - 1 < W)
    row = np.where(diag, r, d - (W - T) + r)
    read = ~hidden & ~full
    row = np.clip(np.where(read, row, 0), 0, p.mask.shape[0] - 1)
    col = np.clip(np.broadcast_to(c, row.shape), 0, p.mask.shape[1] - 1)
    return ~hidden & (full | (p.mask[row, col] == 0))


def _visible(p, ip, jp, jidx, nk, kbase, fault):
    """[rows, keys] visibility of a tile: bounds, then the mask or the band."""
    inb = jidx < nk
    if fault == "fault_05":
        inb = np.ones_like(inb)
    if p.mask is not None and p.mask_format == "swa-norm":
        L = p.mask.shape[0]
        cols = jp - kbase if fault == "fault_23" else jp
        cols = np.clip(cols, 0, L - 1)
        rows = np.clip(ip, 0, L - 1)
        m = p.mask[cols][:, rows].T if fault == "fault_07" else p.mask[rows][:, cols]
        return inb[None, :] & (m == 0)
    if p.mask is not None and p.mask_format == "swa-compress" and p.call == "prefill":
        return inb[None, :] & _compress_visible(p, ip, jp, fault)
    dist = ip[:, None] - jp[None, :]
    vis = np.broadcast_to(inb[None, :], dist.shape).copy()
    if p.window_left >= 0:
        vis &= (dist < p.window_left) if fault == "fault_04" else (dist <= p.window_left)
    if p.window_right >= 0:
        vis &= -dist <= p.window_right
    return vis


# ---------------------------------------------------------------------------------------------
# the tiled kernel: prefill and chunked prefill
def _tiled(p, q, qpos, k, v, kbase, fault):
    """q [n, Hq, D], k/v [nk, Hkv, D] float32; key buffer index t is position kbase + t."""
    n, hq, dim = q.shape
    nk = k.shape[0]
    kv_head = np.arange(hq) // (hq // p.heads_kv)
    scale = np.float32(p.scale)
    wl, wr = p.window_left, p.window_right
    sinks = None if p.sinks is None else np.asarray(p.sinks, dtype=np.float32)
    out = np.zeros((n, hq, dim), dtype=np.float32)
    for t0 in range(0, n, Q_TILE):
        t1 = min(t0 + Q_TILE, n)
        ip = np.arange(t0, t1) if fault == "fault_01" else qpos[t0:t1]
        qt = q[t0:t1].transpose(1, 0, 2)  # [Hq, r, D]
        first_key = max(kbase, ip[0] - wl) if wl >= 0 else kbase
        top = ip[0] if fault == "fault_03" else ip[-1]
        last_key = min(kbase + nk - 1, top + wr) if wr >= 0 else kbase + nk - 1
        if fault == "fault_02":
            j0, j1 = first_key // K_TILE, last_key // K_TILE
        else:
            j0, j1 = (first_key - kbase) // K_TILE, (last_key - kbase) // K_TILE
        r = t1 - t0
        if sinks is None:
            m = np.full((hq, r), -np.inf, dtype=np.float32)
            l = np.zeros((hq, r), dtype=np.float32)
        else:
            m = np.repeat(sinks[:, None], r, axis=1)
            l = np.full((hq, r), 0.0 if fault == "fault_11" else 1.0, dtype=np.float32)
        acc = np.zeros((hq, r, dim), dtype=np.float32)
        for jt in range(j0, j1 + 1):
            a = jt * K_TILE
            jidx = np.arange(a, a + K_TILE)
            kt = np.zeros((K_TILE, hq, dim), dtype=np.float32)
            vt = np.zeros((K_TILE, hq, dim), dtype=np.float32)
            got = k[a:a + K_TILE].shape[0] if 0 <= a < nk else 0
            if got:
                kt[:got] = k[a:a + got][:, kv_head]
                vt[:got] = v[a:a + got][:, kv_head]
            vis = _visible(p, ip, kbase + jidx, jidx, nk, kbase, fault)
            if not vis.any():
                continue
            raw = np.matmul(qt, kt.transpose(1, 2, 0)) * scale  # [Hq, r, K_TILE]
            s = np.where(vis[None], _cap(raw, p, fault), -np.inf).astype(np.float32)
            tile_max = np.where(vis[None], raw, -np.inf).max(axis=2) if fault == "fault_09" else s.max(axis=2)
            m_new = np.maximum(m, tile_max)
            m_safe = np.where(np.isfinite(m_new), m_new, np.float32(0))
            with np.errstate(over="ignore", invalid="ignore"):
                if fault == "fault_06":
                    alpha = np.where(np.isneginf(m), 0, np.exp(m_safe - m)).astype(np.float32)
                else:
                    alpha = np.where(np.isneginf(m), 0, np.exp(m - m_safe)).astype(np.float32)
            pexp = np.exp(s - m_safe[..., None]).astype(np.float32)
            l = l * alpha + pexp.sum(axis=2, dtype=np.float32)
            acc = acc * alpha[..., None] + np.matmul(pexp, vt.transpose(1, 0, 2))
            m = m_new
        with np.errstate(invalid="ignore", divide="ignore"):
            out[t0:t1] = (acc / np.where(l > 0, l, 1)[..., None]).transpose(1, 0, 2)
    return out


def _fresh(p, rows, fault):
    k = _quantise(_load(p.k[rows], p.dtype), p, "k", fault)
    v = _quantise(_load(p.v[rows], p.dtype), p, "v", fault)
    return k, v


def _prefill(p, b, fault):
    off, n = int(p.seq_offsets[b]), int(p.seq_lens[b])
    rows = off + np.arange(n)
    k, v = _fresh(p, rows, fault)
    q = _load(p.q[rows], p.dtype)
    _store(p.out, rows, _tiled(p, q, np.arange(n), k, v, 0, fault), p.dtype)


def _chunk(p, b, begin, end, fault):
    off = int(p.seq_offsets[b])
    wl = p.window_left
    kbase = max(0, begin - wl) if wl >= 0 else 0
    ck, cv = _cache_gather(p, b, np.arange(kbase, begin), fault)
    qrows = off + np.arange(begin, end)
    kvrows = off + np.arange(0, end - begin) if fault == "fault_21" else qrows
    nk, nv = _fresh(p, kvrows, fault)
    k, v = np.concatenate([ck, nk]), np.concatenate([cv, nv])
    q = _load(p.q[qrows], p.dtype)
    _store(p.out, qrows, _tiled(p, q, np.arange(begin, end), k, v, kbase, fault), p.dtype)
    _reshape_and_cache(p, b, begin, end, kvrows, fault)


# ---------------------------------------------------------------------------------------------
# FlashDecoding
def _decode(p, b, pos, fault):
    off = int(p.seq_offsets[b])
    page_of = None
    if fault == "fault_14" and p.cache.policy == "paged":
        page_of = np.array([(pos - 1) // int(p.cache.page_size)])
    _reshape_and_cache(p, b, pos, pos + 1, np.array([off + pos]), fault, page_of)
    wl = p.window_left
    lo = max(0, pos - wl) if wl >= 0 else 0
    k, v = _cache_gather(p, b, np.arange(lo, pos + 1), fault)  # [n, Hkv, D]
    hkv, hq = p.heads_kv, p.heads_q
    group = hq // hkv
    q = _load(p.q[off + pos], p.dtype).reshape(hkv, group, -1)  # GQA heads packed per KV head
    kh, vh = k.transpose(1, 0, 2), v.transpose(1, 0, 2)  # [Hkv, n, D]
    n = k.shape[0]
    size = n // NUM_SPLITS if fault == "fault_13" else -(-n // NUM_SPLITS)
    scale = np.float32(p.scale)
    ms, ls, accs = [], [], []
    for sp in range(NUM_SPLITS):
        a, e = sp * size, min((sp + 1) * size, n)
        if a >= e:
            continue
        raw = np.matmul(q, kh[:, a:e].transpose(0, 2, 1)) * scale  # [Hkv, group, e - a]
        s = _cap(raw, p, fault).astype(np.float32)
        mx = (raw if fault == "fault_09" else s).max(axis=2)
        w = np.exp(s - mx[..., None]).astype(np.float32)
        ms.append(mx)
        ls.append(w.sum(axis=2, dtype=np.float32))
        accs.append(np.matmul(w, vh[:, a:e]))
    dim = q.shape[2]
    sink = None
    if p.sinks is not None and fault != "fault_12":
        sink = np.asarray(p.sinks, dtype=np.float32).reshape(hkv, group)
    if ms:
        big_m = np.max(np.stack(ms), axis=0)
        if sink is not None:
            big_m = np.maximum(big_m, sink)
        num = np.zeros((hkv, group, dim), dtype=np.float32)
        den = np.zeros((hkv, group), dtype=np.float32)
        for mx, li, ai in zip(ms, ls, accs):
            wgt = np.exp(mx - big_m).astype(np.float32)
            num += ai * wgt[..., None]
            den += li * wgt
        if sink is not None:
            den += np.exp(sink - big_m).astype(np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            o = num / np.where(den > 0, den, 1)[..., None]
    else:
        o = np.zeros((hkv, group, dim), dtype=np.float32)
    if fault == "fault_24":
        o = o.transpose(1, 0, 2)
    _store(p.out, slice(off + pos, off + pos + 1), o.reshape(1, hq, dim), p.dtype)


# ---------------------------------------------------------------------------------------------
def _run(p, fault=None):
    with np.errstate(all="ignore"):  # a faulty kernel's inf/NaN arithmetic is judged, not printed
        _calls(p, fault)
    return None


def _calls(p, fault):
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        if p.call == "prefill":
            _prefill(p, b, fault)
        elif p.call == "chunked_prefill":
            _chunk(p, b, begin, end, fault)
        else:
            for pos in range(begin, end):
                _decode(p, b, pos, fault)


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
