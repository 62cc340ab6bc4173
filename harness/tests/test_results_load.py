#!/usr/bin/env python3
"""swa_harness.load(path) (harness/python/swa_harness/results.py): a results file as typed records,
checked cell by cell against h5py's own reading of the same file; to_pandas() where pandas is
installed (and its error where it is not); and each file that is not a results file (missing, a
folder, not HDF5, truncated, another HDF5 file, a problem file, a damaged row count) an
swa_harness.Error naming the path and why, the file left as it was.

usage: test_results_load.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR PYTHON_PACKAGE_DIR
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

HARNESS = CI = EXAMPLES = PACKAGE = None
swa_harness = None
# Two prefill scenarios, two dtypes, and a chunked one: the faulty NumPy kernel fails w=1's rows.
SCENARIOS = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/(fp32|fp16)/in=normal/seed=1$|" \
            "mode=chunked_prefill/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=33/cache=linear/mask=none/fp32/in=normal/seed=2$"
try:
    import pandas
except ImportError:
    pandas = None


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Load(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="swa-load-test-")
        cls.path = os.path.join(cls.tmp, "r.h5")
        kernel = os.path.join(EXAMPLES, "numpy_kernel.py")
        duts = f"cpu,python:{kernel}:attention:fault=window-plus-one"
        r = subprocess.run([HARNESS, "run", CI, "--filter", SCENARIOS, "--dut", duts, "--out", cls.path,
                            "--perf", "--perf-repeats", "1"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # the faulty kernel fails some rows

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_records_are_the_files_cells_typed(self):
        before = digest(self.path)
        r = swa_harness.load(self.path)
        self.assertEqual(digest(self.path), before)  # read only
        with h5py.File(self.path) as f:
            raw = {t: f[t][:] for t in ("results", "scenarios", "perf")}
            status_names = {v: k for k, v in h5py.check_enum_dtype(f["results"].dtype["status"]).items()}
            self.assertEqual(r.meta["tool_version"], f["meta"].attrs["tool_version"])
            self.assertEqual(r.meta["rows_results"], int(f["meta"].attrs["rows_results"]))
        self.assertIsInstance(r.meta["rows_results"], int)
        self.assertEqual(r.meta["tool_version"], swa_harness.__version__)
        for table in ("results", "scenarios", "perf"):
            records = getattr(r, table)
            self.assertEqual(len(records), len(raw[table]), table)
            self.assertGreater(len(records), 0, table)
            for record, row in zip(records, raw[table]):
                self.assertEqual(record._fields, row.dtype.names)
                for name in row.dtype.names:
                    got, cell = getattr(record, name), row[name]
                    if table == "results" and name == "status":
                        self.assertEqual(got, status_names[int(cell)])
                    elif isinstance(cell, bytes):
                        self.assertIs(type(got), str, name)
                        self.assertEqual(got, cell.decode())
                    elif np.issubdtype(row.dtype[name], np.integer):
                        self.assertIs(type(got), int, name)
                        self.assertEqual(got, int(cell))
                    else:
                        self.assertIs(type(got), float, name)
                        self.assertTrue(got == float(cell) or (np.isnan(got) and np.isnan(cell)), name)
        self.assertEqual(list(r), r.results)
        self.assertEqual(len(r), len(r.results))
        counts = r.counts()
        self.assertEqual(list(counts), ["pass", "warn", "fail", "skip", "error"])
        self.assertGreater(counts["fail"], 0)
        self.assertGreater(counts["pass"], 0)
        failing = next(x for x in r if x.status == "fail")
        self.assertEqual(failing.reason[:0], "")
        self.assertEqual(r.scenario(failing.scenario_id).id, failing.scenario_id)
        self.assertEqual(r.scenario(failing.scenario_id).window, 1)
        with self.assertRaisesRegex(swa_harness.Error, "no scenario 'mode=none' in /scenarios"):
            r.scenario("mode=none")
        self.assertIn("rows (", repr(r))

    def test_a_file_written_before_the_newer_columns_loads(self):
        old = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "results_before_kv_dtype.h5")
        r = swa_harness.load(old)
        self.assertEqual({x.status for x in r}, {"pass"})
        self.assertEqual(r.perf[0].timer, "host wall clock")
        self.assertNotIn("kv_dtype", r.scenarios[0]._fields)

    def test_to_pandas(self):
        r = swa_harness.load(self.path)
        if pandas is None:
            with self.assertRaisesRegex(swa_harness.Error, r"to_pandas\(\) needs pandas.*python3-pandas"):
                r.to_pandas()
            self.skipTest("pandas is not installed (Debian: python3-pandas): only its error was checked")
        df = r.to_pandas()
        self.assertEqual(list(df.columns), list(r.results[0]._fields))
        self.assertEqual(len(df), len(r))
        self.assertEqual(list(df.status.cat.categories), ["pass", "warn", "fail", "skip", "error"])
        self.assertEqual(int((df.status == "fail").sum()), r.counts()["fail"])
        self.assertEqual(df.max_abs.dtype, np.float64)
        self.assertEqual(len(r.to_pandas("scenarios")), len(r.scenarios))
        self.assertEqual(len(r.to_pandas("perf")), len(r.perf))
        with self.assertRaisesRegex(swa_harness.Error, r"to_pandas\(table='dumps'\): the tables are results, scenarios, perf"):
            r.to_pandas("dumps")

    def test_to_pandas_says_when_pandas_is_missing(self):
        code = ("import sys; sys.modules['pandas'] = None\nimport swa_harness\n"
                f"r = swa_harness.load({self.path!r})\n"
                "try:\n    r.to_pandas()\nexcept swa_harness.Error as e:\n    print(e)\n")
        env = dict(os.environ, PYTHONPATH=PACKAGE)
        out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"r\.h5: to_pandas\(\) needs pandas, which is not installed here \(Debian: apt-get install python3-pandas\)")

    def test_what_is_not_a_results_file_is_an_error_naming_it(self):
        tmp = os.path.join(self.tmp, "bad")
        os.makedirs(tmp, exist_ok=True)

        def write(name, data):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            return path

        with open(self.path, "rb") as f:
            whole = f.read()
        foreign = os.path.join(tmp, "foreign.h5")
        with h5py.File(foreign, "w") as f:
            f["results"] = np.arange(3)
        problem = os.path.join(tmp, "golden.h5")
        with h5py.File(problem, "w") as f:
            f.attrs["problem_file_format"] = 1
            f.attrs["kind"] = "golden"
        not_a_table = os.path.join(tmp, "not_a_table.h5")
        with h5py.File(not_a_table, "w") as f:
            f.create_group("meta").attrs["tool_version"] = "0.1.0"
            f.create_group("scenarios")
            f.create_group("results")
        damaged = os.path.join(tmp, "damaged.h5")
        shutil.copy(self.path, damaged)
        with h5py.File(damaged, "a") as f:
            f["meta"].attrs["rows_results"] = np.int64(999)
        cases = [
            (os.path.join(tmp, "missing.h5"), r"missing\.h5: no such file"),
            (tmp, r"bad: is a folder, not a results file"),
            (write("text.h5", b"scenario,status\n"), r"text\.h5: is not an HDF5 file"),
            (write("empty.h5", b""), r"empty\.h5: is not an HDF5 file"),
            (write("truncated.h5", whole[:len(whole) // 3]), r"truncated\.h5: (cannot be read|is not an HDF5 file)"),
            (foreign, r"foreign\.h5: is an HDF5 file but not a results file of swa-harness: it has no /meta, /scenarios"),
            (problem, r"golden\.h5: is a problem file \(kind golden\), not a results file"),
            (not_a_table, r"not_a_table\.h5: /results is not a table \(a Group\)"),
            (damaged, r"damaged\.h5: is damaged: /results holds \d+ rows, /meta says 999 \(rows_results\)"),
        ]
        for path, message in cases:
            with self.subTest(os.path.basename(path)):
                before = digest(path) if os.path.isfile(path) else None
                with self.assertRaisesRegex(swa_harness.Error, message):
                    swa_harness.load(path)
                self.assertEqual(digest(path) if os.path.isfile(path) else None, before)
                self.assertTrue(str(path) in str(self._last_error(path)))

    def _last_error(self, path):
        try:
            swa_harness.load(path)
        except swa_harness.Error as e:
            return e
        return None


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES, PACKAGE = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    sys.path.insert(0, PACKAGE)
    import swa_harness  # noqa: E402,F811
    unittest.main(verbosity=2)
