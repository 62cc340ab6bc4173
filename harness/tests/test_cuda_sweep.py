#!/usr/bin/env python3
"""scenarios/ci.yaml through the CUDA DUT, next to the CPU DUT on the same inputs: every scenario
passes against the golden. Without a usable device every row is a
skip saying so, and this test exits 77 ("skipped: no CUDA device"), which CTest reports as skipped.

usage: test_cuda_sweep.py PATH/TO/swa-harness SWEEP_YAML [JOBS]   (any Python with h5py)
JOBS defaults to min(4, CPUs); full.yaml on a 16-core GPU host wants all of them (its golden is the
time there).
"""
import os
import subprocess
import sys
import tempfile

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def main(harness, ci, jobs):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cuda.h5")
        r = subprocess.run([harness, "run", ci, "--dut", "cuda,cpu", "--jobs", str(jobs), "--out", out],
                           capture_output=True, text=True, timeout=3000)
        with h5py.File(out) as f:
            gpu = text(f["meta"].attrs["gpu"])
            rows = [(text(x["scenario_id"]), text(x["dut"]), text(x["status"]), text(x["reason"]), float(x["max_abs"]))
                    for x in results_table(f)]
    cuda = [row for row in rows if row[1] == "cuda"]
    if cuda and all(row[2] == "skip" and "no CUDA device" in row[3] for row in cuda):
        print(f"skipped: no CUDA device ({cuda[0][3]})")
        return 77
    print(f"device: {gpu}")
    problems = [row for row in cuda if row[2] not in ("pass", "skip")]
    for row in problems[:20]:
        print("FAIL", row)
    passed = sum(row[2] == "pass" for row in cuda)
    skipped = [row for row in cuda if row[2] == "skip"]
    print(f"cuda: {passed} passed, {len(problems)} not passed, {len(skipped)} skipped of {len(cuda)}")
    for row in skipped[:5]:
        print("skip", row[0], row[3])
    if r.returncode != 0 or problems or passed == 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and not sys.argv[3].isdigit()):
        print("usage: test_cuda_sweep.py PATH/TO/swa-harness SWEEP_YAML [JOBS: a positive integer]", file=sys.stderr)
        sys.exit(2)
    jobs = int(sys.argv[3]) if len(sys.argv) == 4 else min(4, os.cpu_count() or 1)
    sys.exit(main(sys.argv[1], sys.argv[2], max(1, jobs)))
