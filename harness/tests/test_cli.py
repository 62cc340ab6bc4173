#!/usr/bin/env python3
"""End-to-end checks of the swa-harness command line, independent of the C++ code: the ATB doc's
own numpy mask samples, and attention recomputed in numpy from the inputs the golden file holds.

usage: test_cli.py PATH/TO/swa-harness
"""
import html
import os
import re
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HARNESS = None
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run(*args):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, timeout=600)


def doc_swa_norm_mask(maxseq, window_size, fill):
    # Verbatim from the ATB SelfAttention doc (MASK_TYPE_SLIDING_WINDOW_NORM, python sample).
    swa_mask = np.ones(shape=[maxseq, maxseq]) * fill
    triu_mask = np.triu(swa_mask, 1)
    tril_mask = np.tril(swa_mask, -window_size)
    return triu_mask + tril_mask


def doc_swa_compress_mask(window_size, head_size, fill):
    # Verbatim from the ATB SelfAttention doc (MASK_TYPE_SLIDING_WINDOW_COMPRESS, python sample).
    swa_mask = np.ones(shape=(1, 512, 512)) * fill
    pp_n = 128 if head_size <= 128 else 64
    if window_size <= pp_n * 3:
        true_size = window_size
    else:
        if window_size % pp_n == 0:
            true_size = pp_n * 3
        else:
            true_size = pp_n * 2 + window_size % pp_n
    triu_mask = np.triu(swa_mask, 1)
    tril_mask = np.tril(swa_mask, -true_size)
    return (triu_mask + tril_mask)[0], true_size


def numpy_attention(q, k, v, seq_lens, window, scale):
    """Dense SWA in float64: query i sees key j iff i - window < j <= i."""
    n, hq, d = q.shape
    hkv = k.shape[1]
    out = np.zeros((n, hq, d))
    start = 0
    for length in seq_lens:
        qs, ks, vs = (t[start:start + length].astype(np.float64) for t in (q, k, v))
        i = np.arange(length)[:, None]
        j = np.arange(length)[None, :]
        visible = (j <= i) & (i - window < j)
        for h in range(hq):
            g = h // (hq // hkv)
            scores = scale * qs[:, h, :] @ ks[:, g, :].T
            scores = np.where(visible, scores, -np.inf)
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            out[start:start + length, h, :] = p @ vs[:, g, :]
        start += length
    return out


class DutKinds(unittest.TestCase):
    def test_the_readmes_table_of_duts_is_list_duts_and_every_kind_is_known_to_run(self):
        r = run("list", "--duts")
        self.assertEqual(r.returncode, 0, r.stderr)
        table = r.stdout
        with open(os.path.join(ROOT, "harness", "README.md")) as f:
            self.assertTrue(table in f.read(), "harness/README.md's table of DUTs is not `swa-harness list --duts`: paste it")
        names = re.findall(r"^\| `([^`]+)` \|", table, re.M)
        self.assertEqual(len(names), 7, table)
        # --dut's help and an unknown name's message come from the same table.
        help_text = " ".join(run("run", "--help").stdout.split())
        unknown = run("run", os.path.join(ROOT, "scenarios", "ci.yaml"), "--dut", "nosuch").stderr
        for name in names:
            self.assertIn(name.split("<")[0], help_text, name)
            self.assertIn(name.split("<")[0], unknown, name)
        self.assertEqual(run("list", "--duts", os.path.join(ROOT, "scenarios", "ci.yaml")).returncode, 2)


class MaskCommand(unittest.TestCase):
    def test_swa_norm_matches_the_doc_sample(self):
        with tempfile.TemporaryDirectory() as tmp:
            for dtype, fill in (("fp16", -65536.0), ("bf16", 1.0)):
                for window, maxseq in ((3, 5), (1, 9), (7, 7), (40, 12)):
                    path = os.path.join(tmp, "m.h5")
                    r = run("mask", "--type", "swa-norm", "--window", window, "--max-seq", maxseq, "--dtype", dtype,
                            "--out", path)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    with h5py.File(path) as f:
                        np.testing.assert_array_equal(f["mask"][:], doc_swa_norm_mask(maxseq, window, fill))
                        self.assertEqual(f["mask"].dtype, np.float32)
                        self.assertEqual(f["mask"].attrs["type"], "swa-norm")
                        if dtype == "fp16":
                            self.assertTrue(np.isneginf(f["mask"].attrs["fill_value_cast"]))

    def test_swa_compress_matches_the_doc_sample(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "c.h5")
            for head_size in (64, 128, 160, 256):
                for window in (3, 129, 384, 385, 512, 4096):
                    r = run("mask", "--type", "swa-compress", "--window", window, "--head-size", head_size,
                            "--dtype", "fp16", "--generator", "python", "--out", path)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    expected, true_size = doc_swa_compress_mask(window, head_size, -65536.0)
                    with h5py.File(path) as f:
                        np.testing.assert_array_equal(f["mask"][:], expected)
                        self.assertEqual(f["mask"].attrs["effective_window"], true_size)


class GoldenCommand(unittest.TestCase):
    CASES = [
        # (extra arguments, dtype)
        (["--seq-lens", "5,17", "--heads", "8", "--kv-heads", "2", "--head-size", "64", "--window", "4"], "fp32"),
        (["--seq-lens", "33,1,20", "--heads", "4", "--kv-heads", "1", "--head-size", "40", "--window", "7",
          "--chunk", "9", "--cache", "ring-compact"], "bf16"),
        (["--seq-lens", "12,30", "--heads", "4", "--kv-heads", "4", "--head-size", "72", "--window", "6",
          "--decode-steps", "8", "--cache", "linear"], "fp16"),
        (["--seq-lens", "12", "--heads", "2", "--kv-heads", "1", "--head-size", "16", "--window", "64",
          "--decode-steps", "5", "--inputs", "outlier"], "bf16"),
    ]

    def test_golden_equals_numpy_attention_on_its_own_inputs(self):
        with tempfile.TemporaryDirectory() as tmp:
            for args, dtype in self.CASES:
                path = os.path.join(tmp, "g.h5")
                r = run("golden", *args, "--dtype", dtype, "--seed", "3", "--out", path)
                self.assertEqual(r.returncode, 0, r.stderr)
                with h5py.File(path) as f:
                    self.assertEqual((f.attrs["problem_file_format"], f.attrs["kind"]), (1, "golden"))
                    self.assertIn(f["case"].attrs["id"], r.stdout)
                    q, k, v, out = f["q"][:], f["k"][:], f["v"][:], f["reference/out"][:]
                    seq_lens = f["seq_lens"][:]
                    window, scale = int(f["case"].attrs["window"]), float(f.attrs["scale"])
                    self.assertEqual(int(f.attrs["window_left"]), window - 1)
                    self.assertEqual(out.dtype, np.float64)
                    self.assertEqual(out.shape[0], seq_lens.sum())
                    ref = numpy_attention(q, k, v, seq_lens, window, scale)
                    self.assertGreater(np.abs(ref).max(), 0.1)
                    err = np.abs(out - ref).max() / np.abs(ref).max()
                    self.assertLess(err, 1e-12, f"{args} {dtype}")
                    if dtype == "fp16":
                        np.testing.assert_array_equal(q.astype(np.float16).astype(np.float32), q)
                    base = f["reference/baseline"][:]
                    rel = np.linalg.norm(base - out) / np.linalg.norm(out)
                    self.assertLess(rel, {"fp32": 1e-5, "fp16": 3e-3, "bf16": 3e-2}[dtype])
                    self.assertGreater(rel, 0.0)

    def test_same_seed_same_file_contents(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
            args = ["--seq-lens", "9", "--heads", "2", "--kv-heads", "1", "--head-size", "32", "--window", "3",
                    "--dtype", "bf16", "--seed", "11"]
            self.assertEqual(run("golden", *args, "--out", a).returncode, 0)
            self.assertEqual(run("golden", *args, "--out", b).returncode, 0)
            with h5py.File(a) as fa, h5py.File(b) as fb:
                for name in ("q", "k", "v", "reference/out", "reference/baseline"):
                    np.testing.assert_array_equal(fa[name][:], fb[name][:])


class BadInput(unittest.TestCase):
    GOOD = ["--seq-lens", "5", "--heads", "4", "--kv-heads", "2", "--head-size", "32", "--window", "3",
            "--dtype", "fp16", "--seed", "1"]

    def with_option(self, option, value):
        args = list(self.GOOD)
        if option in args:
            args[args.index(option) + 1] = value
        else:
            args += [option, value]
        return args

    def expect_refusal(self, args, pattern):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "x.h5")
            r = run(*args, "--out", out)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")
            self.assertRegex(r.stderr, pattern)
            self.assertEqual(os.listdir(tmp), [], "nothing may be written on bad input")

    def test_golden_refusals_name_the_option_and_range(self):
        cases = [
            (self.with_option("--kv-heads", "3"), r"--kv-heads: heads \(4\) must be a multiple of kv_heads \(3\)"),
            (self.with_option("--window", "-1"), r"--window: must be in \[0, "),
            (self.with_option("--heads", "0"), r"--heads: must be in \[1, 1024\], got 0"),
            (self.with_option("--mode", "decode"), r"--decode-steps: decode needs decode_steps >= 1"),
            ([*self.with_option("--window", "0"), "--mask", "swa-norm"], r"--mask: an SWA mask needs window > 0"),
            (self.with_option("--dtype", "fp64"), r"--dtype: 'fp64' is not one of fp32\|fp16\|bf16"),
            (self.with_option("--cache", "ring"), r"--cache: 'ring' is not one of ring-modulo\|ring-compact\|linear"),
            (self.with_option("--seq-lens", "5,x"), r"--seq-lens: expected an integer, got 'x'"),
            (self.with_option("--seq-lens", "0"), r"--seq-lens: must be in \[1, "),
            (self.with_option("--inputs", "gauss"), r"--inputs: 'gauss' is not one of normal\|uniform"),
            (self.with_option("--head-size", "abc"), r"head-size"),
            (self.with_option("--bogus", "1"), r"unrecognised option '--bogus'"),
            (self.with_option("--seq-lens", "16000000,16000000"), r"needs about .* over the limit of"),
        ]
        for args, pattern in cases:
            with self.subTest(pattern=pattern):
                self.expect_refusal(["golden", *args], pattern)
        r = run("golden", *self.GOOD)
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, r"option '--out' is required")

    def test_mask_refusals(self):
        self.expect_refusal(["mask", "--type", "swa-norm", "--window", "3", "--dtype", "fp16"],
                            r"--max-seq is required for --type swa-norm")
        self.expect_refusal(["mask", "--type", "dense", "--window", "3"], r"--type: 'dense' is not one of")
        self.expect_refusal(["mask", "--type", "swa-compress", "--window", "3", "--dtype", "fp32"],
                            r"ATB masks are fp16\|bf16")
        self.expect_refusal(["mask", "--type", "swa-compress", "--window", "3", "--generator", "cpp",
                             "--head-size", "2048"], r"--head-size must be in \[1, 1024\]")

    def test_unwritable_output_is_an_error_not_a_crash(self):
        r = run("golden", *self.GOOD, "--out", "/nonexistent-dir/x.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("directory /nonexistent-dir does not exist", r.stderr)

    def test_unknown_cpu_isa_setting_is_refused(self):
        # A misspelt SWA_CPU_ISA (here "avx2" for "avx2-decode") used to leave the default paths silently.
        env = {**os.environ, "SWA_CPU_ISA": "avx2"}
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "never-written.h5")
            for args in (["list", os.path.join(ROOT, "scenarios", "ci.yaml")], ["golden", *self.GOOD, "--out", out]):
                r = subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=600, env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("SWA_CPU_ISA='avx2'", r.stderr)
                self.assertIn("avx2-decode", r.stderr)
                self.assertFalse(os.path.exists(out))
        for allowed in ("portable", "avx2-decode", ""):
            r = subprocess.run([HARNESS, "list", os.path.join(ROOT, "scenarios", "ci.yaml")], capture_output=True,
                               text=True, timeout=600, env={**os.environ, "SWA_CPU_ISA": allowed})
            self.assertEqual(r.returncode, 0, f"SWA_CPU_ISA={allowed!r}: {r.stderr}")

    def test_the_printed_commands_paste_from_any_folder(self):
        """The console's rerun and bisect lines, pasted in another folder with the build off PATH: they
        name the binary and the files absolutely, write beside the results, and never over them."""
        with tempfile.TemporaryDirectory() as here, tempfile.TemporaryDirectory() as elsewhere:
            sweep = os.path.relpath(os.path.join(ROOT, "scenarios", "ci.yaml"), here)
            r = subprocess.run([HARNESS, "run", sweep, "--sweep", "window_edges", "--filter", "mode=prefill/.*/w=(16|50)/",
                                "--dut", "mutant:window_plus_one", "--out", "r.h5"],
                               cwd=here, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 1, r.stderr)
            with open(os.path.join(here, "r.h5"), "rb") as f:
                before = f.read()
            lines = [l.strip() for l in r.stdout.splitlines()]
            reruns = [l for l in lines if l.startswith(HARNESS + " run ")]
            diagnoses = [l[len("diagnose: "):] for l in lines if l.startswith("diagnose: ")]
            self.assertGreater(len(reruns), 0, r.stdout)
            self.assertEqual(len(diagnoses), 1, r.stdout)  # one group: one DUT, mode and dtype
            self.assertRegex(r.stdout, r"failures: \d+ in 1 group")
            env = dict(os.environ, PATH="/usr/bin:/bin")
            for line in (reruns[0], diagnoses[0]):
                with self.subTest(line.split()[1]):
                    p = subprocess.run(line, shell=True, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                                       env=env)
                    self.assertEqual(p.returncode, 1, line + "\n" + p.stdout[-1500:] + p.stderr[-1500:])
            self.assertTrue(os.path.exists(os.path.join(here, "rerun.h5")))
            self.assertTrue(os.path.exists(os.path.join(here, "bisect-1", "report.txt")))
            self.assertEqual(os.listdir(elsewhere), [])
            with open(os.path.join(here, "r.h5"), "rb") as f:
                self.assertEqual(f.read(), before, "a pasted command rewrote the run's results")

    def test_a_kernel_named_by_a_relative_path_pastes_too(self):
        """--dut python:mine.py:... typed relative to the run's folder: the printed rerun and bisect lines
        name the file absolutely, and so does the repro bisect writes."""
        example = os.path.join(ROOT, "dut", "external", "examples", "quickstart_kernel.py")
        with tempfile.TemporaryDirectory() as here, tempfile.TemporaryDirectory() as elsewhere:
            with open(example) as f:
                faulty = f.read().replace("i - j <= p.window_left", "i - j <= p.window_left + 1")
            with open(os.path.join(here, "mine.py"), "w") as f:
                f.write(faulty)
            sweep = os.path.relpath(os.path.join(ROOT, "scenarios", "ci.yaml"), here)
            r = subprocess.run([HARNESS, "run", sweep, "--filter",
                                "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/fp32/in=normal/seed=1",
                                "--dut", "python:mine.py:attention",
                                "--out", "r.h5"], cwd=here, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 1, r.stdout[-2000:] + r.stderr[-2000:])
            lines = [l.strip() for l in r.stdout.splitlines()]
            reruns = [l for l in lines if l.startswith(HARNESS + " run ")]
            diagnoses = [l[len("diagnose: "):] for l in lines if l.startswith("diagnose: ")]
            self.assertGreater(len(reruns), 0, r.stdout)
            mine = os.path.join(os.path.realpath(here), "mine.py")
            for line in (reruns[0], diagnoses[0]):
                self.assertIn("python:" + mine + ":attention", line.replace(here, os.path.realpath(here)))
                p = subprocess.run(line, shell=True, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                                   env=dict(os.environ, PATH="/usr/bin:/bin"))
                self.assertEqual(p.returncode, 1, line + "\n" + p.stdout[-1500:] + p.stderr[-1500:])
            # The repro bisect wrote reruns from any folder too.
            rerun = re.search(r"rerun it with\n +(.+)\n", p.stdout).group(1)
            q = subprocess.run(rerun, shell=True, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PATH="/usr/bin:/bin"))
            self.assertEqual(q.returncode, 1, rerun + "\n" + q.stdout[-1500:] + q.stderr[-1500:])
            # And the report's rerun lines, from the results file alone.
            rep = subprocess.run([HARNESS, "report", "r.h5", "-o", "report"], cwd=here, capture_output=True, text=True,
                                 timeout=600)
            self.assertEqual(rep.returncode, 0, rep.stderr)
            with open(os.path.join(here, "report", "report.html")) as f:
                lines = re.findall(r"<code>([^<]*--filter[^<]*)</code>", f.read())
            self.assertGreater(len(lines), 0)
            os.remove(os.path.join(here, "rerun.h5"))
            line = html.unescape(lines[0])
            p = subprocess.run(line, shell=True, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PATH="/usr/bin:/bin"))
            self.assertEqual(p.returncode, 1, line + "\n" + p.stdout[-1500:] + p.stderr[-1500:])
            self.assertTrue(os.path.exists(os.path.join(here, "rerun.h5")), line)
            self.assertEqual(os.listdir(elsewhere), [])

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^swa-harness \d+\.\d+\.\d+ \(commit \w+, .+\)\n$")

    def test_output_that_cannot_be_written_fails_the_command(self):
        """stdout on a full device (/dev/full): exit 3 and a message, never exit 0 with the list lost."""
        sweep = os.path.join(ROOT, "scenarios", "ci.yaml")
        for args in (["list", sweep], ["list", sweep, "--coverage"], ["mask-check", "--windows", "3"]):
            with self.subTest(args[-1]), open("/dev/full", "w") as full:
                r = subprocess.run([HARNESS, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=600)
                self.assertEqual(r.returncode, 3, r.stderr)
                self.assertRegex(r.stderr, r"cannot write to standard output \(No space left on device\)")

    def test_dut_memory_limit_refusals_name_the_option(self):
        sweep = os.path.join(ROOT, "scenarios", "ci.yaml")
        with tempfile.TemporaryDirectory() as tmp:
            for command in ("run", "bisect"):
                args = [command, sweep, "--dut", "cpu", "--dut-memory-mb", "-5", "--out", os.path.join(tmp, "x")]
                if command == "bisect":
                    args += ["--filter", "no-such-id"]
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertRegex(r.stderr, r"--dut-memory-mb must be in \[0, \d+\]")
                self.assertEqual(os.listdir(tmp), [])

    def test_unknown_command(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)


class PerfMode(unittest.TestCase):
    def test_perf_rows_count_flops_exactly_for_every_mode(self):
        # Attended pairs recounted here from the window; GFLOP/s = 4 D pairs Hq / time.
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "p.yaml")
            with open(sweep, "w") as f:
                f.write("sweeps:\n  p:\n    duts: [cpu]\n    matrix: {mode: [prefill, chunked_prefill, decode], "
                        "batch: [[10, 7]], heads: 4, kv_heads: 2, head_size: 32, window: 4, chunk: 3, decode_steps: 2}\n")
            out = os.path.join(tmp, "p.h5")
            r = run("run", sweep, "--perf", "--perf-repeats", "3", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with h5py.File(out) as f:
                rows = {x["mode"].decode(): x for x in f["perf"][:]}
            self.assertEqual(set(rows), {"prefill", "chunked_prefill", "decode"})
            window_pairs = lambda n: sum(min(i + 1, 4) for i in range(n))
            self.assertEqual(rows["prefill"]["pairs"], window_pairs(10) + window_pairs(7))
            self.assertEqual(rows["chunked_prefill"]["pairs"], window_pairs(10) + window_pairs(7))
            self.assertEqual(rows["decode"]["pairs"], 8)  # per step: every decode row sees W = 4 keys, 2 sequences
            for mode, x in rows.items():
                with self.subTest(mode):
                    self.assertEqual(x["repeats"], 3)
                    self.assertTrue(0 < x["min_ms"] <= x["time_ms"] <= x["max_ms"])
                    self.assertAlmostEqual(x["gflops"], 4 * 32 * x["pairs"] * 4 / (x["time_ms"] * 1e6), delta=1e-9 * x["gflops"])
                    self.assertGreater(x["ceiling_gflops"], 0)
                    self.assertEqual(x["timer"].decode(), "host wall clock")


class Checks(unittest.TestCase):
    def test_mask_check_exit_status_follows_the_chosen_pairing(self):
        self.assertEqual(run("mask-check", "--windows", "3,512").returncode, 0)
        r = run("mask-check", "--windows", "3,512", "--generator", "python", "--block-rule", "cpp")
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stdout, r"D=128 W=512 generator=python block-rule=cpp .*first at \(q=512, k=0")

    def test_self_check_passes(self):
        r = run("self-check")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertRegex(r.stdout, r"self-check: \d+ passed, 0 failed")


if __name__ == "__main__":
    HARNESS = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
