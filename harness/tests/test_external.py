#!/usr/bin/env python3
"""External DUTs end to end: the Python example through the process protocol, the CPU DUT through
the C ABI plugin, and every bad plugin and bad process case (clear error, results kept).

usage: test_external.py PATH/TO/swa-harness CI_YAML EXAMPLE_DUT PLUGIN_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py

HARNESS = CI = EXAMPLE = PLUGINS = None


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=900)


def rows(path):
    with h5py.File(path) as f:
        r = f["results"][:]
    s = lambda x: x.decode() if isinstance(x, bytes) else x
    return {(s(x["scenario_id"]), s(x["dut"])): (s(x["status"]), float(x["max_abs"]), s(x["reason"])) for x in r}


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
