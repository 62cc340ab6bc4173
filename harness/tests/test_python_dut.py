#!/usr/bin/env python3
"""The python: DUT end to end: the NumPy example through ci.yaml and its faulty variants caught and
diagnosed; the arrays a kernel is given (p.mask, p.sinks) as dut/python/README.md says. Careless or
hostile kernels (raise, hang, exit, fork, print, allocate, wrong shapes and dtypes) and refused
targets are test_python_hostile.py's table.

The swa_harness module too: judge() against run on every ci.yaml scenario, and the pytest plugin
with the example kernels and a faulty variant.

usage: test_python_dut.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR PYTHON_PACKAGE_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = EXAMPLES = PACKAGE = None


def run(*args, timeout=900):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def faulty_run(test, tmp, dut, sweep):
    """ci.yaml's `sweep` through a DUT with a fault in it: exit 1; the run and the IDs of the rows
    that failed."""
    out = os.path.join(tmp, f"fault-{len(os.listdir(tmp))}.h5")
    r = run("run", CI, "--sweep", sweep, "--dut", dut, "--out", out, "--jobs", "2")
    test.assertEqual(r.returncode, 1, dut + "\n" + r.stdout[-2000:] + r.stderr[-2000:])
    return r, {s for s, (status, _) in rows(out).items() if status == "fail"}


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def rows(path):
    with h5py.File(path) as f:
        table = results_table(f)
    return {text(r["scenario_id"]): (text(r["status"]), text(r["reason"])) for r in table}


class NumpyExample(unittest.TestCase):
    def test_the_numpy_kernel_passes_ci_yaml_and_its_faults_fail(self):
        kernel = os.path.join(EXAMPLES, "numpy_kernel.py")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--dut", f"python:{kernel}:attention", "--out", out, "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            got = rows(out)
            listed = run("list", CI).stdout.split()
            self.assertEqual(len(got), len(listed))
            self.assertEqual({s for s, _ in got.values()}, {"pass"})
            # Each fault written into the kernel is caught, where it can be seen.
            for fault, seen in (("window-plus-one", lambda s: "/w=" in s), ("ring-slot-late", lambda s: "cache=ring" in s)):
                dut = f"python:{kernel}:attention:fault={fault}"
                r, failed = faulty_run(self, tmp, dut, "caches")
                self.assertTrue(failed, fault)
                self.assertTrue(all(seen(s) for s in failed), (fault, sorted(failed)[:3]))
                self.assertIn(f"--dut {dut}", r.stdout)  # the rerun line

    def test_bisect_names_the_faulty_variant_through_python(self):
        kernel = os.path.join(EXAMPLES, "numpy_kernel.py")
        scenario = "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/in=normal/seed=2"
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", f"python:{kernel}:attention:fault=window-plus-one",
                    "--out", os.path.join(tmp, "b"), "--json")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual((summary["class"], summary["reproduces"]), ("window_plus_one", True), summary["evidence"])

    def test_a_reading_that_a_probe_refutes_is_not_high(self):
        """Batch F's fault_12 (the GQA map rounded to nearest) reproduces exactly as 'h / Hkv' at Hq 8, Hkv 2;
        at twice the heads (the same groups) the two maps part ways: the reading is kept, at medium, with
        the probe that refutes it in its evidence."""
        kernel = os.path.join(os.path.dirname(EXAMPLES), "faults", "outside", "kernel_batch_f.py")
        scenario = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=1/mask=none/fp32/in=normal/seed=1"
        with tempfile.TemporaryDirectory() as tmp:
            r = run("bisect", CI, "--filter", scenario, "--dut", f"python:{kernel}:fault_12", "--out", os.path.join(tmp, "b"), "--json")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual((summary["class"], summary["confidence"]), ("kv_head_divided_by_kv_heads", "medium"), summary["evidence"])
            self.assertRegex("\n".join(summary["evidence"]), r"does not reproduce every case the DUT fails: on \S*hq=16/hkv=4")

    def test_bisect_finds_nothing_in_the_correct_python_kernels(self):
        """The numpy and quickstart kernels, on scenarios their faults fail: does_not_reproduce, no class."""
        cases = (("numpy_kernel.py", "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/in=normal/seed=2"),
                 ("quickstart_kernel.py", "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1"))
        with tempfile.TemporaryDirectory() as tmp:
            for i, (name, scenario) in enumerate(cases):
                with self.subTest(name):
                    dut = f"python:{os.path.join(EXAMPLES, name)}:attention"
                    r = run("bisect", CI, "--filter", scenario, "--dut", dut, "--out", os.path.join(tmp, str(i)), "--json")
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    summary = json.loads(r.stdout)
                    self.assertEqual((summary["reproduces"], summary["class"]), (False, "does_not_reproduce"))

    def test_the_torch_kernel_passes_or_skips_saying_why_and_its_faults_fail(self):
        """Where Debian's python3-torch is installed (scripts/bench-packages.txt) the PyTorch example
        passes feature_pairs and its two faults fail it; elsewhere every row is a skip naming torch."""
        kernel = os.path.join(EXAMPLES, "torch_kernel.py")
        have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--sweep", "feature_pairs", "--dut", f"python:{kernel}:attention", "--out", out, "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            got = rows(out)
            if not have_torch:
                self.assertEqual({s for s, _ in got.values()}, {"skip"})
                self.assertTrue(all("PyTorch is not installed" in why for _, why in got.values()))
                self.skipTest("python3-torch is not installed: the rows are skips that say so")
            self.assertEqual({s for s, _ in got.values()}, {"pass"})
            for fault, dtypes in (("repeat-not-interleave", {"fp32", "fp16", "bf16"}), ("p-fp16", {"fp32"})):
                _, failed = faulty_run(self, tmp, f"python:{kernel}:attention:fault={fault}", "feature_pairs")
                self.assertEqual({re.search(r"/(fp32|fp16|bf16)/", s).group(1) for s in failed}, dtypes, fault)
            scenario = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1"
            r = run("bisect", CI, "--filter", scenario, "--dut", f"python:{kernel}:attention:fault=repeat-not-interleave",
                    "--out", os.path.join(tmp, "b"), "--json")
            self.assertEqual(json.loads(r.stdout)["class"], "gqa_modulo_mapping", r.stdout[-2000:] + r.stderr[-2000:])

    def test_the_exec_adapter_runs_the_same_kernel_as_an_exec_dut(self):
        """dut/python/exec_adapter.py: the numpy kernel as an exec: DUT passes the caches sweep (every
        cache kind, call by call), its fault fails there, and --record/--time time it in one process."""
        kernel = os.path.join(EXAMPLES, "numpy_kernel.py")
        adapter = os.path.join(os.path.dirname(EXAMPLES), "..", "python", "exec_adapter.py")
        with tempfile.TemporaryDirectory() as tmp:
            record = os.path.join(tmp, "requests")
            os.mkdir(record)
            for fault, code in (("", 0), (":fault=ring-slot-late", 1)):
                out = os.path.join(tmp, f"r{code}.h5")
                dut = f"exec:/usr/bin/python3 {shlex.quote(adapter)} --record {record} {kernel}:attention{fault}"
                r = run("run", CI, "--sweep", "caches", "--dut", dut, "--out", out, "--jobs", "2")
                self.assertEqual(r.returncode, code, r.stdout[-2000:] + r.stderr[-2000:])
                statuses = {s for s, _ in rows(out).values()}
                self.assertEqual(statuses, {"pass"} if code == 0 else {"pass", "fail"}, fault)
            timed = subprocess.run(["/usr/bin/python3", adapter, "--time", record, f"{kernel}:attention"],
                                   capture_output=True, text=True, timeout=600)
            self.assertEqual(timed.returncode, 0, timed.stderr)
            self.assertRegex(timed.stdout, r"^\d+ requests, \d+ calls of the function, 0 failed or declined: [\d.]+ s inside Python")

    def test_the_quickstart_kernel_that_returns_its_output(self):
        kernel = os.path.join(EXAMPLES, "quickstart_kernel.py")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--dut", f"python:{kernel}:attention", "--out", out, "--filter", "mode=prefill/seqs=70-1-33/")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            got = rows(out)
            passed = [s for s, (status, _) in got.items() if status == "pass"]
            self.assertTrue(passed)
            for s, (status, reason) in got.items():  # what it does not describe is a skip that says so
                if status != "pass":
                    self.assertEqual(status, "skip", (s, reason))
                    self.assertRegex(reason, r"describes itself as running|it does not describe (sinks|softcap|two-sided)")


class PerfTimer(unittest.TestCase):
    """run --perf labels each row with whose clock timed it: the kernel's own (p.kernel_ms, set in
    every call), the host's wall clock (a kernel that never sets it: the glue reports no time of its
    own for it), or mixed, counted per call (set in some chunks only)."""

    KERNELS = """
        from numpy_kernel import attention as good

        def timed(p):
            good(p)
            p.kernel_ms = 7.25

        def untimed(p):
            good(p)

        def first_chunk_timed(p):
            good(p)
            if p.call != "chunked_prefill" or p.index == 0:
                p.kernel_ms = 1.5
    """
    PREFILL = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1$"
    CHUNKED = "mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=33/cache=linear/mask=none/fp32/in=normal/seed=2$"

    def test_the_timer_says_whose_clock_it_is(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "clocks.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(self.KERNELS))
            with open(os.path.join(EXAMPLES, "numpy_kernel.py")) as src, open(os.path.join(tmp, "numpy_kernel.py"), "w") as dst:
                dst.write(src.read())
            duts = {name: f"python:{path}:{name}" for name in ("timed", "untimed", "first_chunk_timed")}
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--filter", f"{self.PREFILL}|{self.CHUNKED}", "--perf", "--perf-repeats", "2",
                    "--out", out, "--dut", ",".join(duts.values()))
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            with h5py.File(out) as f:
                perf = {(text(x["dut"]), text(x["mode"])): (text(x["timer"]), float(x["time_ms"])) for x in f["perf"][:]}
        self.assertEqual(len(perf), 6, perf)
        self.assertEqual(perf[(duts["timed"], "prefill")], ("DUT's own timing", 7.25))
        self.assertEqual(perf[(duts["timed"], "chunked_prefill")], ("DUT's own timing", 7.25 * 3))  # 3 chunks of 33
        for mode in ("prefill", "chunked_prefill"):
            timer, ms = perf[(duts["untimed"], mode)]
            self.assertEqual(timer, "host wall clock", mode)
            self.assertGreater(ms, 0)
        self.assertEqual(perf[(duts["first_chunk_timed"], "prefill")][0], "DUT's own timing")
        self.assertRegex(perf[(duts["first_chunk_timed"], "chunked_prefill")][0],
                         r"^mixed: DUT's own timing in \d+ of \d+ calls, host wall clock in the rest$")


class KernelArrays(unittest.TestCase):
    """p.mask and p.sinks as dut/python/README.md and harness/README.md say: in every call of a
    scenario with a mask format (each chunk, each decode step, an ATB decode with swa-norm too) a
    read-only float32 [mask_rows, mask_rows] (the longest sequence, or 512 for swa-compress); sinks
    float32 [heads_q]; None when absent."""

    RECORDER = """
        import json, os
        def record(p):
            shape = lambda x: None if x is None else [str(x.dtype), list(x.shape), bool(x.flags.writeable)]
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as f:
                f.write(json.dumps({"call": p.call, "mode": p.mode, "mask_format": p.mask_format, "mask": shape(p.mask),
                                    "mask_rows": p.mask_rows, "sinks": shape(p.sinks), "heads_q": p.heads_q,
                                    "longest": int(max(p.seq_lens))}) + "\\n")
            p.out[...] = 0
    """
    SCENARIOS = ("mode=decode/seqs=21-1-9/hq=4/hkv=4/d=64/w=6/chunk=0/steps=3/cache=ring-modulo/mask=swa-norm/fp32/|"
                 "mode=chunked_prefill/seqs=21-1-9/hq=6/hkv=2/d=64/w=6/chunk=4/cache=ring-modulo/mask=swa-(norm|compress)/fp32/|"
                 "mode=prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/mask=none/sinks=learned/fp32/in=normal/seed=8")

    def test_masks_and_sinks_in_every_call_as_documented(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "recorder.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(self.RECORDER))
            r = run("run", CI, "--filter", self.SCENARIOS, "--dut", f"python:{path}:record", "--out", os.path.join(tmp, "r.h5"))
            self.assertEqual(r.returncode, 1, r.stdout[-2000:] + r.stderr[-2000:])  # zeros: every row fails
            with open(os.path.join(tmp, "calls.jsonl")) as f:
                calls = [json.loads(line) for line in f]
        kinds = {(c["mode"], c["mask_format"], c["call"]) for c in calls}
        self.assertEqual(kinds, {("decode", "swa-norm", "chunked_prefill"), ("decode", "swa-norm", "decode_step"),
                                 ("chunked_prefill", "swa-norm", "chunked_prefill"),
                                 ("chunked_prefill", "swa-compress", "chunked_prefill"), ("prefill", "none", "prefill")})
        for c in calls:
            if c["mask_format"] == "none":
                self.assertIsNone(c["mask"], c)
            else:
                rows = 512 if c["mask_format"] == "swa-compress" else c["longest"]
                self.assertEqual(c["mask"], ["float32", [rows, rows], False], c)
                self.assertEqual(c["mask_rows"], rows, c)
            self.assertEqual(c["sinks"], ["float32", [c["heads_q"]], False] if c["mode"] == "prefill" else None, c)
        # ... and the sweep files' manual says so: an ATB decode with swa-norm gets the tensor.
        with open(os.path.join(os.path.dirname(CI), "..", "harness", "FORMATS.md")) as f:
            readme = " ".join(f.read().split())
        self.assertNotIn("no tensor is passed", readme)
        self.assertIn("the harness still passes the swa-norm tensor", readme)


class Module(unittest.TestCase):
    """import swa_harness, as a user would: a fresh interpreter with PYTHONPATH=build/python."""

    def python(self, code, *args, env=None, timeout=900):
        e = dict(os.environ, PYTHONPATH=PACKAGE, **(env or {}))
        return subprocess.run(["/usr/bin/python3", *args] + (["-c", code] if code else []), capture_output=True,
                              text=True, env=e, timeout=timeout, cwd=os.path.dirname(CI))

    def test_judge_gives_runs_verdict_and_metrics_for_every_ci_scenario(self):
        """run --dut baseline --dump all, then swa_harness.judge on each dumped output: the same
        status, reason and metrics (the cache, run time and DUT name aside: judge has no cache)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.h5")
            r = run("run", CI, "--dut", "baseline", "--out", out, "--dump", "all", "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            code = textwrap.dedent(f"""
                import json, sys, h5py, numpy as np, swa_harness
                sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
                from results_h5 import results_table
                f = h5py.File({out!r})
                rows = {{r["scenario_id"].decode(): r for r in results_table(f)}}
                skip = {{"dut", "dut_label", "dut_path", "run_ms", "cache_mismatches"}}  # judge() names its DUT "python"
                differ, judged = [], 0
                for s in swa_harness.scenarios({CI!r}):
                    row = rows[s.id]
                    v = swa_harness.judge(s, f["dumps"][s.id]["duts/0/out"][:])
                    judged += 1
                    for name in row.dtype.names:
                        if name in skip:
                            continue
                        a, b = row[name], v.row[name]
                        a = a.decode() if isinstance(a, bytes) else a
                        if name == "status":
                            a = a.lower()
                        same = a == b or (isinstance(b, float) and np.isnan(a) and np.isnan(b))
                        if not same:
                            differ.append((s.id, name, str(a)[:80], str(b)[:80]))
                print(json.dumps({{"judged": judged, "differ": differ[:10], "count": len(differ)}}))
            """)
            r = self.python(code)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            result = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(result["judged"], len(run("list", CI).stdout.split()))
            self.assertEqual(result["count"], 0, result["differ"])

    def test_the_exec_adapters_names_are_the_harnesss(self):
        """exec_adapter.py runs where only h5py and NumPy are, so it spells the enum names out; they
        must stay the golden's (swa_harness.choices(), from the same tables as the python: DUT's)."""
        adapter_dir = os.path.join(os.path.dirname(EXAMPLES), "..", "python")
        r = self.python(f"import json, sys, swa_harness\nsys.path.insert(0, {adapter_dir!r})\nimport exec_adapter\n"
                        "print(json.dumps([swa_harness.choices(), exec_adapter.CHOICES]))")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        harness_names, adapter_names = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertTrue(all(harness_names.values()), harness_names)
        self.assertEqual(adapter_names, harness_names)

    def test_the_version_is_the_tools(self):
        r = self.python("import swa_harness\nprint(swa_harness.__version__)")
        tool = subprocess.run([HARNESS, "--version"], capture_output=True, text=True, timeout=60).stdout.split()[1]
        self.assertEqual(r.stdout.strip(), tool, r.stderr)
        self.assertRegex(tool, r"^\d+\.\d+\.\d+$")

    def test_errors_are_exceptions_with_the_command_lines_words(self):
        r = self.python("import swa_harness\ntry:\n    swa_harness.scenarios('ci.yaml', sweep='nope')\n"
                        "except swa_harness.Error as e:\n    print('ERROR', e)")
        self.assertIn("ERROR", r.stdout, r.stderr)
        self.assertRegex(r.stdout, r"nope")
        r = self.python("import swa_harness\ns = swa_harness.scenarios('ci.yaml')[0]\ntry:\n"
                        "    swa_harness.judge(s, [[[0.0]]], profile='tight')\nexcept swa_harness.Error as e:\n    print('ERROR', e)")
        self.assertRegex(r.stdout, r"ERROR out must have the shape")

    def test_the_pytest_example_passes_and_its_faulty_variant_fails_with_the_reproduce_command(self):
        example = os.path.join(EXAMPLES, "test_python_kernels.py")
        with tempfile.TemporaryDirectory() as tmp:
            junit, out = os.path.join(tmp, "p.xml"), os.path.join(tmp, "p.h5")
            r = self.python(None, "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q", "-p", "no:cacheprovider",
                            example, "--swa-out", out, "--swa-junit", junit)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
            self.assertRegex(r.stdout, r"\d+ passed")
            self.assertTrue(os.path.exists(out) and os.path.exists(junit))
            r2 = run("report", out, "-o", os.path.join(tmp, "report"))
            self.assertEqual(r2.returncode, 0, r2.stderr[-2000:])
            # The faulty variant, on the caches sweep's scenarios: each fails with the command that reproduces it.
            r = self.python(None, "-m", "pytest", "-p", "swa_harness.pytest_plugin", "-q", "-p", "no:cacheprovider",
                            example, "-k", "test_numpy_kernel and ring", env={"SWA_KERNEL_FAULT": "window-plus-one"})
            self.assertEqual(r.returncode, 1, r.stdout[-3000:] + r.stderr[-3000:])
            self.assertRegex(r.stdout, r"\d+ failed")
            commands = re.findall(r"reproduce: (.*)", r.stdout)
            self.assertTrue(commands, r.stdout[-3000:])
            self.assertIn("numpy_kernel.py:attention:fault=window-plus-one", commands[0])
            self.assertRegex(r.stdout, r"diagnose: +\S+ bisect ")
            again = subprocess.run(shlex.split(commands[0].replace("repro.h5", os.path.join(tmp, "repro.h5"))),
                                   capture_output=True, text=True, timeout=600)
            self.assertEqual(again.returncode, 1, again.stdout[-2000:] + again.stderr[-2000:])  # it reproduces
            self.assertRegex(again.stdout, r"0 passed, 1 failed")


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES, PACKAGE = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    unittest.main(verbosity=2)
