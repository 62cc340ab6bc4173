#!/usr/bin/env python3
"""An external DUT in Python, speaking the swa-harness process protocol (harness/README.md).

    swa-harness run SWEEP.yaml --dut "exec:/usr/bin/python3 dut/external/examples/numpy_dut.py"

The harness runs `COMMAND REQUEST.h5 RESPONSE.h5`. This DUT reads the request, computes sliding-
window attention with numpy in float32 (any schedule gives the dense result, so it ignores the
cache and chunking), and writes /out. --fail MODE misbehaves on purpose, for the harness's tests.
"""
import argparse
import sys
import time

import h5py
import numpy as np


def attention(q, k, v, seq_lens, left, right, scale):
    n, hq, d = q.shape
    hkv = k.shape[1]
    out = np.zeros((n, hq, d), dtype=np.float32)
    start = 0
    for length in seq_lens:
        i = np.arange(length)[:, None]
        j = np.arange(length)[None, :]
        visible = np.ones((length, length), dtype=bool)
        if left >= 0:
            visible &= i - j <= left
        if right >= 0:
            visible &= j - i <= right
        for h in range(hq):
            g = h // (hq // hkv)
            s = scale * (q[start:start + length, h, :] @ k[start:start + length, g, :].T)
            s = np.where(visible, s, -np.inf)
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[start:start + length, h, :] = p @ v[start:start + length, g, :]
        start += length
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fail", choices=["exit", "garbled", "wrong-shape", "hang", "report-error", "no-response"])
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
        if f.attrs["protocol_version"] != 1:
            print("numpy_dut: unsupported protocol version", file=sys.stderr)
            return 2
        q, k, v = (f[name][:].astype(np.float32) for name in ("q", "k", "v"))
        out = attention(q, k, v, f["seq_lens"][:], int(f.attrs["window_left"]), int(f.attrs["window_right"]),
                        np.float32(f.attrs["scale"]))
    with h5py.File(args.response, "w") as f:
        if args.fail == "report-error":
            f.attrs["error"] = "numpy_dut cannot do this on purpose"
            return 0
        f["out"] = out[:, :-1, :] if args.fail == "wrong-shape" else out
    return 0


if __name__ == "__main__":
    sys.exit(main())
