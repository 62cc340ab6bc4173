#!/usr/bin/env python3
"""swa-harness bisect: every mutant diagnosed right with a minimal case, a correct DUT does not
reproduce, DUT against DUT, the emitted files, and the time limit.

usage: test_bisect.py PATH/TO/swa-harness CI_YAML
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

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
                    self.assertLess(time.time() - start, 600)  # a hang bound, not a speed check (that is swa-bench's)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(f"Diagnosis: {m}.", r.stdout)
                    # The mutant's own variant, or a reading of the spec that computes the same output.
                    self.assertRegex(r.stdout, rf"\n\nFinding: {m} \((variant|reading reproduced)\)\n")
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
                    self.named_and_reduced(tmp, sweep, m)
            # A kernel that ignores the sinks altogether: the exec DUT, through protocol 3.
            dut = f"exec:/usr/bin/python3 {numpy_dut_path()} --fault no-sinks"
            results = os.path.join(tmp, "exec.h5")
            run("run", CI, "--sweep", "sinks", "--filter", "mode=decode", "--dut", dut, "--out", results)
            r = run("bisect", "--from", results, "--id", first_failure(results), "--dut", dut, "--out", os.path.join(tmp, "b"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Diagnosis: sinks_ignored.", r.stdout)

    def named_and_reduced(self, tmp, sweep, m):
        """Mutant m on a ci.yaml sweep: bisect names it, reduces to one sequence and head, and its repro
        fails again; the repro's text."""
        results = os.path.join(tmp, m + ".h5")
        run("run", CI, "--sweep", sweep, "--dut", "mutant:" + m, "--jobs", "2", "--out", results)
        out = os.path.join(tmp, "bisect-" + m)
        r = run("bisect", "--from", results, "--id", first_failure(results), "--dut", "mutant:" + m, "--out", out)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"Diagnosis: {m}.", r.stdout)
        self.assertIn("1 sequence(s), 1 query head(s) / 1 kv head(s)", r.stdout)
        rerun = run("run", os.path.join(out, "repro.yaml"), "--out", os.path.join(out, "r.h5"))
        self.assertEqual(rerun.returncode, 1, rerun.stdout)
        with open(os.path.join(out, "repro.yaml")) as f:
            return f.read()

    def test_fp8_kv_mutants_are_named(self):
        """The FP8 KV faults on ci.yaml's fp8_kv sweep: named, reduced, and the repro keeps kv_dtype."""
        with tempfile.TemporaryDirectory() as tmp:
            for m in ("fp8_no_saturation", "fp8_descale_twice"):
                with self.subTest(m):
                    self.assertIn("kv_dtype: fp8-", self.named_and_reduced(tmp, "fp8_kv", m))

    def test_paged_cache_mutants_are_named(self):
        """The paged-cache faults on ci.yaml's paged sweep: named, reduced, and the repro keeps the paged
        cache and its page size."""
        with tempfile.TemporaryDirectory() as tmp:
            for m in ("page_table_off_by_one", "page_freed_early", "recycled_page_read"):
                with self.subTest(m):
                    repro = self.named_and_reduced(tmp, "paged", m)
                    self.assertIn("cache: paged", repro)
                    self.assertRegex(repro, r"page_size: \d+")

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
            self.assertIn("Finding: non_finite_output (non-finite output)", r.stdout)
            self.assertIn("No variant explains the output, and none comes close", r.stdout)
            self.assertRegex(r.stdout, r"The output is not finite: \d+ NaN and 0 Inf elements; the first at sequence 2, "
                                       r"token \d+, head 0, dim 0, a row that sees \d+ key\(s\)")

    # Faults no built-in variant models, planted in the numpy exec DUT (dut/external/examples/numpy_dut.py,
    # each a bug real SWA kernels have had): (scenario of ci.yaml, the class bisect must name, a pattern
    # its evidence must show, the rows it must say fail or None).
    PREFILL = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1"
    CHUNKED = "mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/cache=ring-modulo/mask=none/fp32/in=normal/seed=2"
    DECODE = "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/in=normal/seed=2"
    PLANTED = {
        # 1/D instead of 1/sqrt(D), at whichever head size the fit ran: the DUT's scale is the golden's squared.
        # Reproduced by the scale fitted on the DUT's own inputs.
        "scale-one-over-d": (PREFILL, "wrong_scale", r"scales the scores by (\S+) instead of (\S+) \(x([0-9.e+-]+)", None),
        "packed-rows": (PREFILL, "cross_sequence_leak", r"position \d+ of sequence 0 \(another sequence\) weight", "only sequences after the first fail"),
        # Named by the keys each row attends, measured (key_runs.cpp), or by the recovered attention.
        "drop-own-key": (PREFILL, "own_key_dropped", r"its last key is 1 before the window's last|\(the query's own key\) weight 0;", None),
        "one-future-key": (PREFILL, "future_keys", r"its last key is 1 after the window's last|\(1 after the query: a future key\) weight", None),
        "clamp-window-start": (PREFILL, "future_keys", r"keeps window_left \+ 1 keys|a future key\) weight", "only the first 15 rows of a sequence fail"),
        # Reproduced by the reading of K and V held in fp16 (or told by the single-key rows' V).
        "kv-fp16": (PREFILL, "kv_stored_as_fp16", r"equals the V row rounded to fp16 in every element|holds K and V in fp16", None),
        "v-from-k": (PREFILL, "output_outside_the_values", r"no non-negative combination of V rows gives", None),
        "p-bf16": (PREFILL, "quantised_probabilities", r"has a significand of 8 bits: .* \(bf16\)", None),
        # Key tiles counted as length // 16: the sequence's partial last tile is never read. An edge rule
        # reproduces it (the upper edge of the row's query tile, at the sequence's end, rounded down).
        "last-key-tile": (PREFILL, "upper_edge_per_query_tile",
                          r"last row of its aligned 16-row query tile, and drops the aligned 16-key tile that holds it", None),
        "stale-max": (PREFILL, "tile_rescale_missing", r"key tile of 16", None),
        "chunk-forgets-cache": (CHUNKED, "chunk_prefix_dropped", r"no key before its call's first row is read|before the query's chunk, which starts at \d+", "only chunks after the first fail"),
        # A reading reproduces it: the window one key wider, in decode steps only.
        "decode-window-plus-one": (DECODE, "window_plus_one", r"attends W\+1 keys on the left .*, in decode steps only", "only decode steps fail"),
        # A reading reproduces it (on a ring the same output as each query one position back, listed beside it).
        "read-before-write": (DECODE, "cache_read_before_write", r"reads a decode step's own slot before writing", "only decode steps fail"),
        "nan-last-row": (DECODE, "non_finite_output", r"The output is not finite: \d+ NaN", None),
    }

    def test_planted_faults_are_named_by_the_recovered_attention(self):
        """Each planted fault: bisect's first line names the planted class (from the recovered attention,
        the single-key rows or the non-finite elements, as no variant explains it), its evidence names
        the keys, summary.json and repro.h5 carry it, and the time is bounded. Prints the table."""
        def bisect(item, tmp):
            fault, (scenario, _, _, _) = item
            dut = f"exec:/usr/bin/python3 {numpy_dut_path()} --fault {fault}"
            start = time.time()
            r = run("bisect", CI, "--filter", scenario, "--dut", dut, "--out", os.path.join(tmp, fault), "--json")
            return fault, r, time.time() - start

        table = []
        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
            for fault, r, seconds in pool.map(lambda item: bisect(item, tmp), self.PLANTED.items()):
                scenario, name, evidence, rows = self.PLANTED[fault]
                with self.subTest(fault):
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    summary = json.loads(r.stdout)
                    table.append((fault, summary["class"], summary["class"] == name, summary["minimal_case"], seconds))
                    self.assertEqual((summary["class"], summary["reproduces"]), (name, True), summary["evidence"])
                    self.assertNotEqual(summary["source"], "variant")
                    self.assertRegex("\n".join(summary["evidence"]), evidence)
                    if fault == "scale-one-over-d":  # 1/D is the golden's 1/sqrt(D) squared (4 significant digits)
                        dut_scale, scale, ratio = map(float, re.search(evidence, "\n".join(summary["evidence"])).groups())
                        self.assertAlmostEqual(dut_scale / (scale * scale), 1, delta=1e-3)
                        self.assertAlmostEqual(ratio / scale, 1, delta=1e-3)
                    if rows:
                        self.assertTrue(any(rows in x for x in summary["pattern"]), summary["pattern"])
                    self.assertLess(seconds, 600)  # a hang bound
                    with open(os.path.join(tmp, fault, "report.txt")) as f:
                        report = f.read()
                    self.assertIn(f"\n\nFinding: {name} (", report)  # the first line after the header
                    with h5py.File(os.path.join(tmp, fault, "repro.h5")) as f:
                        d = f["diagnosis"]
                        self.assertEqual(d.attrs["class"], name)
                        if summary["source"] == "recovered attention" and name != "output_outside_the_values":
                            w, g = d["weights"][:], d["golden_weights"][:]
                            self.assertEqual(w.shape, g.shape)
                            self.assertEqual(d["rows"].shape, (w.shape[0], 3))
                            self.assertEqual(d["candidates"].shape, (w.shape[1], 3))
                            self.assertTrue(np.all(w >= 0))
                            np.testing.assert_allclose(g.sum(axis=1), 1, rtol=1e-9)  # no sinks here
        print("\n| planted fault | bisect's first line | right | reduced case | time |\n|---|---|---|---|---|")
        for fault, name, right, case, seconds in table:
            print(f"| {fault} | {name} | {'yes' if right else 'NO'} | `{case}` | {seconds:.1f} s |")

    def test_json_summary_and_no_invented_finding(self):
        """--json prints summary.json; a correct kernel's run does not reproduce and names no class."""
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", self.PREFILL, "--dut", f"exec:/usr/bin/python3 {numpy_dut_path()}",
                    "--out", tmp, "--json")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual((summary["reproduces"], summary["class"]), (False, "does_not_reproduce"))
            with open(os.path.join(tmp, "summary.json")) as f:
                self.assertEqual(json.load(f), summary)
            self.assertNotIn("Recover", open(os.path.join(tmp, "report.txt")).read())

    def bisect_wrapped_kernel(self, tmp, body, *extra):
        """`bisect` of the prefill case with a python: kernel that imports the NumPy example
        (numpy_kernel) and defines attention(p) with `body` (source after the imports)."""
        examples = os.path.join(os.path.dirname(CI), "..", "dut", "external", "examples")
        kernel = os.path.join(tmp, "wrapped_kernel.py")
        with open(kernel, "w") as f:
            f.write(f"import sys\nsys.path.insert(0, {os.path.abspath(examples)!r})\nimport numpy as np\n"
                    "import numpy_kernel\n" + body)
        return run("bisect", CI, "--filter", self.PREFILL, "--dut", f"python:{kernel}:attention", "--out",
                   os.path.join(tmp, "b"), *extra)

    def test_a_dut_that_keeps_state_across_calls_is_told(self):
        """A kernel right on its first call and wrong after (a counter never reset) passes alone in a
        fresh worker: bisect runs it again in the same one and says so, not does_not_reproduce."""
        with tempfile.TemporaryDirectory() as tmp:
            r = self.bisect_wrapped_kernel(tmp, "_calls = [0]\n\n\ndef attention(p):\n    _calls[0] += 1\n"
                                           "    numpy_kernel.attention(p)\n    if _calls[0] > 1:\n        p.out[0] = 0\n",
                                           "--json")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual((summary["reproduces"], summary["class"]), (True, "fails_after_earlier_calls"), r.stdout)

    def test_a_dut_that_keeps_state_from_another_scenario_is_told_which(self):
        """A kernel that keeps the first call's window forever (a plan cached under too coarse a key)
        passes alone and after runs of itself; after the scenario the sweep ran before it, in a
        worker of its own, it fails, and bisect names that scenario and how the two differ."""
        with tempfile.TemporaryDirectory() as tmp:
            r = self.bisect_wrapped_kernel(tmp, "_plan = {}\n\n\nclass _Planned:\n    def __init__(self, p):\n        self._p = p\n\n"
                        "    def __getattr__(self, name):\n        if name == 'window_left':\n"
                        "            return _plan.setdefault('left', self._p.window_left)\n"
                        "        return getattr(self._p, name)\n\n\n"
                        "def attention(p):\n    numpy_kernel.attention(_Planned(p))\n")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Finding: fails_after_earlier_calls", r.stdout)
            self.assertRegex(r.stdout, r"run again right after the scenario mode=\S+, same inputs, it fails")
            self.assertRegex(r.stdout, r"the two differ in: .*w=\d+ there, w=16 here")

    def test_rows_left_zero_are_told_apart_from_the_rows_fitted(self):
        """Some failing rows written as zeros and others a weighting of keys below the window: the
        zero rows are counted by position and left out of the least-squares fit, which names the
        keys of the others (a fit of a zero row reads as "the weights sum to 0")."""
        with tempfile.TemporaryDirectory() as tmp:
            r = self.bisect_wrapped_kernel(tmp, "\n\ndef attention(p):\n    numpy_kernel.attention(p)\n"
                        "    kv = np.arange(p.heads_q) // (p.heads_q // p.heads_kv)\n    p.out[40:56] = 0\n"
                        "    for t in range(56, 64):\n        p.out[t] = 0.7 * p.v[0][kv] + 0.3 * p.v[5][kv]\n")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("Finding: keys_below_the_window", r.stdout)
            self.assertRegex(r.stdout, r"16 of the 24 finite failing rows there hold exactly 0 .* of the other 8")
            self.assertIn("The rows exactly 0, by position: sequence 0 (70 tokens): rows 40..55", r.stdout)

    def test_a_correct_dut_does_not_reproduce(self):
        scenario = run("list", CI, "--sweep", "caches").stdout.split()[3]
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", "cpu", "--out", tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("does not reproduce", r.stdout)
            self.assertIn("Finding: does_not_reproduce", r.stdout)

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
