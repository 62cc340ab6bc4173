#!/usr/bin/env python3
"""The copies of the kernel field list that are not generated from it are held to it: the list is
SWA_KERNEL_FIELDS in golden/include/swa/kernel_fields.hpp, X(FIELD, MEMBER, MINOR, EXEC).
  - dut/python/exec_adapter.py builds the python: glue's params from an exec request: its fields dict
    has every FIELD and no other, and it reads every EXEC attribute of the request (but those it takes
    from the arrays' shapes);
  - the Python bindings' problem(scenario) (harness/python/core.cpp, generated from the list) has
    every EXEC name as an attribute, with the value the exec request carries.
A field added to the list and forgotten in one of them turns this red.

usage: test_field_list.py PATH/TO/swa-harness SOURCE_DIR PYTHON_PACKAGE_DIR CI_YAML
"""
import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HARNESS = SOURCE = PACKAGE = CI = None
# A paged FP8 decode case with sinks and a soft-cap (every minor version's fields), and a plain prefill.
CASES = ["mode=decode/seqs=70-1-33/hq=6/hkv=2/d=64/w=12/chunk=7/steps=8/cache=paged/page=3/mask=none/cap=5/"
         "sinks=learned/fp16/kv=fp8-e5m2/in=normal/seed=15",
         "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp16/in=normal/seed=1"]
# exec_adapter.py takes these from the shapes of /q and /k rather than from their attributes.
FROM_SHAPES = {"heads", "kv_heads", "head_size"}


def field_list():
    text = pathlib.Path(SOURCE, "golden/include/swa/kernel_fields.hpp").read_text()
    entries = re.findall(r'X\((\w+), ([\w.]+), (\d+), "(\w*)"\)', text)
    if len(entries) < 30:
        raise AssertionError(f"kernel_fields.hpp: {len(entries)} X(...) entries read; the list's form changed")
    return [{"field": f, "member": m, "minor": int(n), "exec": e} for f, m, n, e in entries]


def adapter_fields_dict():
    """The keys of Schedule.__init__'s self.fields = {...} in exec_adapter.py, and the names it reads with attr()."""
    tree = ast.parse(pathlib.Path(SOURCE, "dut/python/exec_adapter.py").read_text())
    keys, read = None, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "fields" for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            keys = [k.value for k in node.value.keys]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "attr" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant):
            read.add(node.args[1].value)
    if keys is None:
        raise AssertionError("exec_adapter.py: no self.fields = {...} dict found")
    return keys, read


class FieldList(unittest.TestCase):
    def test_the_exec_adapter_builds_every_field_and_reads_every_attribute(self):
        listed = field_list()
        keys, read = adapter_fields_dict()
        names = [e["field"] for e in listed]
        self.assertEqual(len(keys), len(set(keys)), "exec_adapter.py's fields dict names a field twice")
        self.assertEqual(sorted(set(names) - set(keys)), [], "fields of the list exec_adapter.py does not build")
        self.assertEqual(sorted(set(keys) - set(names)), [], "fields exec_adapter.py builds that the list lacks")
        attributes = {e["exec"] for e in listed if e["exec"]}
        self.assertEqual(sorted(attributes - read - FROM_SHAPES), [],
                         "exec request attributes exec_adapter.py never reads")

    def request_of(self, case):
        """The exec request `run` writes for the case, copied out by a DUT that answers nothing."""
        tmp = tempfile.mkdtemp(prefix="swa-field-list-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        copy = os.path.join(tmp, "request.h5")
        dut = f"exec:/usr/bin/python3 -c 'import shutil, sys; shutil.copy(sys.argv[1], \"{copy}\")'"
        subprocess.run([HARNESS, "run", CI, "--filter", case, "--dut", dut, "--out", os.path.join(tmp, "r.h5"),
                        "--no-golden-cache"], capture_output=True, text=True, timeout=300)
        self.assertTrue(os.path.isfile(copy), f"{case}: no request was written")
        with h5py.File(copy, "r") as f:
            return dict(f.attrs)

    def test_a_problem_has_every_exec_attribute_as_the_request_carries_it(self):
        sys.path.insert(0, PACKAGE)
        import swa_harness
        listed = field_list()
        for case in CASES:
            (scenario,) = swa_harness.scenarios(CI, filter=case + "$")
            p = swa_harness.problem(scenario)
            request = self.request_of(case)
            for e in (e for e in listed if e["exec"]):
                name = e["exec"]
                self.assertTrue(hasattr(p, name), f"{case}: problem has no .{name}")
                if name in request:  # a request leaves out the fields of minor versions the case does not use
                    want = request[name].decode() if isinstance(request[name], bytes) else request[name]
                    got = getattr(p, name)
                    if isinstance(got, float):
                        self.assertEqual(np.float32(got), np.float32(want), f"{case}: .{name}")
                    else:
                        self.assertEqual(got, want, f"{case}: .{name}")
            minors = {e["minor"] for e in listed if e["exec"] in request}
            if case == CASES[0]:
                self.assertEqual(minors, {0, 1, 2, 3}, f"{case}: the request should carry every minor's fields")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    HARNESS, SOURCE, PACKAGE, CI = sys.argv[1:5]
    unittest.main(argv=[sys.argv[0]] + sys.argv[5:], verbosity=2)
