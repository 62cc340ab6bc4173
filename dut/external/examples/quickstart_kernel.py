"""The README's quick start: prefill attention in NumPy, returning its output (the harness rounds it).
    swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/quickstart_kernel.py:attention"""
import numpy as np


def describe():  # what it runs; every other case is a skip that says so
    return {"modes": ["prefill"], "dtypes": ["fp32", "fp16"], "kv_formats": ["dtype"],  # K/V as values, not FP8 codes
            "mask_formats": ["none"], "features": []}


def attention(p):
    out = np.zeros(p.out.shape, np.float32)
    for start, n in zip(p.seq_offsets, p.seq_lens):
        q, k, v = (x[start:start + n].astype(np.float32) for x in (p.q, p.k, p.v))
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        seen = (i - j <= p.window_left if p.window_left >= 0 else True) & (j <= i)
        for h in range(p.heads_q):
            g = h // (p.heads_q // p.heads_kv)
            s = np.where(seen, p.scale * q[:, h] @ k[:, g].T, -np.inf)
            w = np.exp(s - s.max(axis=1, keepdims=True))
            out[start:start + n, h] = (w / w.sum(axis=1, keepdims=True)) @ v[:, g]
    return out
