"""A sliding-window attention kernel in PyTorch (CPU), as a plain function for the python: DUT.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/torch_kernel.py:attention

The attention runs in torch on tensors that share the harness's memory (torch.from_numpy: no copy);
the KV cache's layout (ring, linear, paged, FP8 codes) is the NumPy example's, imported from
numpy_kernel.py beside it. Where torch is not installed (Debian: scripts/bench-packages.txt), every
case is a skip that says so.

fault=NAME runs a wrong kernel on purpose, two bugs PyTorch ports have had:
  repeat-not-interleave  GQA by k.repeat(...) instead of repeat_interleave: query head h reads kv
                         head h % heads_kv instead of h // (heads_q / heads_kv)
  p-fp16                 the probabilities rounded to half precision before P.V (a .half() left
                         in, as an fp16 kernel's P is, in fp32 and bf16 layers too)
"""
import numpy as np

import numpy_kernel as nk

try:
    import torch
except ImportError:  # the skip below says so
    torch = None

FAULTS = ("repeat-not-interleave", "p-fp16")


def describe():
    return {"name": "torch_kernel"}


def supports(p):
    if torch is None:
        return "PyTorch is not installed here (Debian: apt-get install python3-torch)"
    return True


def _kv_heads(p, fault):
    group = p.heads_q // p.heads_kv
    heads = np.arange(p.heads_q)
    return torch.from_numpy(heads % p.heads_kv if fault == "repeat-not-interleave" else heads // group)


def attention(p, fault=None):
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault={fault}: not one of {', '.join(FAULTS)}")
    kv_head = _kv_heads(p, fault)
    left, right = p.window_left, p.window_right
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        first_row = int(p.seq_offsets[b])
        if p.cache is None:
            key_pos = np.arange(int(p.seq_lens[b]))
            k, v = nk._fresh_kv(p, first_row + key_pos)
        else:
            lowest = 0 if left < 0 else max(0, begin - left)
            ok, ov = nk._read_cache(p, b, np.arange(lowest, begin))
            nk_, nv = nk._fresh_kv(p, first_row + np.arange(begin, end))
            key_pos = np.arange(lowest, end)
            k, v = np.concatenate([ok, nk_]), np.concatenate([ov, nv])
        q = torch.from_numpy(nk._to_float(p.q[first_row + begin:first_row + end], p.dtype)).double()
        k, v = torch.from_numpy(np.asarray(k)).double()[:, kv_head], torch.from_numpy(np.asarray(v)).double()[:, kv_head]
        i = torch.arange(begin, end)[:, None]
        j = torch.from_numpy(key_pos)[None, :]
        visible = torch.ones(end - begin, len(key_pos), dtype=torch.bool)
        if left >= 0:
            visible &= i - j <= left
        if right >= 0:
            visible &= j - i <= right
        s = torch.einsum("rhd,nhd->hrn", q, k) * p.scale
        if p.softcap > 0:
            s = p.softcap * torch.tanh(s / p.softcap)
        s = s.masked_fill(~visible, float("-inf"))
        if p.sinks is not None:  # one more logit per head, without a value row
            sink = torch.from_numpy(p.sinks.astype(np.float64))[:, None, None].expand(-1, s.shape[1], 1)
            s = torch.cat([s, sink], dim=2)
        w = torch.softmax(s, dim=2)
        if fault == "p-fp16":
            w = w.half().double()
        if p.sinks is not None:
            w = w[:, :, :-1]
        w = torch.nan_to_num(w, nan=0.0)  # a row that sees no key outputs 0
        o = torch.einsum("hrn,nhd->rhd", w, v)
        nk._store_rows(p.out, slice(first_row + begin, first_row + end), o.float().numpy(), p.dtype)
        if p.cache is not None:
            nk._write_cache(p, b, begin, end, None)
