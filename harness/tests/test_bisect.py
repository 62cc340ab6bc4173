#!/usr/bin/env python3
"""swa-harness bisect: every mutant diagnosed right with a minimal case, a correct DUT does not
reproduce, DUT against DUT, the emitted files, and the time limit.

usage: test_bisect.py PATH/TO/swa-harness CI_YAML
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = None
MUTANTS = ["window_plus_one", "window_minus_one", "ring_slot_off_by_one", "stale_slot_after_wrap",
           "gqa_modulo_mapping", "fp16_pv_accumulation", "no_max_subtraction"]


def numpy_dut_path():
    """The exec example DUT beside the sweep file's checkout (scenarios/../dut/external/examples)."""
    return os.path.join(os.path.dirname(CI), "..", "dut", "external", "examples", "numpy_dut.py")


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=600)


def first_failure(path):
    with h5py.File(path) as f:
        r = results_table(f)
    return next(x["scenario_id"].decode() for x in r if x["status"] == b"fail")


class Bisect(unittest.TestCase):
    def test_every_mutant_gets_the_right_diagnosis_and_a_minimal_case(self):
        with tempfile.TemporaryDirectory() as tmp:
            for m in MUTANTS:
                with self.subTest(m):
                    results = os.path.join(tmp, m + ".h5")
                    run("run", CI, "--dut", "mutant:" + m, "--jobs", "2", "--out", results)
                    out = os.path.join(tmp, "bisect-" + m)
                    start = time.time()
                    r = run("bisect", "--from", results, "--id", first_failure(results), "--dut", "mutant:" + m, "--out", out)
                    self.assertLess(time.time() - start, 60)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(f"Diagnosis: {m}.", r.stdout)
                    heads = "4 query head(s) / 2 kv head(s)" if m == "gqa_modulo_mapping" else "1 query head(s) / 1 kv head(s)"
                    self.assertIn(f"1 sequence(s), {heads}", r.stdout)
                    for name in ("report.txt", "repro.yaml", "repro.h5"):
                        self.assertTrue(os.path.exists(os.path.join(out, name)), name)
                    # The emitted case reproduces the failure on its own.
                    rerun = run("run", os.path.join(out, "repro.yaml"), "--out", os.path.join(out, "r.h5"))
                    self.assertEqual(rerun.returncode, 1, rerun.stdout)
                    with h5py.File(os.path.join(out, "repro.h5")) as f:
                        self.assertEqual((f.attrs["problem_file_format"], f.attrs["kind"]), (1, "repro"))
                        self.assertEqual(set(f.keys()) >= {"q", "k", "v", "reference", "duts", "case"}, True)
                        self.assertEqual(f["reference"].attrs["source"], "golden")
                        dut = f["duts/0"]
                        self.assertEqual(dut.attrs["dut"], "mutant:" + m)
                        np.testing.assert_array_equal(dut["error"][:], dut["out"][:].astype(np.float64) - f["reference/out"][:])
                        self.assertGreater(np.abs(dut["error"][:]).max(), dut.attrs["threshold"])

    def test_score_semantics_mutants_are_named(self):
        """Sinks, soft-cap and two-sided window faults, each on the ci.yaml sweep of its feature."""
        cases = {"sink_in_numerator": "sinks", "softcap_after_mask": "softcap", "window_right_off_by_one": "two_sided"}
        with tempfile.TemporaryDirectory() as tmp:
            for m, sweep in cases.items():
                with self.subTest(m):
                    results = os.path.join(tmp, m + ".h5")
                    run("run", CI, "--sweep", sweep, "--dut", "mutant:" + m, "--jobs", "2", "--out", results)
                    out = os.path.join(tmp, "bisect-" + m)
                    r = run("bisect", "--from", results, "--id", first_failure(results), "--dut", "mutant:" + m, "--out", out)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(f"Diagnosis: {m}.", r.stdout)
                    self.assertIn("1 sequence(s), 1 query head(s) / 1 kv head(s)", r.stdout)
                    rerun = run("run", os.path.join(out, "repro.yaml"), "--out", os.path.join(out, "r.h5"))
                    self.assertEqual(rerun.returncode, 1, rerun.stdout)
            # A kernel that ignores the sinks altogether: the exec DUT, through protocol 3.
                dut = f"exec:/usr/bin/python3 {numpy_dut_path()} --fault no-sinks"
            results = os.path.join(tmp, "exec.h5")
            run("run", CI, "--sweep", "sinks", "--filter", "mode=decode", "--dut", dut, "--out", results)
            r = run("bisect", "--from", results, "--id", first_failure(results), "--dut", dut, "--out", os.path.join(tmp, "b"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Diagnosis: sinks_ignored.", r.stdout)

    def test_decode_failures_are_localised_per_sequence(self):
        """Sequence 0 (prompt 20 > W) fails from decode step 0, sequence 1 (prompt 5) only from step 3,
        when its ring first wraps, at token 8: the lowest failing token, which is not the first step."""
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "decode.yaml")
            with open(sweep, "w") as f:
                f.write("sweeps:\n  d:\n    matrix: {mode: [decode], batch: [[20, 5]], heads: [2], kv_heads: [1], "
                        "head_size: [16], window: [8], chunk: [0], decode_steps: [10], cache: [ring-modulo]}\n")
            scenario = run("list", sweep).stdout.split()[0]
            r = run("bisect", sweep, "--filter", scenario, "--dut", "mutant:stale_slot_after_wrap", "--out",
                    os.path.join(tmp, "b"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Decode: the first failing step is 0 (sequence 0's prompt is 20 tokens).", r.stdout)
            self.assertIn("First failure per sequence: sequence 0: step 0 (token 20); sequence 1: step 3 (token 8).",
                          r.stdout)

    def test_a_non_finite_output_matches_no_finite_variant(self):
        """NaN in one row: every finite variant differs by infinity, and 1% of an infinite error is no
        allowance (it once made the first variant alphabetically "match")."""
        dut = f"exec:/usr/bin/python3 {numpy_dut_path()} --fault nan-last-row"
        scenario = run("list", CI, "--sweep", "caches", "--filter", "mode=decode").stdout.split()[0]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", dut, "--out", os.path.join(tmp, "b"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertNotIn("Diagnosis:", r.stdout)
            self.assertIn("No variant explains the output, and none comes close", r.stdout)
            self.assertRegex(r.stdout, r"The output is not finite: \d+ NaN and 0 Inf elements; the first at sequence 2, "
                                       r"token \d+, head 0, dim 0, a row that sees \d+ key\(s\)")

    def test_faults_without_a_variant_are_told_by_the_recovered_attention(self):
        """Kernels with faults no variant models (the numpy exec DUT's): bisect recovers the attention of
        a failing row by non-negative least squares and names what differs from the golden's."""
        scenario = run("list", CI, "--sweep", "head_sizes", "--filter", "d=64/w=16/mask=none/fp32").stdout.split()[0]
        expected = {
            "scale-one-over-d": (r"wrong_scale\n.*scales the scores by 0\.25 x the golden's scale 0\.25 \(that is 0\.0625\)",),
            "packed-rows": (r"cross_sequence_leak\n.*position \d+ of sequence \d+ \(another sequence\) weight",),
            "drop-own-key": (r"own_key_dropped\n.*\(the query's own key\) weight 0;",),
            "one-future-key": (r"future_keys\n.*\(1 after the query: a future key\) weight",),
        }
        with tempfile.TemporaryDirectory() as tmp:
            for fault, patterns in expected.items():
                with self.subTest(fault):
                    dut = f"exec:/usr/bin/python3 {numpy_dut_path()} --fault {fault}"
                    r = run("bisect", CI, "--filter", scenario, "--dut", dut, "--out", os.path.join(tmp, fault))
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertNotIn("Diagnosis:", r.stdout)
                    self.assertIn("5. Recover: which keys the DUT attended, and how", r.stdout)
                    for pattern in patterns:
                        self.assertRegex(r.stdout, pattern)
            # A correct kernel's failure-free output never reaches the recovery.
            r = run("bisect", CI, "--filter", scenario, "--dut", f"exec:/usr/bin/python3 {numpy_dut_path()}", "--out",
                    os.path.join(tmp, "correct"))
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertNotIn("Recover", r.stdout)

    def test_a_correct_dut_does_not_reproduce(self):
        scenario = run("list", CI, "--sweep", "caches").stdout.split()[3]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "cpu", "--out", tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("does not reproduce", r.stdout)

    def test_the_repro_of_an_atb_decode_case_runs(self):
        # A decode with an ATB mask is valid only under api: atb; the repro must say so.
        scenario = next(i for i in run("list", CI).stdout.split() if "mode=decode" in i and "mask=swa-norm" in i)
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "mutant:p_low_precision", "--out", tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            rerun = run("run", os.path.join(tmp, "repro.yaml"), "--out", os.path.join(tmp, "r.h5"))
            self.assertEqual(rerun.returncode, 1, rerun.stdout + rerun.stderr)

    def test_a_kv_cache_failure_reproduces_as_in_the_run(self):
        # Bisect judges as the run does, KV cache included: a kernel with right outputs and a wrong
        # cache is not "does not reproduce", and no bug class that leaves this case right is a match.
        scenario = next(i for i in run("list", CI, "--sweep", "caches").stdout.split() if "cache=ring-compact" in i and "mode=decode" in i)
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "mutant:cache_slot_shifted", "--out", tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"It reproduces: KV cache differs from the golden cache model in \d+ places")
            self.assertNotIn("MATCH", r.stdout)
            rerun = run("run", os.path.join(tmp, "repro.yaml"), "--out", os.path.join(tmp, "r.h5"))
            self.assertEqual(rerun.returncode, 1, rerun.stdout + rerun.stderr)

    def test_dut_against_dut(self):
        scenario = run("list", CI, "--sweep", "caches").stdout.split()[3]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "mutant:ring_slot_off_by_one", "--against", "cpu", "--out", tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Reference:  cpu", r.stdout)
            self.assertIn("Diagnosis: ring_slot_off_by_one.", r.stdout)
            self.assertIn("the DUT states no query tile", r.stdout)  # a mutant is a plain loop

    def test_the_report_uses_the_duts_own_tile(self):
        # The CPU DUT states its 64-row query tile (dut::Traits); bisect places the failing row in it.
        scenario = run("list", CI, "--sweep", "caches").stdout.split()[3]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "cpu", "--against", "mutant:window_plus_one", "--out", tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"is row \d+ of its 64-row query tile \(the DUT's own tile\)")

    def test_bad_input(self):
        r = run("bisect", CI, "--filter", "mode=", "--dut", "cpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("give one exact ID", r.stderr)
        r = run("bisect", CI, "--filter", "x", "--dut", "nope")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown DUT 'nope'", r.stderr)


if __name__ == "__main__":
    HARNESS, CI = (os.path.abspath(sys.argv.pop(1)) for _ in range(2))
    unittest.main(verbosity=2)
