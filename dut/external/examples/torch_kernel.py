"""A sliding-window attention kernel in PyTorch, as a plain function for the python: DUT.

    swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/torch_kernel.py:attention
    swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/torch_kernel.py:attention:device=cuda

The attention runs in torch on p.torch(NAME): torch tensors over the harness's memory (no copy on the
CPU; bf16 as torch.bfloat16), written back into p.out through its tensor. device=cuda runs it on a
GPU (a copy there and back, dut/python/README.md "PyTorch"). The KV cache's layout (ring, linear,
paged, FP8 codes) is the NumPy example's, imported from numpy_kernel.py beside it. Where torch is
not installed (Debian: scripts/bench-packages.txt), every case is a skip that says so.

fault=NAME runs a wrong kernel on purpose, two bugs PyTorch ports have had:
  repeat-not-interleave  GQA by k.repeat(...) instead of repeat_interleave: query head h reads kv
                         head h % heads_kv instead of h // (heads_q / heads_kv)
  p-fp16                 the probabilities rounded to half precision before P.V (a .half() left
                         in, as an fp16 kernel's P is, in fp32 and bf16 layers too)
"""
import types

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


def _kv_heads(p, fault, device):
    heads = torch.arange(p.heads_q, device=device)
    return heads % p.heads_kv if fault == "repeat-not-interleave" else heads // (p.heads_q // p.heads_kv)


def _fresh_kv(p, t, first, last):
    """K and V of packed rows [first, last) as float64 tensors (through FP8 when the KV format says so:
    the rounding is numpy_kernel's, torch 1.13 has no FP8 type)."""
    if p.kv_format == "dtype":
        return t.k[first:last].double(), t.v[first:last].double()
    k, v = nk._fresh_kv(p, np.arange(first, last))
    return torch.from_numpy(k).double().to(t.q.device), torch.from_numpy(v).double().to(t.q.device)


def attention(p, fault=None, device=None):
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault={fault}: not one of {', '.join(FAULTS)}")
    # q, k, v, out, sinks as torch tensors (on another device, out's copy is written back after the call;
    # the cache stays NumPy's here: its writes through numpy_kernel must not be overwritten by a copy)
    t = types.SimpleNamespace(**{name: p.torch(name, device) for name in ("q", "k", "v", "out", "sinks")})
    kv_head = _kv_heads(p, fault, t.q.device)
    left, right = p.window_left, p.window_right
    for b in range(p.batch):
        begin, end = (int(x) for x in p.positions[b])
        if begin >= end:
            continue
        first_row = int(p.seq_offsets[b])
        if p.cache is None:
            lowest = 0
            k, v = _fresh_kv(p, t, first_row, first_row + int(p.seq_lens[b]))
        else:  # the keys before this call from the cache (numpy_kernel's layout), its own from p.k / p.v
            lowest = 0 if left < 0 else max(0, begin - left)
            ok, ov = nk._read_cache(p, b, np.arange(lowest, begin))
            nk_, nv = _fresh_kv(p, t, first_row + begin, first_row + end)
            k = torch.cat([torch.from_numpy(np.asarray(ok, dtype=np.float64)).to(nk_.device), nk_])
            v = torch.cat([torch.from_numpy(np.asarray(ov, dtype=np.float64)).to(nv.device), nv])
        q = t.q[first_row + begin:first_row + end].double()
        k, v = k[:, kv_head], v[:, kv_head]
        i = torch.arange(begin, end, device=q.device)[:, None]
        j = torch.arange(lowest, lowest + k.shape[0], device=q.device)[None, :]
        visible = torch.ones(end - begin, k.shape[0], dtype=torch.bool, device=q.device)
        if left >= 0:
            visible &= i - j <= left
        if right >= 0:
            visible &= j - i <= right
        s = torch.einsum("rhd,nhd->hrn", q, k) * p.scale
        if p.softcap > 0:
            s = p.softcap * torch.tanh(s / p.softcap)
        s = s.masked_fill(~visible, float("-inf"))
        if t.sinks is not None:  # one more logit per head, without a value row
            s = torch.cat([s, t.sinks.double()[:, None, None].expand(-1, s.shape[1], 1)], dim=2)
        w = torch.softmax(s, dim=2)
        if fault == "p-fp16":
            w = w.half().double()
        if t.sinks is not None:
            w = w[:, :, :-1]
        w = torch.nan_to_num(w, nan=0.0)  # a row that sees no key outputs 0
        o = torch.einsum("hrn,nhd->rhd", w, v)
        t.out[first_row + begin:first_row + end] = o.float().to(t.out.dtype)  # bf16: round to nearest even
        if p.cache is not None:
            nk._write_cache(p, b, begin, end, None)
