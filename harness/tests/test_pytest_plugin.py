#!/usr/bin/env python3
"""The pytest plugin's outputs: --swa-out and --swa-junit get `swa-harness run`'s checks of --out and
--junit (the same C++: swa_harness._core.guard_output), refused as a pytest usage error before any
test runs, --swa-force as run's --force, a write that fails at the end said and not lost silently; and
`swa-harness report` on a session's results file prints rerun commands that work.

Every session runs in a temporary folder of its own, on copies of ci.yaml (a refused output must
never be able to touch the repository's sweep file).

usage: test_pytest_plugin.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR PYTHON_PACKAGE_DIR
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
@swa_harness.sweep({sweep!r}, filter={filter!r})
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

    def __init__(self, tmp, sweeps=("sweep.yaml",), filter=ONE, fault=None, during="", after=""):
        """`sweeps`: copies of ci.yaml, each with a test over the scenarios `filter` (one regex, or
        one per sweep file) selects; `during`, `after`: code the tests run before and after swa_check."""
        self.tmp = tmp
        self.marker = os.path.join(tmp, "ran.txt")
        self.sweeps = []
        tests = []
        filters = [filter] * len(sweeps) if isinstance(filter, str) else filter
        for n, (name, selected) in enumerate(zip(sweeps, filters)):
            path = os.path.join(tmp, name)
            shutil.copy(CI, path)
            self.sweeps.append(path)
            tests.append(TEST_FUNCTION.format(sweep=path, filter=selected, n=n, marker=self.marker,
                                              during=textwrap.indent(textwrap.dedent(during), "    "),
                                              after=textwrap.indent(textwrap.dedent(after), "    ")))
        self.test_file = os.path.join(tmp, "test_session.py")
        with open(self.test_file, "w") as f:
            f.write(TEST_FILE.format(examples=EXAMPLES, fault=fault, tests="\n".join(tests)))
        self.sweep = self.sweeps[0]
        with open(self.sweep, "rb") as f:
            self.sweep_bytes = f.read()

    def pytest(self, *args, timeout=600):
        env = dict(os.environ, PYTHONPATH=PACKAGE)
        r = subprocess.run(["/usr/bin/python3", "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q",
                            "-p", "no:cacheprovider", self.test_file, *map(str, args)],
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
            commands = [c for c in cells if c.startswith("swa-harness run ")]
            self.assertEqual(len(commands), len(cells), cells)
            self.assertGreaterEqual(len(commands), 2, cells)
            for n, command in enumerate(commands):
                args = shlex.split(command)
                self.assertEqual(args[2], w.sweep, command)
                self.assertTrue(os.path.isfile(args[2]), command)
                rerun = os.path.join(tmp, f"rerun-{n}")
                os.mkdir(rerun)
                again = subprocess.run([HARNESS, *args[1:]], capture_output=True, text=True, cwd=rerun, timeout=600)
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
                if cell.startswith("swa-harness run "):
                    self.assertTrue(os.path.isfile(shlex.split(cell)[2]), cell)
                else:
                    self.assertIn("no sweep file recorded", cell)
                    self.assertIn("pytest ", cell)
                    self.assertRegex(cell, r"\[mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/fp32/in=normal/seed=1\]")


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES, PACKAGE = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    unittest.main(verbosity=2)
