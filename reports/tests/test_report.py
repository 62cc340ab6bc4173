#!/usr/bin/env python3
"""swa-harness report end to end: a small real results file (with failures and /perf rows) becomes
report.html and summary.md whose tables and figures match the HDF5 numbers; compare mode lists
exactly the rows made worse.

usage: test_report.py PATH/TO/swa-harness
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from collections import Counter

import h5py
import numpy as np

HARNESS = None
SWEEP = """
sweeps:
  accuracy:
    duts: [cpu, mutant:window_plus_one]
    matrix: {window: [4, 16], head_size: [64, 128], dtype: [fp16, bf16], batch: [[40, 7]]}
  speed:
    duts: [cpu]
    perf: {warmups: 0, repeats: 2}
    matrix: {mode: [prefill], window: [0, 32], batch: [[128], [256]]}
    include:
      - {mode: decode, window: 32, decode_steps: 4, batch: [100], cache: ring-modulo}
      - {mode: decode, window: 32, decode_steps: 4, batch: [100], cache: linear}
      - {mode: decode, window: 32, decode_steps: 4, batch: [100], cache: paged, page_size: 16}
"""


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=600)


def s(x):
    return x.decode() if isinstance(x, bytes) else x


def drop_digests(f):
    """A table edited by hand no longer matches its digest in /meta: drop them, as in files written before them."""
    for name in ("digest_scenarios", "digest_results", "digest_perf", "digest_meta"):
        if name in f["meta"].attrs:
            del f["meta"].attrs[name]


# /results status is an HDF5 enum: {name: value} from the file itself.
VERDICTS = {}


def verdict(x):
    return {v: k for k, v in VERDICTS.items()}[int(x)]


class Report(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        sweep = os.path.join(cls.tmp, "sweep.yaml")
        with open(sweep, "w") as f:
            f.write(SWEEP)
        cls.results = os.path.join(cls.tmp, "results.h5")
        r = run("run", sweep, "--out", cls.results)
        assert r.returncode == 1, r.stderr  # the mutant fails
        cls.out = os.path.join(cls.tmp, "report")
        cls.report = run("report", cls.results, "-o", cls.out)
        with open(os.path.join(cls.out, "report.html")) as f:
            cls.html = f.read()
        with open(os.path.join(cls.out, "summary.md")) as f:
            cls.md = f.read()
        with h5py.File(cls.results) as f:
            VERDICTS.update(h5py.check_enum_dtype(f["results"].dtype["status"]))
            cls.rows = f["results"][:]
            cls.perf = f["perf"][:]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_report_command_succeeds_and_says_where(self):
        self.assertEqual(self.report.returncode, 0, self.report.stderr)
        self.assertIn(os.path.join(self.out, "report.html"), self.report.stdout)

    def test_totals_and_verdict_table_match_the_file(self):
        totals = Counter(verdict(x) for x in self.rows["status"])
        self.assertGreater(totals["fail"], 0)
        for status in ("pass", "fail", "error", "skip"):
            self.assertIn(f'<span id="total-{status}">{totals[status]} {status}</span>', self.html)
        cells = Counter((s(r["dut"]), s(r["dtype"]), s(r["mode"]), verdict(r["status"])) for r in self.rows)
        for (dut, dtype, mode) in {(k[0], k[1], k[2]) for k in cells}:
            line = f"| {dut} | {dtype} | {mode} | " + " | ".join(str(cells[(dut, dtype, mode, st)]) for st in ("pass", "warn", "fail", "error", "skip")) + " |"
            self.assertIn(line, self.md)

    def test_figures_are_embedded(self):
        images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]{1000,})"', self.html)
        alts = " ".join(a for a, _ in images)
        for expected in ("by window and head size: cpu", "by window and head size: mutant:window_plus_one",
                         "Distributions", "distance to the window edge", "SWA vs causal", "per KV cache",
                         "same-run ceiling"):
            self.assertIn(expected, alts)

    def test_every_failure_is_listed_with_its_rerun_command(self):
        for r in self.rows:
            if verdict(r["status"]) == "fail":
                self.assertIn(f"--filter &#x27;{s(r['scenario_id'])}&#x27; --dut {s(r['dut'])}", self.html)
        self.assertIn("## Failing", self.md)

    def test_perf_table_matches_the_file(self):
        self.assertEqual(len(self.perf), 7)
        for p in self.perf:
            self.assertIn(f"<td>{p['time_ms']:.3f}</td><td>{p['min_ms']:.3f}..{p['max_ms']:.3f}</td><td>{p['gflops']:.1f}</td>", self.html)
        self.assertIn("| cpu | 7 |", self.md)

    def test_a_paged_cache_has_its_feature_row(self):
        """The paged decode scenario passes on the cpu DUT and is counted under 'KV paged' alone."""
        self.assertIn("| cpu | KV paged | 1 | 0 | 0 | 0 | 0 |", self.md)

    def test_compare_lists_exactly_what_got_worse(self):
        candidate = os.path.join(self.tmp, "candidate.h5")
        shutil.copy(self.results, candidate)
        with h5py.File(candidate, "r+") as f:
            res, perf = f["results"][:], f["perf"][:]
            passing = [i for i, r in enumerate(res) if verdict(r["status"]) == "pass" and s(r["dut"]) == "cpu"]
            res["max_abs"][passing[0]] *= 5  # error up 5x
            res["status"][passing[1]] = VERDICTS["fail"]
            perf["time_ms"][0] *= 1.5  # 50% slower
            f["results"][...] = res
            f["perf"][...] = perf
            drop_digests(f)
        out = os.path.join(self.tmp, "cmp")
        same = run("report", "--compare", self.results, self.results, "-o", out)
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("**0 got worse.**", same.stdout)
        worse = run("report", "--compare", self.results, candidate, "-o", out)
        self.assertEqual(worse.returncode, 1, worse.stdout + worse.stderr)
        self.assertIn("**3 got worse.**", worse.stdout)
        with open(os.path.join(out, "compare.md")) as f:
            text = f.read()
        for kind in ("| error |", "| verdict |", "| time |"):
            self.assertIn(kind, text)

    def test_a_file_written_before_the_status_enum_still_merges_and_reports(self):
        old = os.path.join(self.tmp, "old.h5")
        shutil.copy(self.results, old)
        with h5py.File(old, "r+") as f:  # /results as earlier versions wrote it: status as text
            res = f["results"][:]
            fields = [(n, h5py.string_dtype() if n == "status" else res.dtype[n]) for n in res.dtype.names]
            text_rows = np.empty(res.shape, dtype=fields)
            for n in res.dtype.names:
                text_rows[n] = [verdict(v) for v in res[n]] if n == "status" else res[n]
            del f["results"]
            f.create_dataset("results", data=text_rows, maxshape=(None,), chunks=(64,))
        merged = os.path.join(self.tmp, "merged.h5")
        r = run("merge", old, "-o", merged)
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(merged) as f:
            self.assertEqual(h5py.check_enum_dtype(f["results"].dtype["status"]), VERDICTS)
            self.assertEqual(Counter(verdict(x) for x in f["results"]["status"]),
                             Counter(verdict(x) for x in self.rows["status"]))
        out = os.path.join(self.tmp, "old-report")
        r = run("report", old, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "report.html")) as f:
            html = f.read()
        totals = Counter(verdict(x) for x in self.rows["status"])
        for status in ("pass", "fail"):
            self.assertIn(f'<span id="total-{status}">{totals[status]} {status}</span>', html)

    def test_every_string_from_the_file_is_escaped(self):
        """A crafted results file: markup in every string column of every table is shown, not run."""
        crafted = os.path.join(self.tmp, "crafted.h5")
        shutil.copy(self.results, crafted)
        tag = b"<script>alert(1)</script>"
        with h5py.File(crafted, "r+") as f:
            for name in ("scenarios", "results", "perf"):
                table = f[name][:]
                planted = 0
                for field in table.dtype.names:
                    if h5py.check_string_dtype(table.dtype[field]):
                        table[field] = [tag + (x if isinstance(x, bytes) else x.encode()) for x in table[field]]
                        planted += 1
                self.assertGreater(planted, 0, name)
                del f[name]
                f.create_dataset(name, data=table, maxshape=(None,), chunks=(64,))
            drop_digests(f)
        out = os.path.join(self.tmp, "crafted-report")
        r = run("report", crafted, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "report.html")) as f:
            page = f.read()
        self.assertNotIn("<script", page)
        self.assertIn("&lt;script&gt;", page)

    def test_bisect_findings_join_their_failures(self):
        """`report --bisect DIR`: the finding of bisect's summary.json beside its failing row, and listed."""
        failing = next(r for r in self.rows if verdict(r["status"]) == "fail")
        scenario, dut = s(failing["scenario_id"]), s(failing["dut"])
        folder = os.path.join(self.tmp, "bisect")
        b = run("bisect", "--from", self.results, "--id", scenario, "--dut", dut, "--out", folder)
        self.assertEqual(b.returncode, 1, b.stdout + b.stderr)
        out = os.path.join(self.tmp, "report-bisect")
        r = run("report", self.results, "-o", out, "--bisect", folder)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "report.html")) as f:
            page = f.read()
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()
        self.assertIn("<h2>Bisect findings (1)</h2>", page)
        self.assertIn("<td class='finding'>window_plus_one (variant)</td>", page)
        self.assertIn(f"`{dut}` `{scenario}`: ", md)
        self.assertIn("(bisect: window_plus_one)", md)
        self.assertIn(f"| {dut} | `{scenario}` | window_plus_one (variant) |", md)
        # A folder without a summary, or with a broken one, is bad input naming the file.
        r = run("report", self.results, "-o", out, "--bisect", self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"--bisect {self.tmp}: no summary.json there", r.stderr)
        with open(os.path.join(folder, "summary.json"), "w") as f:
            f.write('{"dut": "x"}')
        r = run("report", self.results, "-o", out, "--bisect", folder)
        self.assertEqual(r.returncode, 2)
        self.assertIn("summary.json: not a bisect summary (missing scenario", r.stderr)

    def test_bad_input_is_an_error(self):
        r = run("report", os.path.join(self.tmp, "missing.h5"), "-o", os.path.join(self.tmp, "x"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.h5 does not exist", r.stderr)

    def test_a_fifo_or_a_damaged_file_is_refused_with_merge_s_checks(self):
        # h5py would hang on the FIFO and can crash on a damaged file: report reads each file as merge
        # does first (special files refused unopened, a forked and bounded read, the digests).
        fifo = os.path.join(self.tmp, "fifo.h5")
        os.mkfifo(fifo)
        r = run("report", fifo, "-o", os.path.join(self.tmp, "x"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("fifo.h5 is not a results file (not a regular file)", r.stderr)
        damaged = os.path.join(self.tmp, "damaged.h5")
        with open(self.results, "rb") as f:
            data = bytearray(f.read())
        for i in range(len(data) // 2, len(data), 97):  # garbage through the second half
            data[i] ^= 0x5A
        with open(damaged, "wb") as f:
            f.write(data)
        r = run("report", "--compare", self.results, damaged, "-o", os.path.join(self.tmp, "x"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("damaged.h5", r.stderr)


if __name__ == "__main__":
    HARNESS = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
