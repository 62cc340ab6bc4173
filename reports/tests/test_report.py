#!/usr/bin/env python3
"""swa-harness report end to end: a small real results file (with failures and /perf rows) becomes
report.html and summary.md whose tables and figures match the HDF5 numbers; compare mode lists
exactly the rows made worse.

usage: test_report.py PATH/TO/swa-harness
"""
import os
import re
import shlex
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


def replace_table(f, name, rows):
    """/NAME rewritten with `rows` (a table edited by hand), laid out as the harness writes tables."""
    del f[name]
    f.create_dataset(name, data=rows, maxshape=(None,), chunks=(64,))


def without_columns(rows, dropped):
    """`rows` as a file written before the `dropped` columns existed holds them."""
    keep = [n for n in rows.dtype.names if n not in dropped]
    old = np.empty(rows.shape, dtype=[(n, rows.dtype[n]) for n in keep])
    for n in keep:
        old[n] = rows[n]
    return old


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
            replace_table(f, "results", text_rows)
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
                replace_table(f, name, table)
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

    def test_the_run_stored_both_roofs(self):
        self.assertEqual(len(self.perf), 7)
        self.assertEqual(len({(p["ceiling_gflops"], p["triad_gbs"]) for p in self.perf}), 1)
        self.assertTrue(all(p["ceiling_gflops"] > 0 and p["triad_gbs"] > 0 for p in self.perf), self.perf)

    def test_roofline_draws_each_row_under_the_same_run_roofs(self):
        self.assertIn('<img alt="Roofline: each perf row', self.html)
        R = report_module()
        scenarios, _, perf = R.combine([R.load(self.results)])
        (fig, alt), = R.roofline_figures(perf, scenarios)[0]
        (ax,) = fig.axes
        self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
        compute, triad = self.perf[0]["ceiling_gflops"], self.perf[0]["triad_gbs"]
        roof = ax.lines[0].get_xydata()
        self.assertAlmostEqual(roof[:, 1].max(), compute, places=6)  # flat at the SGEMM rate
        self.assertAlmostEqual(roof[0, 1], triad * roof[0, 0], places=6)  # slope: the triad's GB/s
        words = " ".join(t.get_text() for t in ax.texts)
        self.assertIn(f"compute roof {compute:.1f} GFLOP/s", words)
        self.assertIn(f"bandwidth roof {triad:.1f} GB/s", words)
        # The points: each row's achieved GFLOP/s at FLOPs over the bytes it must move (no FP8 KV here).
        expected = []
        for p in self.perf:
            d, hq, hkv, b = p["head_size"], p["heads"], p["kv_heads"], {"fp32": 4, "fp16": 2, "bf16": 2}[s(p["dtype"])]
            moved = (p["pairs"] * 2 * hkv * d * b + 2 * p["batch"] * hq * d * b if s(p["mode"]) == "decode"
                     else p["tokens"] * (2 * hq * d + 2 * hkv * d) * b)
            expected.append((4 * d * p["pairs"] * hq / moved, p["gflops"]))
        drawn = np.concatenate([c.get_offsets() for c in ax.collections])
        self.assertEqual(sorted(map(tuple, np.round(drawn, 6))), sorted(tuple(np.round(e, 6)) for e in expected))
        self.assertEqual(sorted(t.get_text() for t in ax.get_legend().get_texts()),
                         sorted({f"{s(p['mode'])} {s(p['dtype'])}" for p in self.perf}))

    def test_no_roofline_without_the_triad(self):
        old = os.path.join(self.tmp, "no-triad.h5")
        shutil.copy(self.results, old)
        with h5py.File(old, "r+") as f:  # /perf as files written before triad_gbs hold it
            replace_table(f, "perf", without_columns(f["perf"][:], ("triad_gbs",)))
            drop_digests(f)
        out = os.path.join(self.tmp, "no-triad-report")
        r = run("report", old, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "report.html")) as f:
            page = f.read()
        self.assertNotIn('alt="Roofline', page)
        self.assertIn("No roofline: the /perf rows carry no same-run STREAM triad", page)
        self.assertIn('alt="Each DUT&#x27;s GFLOP/s as a fraction', page)  # the rest of the perf section stays

    def test_failures_are_grouped_with_the_rest_folded(self):
        """As the console: per (DUT, mode, dtype) a heading with the count, 3 rows in view, the others folded."""
        groups = Counter((s(r["dut"]), s(r["mode"]), s(r["dtype"])) for r in self.rows if verdict(r["status"]) in ("fail", "error"))
        self.assertGreater(max(groups.values()), 3)
        for (dut, mode, dtype), n in groups.items():
            self.assertRegex(self.html, f"<h3 id='failures-[0-9]+'>{re.escape(dut)}, {mode}, {dtype}: {n} fail</h3>")
        folded = re.findall(r"<summary>the other ([0-9]+) of this group</summary>", self.html)
        self.assertEqual(sorted(map(int, folded)), sorted(n - 3 for n in groups.values() if n > 3))

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


def report_module():
    """reports/swa_report.py imported, to read the figure objects it draws (not pixels)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import swa_report
    return swa_report


WIDE_SWEEP = """
sweeps:
  wide:
    duts: [cpu]
    matrix: {window: [%s], head_size: [64], dtype: [fp32], batch: [[48]]}
  mutant_fp16:
    duts: [mutant:window_plus_one]
    matrix: {window: [4, 8], head_size: [64], dtype: [fp16], batch: [[40, 7]]}
""" % ", ".join(str(w) for w in range(1, 43))


class ReportAtAnyScale(unittest.TestCase):
    """Issue 70 item 9: 42 windows stay readable, absent dtypes get no panels, the roofline is drawn
    only with both same-run roofs, and a bisect folder beside the results joins the report unasked."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.R = report_module()
        sweep = os.path.join(cls.tmp, "wide.yaml")
        with open(sweep, "w") as f:
            f.write(WIDE_SWEEP)
        cls.dir = os.path.join(cls.tmp, "results")
        os.makedirs(cls.dir)
        cls.results = os.path.join(cls.dir, "results.h5")
        r = run("run", sweep, "--out", cls.results, "--jobs", "2")
        assert r.returncode == 1, r.stdout + r.stderr  # the mutant fails
        # The console's diagnose line for the first failure group names RESULTS_DIR/bisect-1.
        lines = [line.split("diagnose:", 1)[1] for line in (r.stdout + r.stderr).splitlines() if "diagnose:" in line]
        assert lines, r.stdout + r.stderr
        words = shlex.split(lines[0])
        cls.scenario, cls.dut, cls.bisect = (words[words.index(o) + 1] for o in ("--id", "--dut", "--out"))
        assert cls.bisect == os.path.join(cls.dir, "bisect-1"), cls.bisect
        b = run("bisect", "--from", cls.results, "--id", cls.scenario, "--dut", cls.dut, "--out", cls.bisect)
        assert b.returncode == 1, b.stdout + b.stderr
        cls.data = cls.R.load(cls.results)
        cls.scenarios, cls.rows, cls.perf = cls.R.combine([cls.data])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def report(self, *args, inputs=None):
        out = tempfile.mkdtemp(dir=self.tmp)
        r = run("report", *(inputs or [self.results]), "-o", out, *args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(out, "report.html")) as f:
            page = f.read()
        with open(os.path.join(out, "summary.md")) as f:
            return r, page, f.read()

    def test_42_windows_label_a_bounded_number_of_ticks(self):
        figures = dict((alt, fig) for fig, alt in self.R.heatmap_figures(self.rows, self.scenarios))
        fig = figures["Worst error over threshold by window and head size: cpu (above 1 fails)"]
        (panel,) = [ax for ax in fig.axes if ax.get_title() == "cpu fp32"]
        labels = [t.get_text() for t in panel.get_yticklabels() if t.get_text()]
        self.assertLessEqual(len(labels), 16)  # reports/README.md's bound
        self.assertGreaterEqual(len(labels), 8)
        self.assertTrue(set(labels) <= {str(w) for w in range(1, 43)}, labels)
        self.assertEqual(labels[0], "1")
        self.assertEqual(panel.images[0].get_array().shape, (42, 1))  # every window still has its row
        self.assertEqual(len(panel.texts), 0)  # no values written into 42 cells of a few pixels each

    def test_absent_dtypes_and_duts_get_no_panels(self):
        # cpu ran fp32 only, the mutant fp16 only: each DUT's heatmap has that one panel (and its
        # colour bar), the distributions one column per dtype present, and no axes is empty.
        for fig, alt in self.R.heatmap_figures(self.rows, self.scenarios):
            titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
            self.assertEqual(titles, ["cpu fp32"] if alt.endswith("cpu (above 1 fails)") else [f"{self.dut} fp16"], alt)
            self.assertEqual(len(fig.axes), 2, alt)
            self.assertTrue(all(ax.get_visible() and ax.has_data() for ax in fig.axes), alt)
        ((fig, _),) = self.R.distribution_figures(self.rows)
        titles = sorted(ax.get_title().split(":")[0] for ax in fig.axes)
        self.assertEqual(titles, ["fp16", "fp16", "fp32", "fp32"])
        self.assertTrue(all(ax.has_data() for ax in fig.axes))
        for fig, alt in self.R.window_edge_figures(self.rows) + self.R.perf_figure_list(self.perf):
            self.assertTrue(all(ax.has_data() for ax in fig.axes), alt)

    def test_no_roofline_without_perf_rows(self):
        self.assertEqual(self.R.roofline_figures(self.perf, self.scenarios)[0], [])
        _, page, _ = self.report()
        self.assertNotIn('alt="Roofline', page)
        self.assertIn("<p class='note' id='roofline-note'>No roofline: the file has no /perf rows.</p>", page)

    def test_a_bisect_folder_beside_the_results_joins_the_report(self):
        r, page, md = self.report()
        self.assertIn("<h2>Bisect findings (1)</h2>", page)
        self.assertIn("<td class='finding'>window_plus_one (variant)</td>", page)
        self.assertIn(f"<code>{self.bisect}</code>", page)
        self.assertIn(f"| {self.dut} | `{self.scenario}` | window_plus_one (variant) |", md)
        self.assertIn("(bisect: window_plus_one)", md)
        # Named with --bisect too, it is listed once.
        _, page, _ = self.report("--bisect", self.bisect)
        self.assertIn("<h2>Bisect findings (1)</h2>", page)

    def test_a_sibling_folder_that_does_not_read_or_belongs_elsewhere_is_left_out_with_a_note(self):
        other = tempfile.mkdtemp(dir=self.tmp)
        shutil.copy(self.results, os.path.join(other, "results.h5"))
        shutil.copytree(self.bisect, os.path.join(other, "bisect-1"))
        os.makedirs(os.path.join(other, "bisect-2"))
        with open(os.path.join(other, "bisect-2", "summary.json"), "w") as f:
            f.write("[1, 2]")
        foreign = os.path.join(other, "bisect-10")
        shutil.copytree(self.bisect, foreign)
        with open(os.path.join(foreign, "summary.json")) as f:
            text = f.read()
        with open(os.path.join(foreign, "summary.json"), "w") as f:
            f.write(text.replace(self.scenario, "someone-else's-scenario"))
        r, page, _ = self.report(inputs=[os.path.join(other, "results.h5")])
        self.assertIn("<h2>Bisect findings (1)</h2>", page)
        self.assertIn("bisect-2/summary.json: not a bisect summary (not an object", r.stderr)
        self.assertIn("bisect-2/summary.json: not a bisect summary (not an object", page)
        self.assertIn("1 bisect folder(s) beside the results diagnose a scenario and DUT that no row of these files holds", page)
        self.assertIn("bisect-10)", page)


ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PAIR_SWEEP = """
sweeps:
  small:
    duts: [cpu]
    matrix: {mode: [prefill], dtype: [fp32], window: [4, 16], batch: [[40, 7]]}
"""


def without_label_columns(path):
    """/results and /perf as files written before dut_label (and dut_path) were: those columns dropped."""
    with h5py.File(path, "r+") as f:
        for table in ("results", "perf"):
            replace_table(f, table, without_columns(f[table][:], ("dut_label", "dut_path")))
        drop_digests(f)


class ComparePairs(unittest.TestCase):
    """report --compare pairs rows by (scenario ID, DUT label): the label does not depend on how a
    kernel's path was typed; --pair joins two different kernels; nothing paired is exit 2."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.sweep = os.path.join(cls.tmp, "sweep.yaml")
        with open(cls.sweep, "w") as f:
            f.write(PAIR_SWEEP)
        kernels = os.path.join(cls.tmp, "kernels")
        os.mkdir(kernels)
        with open(os.path.join(ROOT, "dut", "external", "examples", "quickstart_kernel.py")) as f:
            kernel = f.read()
        with open(os.path.join(kernels, "mine.py"), "w") as f:
            f.write(kernel)
        faulty = kernel.replace("i - j <= p.window_left", "i - j <= p.window_left + 1")  # one key too many
        assert faulty != kernel
        with open(os.path.join(kernels, "mine_v2.py"), "w") as f:
            f.write(faulty)
        os.symlink(kernels, os.path.join(cls.tmp, "linked"))
        cls.files = {}

        def sweep(name, dut, cwd=cls.tmp, code=0):
            out = os.path.join(cls.tmp, name + ".h5")
            r = subprocess.run([HARNESS, "run", cls.sweep, "--dut", dut, "--out", out, "--junit", out + ".xml",
                                "--no-golden-cache"], capture_output=True, text=True, timeout=600, cwd=cwd)
            assert r.returncode == code, (dut, r.returncode, r.stdout + r.stderr)
            cls.files[name] = out

        sweep("relative", "python:mine.py:attention", cwd=kernels)
        sweep("absolute", "python:" + os.path.join(cls.tmp, "linked", "mine.py") + ":attention")
        sweep("v2", "python:kernels/mine_v2.py:attention", code=1)
        sweep("cpu", "cpu")
        sweep("mutant", "mutant:window_plus_one", code=1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def compare(self, old, new, *more, out="cmp"):
        return run("report", "--compare", self.files.get(old, old), self.files.get(new, new),
                   "-o", os.path.join(self.tmp, out), *more)

    def test_a_kernel_by_relative_and_by_absolute_path_pairs_every_row(self):
        with h5py.File(self.files["relative"]) as a, h5py.File(self.files["absolute"]) as b:
            ra, rb = a["results"][:], b["results"][:]
        self.assertNotEqual(s(ra["dut"][0]), s(rb["dut"][0]))  # the dut column keeps the name as typed
        self.assertEqual({s(x) for x in ra["dut_label"]} | {s(x) for x in rb["dut_label"]}, {"python:mine.py:attention"})
        canonical = os.path.realpath(os.path.join(self.tmp, "kernels", "mine.py"))
        self.assertEqual({s(x) for x in ra["dut_path"]} | {s(x) for x in rb["dut_path"]}, {canonical})
        with open(self.files["absolute"] + ".xml") as f:
            self.assertIn('<property name="dut_label" value="python:mine.py:attention"/>', f.read())
        r = self.compare("relative", "absolute")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"Paired {len(ra)} /results rows by (scenario ID, DUT label)", r.stdout)
        self.assertNotIn("Not paired", r.stdout)
        self.assertIn("**0 got worse.**", r.stdout)

    def test_the_python_module_gives_the_command_line_s_label(self):
        """swa_harness.run() and check() with the kernel function (its file by absolute path) label the
        rows as the command line run by relative path does, and their files pair."""
        package = os.path.join(os.path.dirname(os.path.dirname(HARNESS)), "python")
        if not os.path.isdir(os.path.join(package, "swa_harness")):
            self.skipTest(f"no swa_harness package at {package} (the Python module is not built)")
        out = os.path.join(self.tmp, "module.h5")
        script = ("import sys, swa_harness\n"
                  f"sys.path.insert(0, {os.path.join(self.tmp, 'kernels')!r})\n"
                  "import mine\n"
                  f"rc = swa_harness.run({self.sweep!r}, mine.attention, {out!r}, extra=['--no-golden-cache'])\n"
                  f"v = swa_harness.check(swa_harness.scenarios({self.sweep!r})[0], mine.attention)\n"
                  "print(rc, v.row['dut'], v.row['dut_label'])\n")
        r = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONPATH=package), cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rc, dut, label = r.stdout.split()
        self.assertEqual((rc, label), ("0", "python:mine.py:attention"))
        self.assertTrue(dut.startswith("python:/"), dut)  # the function's file by its absolute path
        r = self.compare("relative", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Paired 2 /results rows", r.stdout)
        self.assertNotIn("Not paired", r.stdout)

    def test_two_kernel_files_pair_with_pair_and_the_faulty_one_is_reported(self):
        r = self.compare("relative", "v2", "--pair", "python:mine.py:attention=python:mine_v2.py:attention")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("Paired 2 /results rows", r.stdout)
        self.assertIn("**2 got worse.**", r.stdout)
        self.assertIn("| verdict | python:mine.py:attention -> python:mine_v2.py:attention |", r.stdout)
        # The built-in DUTs the same way: the mutant's window bug is what got worse.
        r = self.compare("cpu", "mutant", "--pair", "cpu=mutant:window_plus_one")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("**2 got worse.**", r.stdout)

    def test_nothing_paired_is_exit_2_naming_both_sides_labels(self):
        r = self.compare("relative", "v2", out="none-paired")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("no rows pair", r.stderr)
        self.assertIn("python:mine.py:attention (2 rows)", r.stderr)
        self.assertIn("python:mine_v2.py:attention (2 rows)", r.stderr)
        self.assertIn("--pair", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "none-paired")))  # nothing written

    def test_bad_pair_text_is_exit_2_naming_the_file_and_its_labels(self):
        for text, says in (("cpu", "is not OLD=NEW"), ("=cpu", "has an empty side"), ("cpu=", "has an empty side"),
                           ("gpu=mutant:window_plus_one", "holds no DUT label 'gpu'; its labels: cpu"),
                           ("cpu=mutant:nope", "holds no DUT label 'mutant:nope'; its labels: mutant:window_plus_one")):
            r = self.compare("cpu", "mutant", "--pair", text)
            self.assertEqual(r.returncode, 2, (text, r.stdout + r.stderr))
            self.assertIn(says, r.stderr, text)
            self.assertNotIn("Traceback", r.stderr)
        r = run("report", self.files["cpu"], "-o", os.path.join(self.tmp, "x"), "--pair", "cpu=cpu")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--pair is for --compare", r.stderr)

    def test_a_file_without_the_label_column_still_pairs(self):
        old = os.path.join(self.tmp, "old.h5")
        shutil.copy(self.files["relative"], old)
        without_label_columns(old)
        r = self.compare(old, "absolute")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Paired 2 /results rows", r.stdout)
        merged = os.path.join(self.tmp, "merged.h5")  # the C++ reader derives it the same way
        self.assertEqual(run("merge", old, "-o", merged, "--force").returncode, 0)
        with h5py.File(merged) as f:
            self.assertEqual({s(x) for x in f["results"]["dut_label"]}, {"python:mine.py:attention"})

    def test_the_label_rule_is_the_same_in_cpp_and_in_the_report(self):
        """Names written by hand into a file without the column: the C++ reader (merge) and
        swa_report.dut_label derive the same label from each."""
        names = ["cpu", "mutant:window_plus_one", "ggml=plugin:/opt/x/libggml.so", "plugin:./libmine.so",
                 "python:../k/mine.py:attention:block=64", "python:/data/run:3/k.py:f", "python:pkg.kern:f",
                 "python:./kernels/mod:f", "exec:python3 /abs/dut.py --lib=/a/b.so", "exec:'./my dut' \"/a b/c\" x\\ y/z"]
        old = os.path.join(self.tmp, "names.h5")
        shutil.copy(self.files["cpu"], old)
        without_label_columns(old)
        with h5py.File(old, "r+") as f:
            res = f["results"][:]
            res = np.concatenate([res] * len(names))
            res["dut"] = [n for n in names for _ in range(len(res) // len(names))]
            replace_table(f, "results", res)
            f["meta"].attrs["rows_results"] = len(res)
        merged = os.path.join(self.tmp, "names-merged.h5")
        r = run("merge", old, "-o", merged, "--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        sys.path.insert(0, os.path.join(ROOT, "reports"))
        import swa_report
        with h5py.File(merged) as f:
            got = {s(r["dut"]): s(r["dut_label"]) for r in f["results"][:]}
        self.assertEqual(got, {n: swa_report.dut_label(n) for n in names})
        self.assertEqual(got["python:/data/run:3/k.py:f"], "python:k.py:f")
        self.assertEqual(got["exec:python3 /abs/dut.py --lib=/a/b.so"], "exec:python3 dut.py --lib=b.so")


class FigureText(unittest.TestCase):
    def test_a_dollar_in_a_name_is_text_and_log_axes_keep_their_tick_labels(self):
        """A DUT named with `$` (a file path may hold one) draws as that text; the TeX parser stays on,
        which log axes need for their tick labels (10^2, not the raw `$\\mathdefault{10^{2}}$`)."""
        R = report_module()
        import matplotlib
        self.assertTrue(matplotlib.rcParams["text.parse_math"])
        fig, ax = R.plt.subplots()
        ax.set_xscale("log")
        ax.plot([1, 100], [1, 2], label=R._tex_safe("plugin:lib$^{x$.so"))
        ax.set_title(R._tex_safe("python:k$.py:attention"))
        ax.legend()
        fig.canvas.draw()  # an unescaped `$^{x$` would raise here
        self.assertEqual(ax.get_legend().get_texts()[0].get_text(), r"plugin:lib\$^{x\$.so")
        R.plt.close(fig)


if __name__ == "__main__":
    HARNESS = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
