#!/usr/bin/python3
"""Judge bisect on the faulty kernels of dut/external/faults: run each through a sweep, bisect its first
failing scenario, and print a table of what bisect said.

usage: scripts/bisect-faults.py [--build DIR] [--sweep-file FILE] [--out DIR] [--jobs N] [--python-batch FILE] [FAULT ...]

--python-batch FILE: the faults are the functions of a Python kernel file named in its FAULTS dict
(name -> what it does wrong), each run as --dut python:FILE:NAME (dut/external/faults/outside/).

For each fault (every line of dut/external/faults/faults.txt but `none`, or the ones named):
  swa-harness run SWEEP --dut plugin:BUILD/dut/external/faults/libswa_fault_NAME.so --out OUT/NAME/run.h5
then, when a scenario fails, bisect --from that file --id FIRST_FAILING_ID --json. Writes OUT/table.md and
OUT/findings.json (one entry per fault: its scenario, bisect's summary, the time) and prints the table.
The judgement column (right / partly / wrong / abstained) is a person's, from the faults' descriptions:
the script does not grade.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness", "tests"))
from results_h5 import results_table  # noqa: E402


def faults():
    with open(os.path.join(ROOT, "dut", "external", "faults", "faults.txt")) as f:
        for line in f:
            if line.startswith("#") or "|" not in line:
                continue
            name, where, what = (x.strip() for x in line.split("|", 2))
            if name != "none":
                yield name, where, what


def python_faults(path):
    """The FAULTS dict of a Python kernel file, read without importing it (ast.literal_eval)."""
    import ast
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found, literal = {}, False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FAULTS" for t in node.targets):
            found.update(ast.literal_eval(node.value))
            literal = True
    # A FAULTS filled at import (a decorator, assignments): the kernel's top-level fault_NN functions.
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and re.fullmatch(r"fault_\d+", node.name) and node.name not in found:
            found[node.name] = "(described in the kernel's FAULTS)"
    if not found and not literal:
        raise SystemExit(f"bisect-faults.py: {path} has no FAULTS dict and no fault_NN function")
    return dict(sorted(found.items()))


def first_failure(path):
    with h5py.File(path) as f:
        rows = results_table(f)
    failing = [r["scenario_id"].decode() for r in rows if r["status"] == b"fail"]
    return (failing[0] if failing else None), len(failing), len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("SWA_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--sweep-file", default=os.path.join(ROOT, "scenarios", "ci.yaml"))
    ap.add_argument("--out", default="bisect-faults")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--python-batch", help="a Python kernel file with a FAULTS dict: one DUT per entry")
    ap.add_argument("--from-results", metavar="DIR",
                    help="bisect from DIR/FAULT.h5, an earlier `run` of the sweep on that fault, instead of running it")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    harness = os.path.join(a.build, "harness", "swa-harness")
    if a.python_batch:
        known = dict((n, ("python", d)) for n, d in python_faults(a.python_batch).items())
    else:
        known = dict((n, (w, d)) for n, w, d in faults())
    unknown = [n for n in a.names if n not in known]
    if unknown:
        print(f"bisect-faults.py: unknown fault(s) {', '.join(unknown)}; allowed: {', '.join(known)}", file=sys.stderr)
        return 2
    if a.from_results:
        missing = [n for n in (a.names or list(known)) if not os.path.isfile(os.path.join(a.from_results, n + ".h5"))]
        if missing:
            print(f"bisect-faults.py: --from-results {a.from_results} has no {missing[0]}.h5 (one results file per "
                  f"fault, FAULT.h5)", file=sys.stderr)
            return 2
    if os.path.exists(a.out):
        print(f"bisect-faults.py: --out {a.out} exists; give a new folder", file=sys.stderr)
        return 2
    os.makedirs(a.out)
    entries = []
    for name in a.names or list(known):
        if a.python_batch:
            dut = f"python:{os.path.abspath(a.python_batch)}:{name}"
        else:
            dut = "plugin:" + os.path.join(a.build, "dut", "external", "faults", f"libswa_fault_{name}.so")
        work = os.path.join(a.out, name)
        os.makedirs(work)
        if a.from_results:
            results = os.path.join(a.from_results, name + ".h5")
        else:
            results = os.path.join(work, "run.h5")
            subprocess.run([harness, "run", a.sweep_file, "--dut", dut, "--jobs", str(a.jobs), "--out", results],
                           capture_output=True, text=True)
        scenario, failing, rows = first_failure(results)
        entry = {"fault": name, "where": known[name][0], "what": known[name][1], "failing": failing, "rows": rows,
                 "scenario": scenario}
        if scenario:
            start = time.time()
            r = subprocess.run([harness, "bisect", "--from", results, "--id", scenario, "--dut", dut, "--out",
                                os.path.join(work, "bisect"), "--json"], capture_output=True, text=True)
            entry["seconds"] = round(time.time() - start, 1)
            try:
                entry["summary"] = json.loads(r.stdout)
            except json.JSONDecodeError:
                entry["summary"] = {"class": "(bisect exited %d) %s" % (r.returncode, r.stderr.strip()[:300])}
        # The run's tensor dumps of every failing scenario (up to gigabytes a fault) are not needed:
        # bisect reran its scenario itself, and its repro.h5 keeps the minimal case's tensors.
        if not a.from_results:  # another run's files are not this script's to remove
            shutil.rmtree(results + ".dumps", ignore_errors=True)
        entries.append(entry)
        s = entry.get("summary", {})
        print(f"{name}: {failing}/{rows} rows fail; {s.get('class', '-')} ({s.get('confidence', '-')}) "
              f"{entry.get('seconds', 0)} s", file=sys.stderr, flush=True)
    with open(os.path.join(a.out, "findings.json"), "w") as f:
        json.dump(entries, f, indent=1)
    lines = ["| fault | where | failing rows | bisect's class | confidence | first evidence | needs | reduced case | time |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        s = e.get("summary", {})
        evidence = (s.get("evidence") or [""])[0].replace("|", "/")
        needs = ", ".join(s.get("needs", [])) if isinstance(s.get("needs"), list) else ""
        lines.append(f"| {e['fault']} | {e['where']} | {e['failing']}/{e['rows']} | {s.get('class', 'not caught')} | "
                     f"{s.get('confidence', '')} | {evidence[:160]} | {needs} | `{s.get('minimal_case', '')}` | "
                     f"{e.get('seconds', '')} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
