#!/usr/bin/env python3
"""A python: kernel run as an exec: DUT (dut/external/EXEC_PROTOCOL.md): one process per request,
the schedule replayed from the request with the same glue (swa_python_dut.py) that the python: DUT
uses. For measuring what the python: DUT saves, and for a kernel that must run where the harness
cannot (another machine, another container).

    swa-harness run SWEEP --dut "exec:/usr/bin/python3 dut/python/exec_adapter.py TARGET:FUNCTION[:k=v...]"

--record DIR also copies each request into DIR; --time DIR TARGET:FUNCTION then loads every request
recorded there in this one process and prints the kernel's total time over them, measured inside
Python around each call of the function (the time the python: DUT could at best reach).
"""
import argparse
import glob
import os
import shutil
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swa_python_dut as glue  # noqa: E402

# The names the exec protocol and sweep files use: the golden's enum tables, spelt out so this runs
# where only h5py and NumPy are; test_python_dut.py keeps them equal to swa_harness.choices().
CHOICES = {"dtypes": ["fp32", "fp16", "bf16"], "modes": ["prefill", "chunked_prefill", "decode"],
           "cache_policies": ["ring-modulo", "ring-compact", "linear", "paged"],
           "kv_formats": ["dtype", "fp8-e4m3", "fp8-e5m2"], "mask_formats": ["none", "swa-norm", "swa-compress"]}


def attr(f, name, default=None):
    value = f.attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else value


def storage(x, dtype):
    """float32 values exactly representable in dtype, as the python: DUT's arrays hold them."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16)
    if dtype == "bf16":
        return (x.view(np.uint32) >> 16).astype(np.uint16)
    return x


def to_float(a, dtype):
    if a.dtype == np.uint8:
        return a.astype(np.float32)  # FP8 codes, returned as the integers they are
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def address(a):
    return 0 if a is None else a.ctypes.data


class Schedule:
    """One request's case: its arrays, the fields the glue takes, and the calls of its schedule."""

    def __init__(self, f, spec):
        self.spec = spec
        self.dtype, self.mode = attr(f, "dtype"), attr(f, "mode")
        self.q, self.k, self.v = (storage(f[n][:], self.dtype) for n in ("q", "k", "v"))
        n, hq, d = self.q.shape
        hkv = self.k.shape[1]
        self.seq_lens = f["seq_lens"][:].astype(np.int32)
        self.prompts = f["prompt_lens"][:].astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.seq_lens, dtype=np.int64)])
        self.out = np.full((n, hq, d), 0x7FC0 if self.dtype == "bf16" else np.nan, self.q.dtype)  # NaN-poisoned
        self.mask = f["mask"][:].astype(np.float32) if "mask" in f else None
        self.sinks = f["sinks"][:].astype(np.float32) if "sinks" in f else None
        kv_format = attr(f, "kv_format", "dtype")
        self.fields = {
            "q": address(self.q), "k": address(self.k), "v": address(self.v), "out": address(self.out),
            "dtype": self.dtype, "q_row_stride": hq * d, "q_head_stride": d, "k_row_stride": hkv * d,
            "k_head_stride": d, "v_row_stride": hkv * d, "v_head_stride": d, "out_row_stride": hq * d,
            "out_head_stride": d, "batch": len(self.seq_lens), "seq_lens": address(self.seq_lens),
            "seq_offsets": address(self.offsets), "heads_q": hq, "heads_kv": hkv, "head_size": d,
            "window_left": int(attr(f, "window_left")), "window_right": int(attr(f, "window_right")),
            "scale": float(attr(f, "scale")), "mode": self.mode, "cache_policy": attr(f, "cache", "linear"),
            "chunk": int(attr(f, "chunk", 0)), "decode_steps": int(attr(f, "decode_steps", 0)),
            "mask_format": attr(f, "mask_format", "none"), "mask": address(self.mask),
            "mask_rows": 0 if self.mask is None else self.mask.shape[0],
            "mask_effective_window": int(attr(f, "mask_effective_window", 0)),
            "mask_block": int(attr(f, "mask_block", 0)), "sinks": address(self.sinks),
            "softcap": float(attr(f, "softcap", 0.0)), "kv_format": kv_format,
            "k_descale": float(attr(f, "k_descale", 1.0)), "v_descale": float(attr(f, "v_descale", 1.0)),
            "page_size": int(attr(f, "page_size", 0)), "pool_pages": int(attr(f, "pool_pages", 0)),
        }
        self.cache, self.page_tables = None, None
        if self.mode != "prefill":
            self.cache = self.make_cache(f, hkv, d, kv_format)
        self.per_call = int(attr(f, "cache_per_call", 0)) == 1

    def make_cache(self, f, hkv, d, kv_format):
        policy, batch = self.fields["cache_policy"], len(self.seq_lens)
        paged = policy == "paged"
        self.page_tables = f["page_tables"][:].astype(np.int32) if paged else None
        width = self.page_tables.shape[2] if paged else 0
        rows, per_row = (int(attr(f, "pool_pages")), int(attr(f, "page_size"))) if paged else (batch, int(attr(f, "cache_slots")))
        dt = np.uint8 if kv_format != "dtype" else self.q.dtype
        self.ck, self.cv = np.zeros((rows, per_row, hkv, d), dt), np.zeros((rows, per_row, hkv, d), dt)
        self.base, self.written = np.zeros(batch, np.int64), np.zeros(batch, np.int64)
        self.table = np.full((batch, max(width, 1)), -1, np.int32)
        return {"policy": policy, "dtype": self.dtype, "kv_format": kv_format, "batch": batch, "heads_kv": hkv,
                "head_size": d, "page_size": per_row if paged else 0, "slots": 0 if paged else per_row,
                "pages": rows if paged else 0, "table_width": width, "k": address(self.ck), "v": address(self.cv),
                "base": address(self.base), "tokens_written": address(self.written),
                "page_table": address(self.table) if paged else 0}

    def calls(self):
        return glue.schedule(self.mode, self.prompts, self.fields["chunk"], self.fields["decode_steps"])

    def run(self, timed=None):
        """Runs the schedule; the first failure's message, or "". `timed` collects, per call, the
        function's time and the whole glue call's (views, checks and the function), in ms."""
        rc, message, _ = glue.call(self.spec, "supports", 0, self.fields, None)
        if rc == 0:
            return "not supported: " + message
        self.snapshots = []
        for number, (op, index) in enumerate(self.calls()):
            if self.page_tables is not None:
                self.table[...] = self.page_tables[number]
            start = time.perf_counter()
            rc, message, _ = glue.call(self.spec, op, index, self.fields, self.cache)
            if rc != 0:
                return message
            if timed is not None:  # the function's own wall time, which the glue keeps (not its kernel_ms)
                timed.append((glue._targets[self.spec].wall_ms, (time.perf_counter() - start) * 1e3))
            if self.cache and self.per_call:
                self.snapshots.append(self.cache_arrays())
        return ""

    def cache_arrays(self):
        return {"k": to_float(self.ck, self.dtype), "v": to_float(self.cv, self.dtype), "base": self.base.copy(),
                "tokens_written": self.written.copy()}


def describe(spec, response):
    d = glue._targets[spec].described
    with h5py.File(response, "w") as r:
        r.attrs["name"] = d["name"]
        for key in ("modes", "dtypes", "cache_policies", "kv_formats", "mask_formats", "features"):
            if key in d:
                r.attrs[key] = ",".join(d[key])
        if "head_sizes" in d:
            r.attrs["head_sizes"] = ",".join(map(str, d["head_sizes"]))
        r.attrs["cache_per_call"] = 1


def serve(spec, request, response):
    with h5py.File(request, "r") as f:
        if attr(f, "request") == "describe":
            return describe(spec, response)
        s = Schedule(f, spec)
    failure = s.run()
    with h5py.File(response, "w") as r:
        if failure:
            r.attrs["error"] = failure
            return
        r["out"] = to_float(s.out, s.dtype)
        if s.cache:
            for name, value in s.cache_arrays().items():
                r["cache/" + name] = value
            for c, snapshot in enumerate(s.snapshots):
                for name, value in snapshot.items():
                    r[f"caches/{c}/{name}"] = value


def time_recorded(spec, folder):
    """The function's total time over every request recorded in `folder`, in this one process."""
    calls, files, failures = [], 0, 0
    for path in sorted(glob.glob(os.path.join(folder, "*.h5"))):
        with h5py.File(path, "r") as f:
            if attr(f, "request") == "describe":
                continue
            s = Schedule(f, spec)
        files += 1
        failures += bool(s.run(calls))
    function, whole = (sum(c[i] for c in calls) / 1e3 for i in (0, 1))
    print(f"{files} requests, {len(calls)} calls of the function, {failures} failed or declined: "
          f"{function:.2f} s inside Python (the sum of each call's wall time around the function); "
          f"{whole:.2f} s with the glue's views and checks around it")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", metavar="DIR", help="also copy each request into DIR")
    ap.add_argument("--time", metavar="DIR", help="time the function over the requests recorded in DIR")
    ap.add_argument("target", help="TARGET:FUNCTION[:key=value...], as after python:")
    ap.add_argument("files", nargs="*", help="REQUEST RESPONSE (the harness appends them)")
    args = ap.parse_args()
    try:
        glue.load(args.target, CHOICES)
    except glue.LoadError as e:
        print(f"exec_adapter: python:{args.target} cannot be loaded: {e}", file=sys.stderr)
        return 2
    if args.time:
        time_recorded(args.target, args.time)
        return 0
    if len(args.files) != 2:
        ap.error("REQUEST and RESPONSE are needed (the harness appends them)")
    if args.record:
        shutil.copy(args.files[0], os.path.join(args.record, f"{time.monotonic_ns()}-{os.getpid()}.h5"))
    serve(args.target, *args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
