#!/usr/bin/env python3
"""External DUTs end to end: the Python example through the process protocol, the CPU DUT through
the C ABI plugin, and every bad plugin and bad process case (clear error, results kept).

usage: test_external.py PATH/TO/swa-harness CI_YAML EXAMPLE_DUT PLUGIN_DIR

Tried the way an outside team does: plugins by absolute path, exec: DUTs with spaces and slashes in
their names, and a plain-C plugin written from swa/dut_v1.h alone (dut/external/examples/c_plugin.c).
"""
import os
import subprocess
import sys
import tempfile
import unittest

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
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})
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
            r = run("run", CI, "--sweep", "caches", "--jobs", "2", "--dut", f"exec:/usr/bin/python3 {EXAMPLE}", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:])
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})
            self.assertGreater(len(rows(out)), 50)

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
                status, _, reason = got[(scenario, f"exec:/usr/bin/python3 {EXAMPLE} --fail {mode}")]
                self.assertEqual(status, "error")
                self.assertIn(message, reason)


class Plugins(unittest.TestCase):
    def plugin(self, name):
        return os.path.join(PLUGINS, f"lib{name}.so")

    def test_the_c_example_plugin_passes_ci_yaml(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--jobs", "2", "--dut", "plugin:" + self.plugin("swa_c_plugin"), "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:])
            self.assertEqual({v[0] for v in rows(out).values()}, {"pass"})

    def test_cpu_as_a_plugin_matches_the_linked_cpu_dut(self):
        with tempfile.TemporaryDirectory() as tmp:
            linked, plugged = os.path.join(tmp, "cpu.h5"), os.path.join(tmp, "plugin.h5")
            for sweep in ("caches", "atb"):  # every cache policy and both ATB mask formats
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
        self.assertIn("speaks ABI version 2; this harness speaks 1", r.stderr)

    def test_a_crashing_plugin_leaves_the_results_and_names_the_scenario(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            self.assertEqual(run("run", CI, "--sweep", "inputs", "--dut", "cpu", "--out", out).returncode, 0)
            before = rows(out)
            r = run("run", CI, "--sweep", "inputs", "--resume", "--out", out,
                    "--dut", "cpu,plugin:" + self.plugin("swa_bad_plugin_crash"))
            self.assertLess(r.returncode, 0)  # killed by SIGSEGV: documented as fatal
            self.assertEqual(rows(out), before)  # everything finished before the crash is there
            with open(out + ".inflight") as f:
                self.assertIn(f.read().strip(), {k[0] for k in before})


if __name__ == "__main__":
    HARNESS, CI, EXAMPLE, PLUGINS = (os.path.abspath(sys.argv.pop(1)) for _ in range(4))
    unittest.main(verbosity=2)
