"""A sliding-window attention kernel in NumPy, as a plain function for the python: DUT.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/numpy_kernel.py:attention

The harness imports this file once per worker and calls attention(p) for each call of the schedule:
the whole prompt (p.call "prefill"), each chunk ("chunked_prefill", p.index the chunk) and each
decode step ("decode_step", p.index the step). p has the fields of swa_dut_v2_params (dut_v2.h) by
the same names, the tensors as NumPy views of the harness's memory, and p.positions: per sequence,
the positions [begin, end) this call computes. Like a serving kernel, a chunk or a decode step reads
the keys before it from the KV cache (p.cache: ring, linear or paged; FP8 codes with an FP8
kv_format) and writes its own keys into the cache.

fault=NAME (python:...numpy_kernel.py:attention:fault=NAME) runs a wrong kernel on purpose, for the
tests: window-plus-one reads one key past the window's lower edge; ring-slot-late writes every ring
slot one late (only the cache check sees it).
"""
import numpy as np

FAULTS = ("window-plus-one", "ring-slot-late")


def describe():
    return {"name": "numpy_kernel"}


def _fp8_values(kv_format):
    """The value of each of the 256 FP8 codes (OCP e4m3 / e5m2; NaN and inf codes as such)."""
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


def _fp8_encode(x, kv_format):
    """FP8 codes of x: nearest value, ties to the even code, saturating at the largest finite value."""
    table = _fp8_values(kv_format)[:0x80]
    finite = table[np.isfinite(table)]
    a = np.minimum(np.abs(x.astype(np.float64)), finite[-1])
    hi = np.clip(np.searchsorted(finite, a), 0, len(finite) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - finite[lo], finite[hi] - a
    code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def _to_float(x, dtype):
    if dtype == "bf16":  # bf16 arrives as its bits (NumPy has no bfloat16)
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def _store_rows(out, rows, values, dtype):
    """values (float32) rounded to the storage dtype, nearest even, into out[rows]."""
    if dtype == "bf16":
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        out[rows] = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    else:
        out[rows] = values


def _slot(cache, b, pos, fault):
    """Where position(s) pos of sequence b live: (first index, second index) into cache.k."""
    if cache.policy == "paged":
        return cache.page_table[b, pos // cache.page_size], pos % cache.page_size
    if cache.policy == "linear":
        slot = pos
    else:
        slot = (pos - (cache.base[b] if cache.policy == "ring-compact" else 0)) % cache.slots
        if fault == "ring-slot-late":
            slot = (slot + 1) % cache.slots
    return np.full_like(pos, b), slot


def _read_cache(p, b, pos):
    """K and V of positions pos of sequence b, as attention reads them, from the cache."""
    c = p.cache
    first, second = _slot(c, b, pos, None)
    k, v = c.k[first, second], c.v[first, second]
    if c.kv_format != "dtype":
        table = _fp8_values(c.kv_format)
        return table[k] * p.k_descale, table[v] * p.v_descale
    return _to_float(k, p.dtype), _to_float(v, p.dtype)


def _write_cache(p, b, begin, end, fault):
    """Stores positions [begin, end) of sequence b in the cache (a ring keeps the last slots only)."""
    c = p.cache
    if c.policy == "ring-compact" and c.tokens_written[b] == 0:
        c.base[b] = max(0, (end - begin) - c.slots)  # fixed by the first write
    lowest = begin if c.policy in ("linear", "paged") else max(begin, end - c.slots, int(c.base[b]))
    pos = np.arange(lowest, end)
    first, second = _slot(c, b, pos, fault)
    keep = first >= 0  # a paged row whose page is -1 is not stored
    rows = p.seq_offsets[b] + pos[keep]
    k, v = p.k[rows], p.v[rows]
    if c.kv_format != "dtype":
        k = _fp8_encode(_to_float(k, p.dtype) / p.k_descale, c.kv_format)
        v = _fp8_encode(_to_float(v, p.dtype) / p.v_descale, c.kv_format)
    c.k[first[keep], second[keep]], c.v[first[keep], second[keep]] = k, v
    c.tokens_written[b] = end


def _fresh_kv(p, rows):
    """K and V of packed rows, as attention reads them (through FP8 when the KV format says so)."""
    k, v = _to_float(p.k[rows], p.dtype), _to_float(p.v[rows], p.dtype)
    if p.kv_format != "dtype":
        table = _fp8_values(p.kv_format)
        k = table[_fp8_encode(k / p.k_descale, p.kv_format)] * p.k_descale
        v = table[_fp8_encode(v / p.v_descale, p.kv_format)] * p.v_descale
    return k, v


def attention(p, fault=None):
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault={fault}: not one of {', '.join(FAULTS)}")
    left = p.window_left + (1 if fault == "window-plus-one" and p.window_left >= 0 else 0)
    group = p.heads_q // p.heads_kv
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        first_row = int(p.seq_offsets[b])
        if p.cache is None:  # prefill: every key of the sequence is here
            key_pos = np.arange(int(p.seq_lens[b]))
            k, v = _fresh_kv(p, first_row + key_pos)
        else:  # keys before the call from the cache, the call's own from p.k / p.v
            lowest = 0 if left < 0 else max(0, begin - left)
            old = np.arange(lowest, begin)
            ok, ov = _read_cache(p, b, old)
            nk, nv = _fresh_kv(p, first_row + np.arange(begin, end))
            key_pos = np.arange(lowest, end)
            k, v = np.concatenate([ok, nk]), np.concatenate([ov, nv])
        q = _to_float(p.q[first_row + begin:first_row + end], p.dtype).astype(np.float64)
        i, j = np.arange(begin, end)[:, None], key_pos[None, :]
        visible = np.ones((end - begin, len(key_pos)), dtype=bool)
        if left >= 0:
            visible &= i - j <= left
        if p.window_right >= 0:
            visible &= j - i <= p.window_right
        kv_head = np.arange(p.heads_q) // group
        s = np.einsum("rhd,nhd->hrn", q, k[:, kv_head].astype(np.float64)) * np.float64(p.scale)
        if p.softcap > 0:
            s = p.softcap * np.tanh(s / p.softcap)
        s = np.where(visible[None], s, -np.inf)
        m = s.max(axis=2, keepdims=True)
        if p.sinks is not None:
            m = np.maximum(m, p.sinks[:, None, None])
        m = np.where(np.isfinite(m), m, 0)  # a row that sees no key outputs 0
        w = np.exp(s - m)
        total = w.sum(axis=2, keepdims=True)
        if p.sinks is not None:
            total = total + np.exp(p.sinks[:, None, None] - m)
        w /= np.where(total > 0, total, 1)
        o = np.einsum("hrn,nhd->rhd", w, v[:, kv_head].astype(np.float64))
        _store_rows(p.out, slice(first_row + begin, first_row + end), o.astype(np.float32), p.dtype)
        if p.cache is not None:
            _write_cache(p, b, begin, end, fault)
