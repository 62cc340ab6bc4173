#!/usr/bin/env python3
"""PyTorch CPU sliding-window attention on swa-bench's shapes, timed in the same run as the CPU DUT.

Prefill: query blocks of 1024 rows, each against the keys its window reaches, with an explicit
boolean window mask: F.scaled_dot_product_attention where this PyTorch has it (>= 2.0, "sdpa"),
else softmax(Q K^T * scale + mask) V written out ("eager", what 1.13 offers). GQA by repeating K/V
heads. Decode: one query per head against the last W cached keys (no mask needed), same two paths.
A dtype this PyTorch's CPU matmul lacks (1.13: fp16) is converted to fp32 inside the timed call
("-upcast" in the implementation's name), as a user of that PyTorch would have to.
The window is keys_including_self: query i sees keys i - W < j <= i (W = 0: all j <= i).

usage: torch_cpu_swa.py --mode prefill|decode --s S --w W --d D --hq HQ --hkv HKV --dtype fp16|bf16|fp32
                        [--warmups N] [--repeats N]
prints one CSV line: impl,mode,dtype,median_ms,min_ms,max_ms,threads,torch_version (or impl,error,<message>)
"""
import argparse
import os
import statistics
import sys
import time


def timed(fn, warmups, repeats):
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["prefill", "decode"], required=True)
    for name in ("s", "w", "d", "hq", "hkv"):
        ap.add_argument(f"--{name}", type=int, required=True)
    ap.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], required=True)
    ap.add_argument("--warmups", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # no torch: the bench says so and goes on
        print(f"torch,error,{type(e).__name__}: {e}".replace("\n", " "))
        return 0
    torch.set_num_threads(os.cpu_count() or 1)
    impl = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "eager"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    gen = torch.Generator().manual_seed(1)
    rep = a.hq // a.hkv
    window = a.w if a.w > 0 else a.s + 1
    scale = a.d ** -0.5

    upcast = False  # this PyTorch's CPU matmul lacks the dtype (1.13 has no fp16 addmm): convert to fp32 inside the timing

    def attend(q, k, v, mask):
        # q [hq, m, d]; k, v [hkv, n, d]; mask [m, n] bool (True = visible) or None
        if upcast:
            q, k, v = q.float(), k.float(), v.float()
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        if impl == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        s = torch.matmul(q, k.transpose(-1, -2)) * scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v)

    try:
        if a.mode == "prefill":
            q = torch.randn(a.hq, a.s, a.d, generator=gen).to(dtype)
            k = torch.randn(a.hkv, a.s, a.d, generator=gen).to(dtype)
            v = torch.randn(a.hkv, a.s, a.d, generator=gen).to(dtype)
            block = 1024
            blocks = []
            for start in range(0, a.s, block):
                end = min(a.s, start + block)
                first = max(0, start - window + 1)
                i = torch.arange(start, end)[:, None]
                j = torch.arange(first, end)[None, :]
                blocks.append((start, end, first, (j <= i) & (i - j < window)))

            def run():
                for start, end, first, mask in blocks:
                    attend(q[:, start:end], k[:, first:end], v[:, first:end], mask)
        else:
            keys = min(a.s + 1, window)
            q = torch.randn(a.hq, 1, a.d, generator=gen).to(dtype)
            k = torch.randn(a.hkv, keys, a.d, generator=gen).to(dtype)
            v = torch.randn(a.hkv, keys, a.d, generator=gen).to(dtype)

            def run():
                attend(q, k, v, None)

        try:
            run()
        except RuntimeError as e:
            if "not implemented" not in str(e):
                raise
            upcast = True
            impl += "-upcast"
        median, lo, hi = timed(run, a.warmups, a.repeats)
        print(f"{impl},{a.mode},{a.dtype},{median:.6f},{lo:.6f},{hi:.6f},{torch.get_num_threads()},{torch.__version__}")
    except Exception as e:  # e.g. a dtype this PyTorch's CPU matmul lacks
        print(f"{impl},error,{type(e).__name__}: {e}".replace("\n", " ")[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
