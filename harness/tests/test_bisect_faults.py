#!/usr/bin/env python3
"""swa-harness bisect on the faulty kernels of dut/external/faults (plugins written from dut_v2.h alone):
the ablation names the features a failure needs, the cache check's differences become findings, the
score semantics are measured, each finding states its confidence, the files carry both, and the correct
kernel of the same source gets no finding.

usage: test_bisect_faults.py PATH/TO/swa-harness CI_YAML FAULTS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import h5py

HARNESS = CI = FAULTS = None


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=900)


def plugin(fault):
    return "plugin:" + os.path.join(FAULTS, f"libswa_fault_{fault}.so")


# fault: (a ci.yaml scenario it fails, the class bisect must name, features the failure must be found
# to need, a pattern of the evidence). Each is one method: a measurement, not a name match.
CASES = {
    # the sink each row implies, against every head's
    "sink_per_kv_head": ("mode=prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/mask=none/sinks=learned/fp32/in=normal/seed=8",
                         "sink_wrong_head", ["sinks"], r"reads the sink of its kv head"),
    # the score -> weight curve
    "softcap_before_scale": ("mode=prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/mask=none/cap=5/fp32/in=normal/seed=9",
                             "softcap_before_scale", ["soft-cap"], r"caps q\.k before the scale"),
    # the band measured, then measured again with one more key on the right
    "right_window_short": ("mode=prefill/seqs=70-1-33/hq=4/hkv=2/d=64/w=0/wr=1/mask=none/fp32/in=normal/seed=10",
                           "window_right_minus_one", ["two-sided window"], r"with one more key on the right"),
    # single-key rows against every reading of the FP8 spec
    "fp8_round_toward_zero": ("mode=prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/mask=none/fp16/kv=fp8-e4m3/in=normal/seed=11",
                              "fp8_rounds_toward_zero", ["FP8 KV"], r"rounding toward zero"),
    # which dims fail
    "head_dim_tail_zero": ("mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=80/w=1/mask=none/fp32/in=normal/seed=1",
                           "head_dims_wrong", [], r"only dims 64\.\.79 of 80"),
    # a reading of the spec that reproduces it: the exponent's base (the scale x ln 2 reproduces it too)
    "exp_base_two": ("mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1",
                     "exp_base_two", [], r"exponent in base 2.*\n.*Reproduced on the minimal case: (\d+) of its \1 "),
    # the cache check's differences, classified
    "compact_base_zero": ("mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=33/cache=ring-compact/mask=none/fp32/in=normal/seed=2",
                          "compact_base_wrong", ["ring cache"], r"compact ring base is 0, expected"),
    "chunked_last_chunk_unwritten": ("mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/cache=ring-modulo/mask=none/fp32/in=normal/seed=2",
                                     "rows_not_written", ["chunks"], r"its prompt's last"),
    # the cache went wrong first, the outputs fail only in the calls that read it back
    "compact_base_from_total_length": ("mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/cache=ring-compact/mask=none/fp32/in=normal/seed=2",
                                       "compact_base_wrong", ["ring cache"],
                                       r"The cache went wrong first: it differs after chunk 0, and the outputs fail only from chunk 1 on"),
    "decode_tokens_written_stale": ("mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/in=normal/seed=2",
                                    "tokens_written_wrong", ["decode steps"], r"has tokens_written \d+, expected \d+"),
}


class FaultKernels(unittest.TestCase):
    def test_each_method_names_its_fault_with_the_features_it_needs(self):
        def bisect(item, tmp):
            fault, (scenario, _, _, _) = item
            out = os.path.join(tmp, fault)
            return fault, out, run("bisect", CI, "--filter", scenario, "--dut", plugin(fault), "--out", out, "--json")

        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
            for fault, out, r in pool.map(lambda item: bisect(item, tmp), CASES.items()):
                scenario, name, needs, evidence = CASES[fault]
                with self.subTest(fault):
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    s = json.loads(r.stdout)
                    self.assertEqual(s["class"], name, s["evidence"])
                    self.assertIn(s["confidence"], ("high", "medium"))
                    self.assertTrue(set(needs) <= set(s["needs"]), s["needs"])
                    self.assertRegex("\n".join(s["evidence"]), evidence)
                    # The ablation table: every feature the case has, its change and outcome.
                    features = {a["feature"]: a for a in s["ablation"]}
                    for feature in needs:
                        self.assertEqual(features[feature]["outcome"], "passes")
                        self.assertFalse(features[feature]["inputs_redrawn"])
                    with open(os.path.join(out, "report.txt")) as f:
                        report = f.read()
                    self.assertIn(f"\n\nFinding: {name} (", report)
                    self.assertRegex(report, r"\n   Confidence: (high|medium) \(")
                    self.assertIn("3. Ablate", report)
                    with h5py.File(os.path.join(out, "repro.h5")) as f:
                        d = f["diagnosis"]
                        self.assertEqual((d.attrs["class"], d.attrs["confidence"]), (name, s["confidence"]))
                        rows = [d["ablation"][k].attrs for k in sorted(d["ablation"])]
                        self.assertEqual([(a["feature"], a["outcome"]) for a in rows],
                                         [(a["feature"], a["outcome"]) for a in s["ablation"]])
                    with open(os.path.join(out, "repro.yaml")) as f:
                        self.assertIn("tolerance_profile: default", f.read())

    def test_a_cache_only_failure_is_not_told_as_a_missing_fit(self):
        """Outputs right, cache wrong: the finding comes from the cache check, and no sentence suggests
        NaN or an unfitted output."""
        scenario = CASES["compact_base_zero"][0]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", plugin("compact_base_zero"), "--out", tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Finding: compact_base_wrong (cache check)", r.stdout)
            self.assertIn("no output row fails: the outputs pass", r.stdout)
            self.assertNotIn("finite output to fit", r.stdout)

    def test_the_correct_kernel_gets_no_finding(self):
        """The same source without a fault, on a scenario of each feature: does not reproduce."""
        scenarios = [CASES[f][0] for f in ("sink_per_kv_head", "softcap_before_scale", "right_window_short",
                                           "fp8_round_toward_zero", "compact_base_zero", "decode_tokens_written_stale")]
        with tempfile.TemporaryDirectory() as tmp:
            for i, scenario in enumerate(scenarios):
                with self.subTest(scenario):
                    r = run("bisect", CI, "--filter", scenario, "--dut", plugin("none"), "--out", os.path.join(tmp, str(i)),
                            "--json")
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    s = json.loads(r.stdout)
                    self.assertEqual((s["reproduces"], s["class"]), (False, "does_not_reproduce"))

    def test_the_html_report_shows_confidence_and_ablation(self):
        fault = "sink_per_kv_head"
        scenario = CASES[fault][0]
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "r.h5")
            run("run", CI, "--filter", scenario, "--dut", plugin(fault), "--out", results)
            b = os.path.join(tmp, "b")
            self.assertEqual(run("bisect", "--from", results, "--id", scenario, "--dut", plugin(fault), "--out", b).returncode, 1)
            report = os.path.join(os.path.dirname(CI), "..", "reports", "swa_report.py")
            r = subprocess.run(["/usr/bin/python3", report, results, "-o", os.path.join(tmp, "rep"), "--bisect", b],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(tmp, "rep", "report.html")) as f:
                page = f.read()
            self.assertIn("<table class='ablation'>", page)
            self.assertIn("<td>sinks</td><td>sinks: none</td><td>passes</td>", page)
            self.assertRegex(page, r"<td>high \(every one of the \d+ failing rows reproduced within its limit by computing the cause\)</td>")


if __name__ == "__main__":
    HARNESS, CI, FAULTS = (os.path.abspath(sys.argv.pop(1)) for _ in range(3))
    unittest.main(verbosity=2)
