#!/usr/bin/env python3
"""External DUTs end to end: the Python example through the process protocol, the CPU DUT through
the C ABI plugin, and every bad plugin and bad process case (clear error, results kept).

usage: test_external.py PATH/TO/swa-harness CI_YAML EXAMPLE_DUT PLUGIN_DIR

Tried the way an outside team does: plugins by absolute path, exec: DUTs with spaces and slashes in
their names, and a plain-C plugin written from swa/dut_v2.h alone (dut/external/examples/c_plugin.c).
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = EXAMPLE = PLUGINS = None


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=900)


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def rows(path):
    with h5py.File(path) as f:
        r = results_table(f)
    return {(text(x["scenario_id"]), text(x["dut"])): (text(x["status"]), float(x["max_abs"]), text(x["reason"])) for x in r}


def full_rows(path):
    with h5py.File(path) as f:
        r = results_table(f)
        names = r.dtype.names
    return {(text(x["scenario_id"]), text(x["dut"])): {n: text(x[n]) for n in names} for x in r}


def write_script(tmp, name, body):
    """An executable /bin/sh script TMP/NAME running BODY; its path."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


def dumped_outputs(path, scenario):
    """{DUT name: output array} of one scenario's dump."""
    with h5py.File(path) as f:
        duts = f["dumps"][scenario]["duts"]
        return {text(d.attrs["dut"]): d["out"][:] for d in duts.values()}


class FailuresStayFailures(unittest.TestCase):
    """A failing external DUT is a `fail` with real metrics and a readable dump, whatever its name."""

    def check_failing_dut(self, dut, env=None):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = subprocess.run([HARNESS, "run", CI, "--sweep", "caches", "--jobs", "2", "--out", out,
                                "--dut", "cpu," + dut], capture_output=True, text=True, timeout=900,
                               env={**os.environ, **(env or {})})
            self.assertEqual(r.returncode, 1, r.stdout[-2000:])
            got = full_rows(out)
            self.assertEqual(len(got), 2 * 72)
            for (scenario, name), row in got.items():
                if name == "cpu":
                    self.assertEqual(row["status"], "pass", row["reason"])  # the other DUT's verdict is untouched
                    continue
                self.assertEqual(row["status"], "fail", row["reason"])
                self.assertNotIn("HDF5", row["reason"])
                self.assertGreater(row["max_abs"], row["threshold"])  # real metrics, not zeros
                self.assertGreater(row["threshold"], 0)
                outputs = dumped_outputs(out, scenario)
                self.assertEqual(set(outputs), {dut})
                self.assertTrue(np.isfinite(outputs[dut]).all())

    def test_a_failing_plugin_given_by_absolute_path(self):
        self.check_failing_dut("plugin:" + os.path.join(PLUGINS, "libswa_c_plugin.so"),
                               {"SWA_C_PLUGIN_FAULT": "window_plus_one"})

    def test_a_failing_exec_dut(self):
        self.check_failing_dut(f"exec:/usr/bin/python3 {EXAMPLE} --fault window-plus-one")

    def test_a_dump_that_cannot_be_written_changes_no_verdict(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            with open(out + ".dumps", "w") as f:  # a file where the dump folder must go
                f.write("in the way")
            r = run("run", CI, "--sweep", "inputs", "--dut", "cpu,mutant:window_plus_one", "--out", out)
            self.assertEqual(r.returncode, 1, r.stdout[-2000:])
            for (scenario, name), row in full_rows(out).items():
                self.assertEqual(row["status"], "pass" if name == "cpu" else "fail", row["reason"])
                if name != "cpu":
                    self.assertTrue(row["max_margin"] > 1 or row["l2_margin"] > 1, row)  # real metrics
                    self.assertIn("tensor dump not written", row["reason"])

    def test_dump_all_on_ci_yaml_passes_and_keys_every_dut_by_index(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--dut", "baseline,cpu", "--dump", "all", "--jobs", "2", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-2000:])
            # The CPU DUT declines SWA_COMPRESS in chunked prefill (its tiles start at chunk boundaries).
            skips = {k for k, v in rows(out).items() if v[0] == "skip"}
            self.assertTrue(all(d == "cpu" and "mode=chunked_prefill/" in s and "mask=swa-compress/" in s for s, d in skips))
            self.assertEqual({v[0] for v in rows(out).values()} - {"skip"}, {"pass"})
            scenario = next(iter(rows(out)))[0]
            with h5py.File(out) as f:
                duts = f["dumps"][scenario]["duts"]
                self.assertEqual({k: text(d.attrs["dut"]) for k, d in duts.items()}, {"0": "baseline", "1": "cpu"})
                dump = f["dumps"][scenario]
                self.assertEqual((dump.attrs["problem_file_format"], text(dump.attrs["kind"])), (1, "dump"))
                self.assertIn("baseline", dump["reference"])  # the baseline's own output beside them
                self.assertEqual({text(d.attrs["verdict"]) for d in duts.values()}, {"pass"})
                for d in duts.values():
                    np.testing.assert_array_equal(d["error"][:], d["out"][:].astype(np.float64) - dump["reference/out"][:])
                # The dump says which case it holds: every case parameter by its sweep-file key.
                attrs = {k: text(v) for k, v in dump["case"].attrs.items()}
                self.assertEqual(attrs["id"], scenario)
                for key in ("mode", "batch", "heads", "kv_heads", "head_size", "window", "dtype", "inputs", "seed"):
                    self.assertIn(key, attrs)
                self.assertIn(f"w={attrs['window']}/", scenario)
                self.assertIn(f"seqs={attrs['batch'].replace(',', '-')}/", scenario)

    def test_a_dut_named_twice_is_refused(self):
        r = run("run", CI, "--dut", "baseline,baseline", "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("option --dut: 'baseline' is named twice", r.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "s.yaml")
            with open(sweep, "w") as f:
                f.write("sweeps:\n  s:\n    duts: [cpu, baseline, cpu]\n    matrix: {window: [8]}\n")
            r = run("list", sweep)
            self.assertEqual(r.returncode, 2)
            self.assertIn("s.yaml:3:", r.stderr)
            self.assertIn("sweeps.s.duts: 'cpu' is named twice", r.stderr)


class CacheCheck(unittest.TestCase):
    """The cache a DUT leaves is compared with the golden cache model after every chunk and step."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_caches(self, dut, *extra, env=None):
        out = os.path.join(self.tmp.name, f"r{len(os.listdir(self.tmp.name))}.h5")
        r = subprocess.run([HARNESS, "run", CI, "--sweep", "caches", "--jobs", "2", "--out", out, "--dut", dut, *extra],
                           capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
        return r, full_rows(out)

    def check_shifted_cache_fails_only_on_rings(self, dut, env=None):
        r, got = self.run_caches(dut, env=env)
        self.assertEqual(r.returncode, 1, r.stdout[-2000:])
        for (scenario, _), row in got.items():
            if "cache=linear" in scenario:
                self.assertEqual(row["status"], "pass", row["reason"])
                self.assertEqual(row["cache_mismatches"], 0)
            else:
                self.assertEqual(row["status"], "fail", scenario)
                self.assertLessEqual(row["max_abs"], row["threshold"])  # the outputs are right ...
                self.assertGreater(row["cache_mismatches"], 0)       # ... the cache is not
                self.assertRegex(row["reason"], r"sequence \d+ slot \d+ holds (position \d+|nothing \(zeros\)), expected position \d+")
        r, got = self.run_caches(dut, "--no-cache-check", env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:])
        self.assertEqual({row["cache_mismatches"] for row in got.values()}, {-1})

    def test_a_plugin_writing_the_ring_one_slot_off(self):
        self.check_shifted_cache_fails_only_on_rings("plugin:" + os.path.join(PLUGINS, "libswa_c_plugin.so"),
                                                     {"SWA_C_PLUGIN_FAULT": "cache_slot_shift"})

    def test_an_exec_dut_returning_a_shifted_cache(self):
        self.check_shifted_cache_fails_only_on_rings(f"exec:/usr/bin/python3 {EXAMPLE} --fault cache-slot-shift")

    def test_a_built_in_mutant_that_reads_back_consistently(self):
        self.check_shifted_cache_fails_only_on_rings("mutant:cache_slot_shifted")

    def test_cache_check_false_in_a_sweep_turns_it_off(self):
        sweep = os.path.join(self.tmp.name, "private.yaml")
        with open(sweep, "w") as f:
            f.write("sweeps:\n  private_layout:\n    cache_check: false\n    duts: [mutant:cache_slot_shifted]\n"
                    "    matrix: {mode: [decode], cache: [ring-modulo], window: [8], batch: [[40, 9]], decode_steps: [5]}\n")
        out = os.path.join(self.tmp.name, "private.h5")
        r = run("run", sweep, "--out", out)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:])
        self.assertEqual({row["cache_mismatches"] for row in full_rows(out).values()}, {-1})
        with open(sweep, "w") as f:
            f.write("sweeps:\n  s:\n    cache_check: sometimes\n    matrix: {window: [8]}\n")
        r = run("list", sweep)
        self.assertEqual(r.returncode, 2)
        self.assertIn("private.yaml:3:18: sweeps.s.cache_check: expected true or false", r.stderr)

    def test_correct_duts_leave_the_golden_cache(self):
        for dut in ("cpu", "plugin:" + os.path.join(PLUGINS, "libswa_c_plugin.so"), f"exec:/usr/bin/python3 {EXAMPLE}"):
            with self.subTest(dut):
                r, got = self.run_caches(dut)
                self.assertEqual(r.returncode, 0, r.stdout[-2000:])
                self.assertEqual({row["cache_mismatches"] for row in got.values()}, {0})


class ProcessProtocol(unittest.TestCase):
    def test_python_example_passes_through_the_harness(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            for sweep in ("caches", "fp8_kv"):  # fp8_kv: protocol 4, /cache holding FP8 codes
                r = run("run", CI, "--sweep", sweep, "--jobs", "2", "--dut", f"exec:/usr/bin/python3 {EXAMPLE}",
                        "--out", out, "--resume")
                self.assertEqual(r.returncode, 0, r.stdout[-3000:])
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})
            self.assertGreater(len(rows(out)), 100)

    def test_bad_processes_are_dut_errors_and_results_are_kept(self):
        cases = {
            "exit": "exited with status 3; stderr: numpy_dut: failing on purpose",
            "hang": "timed out after 2",
            "garbled": "wrote an unreadable response",
            "wrong-shape": "response /out has shape [",
            "report-error": "the DUT reported: numpy_dut cannot do this on purpose",
            "no-response": "wrote no response file",
        }
        scenario = run("list", CI, "--sweep", "inputs").stdout.split()[0]
        for mode, message in cases.items():
            with self.subTest(mode), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "r.h5")
                self.assertEqual(run("run", CI, "--filter", scenario, "--dut", "cpu", "--out", out).returncode, 0)
                r = run("run", CI, "--filter", scenario, "--resume", "--exec-timeout", "2", "--out", out,
                        "--dut", f"exec:/usr/bin/python3 {EXAMPLE} --fail {mode}")
                self.assertEqual(r.returncode, 1, r.stderr)
                got = rows(out)
                self.assertEqual(got[(scenario, "cpu")][0], "pass")  # kept
                dut = f"exec:/usr/bin/python3 {EXAMPLE} --fail {mode}"
                status, _, reason = got[(scenario, dut)]
                self.assertEqual(status, "error")
                self.assertIn(message, reason)
                # The console's rerun line pastes into a shell as the same command (the DUT has spaces).
                rerun = [line.strip() for line in r.stdout.splitlines() if line.strip().startswith(HARNESS + " run ")]
                self.assertEqual([shlex.split(line) for line in rerun],
                                 [[HARNESS, "run", CI, "--filter", scenario, "--dut", dut, "--out",
                                   os.path.join(tmp, "rerun.h5")]], r.stdout)

    def test_the_cache_is_checked_after_every_call_and_the_end_only_limit_is_exact(self):
        # cache-slip-repaired leaves a wrong slot after every call but the last. Returned call by call
        # (cache_per_call = 1 in the describe answer, /caches/C) the check names the first call;
        # returned once (--no-cache-per-call) it cannot see it: EXEC_PROTOCOL.md's stated limit.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            dut = f"exec:/usr/bin/python3 {EXAMPLE} --fault cache-slip-repaired"
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--jobs", "2", "--dut", dut, "--out", out)
            self.assertEqual(r.returncode, 1, r.stdout[-2000:])
            self.assertRegex(r.stdout, r"KV cache differs from the golden cache model in \d+ places, first after chunk 0: "
                                       r"sequence 0 slot 0 holds data of no position")
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--jobs", "2", "--out", os.path.join(tmp, "end.h5"),
                    "--dut", dut + " --no-cache-per-call")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:])

    def test_a_dut_is_asked_once_what_it_runs_and_not_run_outside_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "calls")
            dut = "exec:" + write_script(tmp, "logged.sh", f'echo "$1" >> {log}\n'
                                                  f'exec /usr/bin/python3 {EXAMPLE} --describe-modes prefill,chunked_prefill "$@"')
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--jobs", "2", "--dut", dut, "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            got = rows(out)
            decode = [v for (scenario, _), v in got.items() if scenario.startswith("mode=decode/")]
            chunked = [v for (scenario, _), v in got.items() if scenario.startswith("mode=chunked_prefill/")]
            self.assertGreater(len(decode), 0)
            for status, _, reason in decode:
                self.assertEqual(status, "skip")
                self.assertIn("exec: it describes modes prefill, chunked_prefill, not decode (its answer to the describe "
                              "request)", reason)
            self.assertEqual({v[0] for v in chunked}, {"pass"})
            with open(log) as f:
                calls = [os.path.basename(line.strip()) for line in f]
            self.assertEqual(calls.count("describe.h5"), 1, calls)      # asked once for the whole run
            self.assertEqual(len(calls), 1 + len(chunked), calls)       # no process for a skipped case
            self.assertRegex(r.stdout, r"\nnumpy_dut +fp32 +chunked_prefill ")  # the name it gives itself
            # An answer that breaks the protocol: every case is an error row naming the attribute.
            bad = f"exec:/usr/bin/python3 {EXAMPLE} --describe-modes prefil"
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--dut", bad, "--out", os.path.join(tmp, "bad.h5"))
            self.assertEqual(r.returncode, 1, r.stdout[-2000:])
            reasons = {v[2] for v in rows(os.path.join(tmp, "bad.h5")).values()}
            self.assertEqual(len(reasons), 1, reasons)
            self.assertIn("the answer to the describe request is refused: attribute modes: 'prefil' is not one of "
                          "prefill|chunked_prefill|decode", reasons.pop())
            # A DUT that does not answer it runs everything, its cache checked at the end.
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--jobs", "2", "--out", os.path.join(tmp, "old.h5"),
                    "--dut", f"exec:/usr/bin/python3 {EXAMPLE} --no-describe")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:])
            self.assertEqual({v[0] for v in rows(os.path.join(tmp, "old.h5")).values()}, {"pass"})

    def test_a_dut_that_declines_a_case_gets_a_skip_not_an_error(self):
        # "not supported: REASON" in the response's error attribute: a skip row with the reason, and
        # the run passes when everything it ran passes (a kernel without decode is not a failing one).
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            dut = f"exec:/usr/bin/python3 {EXAMPLE} --not-supported decode"
            r = run("run", CI, "--sweep", "caches", "--filter", "fp32", "--dut", dut, "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            got = rows(out)
            decode = [row for (scenario, _), row in got.items() if scenario.startswith("mode=decode/")]
            others = [row for (scenario, _), row in got.items() if not scenario.startswith("mode=decode/")]
            self.assertGreater(len(decode), 0)
            self.assertGreater(len(others), 0)
            for status, _, reason in decode:
                self.assertEqual(status, "skip", reason)
                self.assertIn("the DUT does not support this case: numpy_dut was told to decline decode", reason)
            for status, _, reason in others:
                self.assertEqual(status, "pass", reason)

# Every process this test starts (and whatever they start) inherits this marker in its environment, so
# the process checks see only this test's processes: another harness run on the machine, with its own
# swa-dut-worker processes, must not make it fail.
OWNER = f"SWA_TEST_OWNER=test_external-{os.getpid()}-{time.time_ns()}"
os.environ["SWA_TEST_OWNER"] = OWNER.split("=", 1)[1]


def ours(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return OWNER.encode() in f.read().split(b"\0")
    except OSError:
        return False


def live_processes():
    """(pid, argv) of every live process on the machine (zombies have no argv and are left out)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv:
            found.append((pid, argv))
    return found


def all_command_lines():
    """argv of every live process (for processes known by a word no other process has)."""
    return [argv for _, argv in live_processes()]


def command_lines():
    """argv of every live process this test started, directly or not."""
    return [argv for pid, argv in live_processes() if ours(pid)]


def processes_with(*words):
    """Command lines of live processes whose argv holds every one of `words`."""
    return [" ".join(argv) for argv in command_lines() if all(w in argv for w in words)]


class ProcessHygiene(unittest.TestCase):
    """What an exec: DUT starts is gone when its call ends; its responses are checked before reading."""

    def script(self, tmp, name, body):
        return write_script(tmp, name, body)

    def one_scenario(self, tmp, dut, *args):
        scenario = run("list", CI, "--sweep", "inputs").stdout.split()[0]
        out = os.path.join(tmp, "r.h5")
        env = {**os.environ, "TMPDIR": tmp}
        r = subprocess.run([HARNESS, "run", CI, "--filter", scenario, "--out", out, "--dut", dut, *args],
                           capture_output=True, text=True, timeout=300, env=env)
        self.assertNotEqual(r.returncode, 2, r.stderr)
        self.assertEqual([d for d in os.listdir(tmp) if d.startswith("swa-exec-")], [], "temp folders removed")
        return r, rows(out)[(scenario, dut)]

    def test_processes_the_command_leaves_behind_are_killed(self):
        with tempfile.TemporaryDirectory() as tmp:
            dut = self.script(tmp, "leaves.sh", f"sleep 9871 &\nexec /usr/bin/python3 {EXAMPLE} \"$@\"")
            r, row = self.one_scenario(tmp, "exec:" + dut)
            self.assertEqual(row[0], "pass", row)
            self.assertEqual(processes_with("sleep", "9871"), [])

    def test_daemons_the_command_starts_are_killed_when_its_call_ends(self):
        # setsid leaves the command's process group; env -i also drops every marker in the
        # environment, and the double fork leaves it to the harness (a subreaper). Both are gone
        # when the call ends, not only when the harness does.
        unique = f"{9000 + os.getpid() % 900}.{time.time_ns() % 10**9}"
        with tempfile.TemporaryDirectory() as tmp:
            dut = self.script(tmp, "daemons.sh",
                              "setsid sleep 9874 </dev/null >/dev/null 2>&1 &\n"
                              f"(env -i setsid /bin/sleep {unique} </dev/null >/dev/null 2>&1 &)\n"
                              f"sleep 0.2\nexec /usr/bin/python3 {EXAMPLE} \"$@\"")
            log = open(os.path.join(tmp, "log"), "w+")
            p = subprocess.Popen([HARNESS, "run", CI, "--sweep", "inputs", "--filter", "in=uniform",
                                  "--out", os.path.join(tmp, "r.h5"), "--dut", "exec:" + dut],
                                 stdout=log, stderr=log, env={**os.environ, "TMPDIR": tmp})
            try:
                # While the harness still runs, between calls, neither kind may pile up.
                seen = []
                while p.poll() is None:
                    seen.append(len(processes_with("sleep", "9874")) +
                                sum(argv[1:] == [unique] for argv in all_command_lines()))
                    time.sleep(0.05)
            finally:
                if p.poll() is None:
                    p.kill()
                p.wait()
                log.seek(0)
                said = log.read()
                log.close()
            left = [pid for pid, argv in live_processes()
                    if argv[1:] == [unique] or (argv[1:] == ["9874"] and ours(pid))]
            for pid in left:  # the test's own, on a failure
                os.kill(int(pid), signal.SIGKILL)
            self.assertEqual(p.returncode, 0, said[-2000:])
            self.assertLessEqual(max(seen, default=0), 4, "daemons piled up across calls")
            self.assertEqual(left, [], "daemons outlived the run")

    def test_stdout_does_not_flood_the_console(self):
        with tempfile.TemporaryDirectory() as tmp:
            dut = self.script(tmp, "chatty.sh", f"for i in $(seq 2000); do echo FLOODLINE; done\nexec /usr/bin/python3 {EXAMPLE} \"$@\"")
            r, row = self.one_scenario(tmp, "exec:" + dut)
            self.assertEqual(row[0], "pass", row)
            self.assertNotIn("FLOODLINE", r.stdout)

    def test_a_dut_s_text_is_cleaned_before_it_reaches_a_reason(self):
        # Colour codes, bytes that are not UTF-8, a character cut by the tail, and far too much of it:
        # the reason is valid UTF-8 with the controls shown as text and a cap, the JUnit XML parses,
        # and report reads the file.
        with tempfile.TemporaryDirectory() as tmp:
            dut = self.script(tmp, "noisy.sh",
                              "printf '\\033[31mred\\033[0m \\377\\376 caf\\303\\251\\n' >&2\n"
                              "head -c 200000 /dev/zero | tr '\\0' 'x' >&2\n"
                              "printf '\\342\\202\\254 \\033]0;title\\007 the end' >&2\nexit 1")
            junit = os.path.join(tmp, "r.xml")
            r, row = self.one_scenario(tmp, "exec:" + dut, "--junit", junit)
            self.assertEqual(row[0], "error", row)
            reason = row[2]
            self.assertNotIn("\x1b", reason)
            self.assertNotIn("\x07", reason)
            self.assertIn("\\x1b]0;title\\x07 the end", reason)
            self.assertLess(len(reason.encode()), 5000)
            self.assertNotIn("\x1b", r.stdout + r.stderr)  # nor raw on the console
            ET.parse(junit)  # well-formed XML 1.0
            out = os.path.join(tmp, "report")
            rep = subprocess.run([HARNESS, "report", os.path.join(tmp, "r.h5"), "-o", out],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(rep.returncode, 0, rep.stderr)

    def test_a_response_that_reaches_outside_itself_is_refused_unread(self):
        # Its /out an external link, raw data in an external file, or a virtual dataset, each pointing
        # at a FIFO nobody writes: reading it would block past --exec-timeout.
        cases = {
            "external_link": "/out is an external link",
            "external_storage": "/out keeps its data in external files",
            "virtual": "/out is a virtual dataset",
        }
        for mode, message in cases.items():
            with self.subTest(mode), tempfile.TemporaryDirectory() as tmp:
                dut = self.script(tmp, mode + ".sh", f"""exec /usr/bin/python3 - "$@" <<'PY'
import os, sys, h5py
request, response = sys.argv[1], sys.argv[2]
fifo = os.path.join(os.path.dirname(response), "fifo")
os.mkfifo(fifo)
with h5py.File(request) as r:
    shape = (int(sum(r["seq_lens"][:])), int(r.attrs["heads"]), int(r.attrs["head_size"]))
with h5py.File(response, "w") as f:
    if "{mode}" == "external_link":
        f["out"] = h5py.ExternalLink(fifo, "/out")
    elif "{mode}" == "external_storage":
        f.create_dataset("out", shape=shape, dtype="f4", external=[(fifo, 0, h5py.h5f.UNLIMITED)])
    else:
        layout = h5py.VirtualLayout(shape=shape, dtype="f4")
        layout[:] = h5py.VirtualSource(fifo, "out", shape=shape)
        f.create_virtual_dataset("out", layout, fillvalue=0)
PY""")
                start = time.time()
                r, row = self.one_scenario(tmp, "exec:" + dut, "--exec-timeout", "60")
                self.assertEqual(row[0], "error", row)
                self.assertIn("wrote a response that is refused unread: " + message, row[2])
                self.assertLess(time.time() - start, 50)

    def test_a_response_that_crashes_libhdf5_is_an_error_row(self):
        # A response with an `error` attribute whose header has two bytes changed (found by mutating a
        # valid one): reading the attribute segfaults libhdf5 1.10. The probe's process takes the crash.
        crashing = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "response_crashing_libhdf5.h5")
        with tempfile.TemporaryDirectory() as tmp:
            dut = self.script(tmp, "crashing.sh", f'cp {crashing} "$2"')
            r, row = self.one_scenario(tmp, "exec:" + dut)
            self.assertEqual(r.returncode, 1, r.stderr[-2000:])  # the run ends as a failing run, not a crash
            self.assertEqual(row[0], "error", row)
            self.assertIn("the response crashed the HDF5 library (was killed by signal 11", row[2])

    def test_responses_that_are_not_plain_files_or_too_big_are_refused_unread(self):
        cases = {
            "symlink.sh": ('ln -s /dev/zero "$2"', "not a regular file"),
            "fifo.sh": ('mkfifo "$2"', "not a regular file"),
            "huge.sh": ('truncate -s 64G "$2"', "over the"),
        }
        for name, (body, message) in cases.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                start = time.time()
                r, row = self.one_scenario(tmp, "exec:" + self.script(tmp, name, body))
                self.assertEqual(row[0], "error", row)
                self.assertIn(message, row[2])
                self.assertLess(time.time() - start, 60)

    def test_sigint_stops_the_dut_removes_temp_folders_and_says_how_to_resume(self):
        # SIGHUP (a closed terminal) and SIGQUIT (Ctrl-\\) end a run as SIGINT and SIGTERM do.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            with self.subTest(sig.name):
                self.check_interrupt(sig)

    def check_interrupt(self, sig):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            # With a daemon of its own session beside it: the interrupt ends that too.
            dut = "exec:" + self.script(tmp, "hang.sh", "setsid sleep 9875 </dev/null >/dev/null 2>&1 &\n"
                                                         f"exec /usr/bin/python3 {EXAMPLE} --fail hang \"$@\"")
            p = subprocess.Popen([HARNESS, "run", CI, "--sweep", "inputs", "--out", out, "--dut", dut],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": tmp})
            deadline = time.time() + 60
            while not processes_with("--fail", "hang") and time.time() < deadline:
                time.sleep(0.1)
            self.assertTrue(processes_with("--fail", "hang"), "the DUT started")
            p.send_signal(sig)
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 128 + sig, err)
            self.assertIn(f"interrupted by {sig.name}", err)
            self.assertIn("--resume", err)
            self.assertEqual(processes_with("--fail", "hang"), [])
            self.assertEqual(processes_with("sleep", "9875"), [])
            self.assertEqual([d for d in os.listdir(tmp) if d.startswith("swa-exec-") or ".tmp." in d], [])
            with h5py.File(out) as f:  # the results file is whole
                self.assertIn("results", f)

    def test_a_dut_killed_by_the_signal_that_interrupts_the_run_is_not_stored_as_a_failure(self):
        # Slurm's requeue and scancel signal every process of the job: the DUT may die of the SIGTERM
        # a moment before the harness handles its own. That death is the interrupt, not the DUT's
        # failure: no row of it is stored, and --resume runs the scenario again.
        with tempfile.TemporaryDirectory() as tmp:
            out, died = os.path.join(tmp, "r.h5"), os.path.join(tmp, "died")
            dut = "exec:" + self.script(tmp, "dies_once.sh", 'case "$1" in *describe.h5) ;; *)\n'  # a case, not the describe
                                                              f"if [ ! -e {died} ]; then : > {died}; kill -TERM $$; fi;;\nesac\n"
                                                              f"exec /usr/bin/python3 {EXAMPLE} \"$@\"")
            args = ["run", CI, "--sweep", "inputs", "--jobs", "1", "--out", out, "--dut", dut]
            p = subprocess.Popen([HARNESS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.time() + 60
            while not os.path.exists(died) and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # the harness has seen the death by now
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
            self.assertNotIn("error", {v[0] for v in rows(out).values()}, rows(out))
            r = run(*args, "--resume")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})

    def test_perf_refuses_to_time_an_exec_dut_decode_step_by_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            scenario = run("list", CI, "--sweep", "caches", "--filter", "mode=decode").stdout.split()[0]
            out = os.path.join(tmp, "r.h5")
            dut = f"exec:/usr/bin/python3 {EXAMPLE}"
            r = run("run", CI, "--filter", scenario, "--perf", "--perf-repeats", "1", "--out", out, "--dut", dut)
            self.assertEqual(r.returncode, 0, r.stderr)
            status, _, reason = rows(out)[(scenario, dut)]
            self.assertEqual(status, "pass")
            self.assertIn("decode steps cannot be timed one by one", reason)
            with h5py.File(out) as f:
                self.assertEqual(len(f["perf"]), 0)


class Plugins(unittest.TestCase):
    def plugin(self, name):
        return os.path.join(PLUGINS, f"lib{name}.so")

    def test_the_console_table_names_a_dut_as_it_names_itself_or_as_labelled(self):
        # A plugin's traits.name, or LABEL= given with --dut, in the table; the --dut names in the file
        # and in the rerun commands. A label that two DUTs would share names neither.
        c, cpu = self.plugin("swa_c_plugin"), self.plugin("swa_cpu_plugin")
        exec_dut = f"np=exec:/usr/bin/python3 {EXAMPLE} --fail exit"
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--sweep", "inputs", "--filter", "fp32", "--out", out,
                    "--dut", f"plugin:{c},mine=plugin:{cpu},cpu,cpu=mutant:none")
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            table = re.findall(r"^(\S+) +fp32 +prefill +\d", r.stdout, re.M)
            self.assertEqual(sorted(table), sorted(["c_plugin", "mine", "cpu", "cpu=mutant:none"]), r.stdout)
            self.assertEqual({d for _, d in rows(out)}, {f"plugin:{c}", f"mine=plugin:{cpu}", "cpu", "cpu=mutant:none"})
            r = run("run", CI, "--sweep", "inputs", "--filter", "fp32", "--out", out, "--force", "--dut", exec_dut)
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stdout, r"\nnp +fp32 +prefill +0 +0 +0 +4 +0\n")
            self.assertIn(f"--dut '{exec_dut}'", r.stdout)  # the rerun command: the whole --dut name
            self.assertEqual({d for _, d in rows(out)}, {exec_dut})

    def test_the_c_example_plugin_passes_ci_yaml(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--jobs", "2", "--dut", "plugin:" + self.plugin("swa_c_plugin"), "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:])
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})

    def test_cpu_as_a_plugin_matches_the_linked_cpu_dut(self):
        with tempfile.TemporaryDirectory() as tmp:
            linked, plugged = os.path.join(tmp, "cpu.h5"), os.path.join(tmp, "plugin.h5")
            for sweep in ("caches", "atb", "paged"):  # every cache policy and both ATB mask formats
                self.assertEqual(run("run", CI, "--sweep", sweep, "--dut", "cpu", "--out", linked, "--resume").returncode, 0)
                r = run("run", CI, "--sweep", sweep, "--dut", "plugin:" + self.plugin("swa_cpu_plugin"), "--out", plugged, "--resume")
                self.assertEqual(r.returncode, 0, r.stdout[-2000:])
            a = {k[0]: v[1] for k, v in rows(linked).items()}
            b = {k[0]: v[1] for k, v in rows(plugged).items()}
            self.assertEqual(a, b)  # the same numbers through the ABI

    def test_missing_symbols_and_abi_mismatch_are_refused(self):
        r = run("run", CI, "--sweep", "inputs", "--dut", "plugin:" + self.plugin("swa_bad_plugin_missing_symbols"), "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("does not export swa_dut_v1_name", r.stderr)
        r = run("run", CI, "--sweep", "inputs", "--dut", "plugin:" + self.plugin("swa_bad_plugin_abi_version"), "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("speaks ABI version 3; this harness speaks 1 (swa/dut_v1.h) and 2 (swa/dut_v2.h)", r.stderr)

    def test_a_plugin_path_is_named_cleanly_or_asked_for(self):
        # An escape code in the path reaches the message as text, not the terminal; an empty path is
        # asked for (dlopen("") is the harness itself, which "does not export" the symbols).
        r = run("run", CI, "--sweep", "inputs", "--dut", "plugin:/nonexistent/x\x1b[31m.so", "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("x\\x1b[31m.so cannot be loaded", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        r = run("run", CI, "--sweep", "inputs", "--dut", "plugin:", "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("'plugin:' needs the path of the plugin", r.stderr)

    def test_in_process_a_crash_ends_the_run_but_leaves_the_results_and_names_the_scenario(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            self.assertEqual(run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", out).returncode, 0)
            before = rows(out)
            r = run("run", CI, "--sweep", "inputs", "--resume", "--out", out, "--in-process",
                    "--dut", "cpu,plugin:" + self.plugin("swa_bad_plugin_crash"))
            self.assertLess(r.returncode, 0)  # killed by SIGSEGV: --in-process is for gdb
            self.assertEqual(rows(out), before)  # everything finished before the crash is there
            with open(out + ".inflight") as f:
                self.assertIn(f.read().strip(), {k[0] for k in before})


def id_fields(scenario_id):
    """mode, dtype and head size from a scenario ID ("mode=prefill/.../d=64/.../fp32/...")."""
    parts = scenario_id.split("/")
    named = dict(p.split("=", 1) for p in parts if "=" in p)
    dtype = next(p for p in parts if p in ("fp32", "fp16", "bf16"))
    return named["mode"], dtype, int(named["d"])


class AbiVersions(unittest.TestCase):
    """ABI version 2 (swa/dut_v2.h) with plugins that describe themselves; version-1 plugins still load."""

    def plugin(self, name):
        return "plugin:" + os.path.join(PLUGINS, f"lib{name}.so")

    def test_a_version_1_plugin_gives_the_same_numbers_as_its_version_2_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            for extra in ([], ["--in-process"]):
                out = os.path.join(tmp, f"r{len(extra)}.h5")
                v1, v2 = self.plugin("swa_c_plugin_v1"), self.plugin("swa_c_plugin")
                for sweep in ("caches", "atb"):
                    r = run("run", CI, "--sweep", sweep, "--jobs", "2", "--dut", f"{v1},{v2}", "--out", out, "--resume", *extra)
                    self.assertEqual(r.returncode, 0, r.stdout[-2000:])
                got = rows(out)
                self.assertEqual({v[0] for v in got.values()}, {"pass"})
                by_dut = {d: {k[0]: v[1] for k, v in got.items() if k[1] == d} for d in (v1, v2)}
                self.assertGreater(len(by_dut[v1]), 50)
                self.assertEqual(by_dut[v1], by_dut[v2])

    def test_a_plugin_is_not_called_outside_what_it_describes(self):
        # The limited plugin fails loudly if called outside fp32, prefill/chunked prefill, d 64/128,
        # or with a case that soft-caps or has sinks (it describes itself as built against 2.0).
        with tempfile.TemporaryDirectory() as tmp:
            for extra in ([], ["--in-process"]):
                out = os.path.join(tmp, f"r{len(extra)}.h5")
                r = run("run", CI, "--jobs", "2", "--dut", self.plugin("swa_limited_plugin"), "--out", out, *extra)
                self.assertEqual(r.returncode, 0, r.stdout[-2000:])
                got = rows(out)
                ran = newer_skipped = 0
                for (scenario, _), (status, _, reason) in got.items():
                    mode, dtype, d = id_fields(scenario)
                    inside = dtype == "fp32" and mode != "decode" and d in (64, 128)
                    newer = "/cap=" in scenario or "/sinks=" in scenario or "/kv=fp8" in scenario or "/cache=paged" in scenario
                    if inside and not newer:
                        ran += 1
                        self.assertEqual(status, "pass", (scenario, reason))
                    elif inside:
                        newer_skipped += 1
                        self.assertEqual(status, "skip", (scenario, reason))
                        self.assertIn("built against an ABI without the", reason)
                    else:
                        self.assertEqual(status, "skip", (scenario, reason))
                        self.assertIn("the plugin describes itself as running", reason)
                self.assertGreater(ran, 10)
                self.assertGreater(newer_skipped, 5)

    def test_perf_uses_a_plugins_own_kernel_timing(self):
        scenario = next(s for s in run("list", CI, "--filter", "mode=prefill").stdout.split()
                        if id_fields(s)[1:] == ("fp32", 64))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            timed, untimed = self.plugin("swa_limited_plugin"), self.plugin("swa_c_plugin")
            r = run("run", CI, "--filter", scenario, "--perf", "--perf-repeats", "2", "--out", out, "--dut", f"{timed},{untimed}")
            self.assertEqual(r.returncode, 0, r.stderr)
            with h5py.File(out) as f:
                timers = {text(x["dut"]): text(x["timer"]) for x in f["perf"][:]}
            self.assertEqual(timers, {timed: "DUT's own timing", untimed: "host wall clock"})


def live_workers():
    """Command lines of the swa-dut-worker processes alive now."""
    return [" ".join(argv) for argv in command_lines() if argv[0].endswith("swa-dut-worker")]


class Isolation(unittest.TestCase):
    """Plugins run in a worker process: a crash or a hang is an error row and the sweep goes on."""

    def plugin(self, name):
        return "plugin:" + os.path.join(PLUGINS, f"lib{name}.so")

    def sweep(self, plugin, *args):
        """Runs cpu beside the plugin; returns (exit status, {(scenario, dut): row}, seconds)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            start = time.time()
            r = run("run", CI, "--out", out, "--jobs", "2", "--dut", "cpu," + self.plugin(plugin), *args)
            seconds = time.time() - start
            self.assertNotEqual(r.returncode, 2, r.stderr)
            got = full_rows(out)
        self.assertEqual(live_workers(), [], "no worker outlives the run")
        return r.returncode, got, seconds

    def check(self, got, dut, reason, rows_at_least=1):
        errors = 0
        for (scenario, name), row in got.items():
            if name == "cpu":
                self.assertEqual(row["status"], "pass", scenario)
            elif reason in row["reason"]:
                self.assertEqual(row["status"], "error", row["reason"])
                errors += 1
        self.assertGreaterEqual(errors, rows_at_least, f"no row says '{reason}'")

    def test_a_segfault_in_prefill_is_an_error_row_and_the_sweep_goes_on(self):
        rc, got, _ = self.sweep("swa_bad_plugin_crash", "--sweep", "inputs")
        self.assertEqual(rc, 1)
        self.check(got, "crash", "swa_dut_v1_prefill was killed by signal 11 (Segmentation fault)",
                   rows_at_least=len(got) // 2)

    def test_an_abort_in_decode_is_an_error_row_naming_the_entry_point(self):
        rc, got, _ = self.sweep("swa_bad_plugin_abort", "--sweep", "caches", "--filter", "mode=decode")
        self.assertEqual(rc, 1)
        self.check(got, "abort", "swa_dut_v1_decode_step was killed by signal 6 (Aborted)", rows_at_least=len(got) // 2)

    def test_a_hang_is_killed_at_the_call_time_limit(self):
        rc, got, seconds = self.sweep("swa_bad_plugin_hang", "--sweep", "inputs", "--filter", "in=uniform",
                                      "--dut-timeout", "1")
        self.assertEqual(rc, 1)
        self.check(got, "hang", "swa_dut_v1_prefill timed out after 1 s", rows_at_least=len(got) // 2)
        self.assertLess(seconds, 60)

    def test_a_harness_killed_with_sigkill_takes_its_workers_with_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.Popen([HARNESS, "run", CI, "--sweep", "inputs", "--out", os.path.join(tmp, "r.h5"),
                                  "--dut", self.plugin("swa_bad_plugin_hang")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 30
            while not live_workers() and time.time() < deadline:
                time.sleep(0.05)
            self.assertTrue(live_workers(), "a worker started")
            time.sleep(0.5)  # inside the hanging call
            p.kill()
            p.wait()
            deadline = time.time() + 5
            while live_workers() and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(live_workers(), [])

    def test_a_worker_starts_with_no_blocked_or_ignored_signals(self):
        # The harness blocks SIGINT and SIGTERM for its signal thread, and a user may start it with
        # SIGHUP ignored (nohup): neither may reach the worker, or the plugin cannot be interrupted.
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.Popen([HARNESS, "run", CI, "--sweep", "inputs", "--out", os.path.join(tmp, "r.h5"),
                                  "--dut", self.plugin("swa_bad_plugin_hang")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
            try:
                deadline = time.time() + 30
                while not live_workers() and time.time() < deadline:
                    time.sleep(0.05)
                masks = {}
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            if not f.read().split(b"\0")[0].endswith(b"swa-dut-worker") or not ours(pid):
                                continue
                        with open(f"/proc/{pid}/status") as f:
                            masks = dict(line.split(":\t", 1) for line in f.read().splitlines() if line.startswith("Sig"))
                    except OSError:
                        continue
                self.assertTrue(masks, "a worker started")
                self.assertEqual(masks["SigBlk"].strip(), "0" * 16, masks)
                self.assertEqual(masks["SigIgn"].strip(), "0" * 16, masks)
            finally:
                p.terminate()
                p.wait(timeout=60)

    def test_a_plugin_s_prints_reach_the_console_cleaned_bounded_and_never_block_it(self):
        # Its prefill prints 512 KiB (escape codes, bytes that are not UTF-8), more than a pipe holds;
        # its decode_step prints a last coloured line and aborts.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = subprocess.run([HARNESS, "run", CI, "--sweep", "caches", "--filter", "mode=decode", "--out", out,
                                "--dut-timeout", "60", "--dut", self.plugin("swa_bad_plugin_noisy")],
                               capture_output=True, timeout=600)
            self.assertEqual(r.returncode, 1, r.stderr[-2000:])
            got = full_rows(out)
        self.assertNotIn(b"\x1b", r.stdout + r.stderr, "an escape code reached the console raw")
        r.stderr.decode("utf-8")  # raises on bytes that are not UTF-8
        name = b"[plugin:libswa_bad_plugin_noisy.so] "
        self.assertIn(name + b"\\x1b[31mnoisy", r.stderr)  # shown, as text, after the DUT's name
        self.assertIn(name + b"[... ", r.stderr)  # the last 8 KiB of a call, not all 512 KiB
        self.assertLess(r.stderr.count(b"noisy ") / max(1, r.stderr.count(b"earlier bytes not shown")), 200)
        self.assertGreater(len(got), 0)
        for row in got.values():  # no call blocked on a full pipe until its time-out
            self.assertEqual(row["status"], "error", row["reason"])
            self.assertIn("swa_dut_v1_decode_step was killed by signal 6 (Aborted); "
                          "stderr: \\x1b[31mnoisy: giving up in decode\\x1b[0m", row["reason"])
        self.assertEqual(live_workers(), [])

    def test_a_plugin_that_forks_gets_one_answer_per_call(self):
        # Its prefill forks and both processes return: one answer per request, never a stale one
        # (a skip with an empty reason, before requests were numbered). It writes nothing, so each
        # row is a failure that names the NaN left in the output.
        rc, got, _ = self.sweep("swa_bad_plugin_fork", "--sweep", "inputs")
        self.assertEqual(rc, 1)
        rows_of_plugin = [row for (_, name), row in got.items() if name != "cpu"]
        self.assertGreater(len(rows_of_plugin), 0)
        for row in rows_of_plugin:
            self.assertEqual(row["status"], "fail", row["reason"])
            self.assertIn("NaN", row["reason"])

    def test_a_daemon_a_plugin_starts_does_not_outlive_the_run(self):
        # A double fork into a session of its own: out of the worker's process group, so only its
        # scope token (which it keeps) finds it.
        # Output to a file: a daemon left holding a pipe would hang the test instead of failing it.
        with tempfile.TemporaryDirectory() as tmp, open(os.path.join(tmp, "log"), "w+") as log:
            r = subprocess.run([HARNESS, "run", CI, "--sweep", "inputs", "--filter", "in=uniform",
                                "--out", os.path.join(tmp, "r.h5"), "--dut", self.plugin("swa_bad_plugin_daemon")],
                               stdout=log, stderr=log, timeout=300)
            log.seek(0)
            self.assertEqual(r.returncode, 1, log.read()[-2000:])  # it writes nothing: failures
        deadline = time.time() + 5
        while processes_with("sleep", "9873") and time.time() < deadline:
            time.sleep(0.05)
        left = [pid for pid, argv in live_processes() if argv[1:] == ["9873"] and ours(pid)]
        for pid in left:  # the test's own, on a failure
            os.kill(int(pid), signal.SIGKILL)
        self.assertEqual(left, [], "a daemon outlived the run")

    def test_exit_inside_an_in_process_plugin_is_exit_2_naming_it(self):
        plugin = os.path.join(PLUGINS, "libswa_bad_plugin_exit.so")
        with tempfile.TemporaryDirectory() as tmp:
            r = run("run", CI, "--sweep", "inputs", "--out", os.path.join(tmp, "r.h5"), "--in-process",
                    "--dut", "plugin:" + plugin)
            self.assertEqual(r.returncode, 2, r.stderr[-2000:])
            self.assertIn(f"the plugin {plugin} called exit()", r.stderr)
            # In a worker (the default) it is the worker that ends: an error row, and the sweep goes on.
            rc, got, _ = self.sweep("swa_bad_plugin_exit", "--sweep", "inputs")
            self.assertEqual(rc, 1)
            self.check(got, "exit", "exited with status 0", rows_at_least=1)

    def test_the_worker_is_reused_across_scenarios(self):
        # A plugin whose static initialiser counts loads: one load per worker, not per scenario.
        with tempfile.TemporaryDirectory() as tmp:
            out, log = os.path.join(tmp, "r.h5"), os.path.join(tmp, "loads.log")
            r = subprocess.run([HARNESS, "run", CI, "--sweep", "caches", "--out", out, "--dut", self.plugin("swa_c_plugin")],
                               capture_output=True, text=True, timeout=900,
                               env={**os.environ, "SWA_C_PLUGIN_LOG_LOADS": log})
            self.assertEqual(r.returncode, 0, r.stdout[-2000:])
            with open(log) as f:
                loads = f.read().count("swa_c_plugin: loaded")
            self.assertEqual(loads, 1, r.stderr[-2000:])
            self.assertGreater(len(rows(out)), 10)


if __name__ == "__main__":
    HARNESS, CI, EXAMPLE, PLUGINS = (os.path.abspath(sys.argv.pop(1)) for _ in range(4))
    unittest.main(verbosity=2)
