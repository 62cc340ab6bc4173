"""A TensorRT-LLM style sliding-window attention port, in NumPy, for the python: DUT.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/faults/outside/kernel_batch_m.py:attention

Organisation (after TensorRT-LLM's GPT attention plugin):
  * context phase: an fmha_v2-style flash kernel over a varlen ("packed") K/V buffer: 64-row Q tiles
    from each call's first row, STEP_KV-key tiles aligned to the K/V buffer index (128 keys for
    D <= 64, 64 for D <= 128, 32 above), the kv loop range picked from the window band, a fast path
    that skips masking for tiles the band shows fully visible, an online softmax in the log2 domain
    (scale * log2e folded into the scores, exp2), the attention sink folded into the row sum in the
    epilogue;
  * custom masks (ATB SWA_NORM / SWA_COMPRESS): a preprocessing step turns the ATB float mask into a
    packed bit mask (32 keys per uint32 word, one padded row of words per query row), which the
    context kernel unpacks tile by tile;
  * chunked context: the keys still in the window are gathered from the KV cache into a contiguous
    staging buffer (dequantised), the chunk's own K/V appended as the cache would give them back, and
    the same context kernel runs with a past-KV offset; the chunk is written back afterwards;
  * generation phase: a masked-multihead-attention (MMHA) port: the step writes its K/V into the cache,
    q.k over the cache's timesteps plus the current token's K held in registers, multi-block mode
    (timesteps split in blocks of 8, each with a two-pass softmax and a normalised partial output in
    a shared workspace, then a reduction over the grid's blocks), natural-base exp;
  * KV cache addressing through one buffer object (KVLinearBuffer / cyclic / compact ring /
    KVBlockArray-style pages), FP8 through a port of cuda_fp8.hpp's double -> fp8 conversion
    (saturating) and a decode table.

`attention` is the correct kernel; `fault_NN` are variants, each with one change (make_kernel(fault)).
"""
import math

import numpy as np

LOG2E = 1.4426950408889634
STEP_Q = 64
MMHA_TIMESTEPS_PER_BLOCK = 8


def describe():
    return {"name": "trtllm_port"}


def supports(p):
    if p.mask_format == "swa-compress" and p.mode != "prefill":
        return "SWA_COMPRESS is read in tiles from position 0: prefill only"
    return True


# ----------------------------------------------------------------------------------------------
# dtype helpers

def _to_f64(x, dtype):
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _bf16_bits(values):
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def _round_to(values, dtype):
    v = np.asarray(values, dtype=np.float64)
    if dtype == "fp16":
        return v.astype(np.float32).astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        return (_bf16_bits(v.astype(np.float32)).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return v.astype(np.float32).astype(np.float64)


def _store_rows(out, lo, hi, values, dtype):
    v32 = np.asarray(values, dtype=np.float64).astype(np.float32)
    if dtype == "bf16":
        out[lo:hi] = _bf16_bits(v32)
    else:
        out[lo:hi] = v32


# ----------------------------------------------------------------------------------------------
# FP8: port of cuda_fp8.hpp's __nv_cvt_double_to_fp8 (__NV_SATFINITE) and a decode table

_FP8_FMT = {
    # significand bits (with the implicit one), exponent bias, max-norm code, 2^-(min denormal)/2,
    # smallest normal
    "fp8-e4m3": dict(sig=4, bias=7, maxnorm=0x7E, mindenorm_o2=2.0 ** -10, minnorm=2.0 ** -6, nan=0x7F),
    "fp8-e5m2": dict(sig=3, bias=15, maxnorm=0x7B, mindenorm_o2=2.0 ** -17, minnorm=2.0 ** -14, nan=0x7F),
}
_FP8_TABLES = {}


def _cvt_double_to_fp8(x, kv_format):
    f = _FP8_FMT[kv_format]
    sig = f["sig"]
    x = np.ascontiguousarray(x, dtype=np.float64)
    xbits = x.view(np.uint64)
    sign = ((xbits >> np.uint64(63)) << np.uint64(7)).astype(np.int64)
    absx = xbits & np.uint64(0x7FFFFFFFFFFFFFFF)
    exp = ((xbits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023 + f["bias"]
    mant_mask = (1 << (sig - 1)) - 1
    mant = ((xbits >> np.uint64(53 - sig)) & np.uint64(mant_mask)).astype(np.int64)
    half_ulp = 1 << (53 - sig - 1)
    # normal numbers
    rnd = (xbits & np.uint64((half_ulp << 1) - 1)).astype(np.int64)
    res_n = (np.clip(exp, 0, 64) << (sig - 1)) | mant
    res_n = res_n + ((rnd > half_ulp) | ((rnd == half_ulp) & ((mant & 1) == 1)))
    # denormals (shift >= 1; the implicit bit joins the dropped bits as the shift grows)
    shift = np.clip(1 - exp, 1, 8).astype(np.int64)
    mant_d = mant | (1 << (sig - 1))
    res_d = mant_d >> shift
    window = (np.int64(half_ulp) << (shift + 1)) - 1
    rnd_d = ((xbits | np.uint64(1 << 52)).astype(np.uint64) & window.astype(np.uint64)).astype(np.int64)
    mid_d = np.int64(half_ulp) << shift
    res_d = res_d + ((rnd_d > mid_d) | ((rnd_d == mid_d) & ((res_d & 1) == 1)))
    minnorm_bits = np.float64(f["minnorm"]).view(np.uint64)
    res = np.where(absx >= minnorm_bits, res_n, res_d)
    res = np.minimum(res, f["maxnorm"])  # __NV_SATFINITE: beyond the largest finite value (and inf)
    res = np.where(absx <= np.float64(f["mindenorm_o2"]).view(np.uint64), 0, res)
    res = np.where(absx > np.uint64(0x7FF0000000000000), f["nan"], res)
    return (res | sign).astype(np.uint8)


def _fp8_table(kv_format):
    t = _FP8_TABLES.get(kv_format)
    if t is None:
        f = _FP8_FMT[kv_format]
        mbits = f["sig"] - 1
        c = np.arange(256)
        e = (c & 0x7F) >> mbits
        m = c & ((1 << mbits) - 1)
        mag = np.where(e == 0, m * 2.0 ** (1 - f["bias"] - mbits),
                       (1.0 + m / float(1 << mbits)) * np.exp2(e.astype(np.float64) - f["bias"]))
        if kv_format == "fp8-e4m3":
            mag = np.where((e == 15) & (m == 7), np.nan, mag)
        else:
            mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
        t = np.where(c & 0x80, -mag, mag)
        _FP8_TABLES[kv_format] = t
    return t


class _Cfg:
    def __init__(self, fault):
        self.fault = fault

    def on(self, name):
        return self.fault == name


# ----------------------------------------------------------------------------------------------
# the kernel

def _step_kv(head_size):
    return 128 if head_size <= 64 else (64 if head_size <= 128 else 32)


def _kv_quant(cfg, p, x, descale):
    """FP8 codes of x (float64 values of the storage dtype) under a per-tensor descale."""
    if cfg.on("inv_scale_in_storage_dtype"):
        inv = _round_to(1.0 / np.float64(descale), p.dtype)
        return _cvt_double_to_fp8(x * inv, p.kv_format)
    return _cvt_double_to_fp8(x / np.float64(descale), p.kv_format)


def _kv_dequant(p, codes, descale):
    return _fp8_table(p.kv_format)[codes] * np.float64(descale)


def _fresh_kv(cfg, p, lo, hi, quantise=True):
    """K and V of packed rows [lo, hi) as attention reads them (through the FP8 format when set)."""
    k = _to_f64(p.k[lo:hi], p.dtype)
    v = _to_f64(p.v[lo:hi], p.dtype)
    if p.kv_format != "dtype" and quantise:
        k = _kv_dequant(p, _kv_quant(cfg, p, k, p.k_descale), p.k_descale)
        v = _kv_dequant(p, _kv_quant(cfg, p, v, p.v_descale), p.v_descale)
    return k, v


class _KvCacheBuffer:
    """KVLinearBuffer / cyclic / compact ring / KVBlockArray addressing over the harness's cache."""

    def __init__(self, cfg, p):
        self.cfg, self.p, self.c = cfg, p, p.cache
        self.policy = p.cache.policy
        self.slots = int(p.cache.slots)

    def locate(self, b, pos, decode_read=False):
        c = self.c
        if self.policy == "paged":
            ps = int(c.page_size)
            if self.cfg.on("page_offset_pow2_mask"):
                off = pos & (ps - 1)
            else:
                off = pos % ps
            return c.page_table[b, pos // ps].astype(np.int64), off
        if self.policy == "linear":
            slot = pos
        elif self.policy == "ring-modulo" or (decode_read and self.cfg.on("decode_compact_as_modulo")):
            slot = pos % self.slots
        else:
            slot = (pos - int(c.base[b])) % self.slots
        return np.full_like(pos, b), slot

    def gather(self, b, pos, decode_read=False):
        first, second = self.locate(b, pos, decode_read)
        k, v = self.c.k[first, second], self.c.v[first, second]
        p = self.p
        if self.c.kv_format != "dtype":
            return _kv_dequant(p, k, p.k_descale), _kv_dequant(p, v, p.v_descale)
        return _to_f64(k, p.dtype), _to_f64(v, p.dtype)

    def gather_window(self, b, lo, hi):
        """Chunked context: the cache's positions [lo, hi) into a staging buffer."""
        pos = np.arange(lo, hi)
        if self.cfg.on("staging_ring_unwrapped") and self.policy in ("ring-modulo", "ring-compact"):
            first = np.full_like(pos, b)
            second = np.arange(len(pos))
            k, v = self.c.k[first, second], self.c.v[first, second]
            p = self.p
            if self.c.kv_format != "dtype":
                return _kv_dequant(p, k, p.k_descale), _kv_dequant(p, v, p.v_descale)
            return _to_f64(k, p.dtype), _to_f64(v, p.dtype)
        return self.gather(b, pos)

    def write(self, b, begin, end):
        """invokeUpdateKVCache: rows [begin, end) of sequence b into the cache."""
        p, c, cfg = self.p, self.c, self.cfg
        if self.policy == "ring-compact" and int(c.tokens_written[b]) == 0:
            first_write = end - begin
            if cfg.on("compact_base_from_prompt"):
                prompt = int(p.seq_lens[b]) - (int(p.decode_steps) if p.mode == "decode" else 0)
                first_write = prompt - begin
            c.base[b] = max(0, first_write - self.slots)
        if self.policy in ("linear", "paged"):
            lowest = begin
        else:
            lowest = max(begin, end - self.slots, int(c.base[b]))
        pos = np.arange(lowest, end)
        first, second = self.locate(b, pos)
        if self.policy == "paged" and not cfg.on("paged_write_unheld"):
            keep = first >= 0
        else:
            keep = np.ones(len(pos), dtype=bool)
        rows = int(p.seq_offsets[b]) + pos[keep]
        k, v = p.k[rows], p.v[rows]
        if c.kv_format != "dtype":
            k = _kv_quant(cfg, p, _to_f64(k, p.dtype), p.k_descale)
            v = _kv_quant(cfg, p, _to_f64(v, p.dtype), p.v_descale)
        c.k[first[keep], second[keep]] = k
        c.v[first[keep], second[keep]] = v
        if cfg.on("tokens_written_clamped") and self.policy in ("ring-modulo", "ring-compact"):
            c.tokens_written[b] = min(end, self.slots)
        else:
            c.tokens_written[b] = end


# ---- packed custom mask (invokeBuildPackedMask) -----------------------------------------------

class _PackedMask:
    """Visibility bits [rows, words]: bit (c % 32) of word c // 32 of row r is 1 when visible."""

    def __init__(self, cfg, vis):
        rows, cols = vis.shape
        self.words = (cols + 31) // 32
        padded = np.zeros((rows, self.words * 32), dtype=np.uint64)
        padded[:, :cols] = vis
        w = padded.reshape(rows, self.words, 32) << np.arange(32, dtype=np.uint64)
        self.flat = np.zeros(rows * self.words + self.words, dtype=np.uint32)
        self.flat[:rows * self.words] = w.sum(axis=2).astype(np.uint32).reshape(-1)
        self.stride = cols // 32 if cfg.on("packed_mask_row_stride_floor") else self.words

    def tile(self, r0, r1, c0, c1):
        w0, w1 = c0 // 32, (c1 - 1) // 32 + 1
        idx = (np.arange(r0, r1) * self.stride)[:, None] + np.arange(w0, w1)[None, :]
        words = self.flat[idx].astype(np.uint64)
        bits = (words[:, :, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)
        bits = bits.reshape(r1 - r0, (w1 - w0) * 32)
        return bits[:, c0 - w0 * 32:c1 - w0 * 32].astype(bool)


def _compress_visibility(cfg, p, L):
    """Walk the [512, 512] SWA_COMPRESS mask tile by tile (ATB's rule) into a dense [L, L] pattern."""
    B = int(p.mask_block)
    T = int(p.mask_effective_window)
    W = int(p.window_left) + 1
    mask = p.mask
    vis = np.zeros((L, L), dtype=bool)
    nt = (L + B - 1) // B
    for qt in range(nt):
        r0, r1 = qt * B, min(L, qt * B + B)
        for kt in range(qt + 1):
            c0, c1 = kt * B, min(L, kt * B + B)
            d = (qt - kt) * B
            if qt != kt and d - (B - 1) >= W:
                continue  # every pair at distance >= W: hidden
            if qt == kt:
                blk = mask[0:B, 0:B]
            elif (d < W) if cfg.on("compress_full_tile_by_offset") else (d + B - 1 < W):
                vis[r0:r1, c0:c1] = True
                continue
            else:
                off = d - (W - T)
                blk = mask[off:off + B, 0:B]
            vis[r0:r1, c0:c1] = blk[:r1 - r0, :c1 - c0] == 0
    return vis


def _packed_mask(cfg, p, q_lo, q_hi, kv_lo, kv_hi, chunked):
    if p.mask_format == "swa-norm":
        rows = np.arange(q_lo, q_hi)
        if chunked and cfg.on("norm_mask_rows_chunk_local"):
            rows = rows - q_lo
        vis = p.mask[rows][:, kv_lo:kv_hi] == 0
    else:
        vis = _compress_visibility(cfg, p, kv_hi)[q_lo:q_hi, kv_lo:kv_hi]
    return _PackedMask(cfg, vis)


# ---- the context (fmha_v2-style) kernel ------------------------------------------------------

def _fmha_context(cfg, p, q, q_pos0, kv_load, kv_valid, kv_pos0, band, packed, kvh):
    """q [nq, Hq, D] (float64) at positions q_pos0.. against the K/V buffer whose index 0 is at
    position kv_pos0 (kv_valid keys loadable); band (left, right); packed: custom mask or None."""
    nq, Hq, D = q.shape
    left, right = band
    step_kv = _step_kv(D)
    scale = np.float64(p.scale)
    if cfg.on("scale_from_padded_head_size"):
        scale = np.float64(1.0 / math.sqrt(1 << (D - 1).bit_length()))
    softcap = float(p.softcap)
    scale_bmm1 = scale * LOG2E
    out = np.zeros((nq, Hq, D))
    for q0 in range(0, nq, STEP_Q):
        q1 = min(nq, q0 + STEP_Q)
        qf, ql = q_pos0 + q0, q_pos0 + q1 - 1
        # kv loop range, in buffer indices
        if left >= 0:
            lo_pos = (ql if cfg.on("kv_loop_start_from_last_row") else qf) - left
            start = lo_pos if cfg.on("kv_loop_start_absolute") else lo_pos - kv_pos0
            start = max(0, start) // step_kv * step_kv
        else:
            start = 0
        if right >= 0 and not cfg.on("kv_loop_end_causal"):
            end = min(kv_valid, ql + right - kv_pos0 + 1)
        elif right >= 0:
            end = min(kv_valid, ql - kv_pos0 + 1)
        else:
            end = kv_valid
        qt = q[q0:q1].transpose(1, 0, 2)  # [Hq, rows, D]
        rows = q1 - q0
        m = np.full((Hq, rows), -np.inf)
        lsum = np.zeros((Hq, rows))
        acc = np.zeros((Hq, rows, D))
        i = np.arange(qf, ql + 1)[:, None]
        for k0 in range(start, end, step_kv):
            k1 = min(k0 + step_kv, kv_valid)
            K, V = kv_load(k0, k1)
            Kh, Vh = K[:, kvh], V[:, kvh]  # [nk, Hq, D]
            qk = np.einsum("hrd,nhd->hrn", qt, Kh)
            if softcap <= 0:
                s2 = qk * scale_bmm1  # scale * log2e folded into one factor
            else:
                s = qk * scale
                if not cfg.on("softcap_in_log2_domain"):
                    s = softcap * np.tanh(s / softcap)
                s2 = s * LOG2E
            if softcap > 0 and cfg.on("softcap_in_log2_domain"):
                s2 = softcap * np.tanh(s2 / softcap)
            kf, kl = kv_pos0 + k0, kv_pos0 + k1 - 1
            if packed is not None:
                vis = packed.tile(q0, q1, k0, k1)
                s2 = np.where(vis[None], s2, -np.inf)
            else:
                far_row = qf if cfg.on("fast_path_first_row") else ql
                full = (left < 0 or far_row - kf <= left) and (right < 0 or kl - qf <= right)
                if not full:
                    j = np.arange(kf, kl + 1)[None, :]
                    vis = np.ones((rows, k1 - k0), dtype=bool)
                    if left >= 0:
                        vis &= i - j <= left
                    if right >= 0:
                        vis &= j - i <= right
                    s2 = np.where(vis[None], s2, -np.inf)
            m_new = np.maximum(m, s2.max(axis=2))
            if cfg.on("max_frozen_first_tile"):
                m_new = np.where(np.isfinite(m), m, m_new)
                pexp = np.exp2((s2 - np.where(np.isfinite(m_new), m_new, 0.0)[:, :, None]).astype(np.float32))
            m_use = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp2(m - m_use)
            if cfg.on("max_frozen_first_tile"):
                alpha = np.where(np.isfinite(m), 1.0, 0.0)
                pexp = pexp.astype(np.float64)
            else:
                pexp = np.exp2(s2 - m_use[:, :, None])
            lsum = lsum * alpha + pexp.sum(axis=2)
            pv = pexp.astype(np.float16).astype(np.float64) if cfg.on("p_half_for_pv") else pexp
            acc = acc * alpha[:, :, None] + np.einsum("hrn,nhd->hrd", pv, Vh)
            m = m_new
        if p.sinks is not None:
            sk = np.asarray(p.sinks, dtype=np.float64)
            sk2 = (sk if cfg.on("sink_not_log2") else sk * LOG2E)[:, None]
            m_fin = np.maximum(m, sk2)
            alpha = np.exp2(m - m_fin)
            lsum = lsum * alpha + np.exp2(sk2 - m_fin)
            acc = acc * alpha[:, :, None]
        o = acc / np.where(lsum > 0, lsum, 1.0)[:, :, None]
        out[q0:q1] = o.transpose(1, 0, 2)
    return out


# ---- the generation (MMHA-style) kernel ------------------------------------------------------

_MMHA_WORKSPACE = {}


def _mmha_workspace(blocks, Hq, D):
    key = (Hq, D)
    ws = _MMHA_WORKSPACE.get(key)
    if ws is None or ws[0].shape[0] < blocks:
        n = max(blocks, 8)
        ws = (np.zeros((n, Hq)), np.zeros((n, Hq)), np.zeros((n, Hq, D)))
        _MMHA_WORKSPACE[key] = ws
    return ws


def _mmha_ti_begin(cfg, p, kvbuf, t):
    left = int(p.window_left)
    if cfg.on("decode_window_from_slots"):
        return max(0, t - kvbuf.slots + 1)
    if left < 0 and not cfg.on("decode_unbounded_as_zero"):
        return 0
    return max(0, t - left)


def _mmha_blocks(cfg, n_ctx):
    if cfg.on("mmha_block_count_floor"):
        return max(1, n_ctx // MMHA_TIMESTEPS_PER_BLOCK)
    return max(1, -(-n_ctx // MMHA_TIMESTEPS_PER_BLOCK))


def _decode_step(cfg, p):
    kvbuf = _KvCacheBuffer(cfg, p)
    Hq, Hkv, D = p.heads_q, p.heads_kv, p.head_size
    group = Hq // Hkv
    if cfg.on("decode_head_round_robin"):
        kvh = np.arange(Hq) % Hkv
    else:
        kvh = np.arange(Hq) // group
    scale = np.float64(p.scale)
    softcap = float(p.softcap)
    sinks = None if p.sinks is None else np.asarray(p.sinks, dtype=np.float64)
    work = []
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        work.append((b, begin))
    # the grid: as many blocks per sequence as the longest context of the step needs
    grid = 1
    for b, t in work:
        grid = max(grid, _mmha_blocks(cfg, max(0, t - _mmha_ti_begin(cfg, p, kvbuf, t))))
    ws_m, ws_s, ws_o = _mmha_workspace(grid, Hq, D)
    for b, t in work:
        row = int(p.seq_offsets[b]) + t
        kvbuf.write(b, t, t + 1)  # the step's K/V go into the cache first
        ti_begin = min(_mmha_ti_begin(cfg, p, kvbuf, t), t)
        n_ctx = t - ti_begin
        Kc, Vc = kvbuf.gather(b, np.arange(ti_begin, t), decode_read=True)
        # the current token's K/V, held in registers, as the cache gives them back
        k_cur, v_cur = _fresh_kv(cfg, p, row, row + 1, quantise=not cfg.on("decode_current_unquantised"))
        q = _to_f64(p.q[row], p.dtype)  # [Hq, D]
        nblocks = _mmha_blocks(cfg, n_ctx)
        for blk in range(grid):
            if blk >= nblocks:
                if not cfg.on("mmha_stale_blocks"):
                    ws_m[blk] = -np.inf
                    ws_s[blk] = 0.0
                    ws_o[blk] = 0.0
                continue
            lo = blk * MMHA_TIMESTEPS_PER_BLOCK
            hi = min(n_ctx, lo + MMHA_TIMESTEPS_PER_BLOCK)
            K, V = Kc[lo:hi], Vc[lo:hi]
            if blk == nblocks - 1:
                K, V = np.concatenate([K, k_cur]), np.concatenate([V, v_cur])
            qk = np.einsum("hd,nhd->hn", q, K[:, kvh])
            if softcap > 0 and cfg.on("decode_cap_before_scale"):
                qk = scale * (softcap * np.tanh(qk / softcap))
            else:
                qk = qk * scale
                if softcap > 0:
                    qk = softcap * np.tanh(qk / softcap)
            mb = qk.max(axis=1)
            if sinks is not None and cfg.on("sink_per_block"):
                mb = np.maximum(mb, sinks)
            e = np.exp(qk - mb[:, None])
            sb = e.sum(axis=1)
            if sinks is not None and cfg.on("sink_per_block"):
                sb = sb + np.exp(sinks - mb)
            ws_m[blk] = mb
            ws_s[blk] = sb
            ws_o[blk] = np.einsum("hn,nhd->hd", e, V[:, kvh]) / sb[:, None]
        # the multi-block reduction
        pm, ps, po = ws_m[:grid], ws_s[:grid], ws_o[:grid]
        M = pm.max(axis=0)
        if sinks is not None and not cfg.on("sink_per_block"):
            M = np.maximum(M, sinks)
        wgt = np.exp(pm - M[None])
        if not cfg.on("merge_drops_block_sum"):
            wgt = wgt * ps
        den = wgt.sum(axis=0)
        if sinks is not None and not cfg.on("sink_per_block"):
            den = den + np.exp(sinks - M)
        o = np.einsum("bh,bhd->hd", wgt, po) / den[:, None]
        _store_rows(p.out, row, row + 1, o[None], p.dtype)


# ---- the schedule's calls ------------------------------------------------------------------------

def _context_call(cfg, p):
    Hq, Hkv = p.heads_q, p.heads_kv
    kvh = np.arange(Hq) // (Hq // Hkv)
    left, right = int(p.window_left), int(p.window_right)
    n_tokens = int(p.seq_offsets[p.batch])
    chunked = p.cache is not None
    kvbuf = _KvCacheBuffer(cfg, p) if chunked else None
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        first_row = int(p.seq_offsets[b])
        q = _to_f64(p.q[first_row + begin:first_row + end], p.dtype)
        if not chunked:
            L = int(p.seq_lens[b])
            quant = not cfg.on("prefill_skips_fp8")
            kv_valid = n_tokens - first_row if cfg.on("varlen_kv_unclipped") else L

            def kv_load(a, z, first_row=first_row, quant=quant):
                return _fresh_kv(cfg, p, first_row + a, first_row + z, quantise=quant)

            packed = None if p.mask is None else _packed_mask(cfg, p, 0, L, 0, L, False)
            o = _fmha_context(cfg, p, q, 0, kv_load, kv_valid, 0, (left, right), packed, kvh)
        else:
            kv_start = 0 if left < 0 else max(0, begin - left)
            ok, ov = kvbuf.gather_window(b, kv_start, begin)
            nk, nv = _fresh_kv(cfg, p, first_row + begin, first_row + end,
                               quantise=not cfg.on("chunk_own_kv_unquantised"))
            K, V = np.concatenate([ok, nk]), np.concatenate([ov, nv])

            def kv_load(a, z, K=K, V=V):
                return K[a:z], V[a:z]

            packed = None if p.mask is None else _packed_mask(cfg, p, begin, end, kv_start, end, True)
            o = _fmha_context(cfg, p, q, begin, kv_load, end - kv_start, kv_start, (left, 0), packed, kvh)
        _store_rows(p.out, first_row + begin, first_row + end, o, p.dtype)
        if chunked:
            kvbuf.write(b, begin, end)


def make_kernel(fault=None, name=None):
    """The kernel; fault names one change (see _FAULT_KEYS), None the correct kernel."""
    cfg = _Cfg(fault)

    def kernel(p):
        if p.call == "decode_step":
            _decode_step(cfg, p)
        else:
            _context_call(cfg, p)
        return None

    kernel.__name__ = name or "attention"
    return kernel


attention = make_kernel(None)

_FAULT_KEYS = [
    "kv_loop_start_from_last_row",
    "fast_path_first_row",
    "varlen_kv_unclipped",
    "kv_loop_end_causal",
    "kv_loop_start_absolute",
    "norm_mask_rows_chunk_local",
    "decode_window_from_slots",
    "decode_unbounded_as_zero",
    "merge_drops_block_sum",
    "mmha_block_count_floor",
    "mmha_stale_blocks",
    "sink_per_block",
    "decode_current_unquantised",
    "inv_scale_in_storage_dtype",
    "prefill_skips_fp8",
    "chunk_own_kv_unquantised",
    "softcap_in_log2_domain",
    "p_half_for_pv",
    "max_frozen_first_tile",
    "decode_cap_before_scale",
    "scale_from_padded_head_size",
    "sink_not_log2",
    "decode_head_round_robin",
    "compact_base_from_prompt",
    "page_offset_pow2_mask",
    "paged_write_unheld",
    "tokens_written_clamped",
    "staging_ring_unwrapped",
    "decode_compact_as_modulo",
    "compress_full_tile_by_offset",
    "packed_mask_row_stride_floor",
]

for _n, _key in enumerate(_FAULT_KEYS, 1):
    globals()["fault_%02d" % _n] = make_kernel(_key, "fault_%02d" % _n)

FAULTS = {
    "fault_01": "Context kernel: the first KV tile of a Q tile is picked from the window start of the Q tile's LAST row (last_pos - window_left) instead of its first row, so the earlier rows of the Q tile never see the keys in the KV tile(s) below that.",
    "fault_02": "Context kernel without a custom mask: a KV tile is taken as fully visible (masking skipped) when the Q tile's FIRST row is within window_left of the tile's first key (and the right bound holds), instead of its last row, so later rows of the Q tile see keys beyond their left window edge in such tiles.",
    "fault_03": "Prefill: the loadable key range and the kv loop end are clipped only to the packed buffer's end, not to the sequence's length, so with a right window (two-sided) the last rows of a sequence also attend to the first keys of the sequences packed after it.",
    "fault_04": "Context kernel: the kv loop ends at the KV tile holding the Q tile's last row (the causal end), ignoring window_right, so keys right of the queries that lie in later KV tiles are never visited in two-sided windows.",
    "fault_05": "Chunked context: the first KV tile index is computed from the absolute window-start position without subtracting the staging buffer's first position (kv_start), so rows skip leading cached keys (or all of them) whenever the staging buffer does not start at position 0.",
    "fault_06": "Chunked prefill with SWA_NORM: the packed mask takes mask ROWS at chunk-local query indices (position - chunk start) while columns stay at absolute key positions.",
    "fault_07": "Decode (MMHA): the first attended cache position is t - slots + 1 (the cache's slot count used as the attention window) instead of t - window_left, so LINEAR and PAGED caches attend to far more than the window (paged: through freed page-table entries -1).",
    "fault_08": "Decode with an unbounded left window (window_left = -1): the first attended position is t - window_left = t + 1, so each decode step attends only to its own token.",
    "fault_09": "MMHA multi-block reduction: each block's normalised partial output is weighted by exp(block_max - global_max) alone, without the block's exp-sum, so blocks are mixed with wrong weights whenever a decode context spans more than one block of 8 timesteps.",
    "fault_10": "MMHA: the number of timestep blocks is max(1, floor(n_cache_keys / 8)) instead of the ceiling, so the newest n_cache_keys % 8 cache keys before the current token are dropped when there are more than 8 cache keys and not a multiple of 8.",
    "fault_11": "MMHA: grid blocks past a sequence's own block count exit without marking their workspace slot empty (-inf max, 0 sum), so the reduction over the step's largest block count merges stale partials left by the previously processed sequence.",
    "fault_12": "MMHA multi-block: the sink logit joins every block's partial max and exp-sum instead of once in the reduction, so the sink is counted once per block (too heavy with 2+ blocks).",
    "fault_13": "Decode with an FP8 cache: the current token's K and V (held in registers) are used at their storage-dtype values instead of the FP8 round trip fp8(x/descale)*descale that the cache gives back (cached keys are dequantised correctly).",
    "fault_14": "FP8 quantisation (cache write-back and on-load quantisation) multiplies by 1/descale rounded to the storage dtype (fp16/bf16; fp32 for fp32) instead of dividing by the descale, so many stored codes (and read values) are one FP8 step off.",
    "fault_15": "Prefill with an FP8 kv_format: K and V are read at their storage-dtype values, never quantised to FP8 and back.",
    "fault_16": "Chunked prefill with FP8: the chunk's own K/V appended to the staging buffer are the raw storage-dtype values instead of the FP8 round trip (the cached keys are dequantised correctly; the cache stores correct codes).",
    "fault_17": "Context kernel (prefill/chunked): the soft-cap is applied after the log2e factor, cap*tanh(s*log2e/cap), instead of log2e*cap*tanh(s/cap).",
    "fault_18": "Context kernel: the unnormalised probabilities exp2(s2 - m) are rounded to fp16 before the P.V product (the row sum uses the unrounded values), for every storage dtype.",
    "fault_19": "Context kernel: the running row max is frozen at the first KV tile where the row sees a key and never updated; later tiles' exp2(s2 - m) are evaluated in fp32 against it (overflow to inf / loss when later scores are much larger, e.g. large-logit inputs).",
    "fault_20": "Decode (MMHA): the soft-cap is applied to the raw q.k before the scale, scale*cap*tanh(qk/cap), instead of cap*tanh(scale*qk/cap).",
    "fault_21": "Context kernel: the softmax scale is 1/sqrt(head_size rounded up to a power of two) instead of p.scale (wrong for head sizes 80, 96, 160, 192).",
    "fault_22": "Context kernel epilogue: the sink logit is used in the log2 domain without the log2e factor (max(m2, sink) and exp2(sink - m2) instead of sink*log2e).",
    "fault_23": "Decode (MMHA): query head h reads kv head h % heads_kv instead of h // (heads_q / heads_kv).",
    "fault_24": "RING_COMPACT: base is set at the first write as max(0, prompt_length - W) from the whole prompt instead of max(0, rows_in_that_write - W): wrong whenever the prompt is longer than W and its first write (a chunk) is shorter than the whole prompt.",
    "fault_25": "Paged cache: the in-page offset is pos & (page_size - 1) instead of pos % page_size (wrong for page sizes that are not powers of two: reads and writes land at wrong offsets).",
    "fault_26": "Paged cache write-back: rows whose page_table entry is -1 are not skipped but written to physical page index -1 (the pool's last page), clobbering the K/V of whichever sequence holds that page.",
    "fault_27": "Ring caches (modulo and compact): tokens_written[b] is set to min(end, slots) instead of end.",
    "fault_28": "Chunked context with ring caches: the cached positions [kv_start, begin) are gathered from ring slots 0, 1, 2, ... in order, as if the ring had never wrapped, instead of from each position's own slot.",
    "fault_29": "Decode reading a RING_COMPACT cache: cache positions are read from slot pos % W, ignoring base (writes still use (pos - base) % W).",
    "fault_30": "SWA_COMPRESS tile walk: an off-diagonal tile is treated as fully visible when its tile distance d < W instead of when d + B - 1 < W, so window-boundary tiles show keys at distance >= W.",
    "fault_31": "Packed custom mask: unpacking reads rows with a stride of floor(kv_len / 32) words while packing used ceil(kv_len / 32), so when the key count is not a multiple of 32 every row after the first reads bits of the wrong rows.",
}
