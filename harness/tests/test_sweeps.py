#!/usr/bin/env python3
"""The harness end to end: sweep validation messages, the mutants caught by scenarios/ci.yaml,
crash safety under kill -9 with --resume, sharding with merge, and job-count independence.

usage: test_sweeps.py PATH/TO/swa-harness PATH/TO/scenarios/ci.yaml
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import xml.etree.ElementTree as ET

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = None
CI_YAML = None
MUTANTS = ["window_plus_one", "window_minus_one", "ring_slot_off_by_one", "stale_slot_after_wrap",
           "gqa_modulo_mapping", "fp16_pv_accumulation", "no_max_subtraction", "cache_slot_shifted",
           "p_low_precision", "scores_low_precision", "additive_mask", "mask_block_cpp_rule"]
CONTROLS = ["baseline", "cpu", "mutant:none", "mutant:none_reversed"]


def run(*args, **kw):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=900, **kw)


def rows(path):
    """(scenario, dut) -> (status, max_abs, threshold) of a results file."""
    with h5py.File(path) as f:
        r = results_table(f)
    as_str = lambda x: x.decode() if isinstance(x, bytes) else x
    return {(as_str(x["scenario_id"]), as_str(x["dut"])): (as_str(x["status"]), float(x["max_abs"]),
                                                           float(x["threshold"])) for x in r}


class Validation(unittest.TestCase):
    """Every validation error names the file, the line and the key, and exits 2."""

    CASES = [
        ("unknown key", "sweeps:\n  s:\n    matrix:\n      head: [64]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.head: unknown key 'head' \(allowed: batch, cache"),
        ("wrong type", "sweeps:\n  s:\n    matrix:\n      heads: [eight]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.heads: expected an integer, got 'eight'"),
        ("out of range", "sweeps:\n  s:\n    matrix:\n      head_size: [0]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.head_size: must be in \[1, 1024\], got 0"),
        ("bad choice", "sweeps:\n  s:\n    matrix:\n      dtype: [fp8]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.dtype: 'fp8' is not one of fp32\|fp16\|bf16"),
        ("heads not divisible", "sweeps:\n  s:\n    matrix:\n      heads: [6]\n      kv_heads: [4]\n",
         r"bad\.yaml:5:\d+: sweeps\.s\.matrix\.kv_heads: heads \(6\) must be a multiple of kv_heads \(4\)"),
        ("atb: window without SWA mask", "sweeps:\n  s:\n    api: atb\n    matrix:\n      window: [8]\n      mask: [none]\n",
         r"bad\.yaml:6:\d+: sweeps\.s\.matrix\.mask: ATB SWA needs an SWA mask type"),
        ("atb: SWA mask without window", "sweeps:\n  s:\n    api: atb\n    matrix:\n      window: [0]\n      mask: [swa-norm]\n",
         r"bad\.yaml:5:\d+: sweeps\.s\.matrix\.window: ATB mask type swa-norm needs windowSize > 0"),
        ("atb: decode with compressed mask",
         "sweeps:\n  s:\n    api: atb\n    matrix:\n      mode: [decode]\n      decode_steps: [2]\n      window: [8]\n"
         "      mask: [swa-compress]\n",
         r"bad\.yaml:8:\d+: sweeps\.s\.matrix\.mask: ATB decode \(calcType DECODER\) cannot use MASK_TYPE_SLIDING_WINDOW_COMPRESS"),
        ("decode with a mask tensor", "sweeps:\n  s:\n    matrix:\n      mode: [decode]\n      decode_steps: [2]\n"
         "      mask: [swa-norm]\n", r"bad\.yaml:6:\d+: sweeps\.s\.matrix\.mask: decode takes no mask tensor"),
        ("memory limit", "sweeps:\n  s:\n    matrix:\n      batch: [[16000000]]\n      heads: [64]\n      head_size: [1024]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.batch: scenario mode=prefill.* needs about \d+ MiB, over the limit of \d+ MiB"),
        ("chunk missing", "sweeps:\n  s:\n    matrix:\n      mode: [chunked_prefill]\n",
         r"bad\.yaml:2:\d+: sweeps\.s: chunked_prefill needs chunk >= 1"),
        ("ring without window", "sweeps:\n  s:\n    matrix:\n      mode: [decode]\n      decode_steps: [1]\n"
         "      window: [0]\n      cache: [ring-compact]\n",
         r"bad\.yaml:7:\d+: sweeps\.s\.matrix\.cache: ring-compact needs a window > 0"),
        ("yaml syntax", "sweeps: {s: {matrix: {heads: [4]}\n", r"bad\.yaml:2:\d+: YAML syntax error"),
        ("unknown top-level key", "sweep:\n  s: {}\n", r"bad\.yaml:1:1: \(top level\)\.sweep: unknown key 'sweep'"),
        # Score semantics: where they are undefined, and ATB, which has none of them.
        ("two-sided window in decode", "sweeps:\n  s:\n    matrix:\n      mode: [decode]\n      decode_steps: [2]\n"
         "      window_right: [3]\n",
         r"bad\.yaml:6:\d+: sweeps\.s\.matrix\.window_right: a two-sided window \(window_right > 0\) is defined for "
         r"prefill only: in decode"),
        ("two-sided window with a mask", "sweeps:\n  s:\n    matrix:\n      window: [8]\n      window_right: [3]\n"
         "      mask: [swa-norm]\n", r"bad\.yaml:5:\d+: sweeps\.s\.matrix\.window_right: ATB masks are causal"),
        ("atb with sinks", "sweeps:\n  s:\n    api: atb\n    matrix:\n      window: [8]\n      mask: [swa-norm]\n"
         "      sinks: [learned]\n", r"bad\.yaml:7:\d+: sweeps\.s\.matrix\.sinks: api: atb has no attention sinks"),
        ("atb with soft-cap", "sweeps:\n  s:\n    api: atb\n    defaults: {softcap: 50}\n    matrix:\n      window: [8]\n"
         "      mask: [swa-norm]\n", r"bad\.yaml:4:\d+: sweeps\.s\.defaults\.softcap: api: atb has no logit soft-capping"),
        ("atb with a two-sided window", "sweeps:\n  s:\n    api: atb\n    include:\n      - {window: 8, mask: swa-norm, "
         "window_right: 2}\n", r"bad\.yaml:5:\d+: sweeps\.s\.include\.window_right: api: atb has no two-sided window"),
        ("soft-cap not a number", "sweeps:\n  s:\n    matrix:\n      softcap: [high]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.softcap: expected a number, got 'high'"),
        ("soft-cap negative", "sweeps:\n  s:\n    matrix:\n      softcap: [-5]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.softcap: must be in \[0, 1000000\], got -5"),
        ("sinks unknown", "sweeps:\n  s:\n    matrix:\n      sinks: [4]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.sinks: '4' is not one of none\|learned"),
        ("kv_dtype unknown", "sweeps:\n  s:\n    matrix:\n      kv_dtype: [fp8]\n",
         r"bad\.yaml:4:\d+: sweeps\.s\.matrix\.kv_dtype: 'fp8' is not one of dtype\|fp8-e4m3\|fp8-e5m2"),
        ("atb with an FP8 KV cache", "sweeps:\n  s:\n    api: atb\n    matrix:\n      window: [8]\n      mask: [swa-norm]\n"
         "      kv_dtype: [fp8-e4m3]\n", r"bad\.yaml:7:\d+: sweeps\.s\.matrix\.kv_dtype: api: atb has no FP8 KV cache"),
        ("page size 0", "sweeps:\n  s:\n    defaults: {mode: decode, decode_steps: 2, cache: paged}\n    matrix:\n"
         "      page_size: [0]\n", r"bad\.yaml:5:\d+: sweeps\.s\.matrix\.page_size: must be in \[1, 4096\], got 0"),
        ("page size too large", "sweeps:\n  s:\n    defaults: {mode: decode, decode_steps: 2, cache: paged, page_size: 4097}\n",
         r"bad\.yaml:3:\d+: sweeps\.s\.defaults\.page_size: must be in \[1, 4096\], got 4097"),
        ("cache unknown", "sweeps:\n  s:\n    defaults: {mode: decode, decode_steps: 2}\n    matrix:\n      cache: [pages]\n",
         r"bad\.yaml:5:\d+: sweeps\.s\.matrix\.cache: 'pages' is not one of ring-modulo\|ring-compact\|linear\|paged"),
        ("atb with a paged cache", "sweeps:\n  s:\n    api: atb\n    defaults: {mode: decode, decode_steps: 2}\n    matrix:\n"
         "      window: [8]\n      mask: [swa-norm]\n      cache: [paged]\n",
         r"bad\.yaml:8:\d+: sweeps\.s\.matrix\.cache: api: atb has no paged KV cache"),
    ]
    ATB_FEATURES = ["dynamic_batch", "high_precision", "clamp", "logn", "qkv_quant", "bnsd", "kv_tensorlist", "mla"]

    def refused(self, text, pattern, command="list"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.yaml")
            with open(path, "w") as f:
                f.write(text)
            out = os.path.join(tmp, "r.h5")
            r = run(command, path, *(["--dut", "baseline", "--out", out] if command == "run" else []))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertRegex(r.stderr, pattern)
            if command == "run":
                self.assertFalse(os.path.exists(out), "nothing may run on invalid input")

    def test_each_rule_has_a_clear_message(self):
        for name, text, pattern in self.CASES:
            with self.subTest(name):
                self.refused(text, pattern)
        self.refused(self.CASES[0][1], self.CASES[0][2], command="run")

    def test_atb_features_that_do_not_combine_with_swa(self):
        for feature in self.ATB_FEATURES:
            with self.subTest(feature):
                self.refused(f"sweeps:\n  s:\n    api: atb\n    atb_features: [{feature}]\n    matrix:\n"
                             f"      window: [8]\n      mask: [swa-norm]\n",
                             r"bad\.yaml:4:\d+: sweeps\.s\.atb_features: ATB SWA does not combine with")
        for ok in ["kv_bypass", "compress_mask", "split_prefill_decode"]:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "ok.yaml")
                with open(path, "w") as f:
                    f.write(f"sweeps:\n  s:\n    api: atb\n    atb_features: [{ok}]\n    matrix:\n      window: [8]\n"
                            f"      mask: [swa-norm]\n")
                self.assertEqual(run("list", path).returncode, 0, ok)

    def test_unknown_dut_and_shard(self):
        r = run("run", CI_YAML, "--dut", "gpu9000", "--out", "/tmp/never.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("option --dut: unknown DUT 'gpu9000' (known: baseline|cpu|cuda|mutant:<none|", r.stderr)
        r = run("list", CI_YAML, "--shard", "2/2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected K/N with 0 <= K < N", r.stderr)


class Listing(unittest.TestCase):
    def test_ids_are_stable_and_rerun_exactly_one_case(self):
        a = run("list", CI_YAML).stdout.split()
        b = run("list", CI_YAML).stdout.split()
        self.assertEqual(a, b)
        self.assertEqual(len(a), len(set(a)))
        self.assertGreater(len(a), 100)
        for scenario in (a[0], a[len(a) // 2], a[-1]):
            self.assertEqual(run("list", CI_YAML, "--filter", scenario).stdout.split(), [scenario])

    def test_coverage_has_every_allowed_cell_and_pair_and_names_the_gaps_of_a_sweep_removed(self):
        r = run("list", CI_YAML, "--coverage")
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        n = re.search(r"^(\d+) of (\d+) allowed cells and pairs have scenarios$", r.stdout, re.M)
        self.assertTrue(n and n.group(1) == n.group(2) and int(n.group(2)) > 100, r.stdout[-500:])
        self.assertRegex(r.stdout, r"\nsoftcap +decode +fp32 +paged +[1-9]")
        self.assertRegex(r.stdout, r"\nsinks x softcap +[1-9]")
        self.assertNotRegex(r.stdout, r"two-sided +(chunked_prefill|decode)")  # prefill only: not a cell
        with tempfile.TemporaryDirectory() as tmp:
            with open(CI_YAML) as f:
                text = f.read()
            start = text.index("\n  cells_score:")
            end = text.index("\n\n  ", start + 1)
            without = os.path.join(tmp, "ci-without-cells_score.yaml")
            with open(without, "w") as f:
                f.write(text[:start] + text[end:])
            r = run("list", without, "--coverage")
            self.assertEqual(r.returncode, 1, r.stdout[-3000:])
            self.assertRegex(r.stdout, r"\nsoftcap +chunked_prefill +fp32 +linear +0  <- none")
            self.assertIn("; none for:\n", r.stdout)
            self.assertIn("\n  fp8-e5m2 decode fp32 ring-modulo\n", r.stdout)

    def test_edges_generate_the_boundary_cases(self):
        ids = run("list", CI_YAML, "--sweep", "window_edges").stdout.split()
        self.assertTrue(any("/w=1/" in i for i in ids))
        for w in ("59", "60", "61", "127", "129"):
            self.assertTrue(any(f"/w={w}/" in i for i in ids), w)
        self.assertTrue(any("seqs=60-1-31" in i for i in ids))          # length-1 sequence, ragged
        self.assertTrue(any("seqs=32/" in i and "chunk=16/" in i for i in ids))  # wrap at a chunk boundary
        self.assertTrue(any("/w=16/" in i and "chunk=15/" in i for i in ids))    # chunk = W - 1


class Mutants(unittest.TestCase):
    def test_every_mutant_is_caught_and_correct_duts_pass(self):
        with tempfile.TemporaryDirectory() as tmp:
            for dut in CONTROLS:
                out = os.path.join(tmp, dut + ".h5")
                r = run("run", CI_YAML, "--dut", dut, "--jobs", "2", "--out", out)
                self.assertEqual(r.returncode, 0, dut + r.stdout[-2000:])
                self.assertRegex(r.stdout, r"\d+ passed, 0 failed, \d+ skipped\n")  # no warning either
                # The one case a control declines: the CPU DUT's SWA_COMPRESS in chunked prefill.
                with h5py.File(out) as f:
                    skips = {(x["scenario_id"].decode(), x["reason"].decode()) for x in results_table(f)
                             if x["status"] == b"skip"}
                for scenario, reason in skips:
                    self.assertEqual(dut, "cpu", (scenario, reason))
                    self.assertIn("mode=chunked_prefill/", scenario)
                    self.assertIn("mask=swa-compress/", scenario)
                    self.assertIn("chunked prefill starts tiles at chunk boundaries", reason)
            for m in MUTANTS:
                with self.subTest(m):
                    out = os.path.join(tmp, m + ".h5")
                    r = run("run", CI_YAML, "--dut", "mutant:" + m, "--jobs", "2", "--out", out)
                    self.assertEqual(r.returncode, 1, m)
                    failed = [k for k, v in rows(out).items() if v[0] == "fail"]
                    self.assertGreater(len(failed), 0, m)
                    with h5py.File(out) as f:
                        self.assertIn(failed[0][0], f["dumps"])  # the failure's tensors are dumped
                        names = [d.attrs["dut"] for d in f["dumps"][failed[0][0]]["duts"].values()]
                        self.assertEqual(names, ["mutant:" + m])

    def test_score_semantics_mutants_are_caught_where_their_feature_is_on(self):
        """Each new fault fails in the ci.yaml sweep of its feature and passes the others (where its
        feature is off, it is a correct kernel); the controls pass all three sweeps, and so does the
        numpy exec DUT (protocol 3), which fails the sinks sweep when it ignores the sinks."""
        sweeps = {"sink_in_numerator": "sinks", "softcap_after_mask": "softcap", "window_right_off_by_one": "two_sided"}
        with tempfile.TemporaryDirectory() as tmp:
            for m, own in sweeps.items():
                for sweep in sweeps.values():
                    with self.subTest(m=m, sweep=sweep):
                        out = os.path.join(tmp, f"{m}-{sweep}.h5")
                        r = run("run", CI_YAML, "--sweep", sweep, "--dut", "mutant:" + m, "--jobs", "2", "--out", out)
                        statuses = [v[0] for v in rows(out).values()]
                        if sweep == own:
                            self.assertEqual(r.returncode, 1, r.stdout[-1500:])
                            self.assertGreater(statuses.count("fail"), len(statuses) // 3)
                        elif sweep != "two_sided":  # the two-sided sweep has sinks and a soft-cap in two cases
                            self.assertEqual(statuses.count("fail"), 0, r.stdout[-1500:])
            numpy_dut = os.path.join(os.path.dirname(CI_YAML), "..", "dut", "external", "examples", "numpy_dut.py")
            for sweep in sweeps.values():
                out = os.path.join(tmp, f"exec-{sweep}.h5")
                r = run("run", CI_YAML, "--sweep", sweep, "--jobs", "2", "--out", out,
                        "--dut", f"baseline,cpu,mutant:none,exec:/usr/bin/python3 {numpy_dut}")
                self.assertEqual(r.returncode, 0, r.stdout[-1500:])
                self.assertRegex(r.stdout, r"\d+ passed, 0 failed, 0 skipped\n")
            out = os.path.join(tmp, "exec-no-sinks.h5")
            r = run("run", CI_YAML, "--sweep", "sinks", "--out", out, "--dut", f"exec:/usr/bin/python3 {numpy_dut} --fault no-sinks")
            self.assertEqual({v[0] for v in rows(out).values()}, {"fail"}, r.stdout[-1500:])

    # Where each feature-pair and confusable-parameter mutant differs from a correct kernel, from a
    # /scenarios row; the sweep of ci.yaml that was written to catch it.
    @staticmethod
    def _on(s, what):
        text = lambda x: x.decode() if isinstance(x, bytes) else x
        sinks, cap, two_sided = text(s["sinks"]) != "none", float(text(s["softcap"])) > 0, int(s["window_right"]) != 0
        paged_fp8 = text(s["cache"]) == "paged" and text(s["kv_dtype"]).startswith("fp8")
        hq, hkv = int(s["heads"]), int(s["kv_heads"])
        lens = [int(x) for x in text(s["seq_lens"]).split(",")]
        return {
            "sink_through_softcap": sinks and cap,
            "softcap_right_after_mask": cap and two_sided,
            "sink_ignored_two_sided": sinks and two_sided,
            "sink_scaled_by_k_descale": sinks and paged_fp8,
            "softcap_before_k_descale": cap and paged_fp8,
            "v_read_with_k_descale": text(s["kv_dtype"]).startswith("fp8"),
            "gqa_group_from_kv_heads": any(min(h // hkv, hkv - 1) != h // (hq // hkv) for h in range(hq)),
            "length_table_of_4": text(s["mode"]) == "prefill" and any(min(lens[b % 4], lens[b]) < lens[b]
                                                                      for b in range(4, len(lens))),
            "first_length_for_all": text(s["mode"]) == "prefill" and any(n > lens[0] for n in lens),
            "window_from_chunk": text(s["mode"]) != "prefill" and int(s["chunk"]) > 0 and int(s["window"]) > 0
                                 and int(s["chunk"]) != int(s["window"]),
            "window_from_page_size": text(s["mode"]) != "prefill" and text(s["cache"]) == "paged"
                                     and int(s["window"]) > 0 and int(s["page_size"]) != int(s["window"]),
        }[what]

    PAIRS_AND_CONFUSABLES = {"sink_through_softcap": "feature_pairs", "softcap_right_after_mask": "feature_pairs",
                             "sink_ignored_two_sided": "feature_pairs", "sink_scaled_by_k_descale": "feature_pairs",
                             "softcap_before_k_descale": "feature_pairs", "v_read_with_k_descale": "fp8_kv",
                             "gqa_group_from_kv_heads": "batch_sizes", "length_table_of_4": "batch_sizes",
                             "first_length_for_all": "batch_sizes", "window_from_chunk": "caches",
                             "window_from_page_size": "paged"}

    def test_feature_pair_and_confusable_mutants_fail_where_their_feature_is_on_and_only_there(self):
        """Each fails every scenario of its own ci.yaml sweep where its features meet (the values that
        make it visible are in ci.yaml's comments), and no scenario where they do not: there it is a
        correct kernel. FP8 K and V descales differ in every FP8 scenario."""
        text = lambda x: x.decode() if isinstance(x, bytes) else x
        with tempfile.TemporaryDirectory() as tmp:
            for m, sweep in self.PAIRS_AND_CONFUSABLES.items():
                with self.subTest(m):
                    out = os.path.join(tmp, m + ".h5")
                    r = run("run", CI_YAML, "--dut", "mutant:" + m, "--jobs", "2", "--out", out)
                    self.assertEqual(r.returncode, 1, r.stdout[-1500:])
                    status = {k[0]: v[0] for k, v in rows(out).items()}
                    with h5py.File(out) as f:
                        scenarios = f["scenarios"][:]
                    on = [text(s["id"]) for s in scenarios if self._on(s, m)]
                    off = [text(s["id"]) for s in scenarios if not self._on(s, m)]
                    own = [text(s["id"]) for s in scenarios if text(s["sweep"]) == sweep and self._on(s, m)]
                    self.assertGreater(len(own), 0)
                    self.assertEqual([i for i in own if status[i] != "fail"], [], "passed in its own sweep")
                    self.assertEqual([i for i in off if status[i] != "pass"], [], "failed with its feature off")
                    self.assertGreater(len(on), 0)
            with h5py.File(os.path.join(tmp, "v_read_with_k_descale.h5")) as f:
                s = f["scenarios"][:]
            fp8 = np.array([text(k).startswith("fp8") for k in s["kv_dtype"]])
            self.assertTrue(np.all(s["k_descale"][fp8] != s["v_descale"][fp8]))

    def controls_pass(self, tmp, sweep, numpy_dut):
        """The controls and the numpy exec DUT pass every scenario of a ci.yaml sweep; its /scenarios."""
        out = os.path.join(tmp, sweep + "-controls.h5")
        r = run("run", CI_YAML, "--sweep", sweep, "--jobs", "2", "--out", out,
                "--dut", f"baseline,cpu,mutant:none,mutant:none_reversed,exec:/usr/bin/python3 {numpy_dut}")
        self.assertEqual(r.returncode, 0, r.stdout[-1500:])
        self.assertRegex(r.stdout, r"\d+ passed, 0 failed, 0 skipped\n")
        with h5py.File(out) as f:
            return f["scenarios"][:]

    def test_paged_mutants_are_caught_and_the_page_table_checked(self):
        """Each paged fault fails ci.yaml's paged sweep and passes a sweep of rings (there it is a correct
        kernel); page_freed_early's page table is named by the cache check; the controls and the numpy exec
        DUT (protocol 5) pass the paged sweep (the C example plugin does in test_external.py, with all of
        ci.yaml), and the exec DUT's planted page-table fault is caught by the cache check; /scenarios
        records page_size and the pool."""
        numpy_dut = os.path.join(os.path.dirname(CI_YAML), "..", "dut", "external", "examples", "numpy_dut.py")
        with tempfile.TemporaryDirectory() as tmp:
            for m, at_least in (("page_table_off_by_one", 0.8), ("page_freed_early", 0.6), ("recycled_page_read", 0.4)):
                with self.subTest(m):
                    out = os.path.join(tmp, m + ".h5")
                    r = run("run", CI_YAML, "--sweep", "paged", "--dut", "mutant:" + m, "--jobs", "2", "--out", out)
                    self.assertEqual(r.returncode, 1, r.stdout[-1500:])
                    statuses = [v[0] for v in rows(out).values()]
                    self.assertGreater(statuses.count("fail"), at_least * len(statuses), statuses)
                    if m == "page_freed_early":
                        self.assertRegex(r.stdout, r"page table maps logical page \d+ \(positions \d+\.\.\d+\) to no page "
                                                   r"\(freed or never taken\), expected physical page \d+")
                    rings = os.path.join(tmp, m + "-caches.h5")
                    r = run("run", CI_YAML, "--sweep", "caches", "--dut", "mutant:" + m, "--jobs", "2", "--out", rings)
                    self.assertEqual(r.returncode, 0, r.stdout[-1500:])
            s = self.controls_pass(tmp, "paged", numpy_dut)
            self.assertEqual(set(s["page_size"].tolist()), {1, 3, 4, 5, 16, 64, 4096})
            self.assertTrue(np.all(s["pool_pages"] > 0))
            out = os.path.join(tmp, "exec-fault.h5")
            r = run("run", CI_YAML, "--sweep", "paged", "--jobs", "2", "--out", out,
                    "--dut", f"exec:/usr/bin/python3 {numpy_dut} --fault page-table-ignored --no-cache-per-call")
            self.assertEqual(r.returncode, 1, r.stdout[-1500:])
            # Its cache returned once (the describe answer's cache_per_call = 0): checked at the end. The
            # console shows a few rows per group: the reasons are read from the file.
            with h5py.File(out) as f:
                reasons = [x.decode() if isinstance(x, bytes) else x for x in results_table(f)["reason"]]
            pattern = (r"KV cache differs from the golden cache model in \d+ places, first at the end of the schedule, "
                       r".*: sequence 0 position \d+ \(physical page \d+ slot \d+\) holds position \d+, expected position \d+")
            self.assertTrue(any(re.search(pattern, x) for x in reasons), reasons[:5])

    def test_fp8_kv_mutants_are_caught_and_the_descales_recorded(self):
        """The FP8 faults fail the fp8_kv sweep and pass a sweep without FP8 (there they are correct
        kernels); the controls, the numpy exec DUT (protocol 4) and the C example plugin pass it; the
        exec DUT's planted FP8 faults fail; /scenarios records kv_dtype and descales that are not powers of two."""
        numpy_dut = os.path.join(os.path.dirname(CI_YAML), "..", "dut", "external", "examples", "numpy_dut.py")
        with tempfile.TemporaryDirectory() as tmp:
            for m in ("fp8_no_saturation", "fp8_descale_twice"):
                with self.subTest(m):
                    out = os.path.join(tmp, m + ".h5")
                    r = run("run", CI_YAML, "--sweep", "fp8_kv", "--dut", "mutant:" + m, "--jobs", "2", "--out", out)
                    self.assertEqual(r.returncode, 1, r.stdout[-1500:])
                    statuses = [v[0] for v in rows(out).values()]
                    self.assertGreater(statuses.count("fail"), len(statuses) // 3 if m == "fp8_no_saturation" else len(statuses) - 1)
                    plain = os.path.join(tmp, m + "-caches.h5")
                    r = run("run", CI_YAML, "--sweep", "sinks", "--dut", "mutant:" + m, "--jobs", "2", "--out", plain)
                    self.assertEqual(r.returncode, 0, r.stdout[-1500:])
            s = self.controls_pass(tmp, "fp8_kv", numpy_dut)
            kinds = {x.decode() if isinstance(x, bytes) else x for x in s["kv_dtype"]}
            self.assertEqual(kinds, {"fp8-e4m3", "fp8-e5m2"})
            descales = np.concatenate([s["k_descale"], s["v_descale"]])
            self.assertTrue(np.all(descales > 0))
            # Calibration scales, not powers of two (which FP8's grid is blind to), V's not a power
            # of two times K's (harness/src/case/inputs.cpp).
            off = lambda x: np.abs(np.log2(x) - np.round(np.log2(x)))
            self.assertTrue(np.all(off(descales) > 0.05), descales)
            self.assertTrue(np.all(off(s["v_descale"] / s["k_descale"]) > 0.1))
            self.assertGreater(len(set(s["k_descale"].tolist())), 2)  # seeds draw different descales
            for fault, every in (("fp8-descale-twice", True), ("fp8-no-saturation", False)):
                with self.subTest(fault):
                    out = os.path.join(tmp, fault + ".h5")
                    r = run("run", CI_YAML, "--sweep", "fp8_kv", "--jobs", "2", "--out", out,
                            "--dut", f"exec:/usr/bin/python3 {numpy_dut} --fault {fault}")
                    statuses = [v[0] for v in rows(out).values()]
                    self.assertEqual(r.returncode, 1, r.stdout[-1500:])
                    if every:
                        self.assertEqual(set(statuses), {"fail"})
                    else:
                        self.assertGreater(statuses.count("fail"), len(statuses) // 3)

    def test_precision_loss_of_three_bits_fails_in_fp16_and_bf16(self):
        """P or the scores rounded to 3 fewer mantissa bits than the dtype fail in fp16 and bf16. In fp32
        3 bits sit inside the spread of correct kernels (docs/measurements/2026-11-27-tolerance-calibration.md); the scores'
        loss fails there from 4 bits on, which this cannot show with a 3-bit mutant."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "p.h5")
            run("run", CI_YAML, "--dut", "mutant:p_low_precision,mutant:scores_low_precision", "--jobs", "2", "--out", out)
            with h5py.File(out) as f:
                r = results_table(f)
            status = np.array([s.decode() for s in r["status"]])
            dtype = np.array([s.decode() for s in r["dtype"]])
            for dt in ("fp16", "bf16"):
                self.assertGreater(((status == "fail") & (dtype == dt)).sum() / (dtype == dt).sum(), 0.5, dt)


class Verdicts(unittest.TestCase):
    """Warnings are visible everywhere a user looks; profiles change the limits and are recorded."""
    DECODE_FP16 = ["--sweep", "batches_and_gqa", "--filter", "mode=decode", "--dut", "mutant:fp16_pv_decode_only"]

    def test_a_precision_warning_shows_in_console_junit_and_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, junit, report = (os.path.join(tmp, n) for n in ("r.h5", "r.xml", "report"))
            r = run("run", CI_YAML, *self.DECODE_FP16, "--out", out, "--junit", junit)
            warned = [k for k, v in rows(out).items() if v[0] == "warn"]
            self.assertGreater(len(warned), 0, r.stdout[-2000:])
            self.assertIn("warnings: passed, with precision below a same-precision kernel's", r.stdout)
            self.assertRegex(r.stdout, r"\(\d+ of the passed with a precision warning\)")
            with h5py.File(out) as f:
                res = results_table(f)
            for x in res:
                if x["status"].decode() == "warn":
                    self.assertEqual(x["profile"].decode(), "default")
                    self.assertEqual(x["worst_phase"].decode(), "decode")  # the prompt rows are right
                    self.assertGreater(x["l2_ratio"], x["warn_l2_factor"])
            root = ET.parse(junit).getroot()
            flagged = [c for c in root.findall(".//testcase") if c.find("properties/property[@value='warn']") is not None]
            self.assertEqual(len(flagged), len(warned))
            self.assertIn("WARNING: warning: relative L2 error in phase decode", flagged[0].find("system-out").text)
            self.assertEqual(run("report", out, "-o", report).returncode, 0)
            with open(os.path.join(report, "report.html")) as f:
                self.assertIn(f"Precision warnings ({len(warned)})", f.read())
            with open(os.path.join(report, "summary.md")) as f:
                self.assertIn(f"{len(warned)} warnings", f.read())

    def test_profiles_move_the_limits_and_are_recorded(self):
        with tempfile.TemporaryDirectory() as tmp:
            verdicts = {}
            for profile in ("strict", "default", "loose"):
                out = os.path.join(tmp, profile + ".h5")
                run("run", CI_YAML, *self.DECODE_FP16, "--tolerance-profile", profile, "--out", out)
                with h5py.File(out) as f:
                    res = results_table(f)
                self.assertEqual({p.decode() for p in res["profile"]}, {profile})
                verdicts[profile] = sorted(s.decode() for s in res["status"])
            self.assertNotIn("warn", verdicts["strict"])
            self.assertGreater(verdicts["strict"].count("fail"), verdicts["default"].count("fail"))
            self.assertEqual(set(verdicts["loose"]), {"pass"})  # llama.cpp's NMSE bound lets it through
            r = run("run", CI_YAML, "--tolerance-profile", "lenient", "--out", os.path.join(tmp, "x.h5"))
            self.assertEqual(r.returncode, 2)
            self.assertIn("option --tolerance-profile: 'lenient' is not one of strict|default|loose", r.stderr)


class CrashSafety(unittest.TestCase):
    # Without the golden cache: with a warm one the sweep could end before the kill lands (as it did
    # with a user's filled cache), which made the test depend on what earlier runs left behind.
    SWEEP = ["--sweep", "caches", "--dut", "baseline,mutant:none", "--no-golden-cache"]

    def test_kill_9_then_resume_gives_the_rows_of_an_uninterrupted_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            full, killed = os.path.join(tmp, "full.h5"), os.path.join(tmp, "killed.h5")
            self.assertEqual(run("run", CI_YAML, *self.SWEEP, "--out", full).returncode, 0)
            proc = subprocess.Popen([HARNESS, "run", CI_YAML, *self.SWEEP, "--out", killed],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 120
            while time.time() < deadline:
                time.sleep(0.05)
                if os.path.exists(killed) and len(rows(killed)) >= 6:
                    break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            partial = rows(killed)  # readable right after kill -9
            self.assertGreater(len(partial), 0)
            self.assertLess(len(partial), len(rows(full)), "killed too late to test anything")
            r = run("run", CI_YAML, *self.SWEEP, "--out", killed, "--resume")
            self.assertEqual(r.returncode, 0, r.stderr[-1000:])
            resumed = rows(killed)
            self.assertEqual(sorted(resumed), sorted(rows(full)))  # same rows, no duplicates
            with h5py.File(killed) as f:
                self.assertEqual(len(f["results"]), len(resumed))
            for key, value in rows(full).items():
                self.assertEqual(resumed[key], value, key)

    def test_every_scenario_the_console_calls_finished_is_in_the_file_after_kill_9(self):
        # Commits are batched (results_store.hpp); a progress line waits for its commit. The whole
        # ci.yaml, so that the kill lands before the end: one of its sweeps (63 scenarios) took 0.2 s
        # on a 2-core Zen 5 with a warm golden cache and had ended before this test's kill.
        total = len(run("list", CI_YAML).stdout.split())
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            proc = subprocess.Popen([HARNESS, "run", CI_YAML, "--dut", "cpu", "--jobs", "2",
                                     "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            printed = []
            for line in proc.stderr:
                if line.startswith("["):
                    printed.append(line.split()[1])
                if len(printed) >= 25:
                    break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
            self.assertGreaterEqual(len(printed), 25, "the sweep ended before it could be killed")
            stored = {scenario for scenario, _ in rows(out)}
            self.assertLess(len(stored), total, "killed too late to test anything")
            self.assertEqual([s for s in printed if s not in stored], [])

    def test_shards_merge_into_the_whole(self):
        with tempfile.TemporaryDirectory() as tmp:
            whole = os.path.join(tmp, "whole.h5")
            self.assertEqual(run("run", CI_YAML, *self.SWEEP, "--out", whole).returncode, 0)
            parts = []
            for k in range(3):
                parts.append(os.path.join(tmp, f"part{k}.h5"))
                self.assertEqual(run("run", CI_YAML, *self.SWEEP, "--shard", f"{k}/3", "--out", parts[-1]).returncode, 0)
            merged = os.path.join(tmp, "all.h5")
            r = run("merge", *parts, "-o", merged)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(rows(merged), rows(whole))

    def test_results_do_not_depend_on_the_job_count(self):
        with tempfile.TemporaryDirectory() as tmp:
            one, two = os.path.join(tmp, "one.h5"), os.path.join(tmp, "two.h5")
            self.assertEqual(run("run", CI_YAML, "--sweep", "head_sizes", "--jobs", "1", "--out", one).returncode, 0)
            self.assertEqual(run("run", CI_YAML, "--sweep", "head_sizes", "--jobs", "2", "--out", two).returncode, 0)
            self.assertEqual(rows(one), rows(two))


class Outputs(unittest.TestCase):
    def test_results_file_schema_and_junit(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, junit = os.path.join(tmp, "r.h5"), os.path.join(tmp, "r.xml")
            r = run("run", CI_YAML, "--sweep", "inputs", "--dut", "baseline,mutant:no_max_subtraction",
                    "--out", out, "--junit", junit)
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stdout, r"swa-harness run .* --filter '.*' --dut mutant:no_max_subtraction")
            with h5py.File(out) as f:
                for key in ("tool_version", "git_commit", "compiler", "host", "cpu", "gpu", "start_time", "sweep_text"):
                    self.assertIn(key, f["meta"].attrs)
                kernels = f["meta"].attrs["cpu_kernels"]
                kernels = kernels.decode() if isinstance(kernels, bytes) else kernels
                self.assertRegex(kernels, r"GEMM \(Eigen, run time\): (x86-64|x86-64-v3|x86-64-v4|native) kernels, \S+; "
                                          r"fp16/bf16 conversion \(run time\): (avx2\+f16c|portable)")
                res, sc = f["results"], f["scenarios"]
                self.assertEqual(res.maxshape, (None,))
                self.assertIsNotNone(res.chunks)
                for field in ("max_abs", "max_rel", "mean_abs", "rms", "rel_l2", "nmse", "max_ulp", "mean_ulp",
                              "cosine", "over_threshold", "worst_seq", "worst_token", "worst_head", "worst_dim",
                              "worst_window_edge", "baseline_max_abs", "rtol_factor", "atol_floor", "threshold",
                              "run_ms", "reason"):
                    self.assertIn(field, res.dtype.names)
                self.assertEqual(len(res), 2 * len(sc))
                table = results_table(f)
                status = [s.decode() for s in table["status"]]
                nan_rows = table[np.array([s == "fail" for s in status])]
                self.assertTrue((nan_rows["nan_count"] > 0).any(), "large logits overflow without the max subtraction")
            root = ET.parse(junit).getroot()
            cases = root.findall(".//testcase")
            self.assertEqual(len(cases), len(status))
            self.assertEqual(len(root.findall(".//failure")), status.count("fail"))


if __name__ == "__main__":
    HARNESS = os.path.abspath(sys.argv.pop(1))
    CI_YAML = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
