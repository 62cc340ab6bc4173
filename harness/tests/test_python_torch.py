#!/usr/bin/env python3
"""torch-native python: kernels (dut/python/README.md, "PyTorch"): p.torch(NAME) and p.tensors()
give torch tensors over the harness's memory (no copy, bf16 as torch.bfloat16, FP8 codes uint8,
without torch.from_numpy's read-only warning); a kernel that writes into an input through one is
the row's error naming the input; a returned torch tensor (bf16 too) is written to p.out; the
PyTorch example passes the prefill sweeps of ci.yaml. A NumPy kernel never imports torch.

Needs Debian's python3-torch (scripts/bench-packages.txt): without it every test but the NumPy one
is skipped and the script exits 77 saying so.

usage: test_python_torch.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = EXAMPLES = None
HAVE_TORCH = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
NO_TORCH = "python3-torch is not installed (Debian: apt-get install python3-torch; scripts/bench-packages.txt)"

# Every dtype, prefill and a cache (ring, paged), FP8 codes, sinks: 8 scenarios of ci.yaml.
VARIED = "|".join([
    "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/(fp32|fp16|bf16)/in=normal/seed=1$",
    "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/bf16/",
    "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/chunk=13/steps=10/cache=ring-modulo/mask=none/bf16/kv=fp8-e4m3/",
    "mode=decode/seqs=70-1-33/hq=6/hkv=2/d=64/w=12/chunk=7/steps=8/cache=paged/page=3/mask=none/cap=5/sinks=learned/fp16/kv=fp8-e5m2/",
    "mode=prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=16/mask=none/sinks=learned/fp32/",
])
PREFILL_ONE = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/bf16/in=normal/seed=1$"

KERNELS = r'''
    import sys
    import warnings

    import numpy as np
    import torch
    from torch_kernel import attention as torch_attention

    DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


    def describe():
        return {"name": "torch_checks"}


    def _address(a):
        return a.__array_interface__["data"][0]


    def _same_memory(t, a, dtype, name):
        assert t.dtype == dtype, f"{name}: {t.dtype}, not {dtype}"
        assert t.data_ptr() == _address(a), f"{name} is a copy"
        assert tuple(t.shape) == a.shape, f"{name}: shape {tuple(t.shape)} != {a.shape}"
        assert t.stride() == tuple(s // a.itemsize for s in a.strides), f"{name}: strides {t.stride()}"


    def checks(p):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch.from_numpy's warning for a read-only array raises here
            _checks(p)
        torch_attention(p)


    def _checks(p):
        t = p.tensors()  # each tensor made when first read
        for name in ("q", "k", "v", "out"):
            _same_memory(getattr(t, name), getattr(p, name), DT[p.dtype], name)
        _same_memory(t.seq_lens, p.seq_lens, torch.int32, "seq_lens")
        _same_memory(t.seq_offsets, p.seq_offsets, torch.int64, "seq_offsets")
        assert (t.sinks is None) == (p.sinks is None) and (t.mask is None) == (p.mask is None)
        if t.sinks is not None:
            _same_memory(t.sinks, p.sinks, torch.float32, "sinks")
        assert p.torch("q") is t.q, "a second p.torch('q') is another tensor"
        assert torch.equal(t.q.float(), torch.from_numpy(
            (p.q.astype(np.uint32) << 16).view(np.float32) if p.dtype == "bf16" else p.q.astype(np.float32))), "q's values"
        if p.cache is None:
            assert t.cache is None
        else:
            codes = p.cache.kv_format != "dtype"
            for name in ("k", "v"):
                _same_memory(getattr(t.cache, name), getattr(p.cache, name), torch.uint8 if codes else DT[p.dtype], "cache." + name)
            _same_memory(t.cache.tokens_written, p.cache.tokens_written, torch.int64, "cache.tokens_written")
            if p.cache.policy == "paged":
                _same_memory(p.cache.torch("page_table"), p.cache.page_table, torch.int32, "cache.page_table")
            else:
                assert p.cache.torch("page_table") is None
            assert p.cache.torch("k") is t.cache.k


    def writes_v(p):
        torch_attention(p)
        p.torch("v").add_(1)


    def writes_page_table(p):
        torch_attention(p)
        if p.cache is not None:
            p.cache.torch("page_table").fill_(0)


    def returns_a_bf16_tensor(p):
        torch_attention(p)
        return p.torch("out").clone()  # bf16 for a bf16 scenario: written back as its bits


    def asks_for_no_such_tensor(p):
        p.torch("qkv")
'''

NUMPY_ONLY = r'''
    import sys
    from numpy_kernel import attention as good


    def attention(p):
        assert "torch" not in sys.modules, "something imported torch for a NumPy kernel"
        good(p)
'''


def rows(path):
    with h5py.File(path) as f:
        return {r["scenario_id"].decode(): (r["status"].decode(), r["reason"].decode()) for r in results_table(f)}


class TorchKernels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="swa-torch-test-")
        for name in ("numpy_kernel.py", "torch_kernel.py"):
            shutil.copy(os.path.join(EXAMPLES, name), cls.tmp)
        for name, text in (("kernels.py", KERNELS), ("numpy_only.py", NUMPY_ONLY)):
            with open(os.path.join(cls.tmp, name), "w") as f:
                f.write(textwrap.dedent(text))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_kernel(self, function, scenarios, *args, module="kernels.py", code=None):
        out = os.path.join(self.tmp, f"{function}-{len(os.listdir(self.tmp))}.h5")
        dut = f"python:{os.path.join(self.tmp, module)}:{function}"
        r = subprocess.run([HARNESS, "run", CI, "--filter", scenarios, "--dut", dut, "--out", out, *args],
                           capture_output=True, text=True, timeout=600)
        if code is not None:
            self.assertEqual(r.returncode, code, r.stdout[-3000:] + r.stderr[-3000:])
        got = rows(out)
        self.assertTrue(got, r.stdout[-2000:] + r.stderr[-2000:])
        return got

    def assert_all(self, got, status, reason=None):
        for scenario, (s, why) in got.items():
            self.assertEqual(s, status, f"{scenario}: {why}")
            if reason:
                self.assertRegex(why, reason, scenario)

    def needs_torch(self):
        if not HAVE_TORCH:
            self.skipTest(NO_TORCH)

    def test_the_tensors_share_the_memory_in_each_dtype_and_cache(self):
        self.needs_torch()
        got = self.run_kernel("checks", VARIED, "--jobs", "2", code=0)
        self.assertGreaterEqual(len(got), 8)
        self.assert_all(got, "pass")

    def test_a_kernel_that_writes_into_an_input_is_an_error_naming_it(self):
        self.needs_torch()
        for args in ((), ("--in-process",)):
            with self.subTest(args=args):
                got = self.run_kernel("writes_v", PREFILL_ONE, *args, code=1)
                self.assert_all(got, "error", r"writes_v\(\) wrote into the read-only input p\.v \(through the tensor "
                                              r"p\.torch\('v'\) gave it")

    def test_a_kernel_that_writes_into_the_page_table_is_an_error_naming_it(self):
        self.needs_torch()
        paged = "mode=decode/seqs=70-1-33/hq=6/hkv=2/d=64/w=12/chunk=7/steps=8/cache=paged/page=3/mask=none/cap=5/sinks=learned/fp16/kv=fp8-e5m2/"
        got = self.run_kernel("writes_page_table", paged, code=1)
        self.assert_all(got, "error", r"wrote into the read-only input p\.cache\.page_table")

    def test_a_returned_bf16_tensor_is_written_to_out(self):
        self.needs_torch()
        self.assert_all(self.run_kernel("returns_a_bf16_tensor", PREFILL_ONE, code=0), "pass")

    def test_an_unknown_tensor_name_is_an_error_listing_the_names(self):
        self.needs_torch()
        got = self.run_kernel("asks_for_no_such_tensor", PREFILL_ONE, code=1)
        self.assert_all(got, "error", r"p\.torch\('qkv'\): not a tensor of the call; the names: q, k, v, out, .*cache\.page_table")

    def test_the_torch_example_passes_the_prefill_sweeps(self):
        """torch_kernel.py (on p.torch()) over every prefill scenario of ci.yaml: about 400, some seconds."""
        self.needs_torch()
        started = time.monotonic()
        got = self.run_kernel("attention", "mode=prefill", "--jobs", "2", module="torch_kernel.py", code=0)
        listed = subprocess.run([HARNESS, "list", CI, "--filter", "mode=prefill"], capture_output=True, text=True).stdout
        self.assertEqual(len(got), len(re.findall(r"^mode=prefill/", listed, re.M)))
        self.assertGreater(len(got), 300)
        self.assert_all(got, "pass")
        print(f"  {len(got)} prefill scenarios in {time.monotonic() - started:.1f} s", file=sys.stderr)

    def test_a_numpy_kernel_never_imports_torch(self):
        self.assert_all(self.run_kernel("attention", PREFILL_ONE, module="numpy_only.py", code=0), "pass")


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES = (os.path.abspath(a) for a in sys.argv[1:4])
    del sys.argv[1:4]
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if not HAVE_TORCH:
        print(f"skipped: {NO_TORCH}")
        sys.exit(77)
