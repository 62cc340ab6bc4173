#!/usr/bin/python3
"""Checks the tensor-core prefill's PTX: every instantiation of prefill_mma_kernel streams K/V with
cp.async (and its commit/wait groups), reads shared memory through ldmatrix (.trans for V) and
multiplies with mma.sync.m16n8k16; and ptxas, for each architecture named, compiles it without
spilling registers. Usage: check_ptx.py PTXAS ARCH[,ARCH...] FILE.ptx...  Exit 0 when all hold."""
import re
import subprocess
import sys

KERNEL = "prefill_mma_kernel"
# What each instantiation's body must contain, with the least count that makes sense for it.
REQUIRED = {
    "cp.async.cg.shared.global": 1,
    "cp.async.commit_group": 1,
    "cp.async.wait_group": 1,
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16": 1,
    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16": 1,
    "mma.sync.aligned.m16n8k16": 1,
}


def entries(text):
    """{entry name: its PTX body} for every .entry in a PTX file."""
    found = {}
    starts = [m for m in re.finditer(r"^\.(?:visible\s+)?\.entry\s+(\S+?)\s*\(", text, re.M)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        found[m.group(1)] = text[m.start():end]
    return found


def spills(ptxas, arch, path):
    """{entry: (spill store bytes, spill load bytes)} from ptxas -v."""
    run = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", "/dev/null", path], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"check_ptx: ptxas -arch={arch} {path} failed:\n{run.stderr[-2000:]}")
    result, entry = {}, None
    for line in run.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            entry = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and entry:
            result[entry] = (int(m.group(1)), int(m.group(2)))
    return result


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ptxas, archs, files = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
    failures, checked = [], 0
    for path in files:
        kernels = {name: body for name, body in entries(open(path).read()).items() if KERNEL in name}
        if not kernels:
            failures.append(f"{path}: no {KERNEL} entry")
        for name, body in sorted(kernels.items()):
            checked += 1
            counts = {op: len(re.findall(re.escape(op), body)) for op in REQUIRED}
            print(f"{name}: " + ", ".join(f"{op} {n}" for op, n in counts.items()))
            for op, least in REQUIRED.items():
                if counts[op] < least:
                    failures.append(f"{name}: {counts[op]} {op} (at least {least})")
        for arch in archs:
            for name, (stores, loads) in sorted(spills(ptxas, arch, path).items()):
                if KERNEL in name:
                    print(f"{arch} {name}: {stores} bytes spill stores, {loads} bytes spill loads")
                    if stores or loads:
                        failures.append(f"{arch} {name}: spills {stores} bytes, reloads {loads} bytes")
    for f in failures:
        print("FAIL " + f)
    print(f"{checked} instantiations of {KERNEL} checked, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
