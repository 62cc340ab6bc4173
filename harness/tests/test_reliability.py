#!/usr/bin/env python3
"""Hostile conditions end to end: nothing lost, nothing overwritten, no crash, no hang.

usage: test_reliability.py PATH/TO/swa-harness CI_YAML

Each test reproduces a defect found by trying the harness as a hostile user would (issue 15).
"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = None
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dut", "external", "examples", "numpy_dut.py")


def run(*args, **kw):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, errors="replace", timeout=900, **kw)


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def stored_pairs(path):
    """(scenario, DUT) of every /results row, in file order."""
    with h5py.File(path) as f:
        return [(text(r["scenario_id"]), text(r["dut"])) for r in results_table(f)]


def file_size_limit(limit):
    """preexec_fn: writes past `limit` bytes fail with EFBIG (SIGXFSZ ignored), as on a full disk."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


class FullDisk(unittest.TestCase):
    """A results file that cannot be rewritten stops the run; what it holds stays whole and unique."""

    def check_stopped_run(self, r, out, junit, cause):
        self.assertEqual(r.returncode, 3, r.stderr[-2000:])  # not a segfault (139) nor a pass
        self.assertIn("the results could not be stored", r.stderr)
        self.assertIn(cause, r.stderr)
        self.assertIn("--resume", r.stderr)
        pairs = stored_pairs(out)
        self.assertEqual(len(pairs), len(set(pairs)), "a (scenario, DUT) pair stored twice")
        if os.path.exists(junit):  # whole, and the same rows as the file
            cases = ET.parse(junit).getroot().iter("testcase")
            self.assertEqual(sum(1 for _ in cases), len(pairs))
        return pairs

    def test_a_file_size_limit_stops_the_run_and_resume_finishes_it(self):
        # Rows reach the file at commits spaced by their own cost, at most a second apart
        # (results_store.hpp). The limited run must outlast the first commit by far, or the last
        # one alone meets the limit and nothing is stored: so all of ci.yaml, golden computed
        # (4-5 s; the caches sweep with a warm golden cache took 0.2 s and sometimes ended first).
        with tempfile.TemporaryDirectory() as tmp:
            whole = os.path.join(tmp, "whole.h5")
            self.assertEqual(run("run", CI, "--dut", "cpu", "--no-golden-cache", "--out", whole).returncode, 0)
            total = stored_pairs(whole)
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            limit = os.path.getsize(whole) * 2 // 3
            r = run("run", CI, "--dut", "cpu", "--no-golden-cache", "--out", out, "--junit", junit,
                    preexec_fn=file_size_limit(limit))
            pairs = self.check_stopped_run(r, out, junit, "File too large")
            self.assertGreater(len(pairs), 0)
            self.assertLess(len(pairs), len(total))
            self.assertEqual([f for f in os.listdir(tmp) if ".tmp." in f], [])
            r = run("run", CI, "--dut", "cpu", "--no-golden-cache", "--out", out, "--junit", junit, "--resume")
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            pairs = stored_pairs(out)
            self.assertEqual(sorted(pairs), sorted(total))
            self.assertEqual(sum(1 for _ in ET.parse(junit).getroot().iter("testcase")), len(total))

    def test_ulimit_f_as_a_shell_sets_it_is_a_full_disk_not_a_signal(self):
        # A shell's `ulimit -f` leaves SIGXFSZ at its default action, which would kill the harness
        # (exit 153, nothing said, the last rows lost).
        def shell_like_limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        with tempfile.TemporaryDirectory() as tmp:
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            r = run("run", CI, "--dut", "cpu", "--no-golden-cache", "--out", out, "--junit", junit,
                    preexec_fn=shell_like_limit)
            self.check_stopped_run(r, out, junit, "File too large")

    def test_a_full_tmpfs(self):
        # The repro: a 64 KiB tmpfs as the results folder (a user and mount namespace, so no
        # root is needed where the kernel allows unprivileged namespaces).
        if not shutil.which("unshare") or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
            self.skipTest("skipped: cannot create a mount namespace here (unshare -rm)")
        with tempfile.TemporaryDirectory() as tmp:
            tiny, keep = os.path.join(tmp, "tiny"), os.path.join(tmp, "keep")
            os.mkdir(tiny)
            os.mkdir(keep)
            script = (f'mount -t tmpfs -o size=64k tmpfs {tiny} || exit 99\n'
                      f'"$0" run {CI} --sweep caches --dut cpu --out {tiny}/r.h5 --junit {tiny}/r.xml '
                      f'>{keep}/stdout 2>{keep}/stderr\n'
                      f'echo $? >{keep}/rc\ncp {tiny}/* {keep}/ 2>/dev/null\ntrue\n')
            p = subprocess.run(["unshare", "-rm", "sh", "-c", script, HARNESS], capture_output=True, text=True, timeout=900)
            if p.returncode == 99 or not os.path.exists(os.path.join(keep, "rc")):
                self.skipTest("skipped: cannot mount a tmpfs in a namespace here")
            with open(os.path.join(keep, "rc")) as f:
                rc = int(f.read())
            with open(os.path.join(keep, "stderr")) as f:
                err = f.read()
            fake = subprocess.CompletedProcess([], rc, "", err)
            self.check_stopped_run(fake, os.path.join(keep, "r.h5"), os.path.join(keep, "r.xml"),
                                   "No space left on device")
            self.assertFalse([f for f in os.listdir(keep) if ".tmp." in f])


def all_rows(path):
    """Every /results and /scenarios row, for comparing two files."""
    with h5py.File(path) as f:
        return ([tuple(text(v) if isinstance(v, bytes) else v for v in r) for r in results_table(f)],
                [tuple(text(v) if isinstance(v, bytes) else v for v in r) for r in f["scenarios"][:]])


class Temporaries(unittest.TestCase):
    def test_temporaries_of_killed_runs_are_removed_at_the_next_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            dead = subprocess.Popen(["true"])
            dead.wait()  # a PID that no longer runs
            orphans = [f"{out}.tmp.{dead.pid}", os.path.join(tmp, f"r.xml.tmp.{dead.pid}")]
            alive = f"{out}.tmp.{os.getpid()}"  # a live process's temporary is not ours to take
            for path in orphans + [alive]:
                with open(path, "w") as f:
                    f.write("half a file")
            r = run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", out, "--junit", os.path.join(tmp, "r.xml"))
            self.assertEqual(r.returncode, 0, r.stderr[-500:])
            self.assertEqual([p for p in orphans if os.path.exists(p)], [])
            self.assertTrue(os.path.exists(alive))


class DamagedResultsFiles(unittest.TestCase):
    """A damaged results file is refused (exit 2, naming it) or read whole; never a crash or lost rows."""

    def test_garbage_anywhere_in_a_results_file(self):
        import random
        rng = random.Random(15)
        with tempfile.TemporaryDirectory() as tmp:
            good = os.path.join(tmp, "good.h5")
            self.assertEqual(run("run", CI, "--sweep", "caches", "--dut", "cpu,baseline", "--out", good).returncode, 0)
            with open(good, "rb") as f:
                image = f.read()
            expected = all_rows(good)
            refused = 0
            offsets = sorted(rng.randrange(0, len(image)) for _ in range(80))
            for offset in offsets:
                with self.subTest(offset=offset):
                    bad = os.path.join(tmp, f"bad-{offset}.h5")
                    damaged = bytearray(image)
                    damaged[offset:offset + 1024] = bytes(rng.randrange(256) for _ in range(min(1024, len(image) - offset)))
                    with open(bad, "wb") as f:
                        f.write(damaged)
                    merged = os.path.join(tmp, "merged.h5")
                    r = run("merge", bad, "-o", merged)
                    self.assertIn(r.returncode, (0, 2), r.stderr)  # never a crash
                    if r.returncode == 2:
                        refused += 1
                        self.assertIn(bad, r.stderr)
                        self.assertFalse(os.path.exists(merged))
                    else:  # the garbage hit bytes nobody reads: every row is there, unchanged
                        self.assertEqual(all_rows(merged), expected)
                        os.remove(merged)
                    r = run("run", CI, "--sweep", "caches", "--dut", "cpu,baseline", "--out", bad, "--resume")
                    self.assertIn(r.returncode, (0, 2), r.stderr)
                    if r.returncode == 2:
                        self.assertIn(bad, r.stderr)
                        with open(bad, "rb") as f:
                            self.assertEqual(f.read(), bytes(damaged), "a refused file was changed")
            self.assertGreater(refused, len(offsets) // 2)

    def test_a_table_cut_short_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.h5")
            self.assertEqual(run("run", CI, "--sweep", "caches", "--dut", "cpu", "--out", path).returncode, 0)
            with h5py.File(path, "a") as f:  # well-formed HDF5, but rows gone
                f["results"].resize((len(f["results"]) - 3,))
            r = run("merge", path, "-o", os.path.join(tmp, "m.h5"))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("/results holds", r.stderr)
            self.assertIn("the file is damaged", r.stderr)


class FilesFromEarlierVersions(unittest.TestCase):
    """A results file written before columns were added (here: data/results_before_kv_dtype.h5, by
    commit 780c4ca, before kv_dtype, k_descale and v_descale) verifies and reads whole: its digests
    cover the columns it has. It used to be refused as damaged."""

    def test_a_file_without_the_newer_columns_is_read_merged_reported_and_resumed(self):
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "results_before_kv_dtype.h5")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "old.h5")
            shutil.copy(fixture, path)
            def verdicts(p):
                with h5py.File(p) as f:
                    return {(text(r["scenario_id"]), text(r["dut"])): (text(r["status"]), float(r["max_abs"]))
                            for r in results_table(f)}
            before = verdicts(path)
            self.assertEqual(len(before), 6)
            merged = os.path.join(tmp, "merged.h5")
            r = run("merge", path, "-o", merged)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(verdicts(merged), before)
            with h5py.File(merged) as f:
                s = f["scenarios"][:]
                self.assertEqual({x.decode() if isinstance(x, bytes) else x for x in s["kv_dtype"]}, {""})
                self.assertTrue((s["k_descale"] == 0).all())  # not recorded then
            r = run("report", path, "-o", os.path.join(tmp, "report"))
            self.assertEqual(r.returncode, 0, r.stderr)
            # --resume with the file's own sweep text adds rows and keeps the old ones.
            with h5py.File(path) as f:
                sweep_text = f["meta"].attrs["sweep_text"]
                command = f["meta"].attrs["command"]
            sweep = os.path.join(tmp, "sweep.yaml")
            with open(sweep, "w") as f:
                f.write(sweep_text.decode() if isinstance(sweep_text, bytes) else sweep_text)
            pattern = command.split("--filter ")[1].split(" ")[0]
            r = run("run", sweep, "--sweep", "caches", "--filter", pattern, "--dut", "cpu,baseline", "--out", path, "--resume")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr)
            after = verdicts(path)
            self.assertEqual({k: v for k, v in after.items() if k in before}, before)
            self.assertEqual(len(after), 2 * len(before))


def memory_limit(limit):
    """preexec_fn: at most `limit` bytes of address space (a blow-up fails fast instead of swapping).
    Not under AddressSanitizer, whose shadow memory alone reserves terabytes of address space."""
    def apply():
        if "ASAN_OPTIONS" not in os.environ:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


class HugeSweeps(unittest.TestCase):
    """Sizes are checked before anything is expanded or allocated."""

    def write(self, tmp, name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_six_aliased_axes_of_100_values_are_counted_not_expanded(self):
        with tempfile.TemporaryDirectory() as tmp:
            values = "[" + ", ".join(str(v) for v in range(1, 101)) + "]"
            path = self.write(tmp, "big.yaml", "sweeps:\n  big:\n    matrix:\n"
                              f"      window: &v {values}\n      head_size: *v\n      heads: *v\n"
                              "      kv_heads: *v\n      chunk: *v\n      decode_steps: *v\n")
            self.assertLess(os.path.getsize(path), 600)
            for command in ("list", "run"):
                r = run(command, path, "--out", os.path.join(tmp, "r.h5"), preexec_fn=memory_limit(2 << 30)) \
                    if command == "run" else run(command, path, preexec_fn=memory_limit(2 << 30))
                self.assertEqual(r.returncode, 2, r.stderr[-1000:])
                self.assertIn(f"{path}:2:3: sweeps.big:", r.stderr)  # the sweep's own line
                self.assertIn("expands to more than 1000000 scenarios (matrix: window 100 x head_size 100", r.stderr)
                self.assertIn("--max-scenarios", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "r.h5")))

    def test_the_limit_is_an_option_and_counts_every_sweep(self):
        r = run("list", CI, "--max-scenarios", "100")
        self.assertEqual(r.returncode, 2)
        self.assertIn("over the limit of 100", r.stderr)
        self.assertIn("in the sweeps before it", r.stderr)
        self.assertEqual(run("list", CI, "--max-scenarios", "1000000").returncode, 0)
        r = run("list", CI, "--max-scenarios", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--max-scenarios", r.stderr)

    def test_an_oversized_or_special_sweep_file_is_refused_unread(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.write(tmp, "huge.yaml", "sweeps:\n" + "#" * (9 << 20) + "\n")
            r = run("list", path)
            self.assertEqual(r.returncode, 2)
            self.assertIn("files over 8 MiB are refused", r.stderr)
            fifo = os.path.join(tmp, "fifo.yaml")
            os.mkfifo(fifo)
            r = subprocess.run([HARNESS, "list", fifo], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2)
            self.assertIn("not a regular file", r.stderr)

    def test_a_scenario_too_big_to_estimate_in_int64_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            # 7711 sequences of 2^24 tokens: the int64 estimate wrapped to a negative size and passed.
            batch = "[" + ", ".join(["16777216"] * 7711) + "]"
            path = self.write(tmp, "huge_batch.yaml", "sweeps:\n  huge:\n    matrix:\n"
                              f"      batch: [{batch}]\n      heads: 1024\n      kv_heads: 1024\n"
                              "      head_size: 1024\n      window: 8\n      dtype: fp32\n")
            r = run("list", path)
            self.assertEqual(r.returncode, 2, r.stderr[-500:])
            self.assertIn("MiB, over the limit of", r.stderr)


class HostilePatterns(unittest.TestCase):
    """--filter runs in linear time: no pattern hangs the harness or overflows its stack."""

    def test_patterns_that_broke_std_regex(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "long_ids.yaml")
            batch = "[" + ", ".join(["3"] * 20000) + "]"  # IDs of ~40000 characters
            with open(path, "w") as f:
                f.write(f"sweeps:\n  long:\n    matrix:\n      batch: [{batch}]\n      window: [1, 2]\n")
            for pattern in ("seqs=(.)*X", "(.*)*(.*)*(.*)*(.*)*(.*)*X", "seqs=(3-)*3/hq"):
                with self.subTest(pattern=pattern):
                    r = subprocess.run([HARNESS, "list", path, "--filter", pattern], capture_output=True, text=True,
                                       timeout=60)
                    self.assertEqual(r.returncode, 0, r.stderr[-500:])
                    self.assertIn("scenarios", r.stderr)
            r = subprocess.run([HARNESS, "list", path, "--filter", "seqs=(3-)*3/hq"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.stderr.strip().splitlines()[-1], "2 scenarios")

    def test_a_pattern_re2_cannot_take_is_refused_with_the_reason(self):
        for pattern, reason in (("(", "missing )"), ("(a)\\1", "invalid escape")):
            with self.subTest(pattern=pattern):
                r = run("list", CI, "--filter", pattern)
                self.assertEqual(r.returncode, 2)
                self.assertIn("RE2 syntax", r.stderr)
                self.assertIn(reason, r.stderr)


class FilesInTheWay(unittest.TestCase):
    """No output option replaces a file it did not write, or an input."""

    def test_out_never_replaces_the_sweep_file_or_a_foreign_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "ci.yaml")
            shutil.copy(CI, sweep)
            notes = os.path.join(tmp, "notes.txt")
            with open(notes, "w") as f:
                f.write("my notes\n")
            for args, message in (
                    (["--out", sweep], "is also the sweep file"),
                    (["--out", notes], "exists and is not a swa-harness results file"),
                    (["--out", os.path.join(tmp, "r.h5"), "--junit", os.path.join(tmp, "r.h5")], "is also --junit"),
                    (["--out", os.path.join(tmp, "r.h5"), "--junit", notes], "exists and is not a JUnit XML file"),
                    (["--out", os.path.join(tmp, "r.h5"), "--junit", os.path.join(tmp, "no", "r.xml")], "does not exist")):
                with self.subTest(args=args):
                    r = run("run", sweep, "--sweep", "inputs", "--dut", "cpu", *args)
                    self.assertEqual(r.returncode, 2, r.stderr[-500:])
                    self.assertIn(message, r.stderr)
                    self.assertNotIn("passed", r.stdout)  # refused before the sweep ran
            with open(notes) as f:
                self.assertEqual(f.read(), "my notes\n")
            self.assertEqual(open(sweep).read(), open(CI).read())
            r = run("merge", sweep, "-o", notes)
            self.assertEqual(r.returncode, 2)
            r = run("run", sweep, "--sweep", "inputs", "--dut", "cpu", "--out", notes, "--force")
            self.assertEqual(r.returncode, 0, r.stderr[-500:])
            r = run("run", sweep, "--sweep", "inputs", "--dut", "cpu", "--out", notes)  # now ours: replaced
            self.assertEqual(r.returncode, 0, r.stderr[-500:])

    def test_an_unwritable_junit_folder_is_refused_before_the_sweep(self):
        if os.geteuid() == 0:
            self.skipTest("skipped: root writes into read-only folders")
        with tempfile.TemporaryDirectory() as tmp:
            locked = os.path.join(tmp, "locked")
            os.mkdir(locked, 0o555)
            r = run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", os.path.join(tmp, "r.h5"),
                    "--junit", os.path.join(locked, "r.xml"))
            self.assertEqual(r.returncode, 2)
            self.assertIn("is not writable", r.stderr)


class SilentSurprises(unittest.TestCase):
    """What used to be accepted silently is an error naming file, line and key (or a documented behaviour)."""

    def write(self, tmp, text, name="s.yaml", mode="w"):
        path = os.path.join(tmp, name)
        with open(path, mode) as f:
            f.write(text)
        return path

    def refused(self, path, *needles, command=("list",)):
        r = run(*command, path) if command == ("list",) else run(*command)
        self.assertEqual(r.returncode, 2, r.stderr[-800:])
        for n in needles:
            self.assertIn(n, r.stderr)
        return r

    def test_sweep_file_text_problems(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases = {
                "duplicate key": ("sweeps:\n  a:\n    matrix:\n      window: [8]\n      window: [16]\n",
                                  [":5:7: sweeps.a.matrix.window: 'window' appears twice", "first at line 4"]),
                "duplicate sweep": ("sweeps:\n  a:\n    matrix: {window: [8]}\n  a:\n    matrix: {window: [16]}\n",
                                    [":4:3: sweeps.a: 'a' appears twice"]),
                "non-scalar key": ("sweeps:\n  a:\n    matrix:\n      [window]: [8]\n",
                                   [":4:7: sweeps.a.matrix: a key must be a plain name, not a list"]),
                "empty matrix": ("sweeps:\n  a:\n    matrix: {}\n", ["sweeps.a.matrix: is empty"]),
                "no matrix": ("sweeps:\n  a:\n    description: nothing\n", ["sweeps.a: has neither matrix: nor include:"]),
                "inf tolerance": ("sweeps:\n  a:\n    matrix: {window: [8]}\n    tolerance:\n      fp32: {rtol_factor: .inf}\n",
                                  ["sweeps.a.tolerance.fp32.rtol_factor: expected a finite non-negative number, got '.inf'"]),
                "exclude all": ("sweeps:\n  a:\n    matrix: {window: [8]}\n    exclude:\n      - {window: 8}\n",
                                ["sweeps.a.exclude: removes every scenario"]),
            }
            for name, (text, needles) in cases.items():
                with self.subTest(name):
                    self.refused(self.write(tmp, text), *needles)
            path = self.write(tmp, b"sweeps:\n  caf\xe9:\n    matrix: {window: [8]}\n", "latin1.yaml", "wb")
            self.refused(path, f"{path}:2:6: not UTF-8")

    def test_options_that_fell_back_silently(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            for value in ("", ",", "cpu,,baseline"):
                with self.subTest(dut=value):
                    r = run("run", CI, "--sweep", "inputs", "--dut", value, "--out", out)
                    self.assertEqual(r.returncode, 2, r.stderr[-500:])
                    self.assertIn("option --dut:", r.stderr)
            # --resume into a file of another sweep text
            self.assertEqual(run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", out).returncode, 0)
            other = os.path.join(tmp, "other.yaml")
            with open(CI) as f, open(other, "w") as g:
                g.write(f.read() + "\n# edited\n")
            r = run("run", other, "--sweep", "inputs", "--dut", "cpu", "--out", out, "--resume")
            self.assertEqual(r.returncode, 2)
            self.assertIn("was written from another sweep file text", r.stderr)
            r = run("run", other, "--sweep", "inputs", "--dut", "cpu", "--out", out, "--resume", "--force")
            self.assertEqual(r.returncode, 0, r.stderr[-500:])

    def test_an_empty_shard_succeeds_and_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "small.yaml")
            with open(path, "w") as f:
                f.write("sweeps:\n  small:\n    matrix: {window: [4, 8, 16, 32]}\n")
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            r = run("run", path, "--shard", "5/8", "--dut", "cpu", "--out", out, "--junit", junit)
            self.assertEqual(r.returncode, 0, r.stderr[-500:])
            self.assertIn("holds no scenario", r.stderr)
            self.assertEqual(stored_pairs(out), [])
            r = run("run", path, "--shard", "5/8", "--dut", "nonsense", "--out", out)
            self.assertEqual(r.returncode, 2)  # a bad --dut is still refused

    def test_bisect_repro_yaml_holds_a_dut_name_with_quotes(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, 'say "hi".sh')
            with open(script, "w") as f:
                f.write(f'#!/bin/sh\nexec /usr/bin/python3 {EXAMPLE} --fault window-plus-one "$@"\n')
            os.chmod(script, 0o755)
            scenario = run("list", CI, "--sweep", "inputs").stdout.split()[0]
            dut = f"exec:'{script}'"
            r = run("bisect", CI, "--filter", scenario, "--dut", dut, "--reruns", "1", "--out", os.path.join(tmp, "b"))
            self.assertIn(r.returncode, (0, 1), r.stderr[-800:])
            import yaml  # Debian's python3-yaml
            with open(os.path.join(tmp, "b", "repro.yaml")) as f:
                repro = yaml.safe_load(f)
            self.assertEqual(repro["sweeps"]["repro"]["duts"], [dut])


class MessagesThatMisled(unittest.TestCase):
    def test_report_says_write_when_it_cannot_write(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            self.assertEqual(run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", out).returncode, 0)
            blocker = os.path.join(tmp, "not-a-folder")
            with open(blocker, "w") as f:
                f.write("x")
            r = run("report", out, "-o", blocker)
            self.assertEqual(r.returncode, 2)
            self.assertIn("cannot write the report into", r.stderr)
            self.assertNotIn("cannot read", r.stderr)

    def test_hdf5_errors_give_the_cause(self):
        with tempfile.TemporaryDirectory() as tmp:
            notes = os.path.join(tmp, "notes.h5")
            with open(notes, "w") as f:
                f.write("not hdf5\n")
            r = run("merge", notes, "-o", os.path.join(tmp, "m.h5"))
            self.assertEqual(r.returncode, 2)
            self.assertIn(notes, r.stderr)
            self.assertIn("signature", r.stderr)  # HDF5's own reason: file signature not found


if __name__ == "__main__":
    HARNESS, CI = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
