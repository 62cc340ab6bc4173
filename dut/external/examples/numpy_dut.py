#!/usr/bin/env python3
"""An external DUT in Python, speaking the swa-harness process protocol (harness/README.md).

    swa-harness run SWEEP.yaml --dut "exec:/usr/bin/python3 dut/external/examples/numpy_dut.py"

The harness runs `COMMAND REQUEST.h5 RESPONSE.h5`. This DUT reads the request, computes sliding-
window attention with numpy in float32 (any schedule gives the dense result, so it computes the
dense result), writes /out and, in chunked_prefill and decode, the KV cache the schedule ends with
(/cache, protocol 2), with soft-capping and attention sinks (protocol 3), and the FP8 KV cache
(protocol 4: K/V read as fp8(x / descale) * descale, /cache holding the FP8 codes), and the paged KV
cache (protocol 5: /cache is the page pool, filled call by call through the page tables the request
gives in /page_tables). It answers the describe request (its name, cache_per_call = 1) and then
returns the cache after every call too (/caches/C), which the harness checks call by call.

--fail MODE misbehaves on purpose, for the harness's tests. --fault FAULT is a wrong kernel that
still runs, one of the bugs real SWA kernels have had (the comment where `attention` applies it says
which): bisect's tests plant each one and check the class it names (harness/tests/test_bisect.py).
window-plus-one and cache-slot-shift are the built-in classes; cache-slot-shift writes every ring slot
one late, which only the KV cache check sees; nan-last-row leaves head 0 of the last token NaN;
cache-slip-repaired leaves a wrong slot in the cache after every call but the last, which only a
cache checked call by call sees (--no-cache-per-call hides it: the end-of-schedule limit).
"""
import argparse
import sys
import time

import h5py
import numpy as np

FAULTS = ["window-plus-one", "cache-slot-shift", "no-sinks", "nan-last-row", "scale-one-over-d", "packed-rows",
          "drop-own-key", "one-future-key", "kv-fp16", "v-from-k", "p-bf16", "last-key-tile", "chunk-forgets-cache",
          "decode-window-plus-one", "read-before-write", "clamp-window-start", "stale-max", "fp8-no-saturation",
          "fp8-descale-twice", "page-table-ignored", "cache-slip-repaired"]


def round_bf16(x):
    """x (float32) rounded to bfloat16, nearest even, kept as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def fp8_table(kv_format):
    """The values of the non-negative finite FP8 codes 0..largest, ascending (OCP e4m3 / e5m2)."""
    m_bits, bias, largest = (3, 7, 0x7E) if kv_format == "fp8-e4m3" else (2, 15, 0x7B)
    codes = np.arange(largest + 1)
    e, m = codes >> m_bits, codes & ((1 << m_bits) - 1)
    normal = np.ldexp((1 << m_bits) + m, e - bias - m_bits)
    subnormal = np.ldexp(m.astype(np.float64), 1 - bias - m_bits)
    return np.where(e == 0, subnormal, normal)


def fp8_encode(x, kv_format, saturate=True):
    """FP8 codes of x (float64 array): nearest value, ties to the even code, saturating."""
    table = fp8_table(kv_format)
    a = np.minimum(np.abs(x), table[-1])
    hi = np.clip(np.searchsorted(table, a), 0, len(table) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - table[lo], table[hi] - a
    code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi)
    if not saturate:  # what rounds beyond the largest value becomes NaN (e4m3) or inf (e5m2)
        half = table[-1] + (table[-1] - table[-2]) / 2
        e4m3 = kv_format == "fp8-e4m3"  # its largest code is even, so a tie rounds down to it
        over = (np.abs(x) > half) | ((np.abs(x) == half) & (not e4m3))
        code = np.where(over, 0x7F if e4m3 else 0x7C, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def fp8_decode(codes, kv_format):
    m_bits, bias = (3, 7) if kv_format == "fp8-e4m3" else (2, 15)
    c = codes.astype(np.int64)
    e, m = (c & 0x7F) >> m_bits, c & ((1 << m_bits) - 1)
    value = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - m_bits),
                     np.ldexp(((1 << m_bits) + m).astype(np.float64), e - bias - m_bits))
    top = (1 << (7 - m_bits)) - 1
    special = (e == top) & ((m == 7) if kv_format == "fp8-e4m3" else True)
    value = np.where(special, np.where((kv_format == "fp8-e5m2") & (m == 0), np.inf, np.nan), value)
    return np.where(c & 0x80, -value, value)


def attention(q, k, v, seq_lens, left, right, scale, softcap=0.0, sinks=None, fault=None, prompt_lens=None,
              mode="prefill", chunk=0):
    n, hq, d = q.shape
    hkv = k.shape[1]
    out = np.zeros((n, hq, d), dtype=np.float32)
    if fault == "scale-one-over-d":  # 1/D where 1/sqrt(D) is meant
        scale = np.float32(1.0 / d)
    if fault == "kv-fp16":  # a KV cache held in fp16 for an fp32 layer
        k, v = k.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)
    if fault == "v-from-k":  # the values pointer set to the keys
        v = k
    start = 0
    prompt_lens = seq_lens if prompt_lens is None else prompt_lens
    for length, prompt in zip(seq_lens, prompt_lens):
        # packed-rows: the window is applied to packed row numbers, keys from the whole batch
        lo = 0 if fault == "packed-rows" else start
        i = np.arange(start - lo, start - lo + length)[:, None]
        j = np.arange(start + length - lo)[None, :]
        visible = j <= i + max(right, 0) if right >= 0 else np.ones((length, start + length - lo), dtype=bool)
        if left >= 0:
            visible &= i - j <= left
        decode_row = (i >= prompt) & (mode == "decode")
        if fault == "drop-own-key":
            visible &= i != j
        if fault == "one-future-key":
            visible |= j == i + 1
        if fault == "last-key-tile" and length % 16:  # key tiles counted as length // 16, rounded down
            visible &= j < length // 16 * 16
        if fault == "chunk-forgets-cache" and mode != "prefill" and chunk > 0:  # chunks after the first see only themselves
            visible &= (j >= i // chunk * chunk) | decode_row
        if fault == "decode-window-plus-one" and left >= 0:  # the decode kernel's window is W + 1
            visible |= decode_row & (i - j == left + 1)
        if fault == "read-before-write" and left >= 0:  # a decode step reads its ring slot before writing it
            slots = left + 1
            visible &= ~(decode_row & (i == j))
            visible |= decode_row & (i - j == slots)
        if fault == "clamp-window-start" and left >= 0:  # the first rows read W keys from 0 on
            visible |= (i < left) & (j <= left)
        for h in range(hq):
            g = h // (hq // hkv)
            s = scale * (q[start:start + length, h, :] @ k[lo:start + length, g, :].T)
            if softcap > 0:
                s = np.float32(softcap) * np.tanh(s / np.float32(softcap))
            s = np.where(visible, s, -np.inf)
            if fault == "stale-max":
                p = stale_max_weights(s, 16)
            else:
                m = s.max(axis=1, keepdims=True)
                if sinks is not None:
                    m = np.maximum(m, sinks[h])
                m = np.where(np.isfinite(m), m, 0)  # a row with no key outputs 0, FlashAttention's rule
                p = np.exp(s - m)
                if fault == "p-bf16":  # P rounded to bf16 before P.V, in an fp32 layer
                    p = round_bf16(p)
                total = p.sum(axis=1, keepdims=True)
                if sinks is not None:
                    total += np.exp(sinks[h] - m)
                p /= np.where(total > 0, total, 1)
            out[start:start + length, h, :] = p @ v[lo:start + length, g, :]
        start += length
    return out


def stale_max_weights(s, tile):
    """Online softmax over key tiles whose accumulator is never rescaled when the running max grows
    (the denominator is): each key keeps exp(s - the max known when its tile was read)."""
    p = np.zeros_like(s)
    for r in range(s.shape[0]):
        running, total = -np.inf, 0.0
        for t0 in range(0, s.shape[1], tile):
            block = s[r, t0:t0 + tile]
            if not np.isfinite(block).any():
                continue
            new = max(running, block.max())
            total = total * np.exp(running - new) + np.exp(block - new).sum()
            p[r, t0:t0 + tile] = np.exp(block - new)
            running = new
        if total > 0:
            p[r] /= total
    return p


def call_rows(f):
    """Per call of the schedule (prompt chunks, then decode steps), per sequence, the rows [s, e) it writes."""
    seq_lens, prompt_lens, chunk = f["seq_lens"][:], f["prompt_lens"][:], int(f.attrs["chunk"])
    sizes = [chunk if chunk > 0 else p for p in prompt_lens]
    calls = max(-(-int(p) // int(c)) for p, c in zip(prompt_lens, sizes))
    rows = [[(min(p, c * n), min(p, (c + 1) * n)) for p, n in zip(prompt_lens, sizes)] for c in range(calls)]
    if f.attrs["mode"] == "decode":
        rows += [[(p + t, p + t + 1) for p in prompt_lens] for t in range(int(f.attrs["decode_steps"]))]
    return rows


def written_after(f, calls):
    """Per sequence, the end of what the first `calls` calls of the schedule wrote."""
    ends = np.zeros(len(f["seq_lens"][:]), dtype=np.int64)
    for rows in call_rows(f)[:calls]:
        for b, (s, e) in enumerate(rows):
            ends[b] = max(ends[b], e)
    return ends


def paged_cache_after(f, k, v, fault, calls):
    """The page pool after the first `calls` calls: each call writes its rows through the page table it
    sees (a row whose page is -1 is not stored); pages freed and taken again are overwritten in call order."""
    seq_lens, tables, page = f["seq_lens"][:], f["page_tables"][:], int(f.attrs["page_size"])
    starts = np.concatenate([[0], np.cumsum(seq_lens)[:-1]])
    ck = np.zeros((int(f.attrs["pool_pages"]), page, k.shape[1], k.shape[2]), dtype=k.dtype)
    cv = np.zeros_like(ck)
    for table, rows in list(zip(tables, call_rows(f)))[:calls]:
        for b, (s, e) in enumerate(rows):
            for pos in range(s, e):
                physical = table[b, pos // page]
                if fault == "page-table-ignored" and physical >= 0:  # sequence 0's logical pages taken as physical
                    physical = pos // page if b == 0 else physical
                if physical >= 0:
                    ck[physical, pos % page], cv[physical, pos % page] = k[starts[b] + pos], v[starts[b] + pos]
    return ck, cv, np.zeros(len(seq_lens), dtype=np.int64), written_after(f, calls)


def cache_after(f, k, v, fault, calls):
    """The cache after the first `calls` calls of the schedule: every position from the sequence's base
    up to what those calls wrote, in order."""
    if f.attrs["cache"] == "paged":
        return paged_cache_after(f, k, v, fault, calls)
    seq_lens, prompt_lens = f["seq_lens"][:], f["prompt_lens"][:]
    slots, policy, chunk = int(f.attrs["cache_slots"]), f.attrs["cache"], int(f.attrs["chunk"])
    batch, hkv, d = len(seq_lens), k.shape[1], k.shape[2]
    ck = np.zeros((batch, slots, hkv, d), dtype=k.dtype)  # float32, or uint8 FP8 codes
    cv = np.zeros_like(ck)
    base = np.zeros(batch, dtype=np.int64)
    start = 0
    ends = written_after(f, calls)
    for b, (length, prompt) in enumerate(zip(seq_lens, prompt_lens)):
        if policy == "ring-compact":  # fixed by the first write: the first chunk (or the whole prompt)
            first = min(chunk, prompt) if chunk > 0 else prompt
            base[b] = max(0, first - slots)
        for pos in range(base[b], ends[b]):
            slot = pos if policy == "linear" else (pos - base[b]) % slots
            if fault == "cache-slot-shift" and policy != "linear":
                slot = (slot + 1) % slots
            ck[b, slot], cv[b, slot] = k[start + pos], v[start + pos]
        start += length
    if fault == "cache-slip-repaired" and 0 < calls < len(call_rows(f)):
        ck[0, 0], cv[0, 0] = ck[0, 0] + 1, cv[0, 0] + 1  # wrong mid-schedule; the next call rewrites it
    return ck, cv, base, ends


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fail", choices=["exit", "garbled", "wrong-shape", "hang", "report-error", "no-response"])
    ap.add_argument("--not-supported", metavar="MODE", choices=["prefill", "chunked_prefill", "decode"],
                    help="decline every case of this mode (a skip, as a kernel without it would answer)")
    ap.add_argument("--fault", choices=FAULTS)
    ap.add_argument("--describe-modes", metavar="LIST", help="the modes the describe answer names (default: all)")
    ap.add_argument("--no-describe", action="store_true", help="answer the describe request as a DUT without it would")
    ap.add_argument("--no-cache-per-call", action="store_true", help="describe cache_per_call = 0: one cache at the end")
    ap.add_argument("request")
    ap.add_argument("response")
    args = ap.parse_args()
    if args.fail == "exit":
        print("numpy_dut: failing on purpose", file=sys.stderr)
        return 3
    if args.fail == "hang":
        time.sleep(3600)
    if args.fail == "no-response":
        return 0
    if args.fail == "garbled":
        with open(args.response, "wb") as f:
            f.write(b"this is not an HDF5 file")
        return 0
    with h5py.File(args.request, "r") as f:
        if f.attrs.get("request") in ("describe", b"describe"):
            return describe(args)
        mode = f.attrs["mode"].decode() if isinstance(f.attrs["mode"], bytes) else str(f.attrs["mode"])
        if args.not_supported == mode:  # how a kernel declines a case: a skip row, not an error
            with h5py.File(args.response, "w") as r:
                r.attrs["error"] = f"not supported: numpy_dut was told to decline {mode}"
            return 0
        if f.attrs["protocol_version"] not in (2, 3, 4, 5):
            print("numpy_dut: unsupported protocol version", file=sys.stderr)
            return 2
        q, k, v = (f[name][:].astype(np.float32) for name in ("q", "k", "v"))
        kv_format = f.attrs.get("kv_format", "dtype")
        if isinstance(kv_format, bytes):
            kv_format = kv_format.decode()
        codes = None
        if kv_format != "dtype":  # protocol 4: every K/V value is read back from its FP8 code
            descales = [float(f.attrs["k_descale"]), float(f.attrs["v_descale"])]
            twice = 2 if args.fault == "fp8-descale-twice" else 1
            codes = [fp8_encode(x.astype(np.float64) / s, kv_format, args.fault != "fp8-no-saturation")
                     for x, s in zip((k, v), descales)]
            k, v = ((fp8_decode(c, kv_format) * s ** twice).astype(np.float32) for c, s in zip(codes, descales))
        left = int(f.attrs["window_left"])
        if args.fault == "window-plus-one" and left >= 0:
            left += 1
        softcap = float(f.attrs.get("softcap", 0.0))
        sinks = f["sinks"][:].astype(np.float32) if "sinks" in f else None
        if args.fault == "no-sinks":
            sinks = None  # ignores the sinks: what a protocol-2 kernel would do
        out = attention(q, k, v, f["seq_lens"][:], left, int(f.attrs["window_right"]), np.float32(f.attrs["scale"]),
                        softcap, sinks, args.fault, f["prompt_lens"][:], f.attrs["mode"], int(f.attrs["chunk"]))
        cache_k, cache_v = (k, v) if codes is None else codes
        calls = len(call_rows(f)) if f.attrs["mode"] != "prefill" else 0
        cache = cache_after(f, cache_k, cache_v, args.fault, calls) if calls else None
        # cache_per_call (the describe answer asked for it): the cache after each call, /caches/C
        per_call = [cache_after(f, cache_k, cache_v, args.fault, c + 1) for c in range(calls)] \
            if f.attrs.get("cache_per_call", 0) == 1 else []
        if args.fault == "nan-last-row":  # a kernel that leaves its last row unnormalised: 0/0
            out[-1, 0, :] = np.nan
    with h5py.File(args.response, "w") as f:
        if args.fail == "report-error":
            f.attrs["error"] = "numpy_dut cannot do this on purpose"
            return 0
        f["out"] = out[:, :-1, :] if args.fail == "wrong-shape" else out
        if cache is not None:
            for name, value in zip(("k", "v", "base", "tokens_written"), cache):
                f["cache/" + name] = value
        for c, snapshot in enumerate(per_call):
            for name, value in zip(("k", "v", "base", "tokens_written"), snapshot):
                f[f"caches/{c}/{name}"] = value
    return 0


def describe(args):
    """The answer to the describe request (EXEC_PROTOCOL.md): what this DUT runs, asked once per run."""
    with h5py.File(args.response, "w") as r:
        if args.no_describe:
            r.attrs["error"] = "numpy_dut: no describe here"
            return 0
        r.attrs["name"] = "numpy_dut"
        if args.describe_modes:
            r.attrs["modes"] = args.describe_modes
        r.attrs["cache_per_call"] = 0 if args.no_cache_per_call else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
