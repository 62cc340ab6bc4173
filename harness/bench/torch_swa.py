#!/usr/bin/env python3
"""PyTorch's sliding-window attention, timed the way swa-bench times the CUDA DUT, for the same-run
comparison: FlexAttention with a sliding-window block mask (compiled), and SDPA with an explicit
boolean mask. The window is keys_including_self: query i sees keys i - W < j <= i.

usage: torch_swa.py --s S --w W --d D --hq HQ --hkv HKV --dtype fp16|bf16|fp32 [--warmups N] [--repeats N]
prints one CSV line per implementation: impl,dtype,median_ms,min_ms,max_ms (or impl,error,<message>)
"""
import argparse
import statistics
import sys


def time_cuda(torch, fn, warmups, repeats):
    for _ in range(warmups):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times), max(times)


def main():
    ap = argparse.ArgumentParser()
    for name in ("s", "w", "d", "hq", "hkv"):
        ap.add_argument(f"--{name}", type=int, required=True)
    ap.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], required=True)
    ap.add_argument("--warmups", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except Exception as e:  # no torch, or one without FlexAttention
        print(f"flex,error,{type(e).__name__}: {e}".replace("\n", " "))
        print(f"sdpa,error,{type(e).__name__}: {e}".replace("\n", " "))
        return 0
    if not torch.cuda.is_available():
        print("flex,error,torch.cuda.is_available() is False")
        print("sdpa,error,torch.cuda.is_available() is False")
        return 0
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(1, a.hq, a.s, a.d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(1, a.hkv, a.s, a.d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(1, a.hkv, a.s, a.d, device="cuda", dtype=dtype, generator=gen)
    window = a.w if a.w > 0 else a.s

    def sliding_window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    try:
        block_mask = create_block_mask(sliding_window, B=None, H=None, Q_LEN=a.s, KV_LEN=a.s, device="cuda")
        flex = torch.compile(flex_attention)
        run = lambda: flex(q, k, v, block_mask=block_mask, enable_gqa=a.hq != a.hkv)
        print("flex,%s,%.6f,%.6f,%.6f" % ((a.dtype,) + time_cuda(torch, run, a.warmups, a.repeats)))
    except Exception as e:
        print(f"flex,error,{type(e).__name__}: {e}".replace("\n", " ")[:500])
    sys.stdout.flush()
    try:
        idx = torch.arange(a.s, device="cuda")
        mask = (idx[:, None] >= idx[None, :]) & (idx[:, None] - idx[None, :] < window)
        run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=a.hq != a.hkv)
        print("sdpa,%s,%.6f,%.6f,%.6f" % ((a.dtype,) + time_cuda(torch, run, a.warmups, a.repeats)))
    except Exception as e:
        print(f"sdpa,error,{type(e).__name__}: {e}".replace("\n", " ")[:500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
