#!/usr/bin/env python3
"""The pytest plugin's outputs: --swa-out and --swa-junit get `swa-harness run`'s checks of --out and
--junit (the same C++: swa_harness._core.guard_output), refused as a pytest usage error before any
test runs, --swa-force as run's --force, a write that fails at the end said and not lost silently; and
`swa-harness report` on a session's results file prints rerun commands that work. And pytest's
habits: test IDs `-k` selects (no '='), --lf, stacked sweep marks (the union), and under pytest-xdist
(-n 2) the same rows as one process, the outputs checked before any test runs.

Every session runs in a temporary folder of its own, on copies of ci.yaml (a refused output must
never be able to touch the repository's sweep file).

usage: test_pytest_plugin.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR PYTHON_PACKAGE_DIR [CLASS ...]
(CLASS: OutputChecks, ReportOfASession, PytestHabits, Xdist; all by default; Xdist alone exits 77
where pytest-xdist is missing)
"""
import html
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = EXAMPLES = PACKAGE = None
# One small prefill scenario of ci.yaml; FEW adds a second prefill and a decode scenario.
ONE = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1"  # an exact ID
FEW = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/fp32/|" \
      "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/"

TEST_FILE = """
import functools, os, sys
import swa_harness
sys.path.insert(0, {examples!r})
import numpy_kernel

KERNEL = functools.partial(numpy_kernel.attention, fault={fault!r}) if {fault!r} else numpy_kernel.attention
{tests}
"""

TEST_FUNCTION = """
{marks}
def test_kernel_{n}(scenario, swa_check):
    with open({marker!r}, "a") as f:
        f.write(scenario.id + "\\n")
{during}
    swa_check(scenario, KERNEL)
{after}
"""


class World:
    """A temporary folder with a copy of ci.yaml (sweep.yaml), a test file over it and a marker file
    each test run appends its scenario to."""

    def __init__(self, tmp, sweeps=("sweep.yaml",), filter=ONE, fault=None, during="", after="", stacked=False):
        """`sweeps`: copies of ci.yaml (a name twice: one copy), each with a test over the scenarios
        `filter` (one regex, or one per sweep file) selects, or with `stacked` one test with a mark for
        each; `during`, `after`: code the tests run before and after swa_check."""
        self.tmp = tmp
        self.marker = os.path.join(tmp, "ran.txt")
        self.sweeps = []
        marks = []
        filters = [filter] * len(sweeps) if isinstance(filter, str) else filter
        for name, selected in zip(sweeps, filters):
            path = os.path.join(tmp, name)
            if not os.path.exists(path):
                shutil.copy(CI, path)
                self.sweeps.append(path)
            marks.append(f"@swa_harness.sweep({path!r}, filter={selected!r})")
        tests = [TEST_FUNCTION.format(marks="\n".join(group), n=n, marker=self.marker,
                                      during=textwrap.indent(textwrap.dedent(during), "    "),
                                      after=textwrap.indent(textwrap.dedent(after), "    "))
                 for n, group in enumerate([marks] if stacked else [[m] for m in marks])]
        self.test_file = os.path.join(tmp, "test_session.py")
        with open(self.test_file, "w") as f:
            f.write(TEST_FILE.format(examples=EXAMPLES, fault=fault, tests="\n".join(tests)))
        self.sweep = self.sweeps[0]
        with open(self.sweep, "rb") as f:
            self.sweep_bytes = f.read()

    def pytest(self, *args, timeout=600, cache=False, env=None):
        """pytest on the test file (`cache`: with its cache, in the world's folder, for --lf)."""
        env = dict(os.environ, PYTHONPATH=PACKAGE, **(env or {}))
        r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q",
                            *([] if cache else ["-p", "no:cacheprovider"]), self.test_file, *map(str, args)],
                           capture_output=True, text=True, env=env, cwd=self.tmp, timeout=timeout)
        r.output = r.stdout + r.stderr
        return r

    def ran(self):
        """The scenarios the session's tests ran."""
        if not os.path.exists(self.marker):
            return []
        with open(self.marker) as f:
            return f.read().split()

    def sweep_intact(self):
        with open(self.sweep, "rb") as f:
            return f.read() == self.sweep_bytes


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def results_rows(path):
    with h5py.File(path, "r") as f:
        return list(results_table(f))


def meta(path):
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["meta"].attrs.items()}


class OutputChecks(unittest.TestCase):
    def assertRefused(self, world, r, option, path, why):
        """A pytest usage error (exit 4) naming the option, the path and why, before any test ran."""
        self.assertEqual(r.returncode, 4, r.output[-3000:])
        self.assertIn(f"option {option}: ", r.output)
        self.assertIn(path, r.output)
        self.assertIn(why, r.output)
        self.assertEqual(world.ran(), [], "a test ran before the refusal:\n" + r.output[-3000:])
        self.assertTrue(world.sweep_intact())

    def test_a_foreign_file_at_swa_out_is_refused_before_any_test_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            notes = os.path.join(tmp, "notes.txt")
            with open(notes, "w") as f:
                f.write("my notes, not results\n")
            r = w.pytest("--swa-out", notes)
            self.assertRefused(w, r, "--swa-out", notes, "exists and is not a swa-harness results file")
            self.assertIn("--swa-force", r.output)
            self.assertEqual(read(notes), b"my notes, not results\n")

    def test_a_foreign_file_at_swa_junit_is_refused_before_any_test_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            notes = os.path.join(tmp, "notes.xml")
            with open(notes, "w") as f:
                f.write("<?xml version='1.0'?><config/>\n")
            r = w.pytest("--swa-junit", notes, "--swa-out", os.path.join(tmp, "r.h5"))
            self.assertRefused(w, r, "--swa-junit", notes, "exists and is not a JUnit XML file")
            self.assertEqual(read(notes), b"<?xml version='1.0'?><config/>\n")
            self.assertFalse(os.path.exists(os.path.join(tmp, "r.h5")))

    def test_swa_force_replaces_a_foreign_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            out, junit = os.path.join(tmp, "notes.h5"), os.path.join(tmp, "notes.xml")
            for path in (out, junit):
                with open(path, "w") as f:
                    f.write("not ours\n")
            r = w.pytest("--swa-out", out, "--swa-junit", junit, "--swa-force")
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(len(results_rows(out)), 1)
            self.assertTrue(read(junit).startswith(b"<?xml") and b"<testsuites" in read(junit))

    def test_the_same_file_for_both_options_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            both = os.path.join(tmp, "both")
            r = w.pytest("--swa-out", both, "--swa-junit", both)
            self.assertRefused(w, r, "--swa-out", both, "is also --swa-junit")
            self.assertFalse(os.path.exists(both))
            # The same file by another name (a link to the folder) too.
            os.symlink(tmp, os.path.join(tmp, "again"))
            r = w.pytest("--swa-out", both, "--swa-junit", os.path.join(tmp, "again", "both"), "--swa-force")
            self.assertRefused(w, r, "--swa-out", both, "is also --swa-junit")

    def test_the_sweep_file_the_tests_read_is_refused_even_with_force(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            for args in (("--swa-out", w.sweep), ("--swa-out", w.sweep, "--swa-force"),
                         ("--swa-junit", w.sweep, "--swa-force"),
                         ("--swa-out", os.path.relpath(w.sweep, tmp), "--swa-force")):
                r = w.pytest(*args)
                self.assertRefused(w, r, args[0], w.sweep, "is also a sweep file the tests read")

    def test_a_folder_a_missing_folder_and_an_unwritable_folder_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            folder = os.path.join(tmp, "a-folder")
            os.mkdir(folder)
            r = w.pytest("--swa-out", folder)
            self.assertRefused(w, r, "--swa-out", folder, "is a folder")
            r = w.pytest("--swa-junit", folder, "--swa-force")
            self.assertRefused(w, r, "--swa-junit", folder, "is a folder")
            missing = os.path.join(tmp, "no-such-folder", "r.h5")
            r = w.pytest("--swa-out", missing)
            self.assertRefused(w, r, "--swa-out", os.path.dirname(missing), "does not exist")
            r = w.pytest("--swa-out", "")
            self.assertEqual(r.returncode, 4, r.output[-3000:])
            self.assertIn("option --swa-out: ", r.output)
            if os.geteuid() != 0:  # root writes anywhere
                locked = os.path.join(tmp, "locked")
                os.mkdir(locked, 0o500)
                r = w.pytest("--swa-junit", os.path.join(locked, "r.xml"))
                self.assertRefused(w, r, "--swa-junit", locked, "is not writable")

    def test_results_and_junit_files_and_empty_files_are_replaced(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp)
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            open(out, "w").close()  # as mktemp makes them
            open(junit, "w").close()
            r = w.pytest("--swa-out", out, "--swa-junit", junit)
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(len(results_rows(out)), 1)
            self.assertEqual(meta(out)["sweep_file"], w.sweep)  # one sweep file: recorded
            r = w.pytest("--swa-out", out, "--swa-junit", junit)  # ours: replaced
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(len(results_rows(out)), 1)
            self.assertEqual(len(w.ran()), 2)

    def test_a_foreign_file_that_appears_while_the_tests_run_is_not_replaced_and_is_said(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            w = World(tmp, during=f"""
                with open({out!r}, "w") as f:
                    f.write("written by someone else while the tests ran\\n")
            """)
            r = w.pytest("--swa-out", out, "--swa-junit", junit)
            self.assertEqual(len(w.ran()), 1, r.output[-3000:])
            self.assertNotEqual(r.returncode, 0, r.output[-3000:])
            self.assertRegex(r.output, r"ERROR: option --swa-out: " + re.escape(out) +
                             r" exists and is not a swa-harness results file.*rows were not written")
            self.assertEqual(read(out), b"written by someone else while the tests ran\n")
            self.assertTrue(read(junit).startswith(b"<?xml"))  # the other output is still written

    def test_a_write_that_fails_at_the_end_is_said_naming_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, "out")
            os.mkdir(folder)
            out = os.path.join(folder, "r.h5")
            w = World(tmp, during=f"""
                import shutil
                shutil.rmtree({folder!r})
                with open({folder!r}, "w") as f:
                    f.write("now a file, so nothing can be written under it\\n")
            """)
            r = w.pytest("--swa-out", out)
            self.assertEqual(len(w.ran()), 1, r.output[-3000:])
            self.assertNotEqual(r.returncode, 0, r.output[-3000:])
            self.assertRegex(r.output, r"ERROR: option --swa-out: .*" + re.escape(folder) + ".*rows were not written")
            self.assertNotIn("INTERNALERROR", r.output)

    def test_a_results_file_that_cannot_be_written_is_said_and_the_junit_still_written(self):
        """The write itself fails (a file size limit under the results file's size: EFBIG)."""
        with tempfile.TemporaryDirectory() as tmp:
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            w = World(tmp, after="""
                import resource
                resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))  # Python ignores SIGXFSZ: writes fail
            """)
            r = w.pytest("--swa-out", out, "--swa-junit", junit)
            self.assertEqual(len(w.ran()), 1, r.output[-3000:])
            self.assertNotEqual(r.returncode, 0, r.output[-3000:])
            self.assertRegex(r.output, r"ERROR: option --swa-out: cannot write " + re.escape(out) + r": .*rows are not in it")
            self.assertNotIn("INTERNALERROR", r.output)
            self.assertFalse(os.path.exists(out) and os.path.getsize(out) > 0 and results_rows(out))
            self.assertTrue(read(junit).startswith(b"<?xml"))


class ReportOfASession(unittest.TestCase):
    def report_commands(self, tmp, results):
        """The rerun cells of `swa-harness report` on `results`: every one, unescaped."""
        out_dir = os.path.join(tmp, "report")
        r = subprocess.run([HARNESS, "report", results, "-o", out_dir], capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(os.path.join(out_dir, "report.html")) as f:
            page = f.read()
        cells = [html.unescape(c) for c in re.findall(r"<td><code>([^<]*)</code></td></tr>", page)]
        page = html.unescape(page)
        at = page.find("swa-harness run ''")
        self.assertEqual(at, -1, page[at - 200:at + 300])
        return cells

    def test_the_reports_rerun_commands_of_a_pytest_session_run(self):
        """A failing session over one sweep file: each rerun command the report prints names that
        sweep file and, pasted, runs (exit 1: the fault reproduces; not 2 or 127)."""
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=FEW, fault="window-plus-one")
            results = os.path.join(tmp, "session.h5")
            r = w.pytest("--swa-out", results)
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertTrue([row for row in results_rows(results) if text(row["status"]) == "fail"])
            cells = self.report_commands(tmp, results)
            # The program as `report` was started (its absolute path: the build's is not on PATH), as the
            # console's lines name it; the output beside the results.
            commands = [c for c in cells if c.startswith(shlex.quote(HARNESS) + " run ")]
            self.assertEqual(len(commands), len(cells), cells)
            self.assertGreaterEqual(len(commands), 2, cells)
            for n, command in enumerate(commands):
                args = shlex.split(command)
                self.assertEqual(args[2], w.sweep, command)
                self.assertTrue(os.path.isfile(args[2]), command)
                self.assertEqual(args[args.index("--out") + 1], os.path.join(tmp, "rerun.h5"), command)
                rerun = os.path.join(tmp, f"rerun-{n}")
                os.mkdir(rerun)
                again = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=rerun, timeout=600,
                                       env=dict(os.environ, PATH="/usr/bin:/bin"))
                self.assertIn(again.returncode, (0, 1), command + "\n" + again.stderr[-3000:])
                self.assertEqual(again.returncode, 1, command + "\n" + again.stdout[-2000:])  # it reproduces
                self.assertRegex(again.stdout, r"0 passed, 1 failed")

    def test_a_session_over_two_sweep_files_gets_an_honest_line_not_run_of_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, sweeps=("a.yaml", "b.yaml"), fault="window-plus-one", filter=[ONE, ONE.replace("w=16", "w=1")])
            results = os.path.join(tmp, "session.h5")
            r = w.pytest("--swa-out", results)
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertEqual(meta(results)["sweep_file"], "")
            cells = self.report_commands(tmp, results)
            self.assertTrue(cells)
            for cell in cells:
                if cell.startswith(shlex.quote(HARNESS) + " run "):
                    self.assertTrue(os.path.isfile(shlex.split(cell)[2]), cell)
                else:
                    self.assertIn("no sweep file recorded", cell)
                    self.assertIn("pytest ", cell)
                    # The test's pytest id, which -k and the terminal show (`=` written `:`).
                    self.assertRegex(cell, r"\[mode:prefill/seqs:70-1-33/hq:8/hkv:2/d:64/w:(1|16)/mask:none/fp32/in:normal/seed:1\]")


# Ten scenarios of ci.yaml: prefill at w=1, 16 and 100 in three dtypes, and a decode one. Under the
# window-plus-one fault, the w=100 ones pass (the window holds every key) and the others fail.
TEN = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16|100)/mask=none/|" \
      "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/"
DECODE = "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/in=normal/seed=2"


def collected(r):
    """The test IDs (in brackets) of a `--collect-only -q` run."""
    return re.findall(r"^\S+::test_kernel_\d+\[(.*)\]$", r.stdout, re.M)


def as_k(scenario_id):
    return scenario_id.replace("=", ":")


def rows_of(path):
    """(scenario, DUT, status) of every row of a results file."""
    return sorted((text(r["scenario_id"]), text(r["dut"]), text(r["status"])) for r in results_rows(path))


def junit_cases(path):
    """(DUT, scenario, failed) of every test case of a JUnit file, and its suite's counts."""
    page = read(path).decode()
    cases = sorted((html.unescape(c), html.unescape(n), "<failure " in body)
                   for c, n, body in re.findall(r'<testcase classname="([^"]*)" name="([^"]*)"[^>]*>(.*?)</testcase>',
                                                page, re.S))
    suite = re.search(r'<testsuite name="swa_harness" tests="(\d+)" failures="(\d+)" errors="(\d+)" skipped="(\d+)"', page)
    return cases, suite.groups()


class PytestHabits(unittest.TestCase):
    def test_k_selects_by_the_test_ids_and_every_message_keeps_the_scenario_id(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=TEN, fault="window-plus-one")
            r = w.pytest("--collect-only")
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            ids = collected(r)
            self.assertEqual(len(ids), 10, r.output[-3000:])
            self.assertTrue(all("=" not in i for i in ids), ids)
            self.assertIn(as_k(ONE), ids)
            self.assertIn(as_k(DECODE), ids)
            # The words of a scenario ID select: a value, two at once, a prefix with its '/'.
            out = os.path.join(tmp, "r.h5")
            r = w.pytest("-k", "cache:ring-modulo", "--swa-out", out)
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertEqual(w.ran(), [DECODE], r.output[-3000:])
            self.assertRegex(r.stdout, r"1 failed, 9 deselected")
            self.assertIn(f"--filter {DECODE} ", r.stdout)  # the rerun line: the real ID
            self.assertEqual([(row[0], row[2]) for row in rows_of(out)], [(DECODE, "fail")])
            os.remove(w.marker)
            r = w.pytest("-k", "w:16/ and fp32 and mode:prefill")
            self.assertEqual(w.ran(), [ONE], r.output[-3000:])
            os.remove(w.marker)
            r = w.pytest("-k", "w:100/ and not bf16")
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(sorted(w.ran()), sorted(i.replace(":", "=") for i in ids if "/w:100/" in i and "bf16" not in i))
            self.assertEqual(len(w.ran()), 2)

    def test_lf_reruns_the_tests_that_failed(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=TEN, after="""
                assert "/w=16/" not in scenario.id, "fails on purpose"
            """)
            r = w.pytest(cache=True)
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertRegex(r.stdout, r"3 failed, 7 passed")
            os.remove(w.marker)
            r = w.pytest("--lf", cache=True)
            self.assertRegex(r.stdout, r"3 failed, 7 deselected")
            self.assertEqual(len(w.ran()), 3, r.output[-3000:])
            self.assertTrue(all("/w=16/" in i for i in w.ran()), w.ran())

    def test_stacked_sweep_marks_run_the_union_and_two_files_ids_are_told_apart(self):
        """Marks on one test: a.yaml twice (two filters that share ONE: one test) and b.yaml (ONE
        again, another file: a test of its own, both IDs prefixed by their files' names)."""
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, sweeps=("a.yaml", "a.yaml", "b.yaml"), stacked=True, fault="window-plus-one",
                      filter=["mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/fp32/", ONE, ONE])
            a, b = w.sweeps
            r = w.pytest("--collect-only")
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            one_w1 = ONE.replace("/w=16/", "/w=1/")
            self.assertEqual(sorted(collected(r)), sorted([as_k(one_w1), "a.yaml/" + as_k(ONE), "b.yaml/" + as_k(ONE)]))
            out = os.path.join(tmp, "r.h5")
            r = w.pytest("--swa-out", out, "-k", "b.yaml or w:1/")
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertEqual(sorted(w.ran()), sorted([one_w1, ONE]), r.output[-3000:])
            # Each failure's rerun line names its own sweep file.
            commands = re.findall(r"reproduce: (.*)", r.stdout)
            self.assertEqual(sorted(shlex.split(c)[2] for c in commands), sorted([a, b]), r.stdout[-3000:])
            self.assertEqual(meta(out)["sweep_file"], "")  # rows from two sweep files
            os.remove(w.marker)
            r = w.pytest("--swa-out", out)  # every test: ONE twice (two files), one row per (scenario, DUT)
            self.assertEqual(len(w.ran()), 3, r.output[-3000:])
            self.assertEqual([row[0] for row in rows_of(out)], sorted([one_w1, ONE]))

    def test_two_sweeps_of_one_file_stacked_run_both(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sweep.yaml")
            shutil.copy(CI, path)
            with open(os.path.join(tmp, "test_two.py"), "w") as f:
                f.write(f"import swa_harness\n\n@swa_harness.sweep({path!r}, sweep='window_edges')\n"
                        f"@swa_harness.sweep({path!r}, sweep='head_sizes')\ndef test_x(scenario):\n    pass\n")
            r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q",
                                "-p", "no:cacheprovider", "--collect-only", "test_two.py"], capture_output=True,
                               text=True, cwd=tmp, env=dict(os.environ, PYTHONPATH=PACKAGE), timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            ids = re.findall(r"^test_two.py::test_x\[(.*)\]$", r.stdout, re.M)
            listed = {}
            for sweep in ("window_edges", "head_sizes"):
                listed[sweep] = subprocess.run([HARNESS, "list", path, "--sweep", sweep], capture_output=True,
                                               text=True, timeout=600).stdout.split()
                self.assertTrue(listed[sweep])
            self.assertEqual(sorted(ids), sorted(as_k(i) for i in listed["window_edges"] + listed["head_sizes"]))

    def test_a_bad_mark_is_a_collection_error_naming_the_test_and_the_mark(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sweep.yaml")
            shutil.copy(CI, path)
            cases = {"nothing": (f"swa_harness.sweep({path!r}, filter='no-such-scenario')", "selects no scenario"),
                     "missing": ("swa_harness.sweep('no-such.yaml')", "no-such.yaml"),
                     "sweep": (f"swa_harness.sweep({path!r}, sweep='no_such_sweep')", "no sweep named 'no_such_sweep'"),
                     "keyword": (f"pytest.mark.swa_sweep({path!r}, sweeps='caches')", "is not swa_harness.sweep(path")}
            for name, (mark, why) in cases.items():
                test_file = os.path.join(tmp, f"test_{name}.py")
                with open(test_file, "w") as f:
                    f.write(f"import pytest, swa_harness\n\n@swa_harness.sweep({path!r}, sweep='caches')\n@{mark}\n"
                            "def test_x(scenario):\n    pass\n")
                r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q",
                                    "-p", "no:cacheprovider", test_file], capture_output=True, text=True, cwd=tmp,
                                   env=dict(os.environ, PYTHONPATH=PACKAGE), timeout=600)
                output = r.stdout + r.stderr
                self.assertEqual(r.returncode, 2, output[-3000:])
                self.assertIn(f"test_{name}.py::test_x: ", output)
                self.assertIn(why, output)
                self.assertNotIn("Traceback", output)


def xdist_missing():
    """Why pytest-xdist cannot run here (Debian's python3-pytest-xdist), or None."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import xdist"], capture_output=True, text=True)
    return None if r.returncode == 0 else \
        "pytest-xdist is not installed for /usr/bin/python3 (apt-get install python3-pytest-xdist): " + r.stderr.strip()


class Xdist(unittest.TestCase):
    """pytest -n 2: the controller checks the outputs before any test runs and writes every worker's
    rows at the end (the workers' files in a private folder, merged, then gone)."""

    def setUp(self):
        if xdist_missing():
            self.skipTest(xdist_missing())

    def run_both(self, w, tmp, *args):
        """The session without -n and with -n 2: (results, JUnit) of each, and the -n 2 run."""
        files = []
        for n, extra in enumerate(((), ("-n", "2"))):
            out, junit = os.path.join(tmp, f"r{n}.h5"), os.path.join(tmp, f"r{n}.xml")
            private = os.path.join(tmp, f"tmp{n}")
            os.mkdir(private)
            r = w.pytest("--swa-out", out, "--swa-junit", junit, *extra, *args, env={"TMPDIR": private})
            left = [e for e in os.listdir(private) if not e.startswith("pytest-of-")]  # (pytest's own basetemp)
            self.assertEqual(left, [], "the workers' files are left behind")
            files.append((out, junit))
        return files, r

    def test_n2_writes_the_same_rows_as_one_process(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, sweeps=("a.yaml", "b.yaml"), filter=[TEN, ONE], fault="window-plus-one")
            ((out0, junit0), (out2, junit2)), r = self.run_both(w, tmp)
            self.assertEqual(r.returncode, 1, r.output[-3000:])
            self.assertRegex(r.stdout, r"8 failed, 3 passed")
            self.assertEqual(len(w.ran()), 22)  # both sessions' tests
            rows = rows_of(out2)
            self.assertEqual(rows, rows_of(out0))
            self.assertEqual(len(rows), 10)  # ONE twice: one row per (scenario, DUT)
            self.assertEqual({row[2] for row in rows}, {"pass", "fail"})
            self.assertEqual(junit_cases(junit2), junit_cases(junit0))
            self.assertEqual(junit_cases(junit2)[1], ("10", "7", "0", "0"))
            self.assertEqual(meta(out2)["sweep_file"], "")  # two sweep files, as without -n
            self.assertIn("-n 2", meta(out2)["command"])
            r = subprocess.run([HARNESS, "report", out2, "-o", os.path.join(tmp, "report")], capture_output=True,
                               text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])

    def test_n2_over_one_sweep_file_names_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=TEN)
            ((out0, _), (out2, junit2)), r = self.run_both(w, tmp)
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(rows_of(out2), rows_of(out0))
            self.assertEqual(len(rows_of(out2)), 10)
            self.assertEqual(meta(out2)["sweep_file"], w.sweep)
            self.assertEqual(junit_cases(junit2)[1], ("10", "0", "0", "0"))

    def test_n2_refuses_a_foreign_file_and_the_sweep_file_before_any_test_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=TEN)
            notes = os.path.join(tmp, "notes.txt")
            with open(notes, "w") as f:
                f.write("my notes\n")
            for args, path, why in ((("--swa-out", notes), notes, "exists and is not a swa-harness results file"),
                                    (("--swa-junit", w.sweep, "--swa-force"), w.sweep, "is also a sweep file the tests read")):
                r = w.pytest(*args, "-n", "2")
                OutputChecks.assertRefused(self, w, r, args[0], path, why)
                self.assertNotIn("INTERNALERROR", r.output)
            self.assertEqual(read(notes), b"my notes\n")
            r = w.pytest("--swa-out", notes, "--swa-force", "-n", "2")
            self.assertEqual(r.returncode, 0, r.output[-3000:])
            self.assertEqual(len(rows_of(notes)), 10)

    def test_a_worker_that_crashes_is_said_and_the_others_rows_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = World(tmp, filter=TEN, after=f"""
                if scenario.id == {DECODE!r}:
                    os._exit(9)
            """)
            out = os.path.join(tmp, "r.h5")
            r = w.pytest("--swa-out", out, "-n", "2")
            self.assertEqual(r.returncode, 3, r.output[-3000:])
            self.assertRegex(r.output, r"ERROR: pytest-xdist worker gw\d stopped before storing its rows \(crashed or "
                                       r"killed\): the rows of the tests it ran are not in " + re.escape(out))
            rows = rows_of(out)
            self.assertTrue(0 < len(rows) < 10, rows)
            self.assertNotIn(DECODE, [row[0] for row in rows])


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES, PACKAGE = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    if sys.argv[1:] == ["Xdist"] and xdist_missing():  # (its own CTest registration: 77, skipped)
        print("skipped:", xdist_missing())
        sys.exit(77)
    unittest.main(verbosity=2)
