#!/usr/bin/python3
"""Are two results files the same run? For refactors that must not change behaviour.

usage: compare-results.py BEFORE.h5 AFTER.h5 [--ignore COLUMN ...]

Compares the scenario IDs of /scenarios (as a set: the order follows --jobs) and, per (scenario_id, dut) of /results, the verdict, the
reason and every metric and limit, bit for bit (NaN equals NaN). Timings (run_ms) are left out, and
the columns of /results that only one file has are listed, not compared. Exit 0: the same; 1: they
differ (the first differences are printed); 2: a file cannot be read.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reports"))
try:
    import swa_results  # reports/swa_results.py: the results reader the report uses too
except ImportError:
    sys.exit("compare-results.py: needs h5py (Debian package python3-h5py)")

TIMINGS = {"run_ms"}
text = swa_results.text


def load(path):
    try:
        data = swa_results.load(path)
    except swa_results.ResultsFileError as e:
        print(f"compare-results.py: {e}", file=sys.stderr)
        sys.exit(2)
    rows = {(r["scenario_id"], r["dut"]): r for r in data["results"]}
    return [s["id"] for s in data["scenarios"]], rows, set(data["result_columns"])


def same(a, b):
    a, b = text(a), text(b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--ignore", action="append", default=[], help="a /results column not to compare")
    a = ap.parse_args()
    s1, r1, c1 = load(a.before)
    s2, r2, c2 = load(a.after)
    diffs = []
    if sorted(s1) != sorted(s2):  # the order rows were finished in depends on --jobs, not on the code
        only1, only2 = set(s1) - set(s2), set(s2) - set(s1)
        diffs.append(f"/scenarios IDs differ: {len(only1)} only in {a.before}, {len(only2)} only in {a.after}"
                     + ("" if only1 or only2 else " (an ID written twice)"))
        diffs += [f"  only in {a.before}: {i}" for i in sorted(only1)[:5]]
        diffs += [f"  only in {a.after}: {i}" for i in sorted(only2)[:5]]
    for key in sorted(set(r1) ^ set(r2)):
        diffs.append(f"/results row {key} is only in {a.before if key in r1 else a.after}")
    columns = sorted((c1 & c2) - TIMINGS - set(a.ignore))
    changed = {}
    for key in sorted(set(r1) & set(r2)):
        for col in columns:
            if not same(r1[key][col], r2[key][col]):
                changed[col] = changed.get(col, 0) + 1
                if changed[col] <= 3:
                    diffs.append(f"{key[0]} {key[1]}: {col} {text(r1[key][col])!r} -> {text(r2[key][col])!r}")
    for col, n in sorted(changed.items()):
        diffs.append(f"column {col}: {n} rows differ")
    for col in sorted(c1 ^ c2):
        print(f"note: column {col} only in {a.before if col in c1 else a.after}: not compared")
    if diffs:
        print("\n".join(diffs))
        print(f"DIFFERENT: {a.before} vs {a.after}")
        return 1
    print(f"same: {len(s1)} scenarios, {len(r1)} results rows, {len(columns)} columns compared "
          f"(left out: {', '.join(sorted(TIMINGS | set(a.ignore)))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
