"""Sliding-window attention for the swa-harness python: DUT, ported from Apple MLX's Metal kernels.

    swa-harness run scenarios/ci.yaml --dut python:$PWD/dut/external/faults/outside/kernel_batch_l.py:attention

The layout follows MLX (mlx/backend/metal/kernels/steel/attn and sdpa_vector.h, plus mlx-lm's
KV caches), re-expressed in NumPy:

  * PREFILL and CHUNKED_PREFILL run "steel attention": one threadgroup per (query tile of BQ = 32
    rows, query head); the key buffer is walked in BK-key blocks (BK = 16 for head_dim >= 128, 32
    below, as MLX picks), from the block holding the tile's first visible key up to kb_lim. The
    query tile is aligned to the key buffer with MLX's qL_off = kL - qL convention (the chunk's
    queries are the buffer's last rows). Q is pre-multiplied by scale * log2(e) and the softmax runs
    in base 2. The accumulator is kept NORMALISED after every block (the FlashAttention-1 update,
    O <- (alpha l O + P V) / l'), with (m, l) per row.
  * CHUNKED_PREFILL builds the key buffer as mlx-lm does for a multi-token cache update: the
    cache's held keys in temporal order (oldest visible first), then the chunk's own keys.
  * DECODE runs "sdpa_vector": BN = 32 simdgroups, simdgroup g taking keys g, g + BN, g + 2 BN ...
    (strided, each with its own online state), merged across simdgroups at the end. From 1024
    keys on it is "sdpa_vector_2pass": 32 blocks of BN simdgroups interleaved over the keys, a
    partial (o, l, m) per block, and a second pass that merges the blocks. A ring cache is walked
    slot by slot (attention is order-free), a linear or paged one position by position.
  * KV caches through one adapter (slot/page arithmetic, FP8 codes); FP8 via a port of c10's
    bit-level fp8 encoders (e4m3fn / e5m2, made saturating) and a 256-entry decode table.
  * ATB masks: SWA_NORM gathered by absolute (query, key) position; SWA_COMPRESS expanded element by
    element through the [512, 512] tile-walk rule with the operator's mask_block.
  * Sinks seed the softmax state (simdgroup 0 only in decode); soft-cap is applied to the natural
    score, which in this kernel lives in the log2 domain.

Each fault_NN below is this kernel with one porting bug switched on; FAULTS at the end is the key.
"""
import numpy as np

LOG2E = 1.4426950408889634
BQ = 32           # steel query tile
BN = 32           # sdpa_vector simdgroups per threadgroup
TWO_PASS_BLOCKS = 32
TWO_PASS_MIN_KEYS = 1024
MMA_K = 8         # simdgroup_matrix k-step (only used for the accumulator-type variant)
MASK_SIZE = 512   # SWA_COMPRESS mask tensor side


def describe():
    return {"name": "mlx_steel_port", "query_tile": BQ}


# --------------------------------------------------------------------------------------------
# storage dtypes
# --------------------------------------------------------------------------------------------
def _to_f32(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def _round_to_storage(x, dtype):
    """float32 -> float32 holding the nearest storage value (RNE)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return x


def _store_out(out, rows, values, dtype):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    elif dtype == "fp16":
        out[rows] = values.astype(np.float16)
    else:
        out[rows] = values


# --------------------------------------------------------------------------------------------
# FP8: c10-style bit encoders (Float8_e4m3fn.h / Float8_e5m2.h), saturating; table decoder
# --------------------------------------------------------------------------------------------
def _f32_bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


_FP8_SPEC = {
    #             mant bits, bias, largest, smallest-normal exponent field (fp32), denorm magic exp
    "fp8-e4m3": dict(mbits=3, bias=7, largest=448.0, min_normal=121, denorm=141),
    "fp8-e5m2": dict(mbits=2, bias=15, largest=57344.0, min_normal=113, denorm=134),
}


def _fp8_encode(x, fmt, variant):
    """uint8 codes of float32 x (nearest, ties to even, saturating)."""
    s = _FP8_SPEC[fmt]
    largest = s["largest"]
    if fmt == "fp8-e4m3" and variant.fnuz_e4m3_max:
        largest = 240.0
    x = np.ascontiguousarray(x, dtype=np.float32)
    f = x.view(np.uint32).astype(np.int64)
    sign = f & 0x80000000
    mag = f ^ sign
    mag = np.minimum(mag, _f32_bits(largest))           # saturate (+-inf too); NaN is not an input
    shift = 23 - s["mbits"]                             # fp32 mantissa bits dropped
    # normal path: rebias the exponent and round the mantissa to nearest even on the bits
    if variant.fp8_truncate:
        rounded = mag + ((s["bias"] - 127) << 23)
    else:
        mant_odd = (mag >> shift) & 1
        rounded = mag + ((s["bias"] - 127) << 23) + ((1 << (shift - 1)) - 1) + mant_odd
    normal_code = (rounded >> shift) & 0x7F
    # subnormal path: add the magic 2^(denorm-127); the FPU's rounding leaves the code in the low bits
    magic = np.float32(np.array(s["denorm"] << 23, dtype=np.uint32).view(np.float32))
    small_val = mag.astype(np.uint32).view(np.float32) + magic
    sub_code = small_val.view(np.uint32).astype(np.int64) - (s["denorm"] << 23)
    code = np.where(mag < (s["min_normal"] << 23), sub_code, normal_code)
    return (code | (sign >> 24)).astype(np.uint8)


def _fp8_table(fmt):
    s = _FP8_SPEC[fmt]
    mb, bias = s["mbits"], s["bias"]
    c = np.arange(256)
    e, m = (c >> mb) & ((1 << (7 - mb)) - 1), c & ((1 << mb) - 1)
    val = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mb),
                   np.ldexp(((1 << mb) + m).astype(np.float64), e - bias - mb))
    if fmt == "fp8-e4m3":
        val = np.where((c & 0x7F) == 0x7F, np.nan, val)
    else:
        val = np.where(e == 31, np.where(m == 0, np.inf, np.nan), val)
    val = np.where(c & 0x80, -val, val)
    return val.astype(np.float32)


_FP8_TABLES = {f: _fp8_table(f) for f in _FP8_SPEC}


def _fp8_dequant(codes, fmt, descale):
    return _FP8_TABLES[fmt][codes] * np.float32(descale)


def _quant_on_load(x32, fmt, descale, variant):
    """What attention reads for a K/V value that has not been through the cache."""
    return _fp8_dequant(_fp8_encode(x32 / np.float32(descale), fmt, variant), fmt, descale)


# --------------------------------------------------------------------------------------------
# variant switches (all False: the correct kernel)
# --------------------------------------------------------------------------------------------
class _Variant:
    FLAGS = ("kb_lim_floor", "kb_start_last_row", "qloff_absolute", "fa1_drop_lold",
             "softcap_log2_domain", "sink_natural_log", "sink_every_simdgroup", "pad_lane_zero_key",
             "merge_sum_unscaled", "ring_assumed_full", "ring_trim_head", "trim_all_policies",
             "compact_base_prompt", "compact_base_memo", "page_table_pool_stride",
             "paged_write_unheld", "page_pow2", "tokens_written_stored", "cache_bhsd",
             "norm_mask_call_row", "compress_row_minus_t", "compress_hidden_tile_distance",
             "fnuz_e4m3_max", "fp8_truncate", "mma_half_accum", "decode_left_literal",
             "decode_uniform_batch", "chunk_rows_from_index", "two_sided_lim_causal",
             "sinks_by_kv_head", "bk_plan_dim32", "mask_additive")

    def __init__(self, **on):
        for f in self.FLAGS:
            setattr(self, f, False)
        for k, v in on.items():
            if k not in self.FLAGS:
                raise ValueError(k)
            setattr(self, k, v)


_CORRECT = _Variant()
_COMPACT_BASE_MEMO = {}   # used by the compact_base_memo variant only


# --------------------------------------------------------------------------------------------
# masks: (query positions, key positions) -> visible, absolute positions inside the sequence
# --------------------------------------------------------------------------------------------
def _band(qpos, kpos, left, right):
    d = qpos[:, None] - kpos[None, :]
    vis = np.ones(d.shape, dtype=bool)
    if left >= 0:
        vis &= d <= left
    if right >= 0:
        vis &= -d <= right
    return vis


def _compress_visible(mask, qpos, kpos, W, B, T, variant):
    qt, kt = qpos[:, None] // B, kpos[None, :] // B
    r, c = qpos[:, None] % B, kpos[None, :] % B
    d = (qt - kt) * B
    if variant.compress_hidden_tile_distance:
        hidden = (kt > qt) | (d >= W)
    else:
        hidden = (kt > qt) | (d - (B - 1) >= W)          # rule 1: nearest pair already out
    diag = qt == kt                                      # rule 2
    full = (kt < qt) & (d + (B - 1) < W)                 # rule 3: farthest pair still in
    shift = T if variant.compress_row_minus_t else (W - T)
    row4 = d - shift + r                                 # rule 4
    row = np.where(diag, r, np.clip(row4, 0, MASK_SIZE - 1))
    col = np.broadcast_to(c, row.shape)
    read = mask[row, col] == 0
    return ~hidden & (diag & read | ~diag & (full | read))


class _MaskPlan:
    """Per call: how a (query block, key block) pair's ATB mask is turned into visibility."""

    def __init__(self, p, variant):
        self.kind = p.mask_format if p.mask is not None else "none"
        self.mask = p.mask
        self.variant = variant
        if self.kind == "swa-compress":
            self.W = int(p.window_left) + 1
            self.T = int(p.mask_effective_window)
            self.B = int(p.mask_block)

    def visible(self, qpos, kpos):
        if self.kind == "none":
            return None
        if self.kind == "swa-norm":
            return self.mask[qpos[:, None], kpos[None, :]] == 0
        return _compress_visible(self.mask, qpos, kpos, self.W, self.B, self.T, self.variant)

    def additive(self, qpos, kpos):
        """The mask_additive variant: the mask's values added to the scores (MLX's float masks)."""
        if self.kind == "swa-norm":
            return self.mask[qpos[:, None], kpos[None, :]]
        return None


# --------------------------------------------------------------------------------------------
# the KV cache adapter
# --------------------------------------------------------------------------------------------
class _Cache:
    def __init__(self, p, variant):
        c = p.cache
        self.c, self.p, self.variant = c, p, variant
        self.policy = c.policy
        self.fmt = c.kv_format
        self.slots = int(c.slots)
        self.W = int(p.window_left) + 1
        self.k, self.v = c.k, c.v
        if variant.cache_bhsd:      # mlx-lm's [B, n_kv_heads, S, D] cache layout
            n0, n1, h, d = c.k.shape
            self.k = c.k.reshape(n0, h, n1, d).transpose(0, 2, 1, 3)
            self.v = c.v.reshape(n0, h, n1, d).transpose(0, 2, 1, 3)

    # where positions live: (first index, second index) into k/v
    def locate(self, b, pos):
        c = self.c
        if self.policy == "paged":
            ps = int(c.page_size)
            if self.variant.page_pow2:
                sh = ps.bit_length() - 1
                lp, off = pos >> sh, pos & (ps - 1)
            else:
                lp, off = pos // ps, pos % ps
            if self.variant.page_table_pool_stride:
                page = np.asarray(c.page_table).reshape(-1)[b * int(self.p.pool_pages) + lp]
            else:
                page = c.page_table[b, lp]
            return np.asarray(page, dtype=np.int64), off
        first = np.full(pos.shape, b, dtype=np.int64)
        if self.policy == "linear":
            return first, pos
        base = self.base(b) if self.policy == "ring-compact" else 0
        return first, (pos - base) % self.slots

    def base(self, b):
        if self.variant.compact_base_memo:
            return _COMPACT_BASE_MEMO.get(b, int(self.c.base[b]))
        return int(self.c.base[b])

    def read(self, b, pos, first=None, second=None):
        if first is None:
            first, second = self.locate(b, pos)
        k, v = self.k[first, second], self.v[first, second]
        if self.fmt != "dtype":
            return (_fp8_dequant(k, self.fmt, self.p.k_descale),
                    _fp8_dequant(v, self.fmt, self.p.v_descale))
        return _to_f32(k, self.p.dtype), _to_f32(v, self.p.dtype)

    def append(self, b, begin, end):
        """mlx-lm update_and_fetch: store positions [begin, end) of sequence b."""
        c, p, var = self.c, self.p, self.variant
        n = end - begin
        if self.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
            first_write = n
            if var.compact_base_prompt:
                first_write = int(p.seq_lens[b]) - int(p.decode_steps)
            base = max(0, first_write - self.slots)
            if var.compact_base_memo:
                _COMPACT_BASE_MEMO.setdefault(b, base)
                base = _COMPACT_BASE_MEMO[b]
            c.base[b] = base
        if self.policy in ("ring-modulo", "ring-compact"):
            base = self.base(b) if self.policy == "ring-compact" else 0
            if var.ring_trim_head:
                pos = np.arange(max(begin, base), end)[:self.slots]
            else:
                pos = np.arange(max(begin, end - self.slots, base), end)
        elif var.trim_all_policies:
            pos = np.arange(max(begin, end - self.W), end)
        else:
            pos = np.arange(begin, end)
        first, second = self.locate(b, pos)
        if self.policy == "paged" and not var.paged_write_unheld:
            keep = first >= 0
            pos, first, second = pos[keep], first[keep], second[keep]
        rows = int(p.seq_offsets[b]) + pos
        k, v = p.k[rows], p.v[rows]
        if self.fmt != "dtype":
            k = _fp8_encode(_to_f32(k, p.dtype) / np.float32(p.k_descale), self.fmt, var)
            v = _fp8_encode(_to_f32(v, p.dtype) / np.float32(p.v_descale), self.fmt, var)
        self.k[first, second] = k
        self.v[first, second] = v
        if var.tokens_written_stored:
            c.tokens_written[b] = begin + len(pos)
        else:
            c.tokens_written[b] = end

    def held_slots(self, b):
        """Ring walk for decode: (slot indices, the position each holds)."""
        T = int(self.c.tokens_written[b])
        W = self.slots
        if self.policy == "ring-compact":
            base = self.base(b)
            n = W if self.variant.ring_assumed_full else min(T - base, W)
            s = np.arange(n)
            return s, T - 1 - ((T - 1 - base - s) % W)
        n = W if self.variant.ring_assumed_full else min(T, W)
        s = np.arange(n)
        return s, s + W * ((T - 1 - s) // W)


def _load_fresh(p, rows, variant):
    """K/V rows straight from the inputs, as attention must read them (FP8 round trip on load)."""
    k, v = _to_f32(p.k[rows], p.dtype), _to_f32(p.v[rows], p.dtype)
    if p.kv_format != "dtype":
        k = _quant_on_load(k, p.kv_format, p.k_descale, variant)
        v = _quant_on_load(v, p.kv_format, p.v_descale, variant)
    return k, v


# --------------------------------------------------------------------------------------------
# score helpers shared by both kernels
# --------------------------------------------------------------------------------------------
def _sink_log2(p, variant):
    if p.sinks is None:
        return None
    s = np.asarray(p.sinks, dtype=np.float32)
    if variant.sinks_by_kv_head:
        s = s[np.arange(p.heads_q) // (p.heads_q // p.heads_kv)]
    if variant.sink_natural_log:
        return s.astype(np.float32)
    return (s * np.float32(LOG2E)).astype(np.float32)


def _softcap_log2(s2, p, variant):
    """s2 = log2(e) * scale * q.k; cap the natural score, return it in the log2 domain again."""
    if not p.softcap > 0:
        return s2
    C = np.float32(p.softcap)
    if variant.softcap_log2_domain:
        return C * np.tanh(s2 / C)
    L = np.float32(LOG2E)
    return L * C * np.tanh(s2 / (L * C))


def _kv_map(p):
    return np.arange(p.heads_q) // (p.heads_q // p.heads_kv)


# --------------------------------------------------------------------------------------------
# steel attention (prefill, chunked prefill)
# --------------------------------------------------------------------------------------------
def _steel_attention(p, q, kbuf, vbuf, qpos, kpos, qL_off, masks, variant):
    """q [qL, Hq, D], kbuf/vbuf [kL, Hkv, D] float32; query r sits at key-buffer index qL_off + r.
    Returns [qL, Hq, D] float32."""
    qL, Hq, D = q.shape
    kL = kbuf.shape[0]
    BK = 16 if D >= 128 else 32
    left, right = int(p.window_left), int(p.window_right)
    kvmap = _kv_map(p)
    Qs = (q * np.float32(p.scale * LOG2E)).transpose(1, 0, 2)          # [Hq, qL, D]
    Kt = np.ascontiguousarray(kbuf.transpose(1, 2, 0))[kvmap]           # [Hq, D, kL]
    Vh = np.ascontiguousarray(vbuf.transpose(1, 0, 2))[kvmap]           # [Hq, kL, D]
    sink2 = _sink_log2(p, variant)
    out = np.zeros((Hq, qL, D), dtype=np.float32)
    nkb = (kL + BK - 1) // BK
    BKp = 32 if variant.bk_plan_dim32 else BK        # the block width the plan counts in
    for r0 in range(0, qL, BQ):
        r1 = min(r0 + BQ, qL)
        bq = r1 - r0
        # -------- the block plan: which key blocks this query tile walks
        if variant.kb_start_last_row:
            kb0 = max(0, qL_off + r1 - 1 - left) // BKp if left >= 0 else 0
        else:
            kb0 = max(0, qL_off + r0 - left) // BKp if left >= 0 else 0
        if right < 0:
            kb_lim = nkb
        else:
            reach = 0 if variant.two_sided_lim_causal else right
            if variant.kb_lim_floor:
                kb_lim = (qL_off + r0 + BQ + reach) // BKp
            else:
                kb_lim = (qL_off + r0 + BQ + reach + BKp - 1) // BKp
            kb_lim = min(kb_lim, nkb)
        # -------- per-row softmax state
        if sink2 is not None:
            m = np.repeat(sink2[:, None], bq, axis=1)
            l = np.ones((Hq, bq), dtype=np.float32)
        else:
            m = np.full((Hq, bq), -np.inf, dtype=np.float32)
            l = np.zeros((Hq, bq), dtype=np.float32)
        o = np.zeros((Hq, bq, D), dtype=np.float32)
        qt = Qs[:, r0:r1]
        qp = qpos[r0:r1]
        for kb in range(kb0, kb_lim):
            n0, n1 = kb * BK, min((kb + 1) * BK, kL)
            kp = kpos[n0:n1]
            if variant.mma_half_accum and p.dtype != "fp32":
                s = np.zeros((Hq, bq, n1 - n0), dtype=np.float32)
                for d0 in range(0, D, MMA_K):
                    s = _round_to_storage(s + np.matmul(qt[:, :, d0:d0 + MMA_K],
                                                        Kt[:, d0:d0 + MMA_K, n0:n1]), p.dtype)
            else:
                s = np.matmul(qt, Kt[:, :, n0:n1])                          # [Hq, bq, bk]
            s = _softcap_log2(s, p, variant)
            if variant.mask_additive and masks.kind == "swa-norm":
                s = s + masks.additive(qp, kp)[None]          # the mask alone decides, by value
                vis = np.ones((bq, n1 - n0), dtype=bool)
            else:
                vis = masks.visible(qp, kp)                    # ATB: the mask alone decides
                if vis is None:
                    vis = _band(qp, kp, left, right)
            s = np.where(vis[None], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=2))
            m_use = np.where(np.isfinite(m_new), m_new, 0).astype(np.float32)
            alpha = np.exp2(m - m_use)
            pexp = np.exp2(s - m_use[:, :, None])
            l_new = alpha * l + pexp.sum(axis=2)
            pv = np.matmul(pexp, Vh[:, n0:n1])
            if variant.fa1_drop_lold:
                o = alpha[:, :, None] * o + pv
            else:
                o = (alpha * l)[:, :, None] * o + pv
            o = o / np.where(l_new > 0, l_new, 1)[:, :, None]
            m, l = m_new, l_new
        out[:, r0:r1] = o
    return out.transpose(1, 0, 2)


# --------------------------------------------------------------------------------------------
# sdpa_vector (decode): strided simdgroups, one or two passes
# --------------------------------------------------------------------------------------------
def _sdpa_vector(p, q, keys, vals, kpos, qpos, masks, variant):
    """q [Hq, D]; keys/vals [N, Hkv, D] float32 at positions kpos [N]. Returns [Hq, D]."""
    Hq, D = q.shape
    N = keys.shape[0]
    kvmap = _kv_map(p)
    blocks = TWO_PASS_BLOCKS if N >= TWO_PASS_MIN_KEYS else 1
    lanes = blocks * BN                            # lane = block * BN + simdgroup
    n_iter = max(1, -(-N // lanes))
    padN = n_iter * lanes
    valid = np.zeros(padN, dtype=bool)
    qrow = np.array([qpos])
    add = None
    if variant.mask_additive and masks.kind == "swa-norm":
        add = np.zeros(padN, dtype=np.float32)
        add[:N] = masks.additive(qrow, kpos)[0]
        vis = np.ones(N, dtype=bool)
    else:
        vis = masks.visible(qrow, kpos)
        vis = _band(qrow, kpos, int(p.window_left), int(p.window_right)) if vis is None else vis
        vis = vis[0]
    valid[:N] = vis
    if variant.pad_lane_zero_key:
        valid[N:] = True                           # the padded lanes' keys are zero-filled
    kp = np.zeros((padN, Hq, D), dtype=np.float32)
    vp = np.zeros((padN, Hq, D), dtype=np.float32)
    kp[:N], vp[:N] = keys[:, kvmap], vals[:, kvmap]
    # key i = n * lanes + lane: lane walks i = lane, lane + lanes, ...
    kp = kp.reshape(n_iter, lanes, Hq, D)
    vp = vp.reshape(n_iter, lanes, Hq, D)
    valid = valid.reshape(n_iter, lanes)
    qs = (q * np.float32(p.scale * LOG2E)).astype(np.float32)
    m = np.full((Hq, lanes), -np.inf, dtype=np.float32)
    l = np.zeros((Hq, lanes), dtype=np.float32)
    o = np.zeros((Hq, lanes, D), dtype=np.float32)
    sink2 = _sink_log2(p, variant)
    if sink2 is not None:
        if variant.sink_every_simdgroup:
            m[:, :] = sink2[:, None]
            l[:, :] = 1
        else:
            m[:, 0] = sink2
            l[:, 0] = 1
    for n in range(n_iter):
        s = np.einsum("hd,lhd->hl", qs, kp[n])
        s = _softcap_log2(s, p, variant)
        if add is not None:
            s = s + add.reshape(n_iter, lanes)[n][None]
        s = np.where(valid[n][None], s, -np.inf)
        m_new = np.maximum(m, s)
        m_use = np.where(np.isfinite(m_new), m_new, 0).astype(np.float32)
        factor = np.exp2(m - m_use)
        e = np.exp2(s - m_use)
        l = l * factor + e
        o = o * factor[:, :, None] + e[:, :, None] * vp[n].transpose(1, 0, 2)
        m = m_new

    def merge(m, l, o, axis):
        M = m.max(axis=axis, keepdims=True)
        M_use = np.where(np.isfinite(M), M, 0)
        f = np.exp2(m - M_use)
        if variant.merge_sum_unscaled:
            L = l.sum(axis=axis)
        else:
            L = (l * f).sum(axis=axis)
        O = (o * np.expand_dims(f, -1)).sum(axis=axis)
        return np.squeeze(M, axis), L, O

    # pass 1: the BN simdgroups of each block; pass 2 (two-pass kernel): the blocks
    m, l, o = (x.reshape((Hq, blocks, BN) + x.shape[2:]) for x in (m, l, o))
    m, l, o = merge(m, l, o, 2)
    if blocks > 1:
        o = o / np.where(l > 0, l, 1)[:, :, None]    # pass 1 writes normalised partials
        o = o * l[:, :, None]
    m, l, o = merge(m, l, o, 1)
    return o / np.where(l > 0, l, 1)[:, None]


# --------------------------------------------------------------------------------------------
# the entry point
# --------------------------------------------------------------------------------------------
def _run(p, variant):
    masks = _MaskPlan(p, variant)
    if p.call == "prefill":
        for b in range(p.batch):
            begin, end = (int(x) for x in p.positions[b])
            if begin >= end:
                continue
            row0 = int(p.seq_offsets[b])
            L = int(p.seq_lens[b])
            q = _to_f32(p.q[row0:row0 + L], p.dtype)
            k, v = _load_fresh(p, np.arange(row0, row0 + L), variant)
            pos = np.arange(L)
            o = _steel_attention(p, q, k, v, pos, pos, 0, masks, variant)
            _store_out(p.out, slice(row0, row0 + L), o, p.dtype)
        return None

    cache = _Cache(p, variant)
    left = int(p.window_left)
    if p.call == "chunked_prefill":
        for b in range(p.batch):
            begin, end = (int(x) for x in p.positions[b])
            if variant.chunk_rows_from_index:
                prompt = int(p.seq_lens[b]) - (int(p.decode_steps) if p.mode == "decode" else 0)
                begin = p.index * int(p.chunk)
                end = min(begin + int(p.chunk), prompt)
            if begin >= end:
                continue
            row0 = int(p.seq_offsets[b])
            lo = max(0, begin - left) if left >= 0 else 0
            old = np.arange(lo, begin)
            ok, ov = cache.read(b, old)
            nk, nv = _load_fresh(p, np.arange(row0 + begin, row0 + end), variant)
            kbuf, vbuf = np.concatenate([ok, nk]), np.concatenate([ov, nv])
            kpos = np.arange(lo, end)
            qL = end - begin
            qL_off = begin if variant.qloff_absolute else kbuf.shape[0] - qL
            q = _to_f32(p.q[row0 + begin:row0 + end], p.dtype)
            mk = _CallRowMask(masks, begin) if variant.norm_mask_call_row else masks
            o = _steel_attention(p, q, kbuf, vbuf, np.arange(begin, end), kpos, qL_off, mk, variant)
            _store_out(p.out, slice(row0 + begin, row0 + end), o, p.dtype)
            cache.append(b, begin, end)
        return None

    # decode_step
    longest = int(np.max(p.seq_lens))
    for b in range(p.batch):
        if int(p.positions[b][0]) >= int(p.positions[b][1]):
            continue
        L = longest if variant.decode_uniform_batch else int(p.seq_lens[b])
        pos = L - int(p.decode_steps) + int(p.index)
        row0 = int(p.seq_offsets[b])
        cache.append(b, pos, pos + 1)                 # write first, then attend to the cache
        if cache.policy in ("ring-modulo", "ring-compact"):
            slots, kpos = cache.held_slots(b)
            keys, vals = cache.read(b, kpos, np.full(slots.shape, b), slots)
        else:
            if variant.decode_left_literal:
                lo = max(0, pos - left)
            else:
                lo = max(0, pos - left) if left >= 0 else 0
            kpos = np.arange(lo, pos + 1)
            keys, vals = cache.read(b, kpos)
        q = _to_f32(p.q[row0 + pos], p.dtype)
        mk = _CallRowMask(masks, pos) if variant.norm_mask_call_row else masks
        o = _sdpa_vector(p, q, keys, vals, kpos, pos, mk, variant)
        _store_out(p.out, row0 + pos, o, p.dtype)
    return None


class _CallRowMask:
    """norm_mask_call_row variant: the SWA_NORM rows indexed by the query's row in the call."""

    def __init__(self, masks, begin):
        self.m, self.begin = masks, begin
        self.kind = masks.kind

    def visible(self, qpos, kpos):
        if self.kind == "swa-norm":
            return self.m.visible(qpos - self.begin, kpos)
        return self.m.visible(qpos, kpos)

    def additive(self, qpos, kpos):
        return self.m.additive(qpos, kpos)


def attention(p):
    return _run(p, _CORRECT)


# --------------------------------------------------------------------------------------------
# faulty variants
# --------------------------------------------------------------------------------------------
def _make_fault(flag):
    variant = _Variant(**{flag: True})

    def fault(p):
        return _run(p, variant)
    fault.__doc__ = "attention with the '%s' porting bug" % flag
    return fault


fault_01 = _make_fault("kb_lim_floor")
fault_02 = _make_fault("kb_start_last_row")
fault_03 = _make_fault("qloff_absolute")
fault_04 = _make_fault("fa1_drop_lold")
fault_05 = _make_fault("softcap_log2_domain")
fault_06 = _make_fault("sink_natural_log")
fault_07 = _make_fault("sink_every_simdgroup")
fault_08 = _make_fault("pad_lane_zero_key")
fault_09 = _make_fault("merge_sum_unscaled")
fault_10 = _make_fault("ring_assumed_full")
fault_11 = _make_fault("ring_trim_head")
fault_12 = _make_fault("trim_all_policies")
fault_13 = _make_fault("compact_base_prompt")
fault_14 = _make_fault("compact_base_memo")
fault_15 = _make_fault("page_table_pool_stride")
fault_16 = _make_fault("paged_write_unheld")
fault_17 = _make_fault("page_pow2")
fault_18 = _make_fault("tokens_written_stored")
fault_19 = _make_fault("cache_bhsd")
fault_20 = _make_fault("norm_mask_call_row")
fault_21 = _make_fault("compress_row_minus_t")
fault_22 = _make_fault("compress_hidden_tile_distance")
fault_23 = _make_fault("fnuz_e4m3_max")
fault_24 = _make_fault("fp8_truncate")
fault_25 = _make_fault("mma_half_accum")
fault_26 = _make_fault("decode_left_literal")
fault_27 = _make_fault("decode_uniform_batch")
fault_28 = _make_fault("two_sided_lim_causal")
fault_29 = _make_fault("sinks_by_kv_head")
fault_30 = _make_fault("bk_plan_dim32")
fault_31 = _make_fault("chunk_rows_from_index")
fault_32 = _make_fault("mask_additive")


FAULTS = {
    "fault_01": "Steel block plan: kb_lim = (qL_off + r0 + BQ) // BK rounds down instead of up, so the key block holding a tile's last diagonal keys is skipped when the tile end is not block-aligned in the key buffer (chunked prefill with qL_off % BK != 0).",
    "fault_02": "Steel block plan: the first key block is taken from the window start of the query tile's LAST row instead of its first, so the tile's earlier rows lose their oldest visible keys.",
    "fault_03": "Chunked prefill: the query-to-key-buffer offset qL_off is the chunk's absolute start position instead of kL - qL, wrong once the gathered buffer starts above position 0 (begin > window_left).",
    "fault_04": "Steel's FlashAttention-1 normalised update forgets to multiply the old normalised accumulator by its row sum l (O <- alpha*O + P V, then / l'), wrong whenever a row spans more than one key block.",
    "fault_05": "Soft-cap applied in the log2 domain (C*tanh(s2/C) on the log2(e)-scaled score) instead of capping the natural score and re-scaling by log2(e).",
    "fault_06": "The sink logit seeds the base-2 softmax state without the log2(e) factor (in steel and sdpa_vector alike).",
    "fault_07": "Decode (sdpa_vector): every one of the 32 simdgroups seeds its state with the sink (the simdgroup-0 guard dropped), so the merge counts the sink 32 times.",
    "fault_08": "Decode: the padding lanes of the last strided round (key index >= N) are zero-filled but not masked, so each adds a score-0 term (zero value) to the denominator.",
    "fault_09": "Decode: the cross-simdgroup merge rescales each simdgroup's output by exp2(m_g - M) but adds the simdgroups' row sums l_g unscaled.",
    "fault_10": "Decode on a ring cache walks all W slots even before the ring has filled (tokens_written - base < W), reading never-written zero slots as visible keys.",
    "fault_11": "Ring write of a chunk longer than the ring keeps the chunk's FIRST W positions instead of its last W (the rolling-buffer trim taken from the wrong end).",
    "fault_12": "The rolling-buffer trim (store only a chunk's last W positions) is applied to linear and paged caches too, leaving their older slots of a long chunk unwritten.",
    "fault_13": "RING_COMPACT: base is set from the whole prompt length (seq_lens - decode_steps) instead of the first write's token count, wrong when a prompt longer than W arrives in several chunks.",
    "fault_14": "RING_COMPACT: the base is memoised per batch index in a module-level table at the first write the worker ever sees and reused by later scenarios (state kept between calls).",
    "fault_15": "Paged: the flattened page table is indexed with row stride pool_pages instead of table_width, wrong (or out of range) for every sequence after the first.",
    "fault_16": "Paged write: rows whose page is -1 are not skipped; index -1 wraps to the pool's last physical page and overwrites what another sequence holds there.",
    "fault_17": "Paged: logical page and offset computed by shift and mask (p >> log2 P, p & (P-1)), assuming a power-of-two page size.",
    "fault_18": "tokens_written is set to begin + rows actually stored instead of the write's end, wrong whenever a write stores fewer rows than it covers (ring chunks longer than W, paged rows whose page is -1).",
    "fault_19": "The cache is addressed in mlx-lm's [batch, kv_heads, slots, head_size] layout instead of the ABI's [batch, slots, kv_heads, head_size] (outputs right, stored layout wrong when heads_kv > 1).",
    "fault_20": "SWA_NORM mask rows are indexed by the query's row within the call instead of its absolute position (chunked prefill and decode).",
    "fault_21": "SWA_COMPRESS rule 4 reads mask row d - T + r instead of d - (W - T) + r.",
    "fault_22": "SWA_COMPRESS rule 1 declares a B x B tile hidden when its tile distance d >= W, though its nearest pair (distance d - B + 1) may still be inside the window.",
    "fault_23": "FP8 e4m3 encoder saturates at 240 (e4m3fnuz's largest finite value) instead of 448.",
    "fault_24": "FP8 encoder's normal path drops the round-to-nearest-even bias and truncates the mantissa.",
    "fault_25": "Steel Q.K^T is accumulated in the storage dtype (fp16/bf16), rounded after every 8-dim MMA k-step, instead of in an fp32 accumulator.",
    "fault_26": "Decode on linear/paged caches takes window_left = -1 (unbounded) literally: the lowest key is pos + 1, so the row sees no key.",
    "fault_27": "Decode position is computed from the longest sequence's length for every sequence (a padded-batch assumption) instead of each sequence's own length.",
    "fault_28": "Steel block plan: kb_lim ignores window_right, so keys to the right of a query tile's last row are never walked (two-sided prefill).",
    "fault_29": "The sink logits are indexed by the kv head (h // group) instead of the query head h, so with GQA each query head uses another head's sink.",
    "fault_30": "Steel block plan is counted in 32-key blocks while the walk uses the 16-key blocks MLX picks for head_dim >= 128, so only part of each tile's key range is walked.",
    "fault_31": "Chunked prefill rows are recomputed as [index*chunk, (index+1)*chunk) instead of taken from positions, so a DECODE prompt sent whole (chunk 0) is neither computed nor stored.",
    "fault_32": "The SWA_NORM mask is ADDED to the scores (MLX's float-mask semantics) instead of read as visibility, so bf16's +1 fill leaves hidden keys visible.",
}
