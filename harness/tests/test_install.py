#!/usr/bin/env python3
"""Installing as users do (README.md, "Install"), end to end:

- `cmake --install BUILD --prefix P` into a temporary prefix: the binaries, the helpers, the header,
  the sweeps and examples, the Python package and the CMake package; no RPATH into the build tree.
- With the build tree and the source tree hidden (an unshare mount namespace over them, when the
  kernel allows one; said when not): a plugin built from the installed example with a 5-line
  CMakeLists and find_package(swa_harness); P/bin/swa-harness runs it on one scenario of the
  installed ci.yaml with PATH holding only P/bin, /usr/bin and /bin; the python: DUT, `report` and the
  installed `import swa_harness` work from P alone.
- A venv (`python3 -m venv --system-site-packages`, `pip install --no-build-isolation --no-index`
  on the source tree, reusing BUILD): V/bin/swa-harness --version, `import swa_harness` from outside
  the tree, pytest without -p (the pytest11 entry point) and with -p as well, and a rerun line the
  console printed pasted into a shell whose PATH is V/bin alone.

usage: test_install.py BUILD_DIR SOURCE_DIR
Exit 77 (skipped, with the reason) only when a Debian package it needs is missing.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

SKIPPED = 77
PYTHON = "/usr/bin/python3"
BUILD = SOURCE = None
TMP = PREFIX = VENV = None
HIDING = None  # the unshare prefix that hides BUILD and SOURCE, or None when the kernel refuses one
ONE = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=16/mask=none/fp32/in=normal/seed=1"  # a scenario of ci.yaml
SYSTEM_PATH = "/usr/bin:/bin"

PLUGIN_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(mine C)
find_package(swa_harness REQUIRED)
add_library(mine MODULE c_plugin.c)
target_link_libraries(mine PRIVATE swa_harness::dut m)
"""

PYTEST_FILE = """import swa_harness, numpy_kernel
@swa_harness.sweep({sweep!r}, filter={filter!r})
def test_kernel(scenario, swa_check): swa_check(scenario, numpy_kernel.attention)
"""


def missing_packages():
    """The Debian packages (scripts/debian-packages.txt) this test needs and cannot find."""
    checks = {
        "python3-venv": [PYTHON, "-c", "import ensurepip, venv"],
        "python3-pip": [PYTHON, "-m", "pip", "--version"],
        "python3-setuptools": [PYTHON, "-c", "import setuptools"],
        "python3-wheel": [PYTHON, "-c", "import wheel"],
        "python3-pytest": [PYTHON, "-c", "import pytest"],
    }
    missing = []
    for package, command in checks.items():
        if subprocess.run(command, capture_output=True).returncode != 0:
            missing.append(package)
    for tool, package in (("cmake", "cmake"), ("cc", "build-essential"), ("unshare", "util-linux")):
        if shutil.which(tool, path=SYSTEM_PATH) is None:
            missing.append(package)
    return missing


def environment(path, **extra):
    """A plain environment: PATH as given, no PYTHONPATH or build-tree overrides."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SWA_", "PYTHON", "VIRTUAL_ENV", "PYTEST")) and k != "PATH"}
    env["PATH"] = path
    env["HOME"] = TMP
    env["XDG_CACHE_HOME"] = os.path.join(TMP, "cache")  # not the build tree's test cache: it is hidden
    env.update(extra)
    return env


def hiding_prefix():
    """`unshare` that mounts empty folders over BUILD and SOURCE for the command it runs."""
    for tree in (BUILD, SOURCE):
        if os.path.realpath(TMP).startswith(tree + os.sep):
            print(f"note: the temporary folder {TMP} is inside {tree}, which therefore cannot be hidden; "
                  "the installed copies run with the trees in place", flush=True)
            return None
    script = f'/bin/mount -t tmpfs swa-hidden {shlex.quote(BUILD)} && /bin/mount -t tmpfs swa-hidden {shlex.quote(SOURCE)} && exec "$@"'
    prefix = ["/usr/bin/unshare", "--mount", "--map-root-user", "/bin/sh", "-c", script, "sh"]
    probe = subprocess.run(prefix + ["/bin/sh", "-c", f"test ! -e {shlex.quote(os.path.join(SOURCE, 'CMakeLists.txt'))}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"note: the build and source trees cannot be hidden here (unshare: {probe.stderr.strip()}); "
              "the installed copies run with them in place", flush=True)
        return None
    return prefix


def run(args, env, cwd=None, hidden=True, timeout=600):
    """Runs `args` (with the build and source trees hidden when `hidden` and hiding works)."""
    full = (HIDING + list(args)) if hidden and HIDING else list(args)
    return subprocess.run(full, env=env, cwd=cwd or TMP, capture_output=True, text=True, timeout=timeout)


def rows_of(path):
    """[(scenario id, status name)] of a results file."""
    with h5py.File(path, "r") as f:
        table = results_table(f)
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    return [(text(r["scenario_id"]), text(r["status"])) for r in table]


def said(result):
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"


def setUpModule():
    global TMP, PREFIX, VENV, HIDING
    TMP = tempfile.mkdtemp(prefix="swa-install-test-")
    PREFIX = os.path.join(TMP, "prefix")
    VENV = os.path.join(TMP, "venv")
    install = subprocess.run(["cmake", "--install", BUILD, "--prefix", PREFIX], capture_output=True, text=True)
    if install.returncode != 0:
        raise AssertionError("cmake --install failed: " + said(install))
    HIDING = hiding_prefix()


def tearDownModule():
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


class Prefix(unittest.TestCase):
    """cmake --install's prefix, used with only P/bin, /usr/bin and /bin on PATH."""

    def test_files_are_where_the_readme_says(self):
        for relative in ["bin/swa-harness", "bin/swa-bench", "libexec/swa-harness/swa-dut-worker",
                         "libexec/swa-harness/swa-h5-probe", "libexec/swa-harness/libswa_python_dut.so",
                         "libexec/swa-harness/swa_python_dut.py", "include/swa/dut_v2.h",
                         "share/swa-harness/scenarios/ci.yaml", "share/swa-harness/examples/c_plugin.c",
                         "share/swa-harness/reports/swa_report.py",
                         "lib/cmake/swa_harness/swa_harnessConfig.cmake",
                         "lib/cmake/swa_harness/swa_harnessConfigVersion.cmake",
                         "lib/python3/dist-packages/swa_harness/__init__.py",
                         "lib/python3/dist-packages/swa_harness/_paths.py"]:
            self.assertTrue(os.path.isfile(os.path.join(PREFIX, relative)), relative)
        self.assertEqual(len(glob.glob(os.path.join(PREFIX, "lib/python3/dist-packages/swa_harness/_core*.so"))), 1)

    def test_binaries_link_nothing_in_the_build_tree(self):
        binaries = ["bin/swa-harness", "bin/swa-bench", "libexec/swa-harness/swa-dut-worker",
                    "libexec/swa-harness/swa-h5-probe", "libexec/swa-harness/libswa_python_dut.so"]
        binaries += [os.path.relpath(p, PREFIX) for p in glob.glob(os.path.join(PREFIX, "lib/python3/dist-packages/swa_harness/_core*.so"))]
        if os.path.exists(os.path.join(BUILD, "dut/cuda/libswa_dut_cuda.so")):  # built with the CUDA DUT
            binaries.append("lib/swa-harness/libswa_dut_cuda.so")
        for relative in binaries:
            path = os.path.join(PREFIX, relative)
            ldd = run(["ldd", path], environment(SYSTEM_PATH))
            self.assertEqual(ldd.returncode, 0, relative + ": " + said(ldd))
            self.assertNotIn("not found", ldd.stdout, relative)
            dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
            for line in dynamic.stdout.splitlines():
                if "RPATH" in line or "RUNPATH" in line:
                    self.assertNotIn(BUILD, line, relative)
                    self.assertNotIn(SOURCE, line, relative)

    def test_plugin_built_with_find_package_runs_from_the_prefix(self):
        plugin = os.path.join(TMP, "plugin")
        os.makedirs(plugin)
        with open(os.path.join(plugin, "CMakeLists.txt"), "w") as f:
            f.write(PLUGIN_CMAKE)
        env = environment(os.path.join(PREFIX, "bin") + ":" + SYSTEM_PATH)
        steps = [
            ["cp", os.path.join(PREFIX, "share/swa-harness/examples/c_plugin.c"), plugin],
            ["cmake", "-S", plugin, "-B", os.path.join(plugin, "build"), f"-DCMAKE_PREFIX_PATH={PREFIX}"],
            ["cmake", "--build", os.path.join(plugin, "build")],
        ]
        for step in steps:
            result = run(step, env)
            self.assertEqual(result.returncode, 0, shlex.join(step) + ": " + said(result))
        library = os.path.join(plugin, "build", "libmine.so")
        out = os.path.join(TMP, "plugin.h5")
        result = run(["swa-harness", "run", os.path.join(PREFIX, "share/swa-harness/scenarios/ci.yaml"),
                      "--filter", ONE, "--dut", "plugin:" + library, "--out", out], env)
        self.assertEqual(result.returncode, 0, said(result))
        self.assertEqual(rows_of(out), [(ONE, "pass")])

    def test_python_dut_and_report_run_from_the_prefix(self):
        env = environment(os.path.join(PREFIX, "bin") + ":" + SYSTEM_PATH)
        kernel = os.path.join(PREFIX, "share/swa-harness/examples/numpy_kernel.py")
        out = os.path.join(TMP, "python-dut.h5")
        result = run(["swa-harness", "run", os.path.join(PREFIX, "share/swa-harness/scenarios/ci.yaml"),
                      "--filter", ONE, "--dut", f"python:{kernel}:attention", "--out", out], env)
        self.assertEqual(result.returncode, 0, said(result))
        self.assertEqual(rows_of(out), [(ONE, "pass")])
        report = os.path.join(TMP, "report")
        result = run(["swa-harness", "report", out, "--out", report], env)
        self.assertEqual(result.returncode, 0, said(result))
        self.assertGreater(os.path.getsize(os.path.join(report, "report.html")), 1000)

    def test_installed_python_package_names_the_installed_binary(self):
        env = environment(os.path.join(PREFIX, "bin") + ":" + SYSTEM_PATH,
                          PYTHONPATH=os.path.join(PREFIX, "lib/python3/dist-packages"))
        result = run([PYTHON, "-c", "import swa_harness; print(swa_harness.HARNESS); print(swa_harness.__version__)"], env)
        self.assertEqual(result.returncode, 0, said(result))
        harness, version = result.stdout.split()
        self.assertEqual(harness, os.path.join(PREFIX, "bin", "swa-harness"))
        self.assertEqual(run(["swa-harness", "--version"], env).stdout.split()[1], version)

    def test_bench_runs_from_the_prefix(self):
        bench = run([os.path.join(PREFIX, "bin", "swa-bench"), "--version"], environment(SYSTEM_PATH))
        self.assertEqual(bench.returncode, 0, said(bench))
        harness = run([os.path.join(PREFIX, "bin", "swa-harness"), "--version"], environment(SYSTEM_PATH))
        self.assertEqual(bench.stdout.split()[1:], harness.stdout.split()[1:])  # one version, one commit


class Venv(unittest.TestCase):
    """pip install of the source tree into a venv, used with only V/bin on PATH."""

    @classmethod
    def setUpClass(cls):
        steps = [[PYTHON, "-m", "venv", "--system-site-packages", VENV],
                 [os.path.join(VENV, "bin", "pip"), "install", "--no-build-isolation", "--no-index", SOURCE]]
        env = environment(os.path.join(VENV, "bin") + ":" + SYSTEM_PATH, SWA_BUILD_DIR=BUILD,
                          SWA_PIP_BUILD_DIR=os.path.join(TMP, "pip-build"))
        for step in steps:
            result = subprocess.run(step, env=env, cwd=TMP, capture_output=True, text=True, timeout=900)
            if result.returncode != 0:
                raise AssertionError(shlex.join(step) + ": " + said(result))
        cls.env = environment(os.path.join(VENV, "bin"))
        cls.work = os.path.join(TMP, "work")
        os.makedirs(cls.work)
        shutil.copy(os.path.join(PREFIX, "share/swa-harness/scenarios/ci.yaml"), cls.work)
        shutil.copy(os.path.join(PREFIX, "share/swa-harness/examples/numpy_kernel.py"), cls.work)

    def test_version_and_import_from_outside_the_tree(self):
        version = run([os.path.join(VENV, "bin", "swa-harness"), "--version"], self.env, cwd=self.work)
        self.assertEqual(version.returncode, 0, said(version))
        self.assertRegex(version.stdout, r"^swa-harness [0-9]+\.[0-9]+\.[0-9]+ \(commit ")
        script = ("import importlib.metadata, swa_harness; print(swa_harness.__file__); print(swa_harness.HARNESS); "
                  "print(swa_harness.__version__); print(importlib.metadata.version('swa-harness'))")
        result = run([os.path.join(VENV, "bin", "python"), "-c", script], self.env, cwd=self.work)
        self.assertEqual(result.returncode, 0, said(result))
        module, harness, version_attr, version_meta = result.stdout.split()
        self.assertTrue(module.startswith(VENV + os.sep), module)
        self.assertTrue(harness.startswith(VENV + os.sep), harness)
        self.assertEqual(version.stdout.split()[1], version_attr)
        self.assertEqual(version_attr, version_meta)

    def test_exit_code_passes_through(self):
        result = run(["swa-harness", "run", "--no-such-option"], self.env, cwd=self.work)
        self.assertEqual(result.returncode, 2, said(result))
        self.assertIn("--no-such-option", result.stderr)

    def pytest(self, *options):
        with open(os.path.join(self.work, "test_k.py"), "w") as f:
            f.write(PYTEST_FILE.format(sweep="ci.yaml", filter=ONE))
        return run([os.path.join(VENV, "bin", "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    *options, "test_k.py"], self.env, cwd=self.work)

    def test_pytest_finds_the_plugin_by_its_entry_point(self):
        result = self.pytest()
        self.assertEqual(result.returncode, 0, said(result))
        self.assertIn("1 passed", result.stdout)

    def test_pytest_with_p_as_well_registers_it_once(self):
        result = self.pytest("-p", "swa_harness.pytest_plugin")
        self.assertEqual(result.returncode, 0, said(result))
        self.assertIn("1 passed", result.stdout)

    def test_printed_rerun_line_pastes_with_only_the_venv_on_path(self):
        out = os.path.join(self.work, "failing.h5")
        result = run(["swa-harness", "run", "ci.yaml", "--filter", ONE, "--dut", "mutant:window_plus_one", "--out", out],
                     self.env, cwd=self.work)
        self.assertEqual(result.returncode, 1, said(result))
        lines = [line.strip() for line in result.stdout.splitlines() if re.match(r"\s+\S+ run .* --out ", line)]
        self.assertTrue(lines, said(result))
        self.assertEqual(shlex.split(lines[0])[0], "swa-harness", lines[0])  # the PATH name: it is V/bin's
        elsewhere = os.path.join(TMP, "elsewhere")
        os.makedirs(elsewhere, exist_ok=True)
        pasted = run(["/bin/sh", "-c", lines[0]], self.env, cwd=elsewhere)
        self.assertEqual(pasted.returncode, 1, lines[0] + ": " + said(pasted))
        rerun = shlex.split(lines[0])[-1]
        self.assertEqual(rows_of(rerun), [(ONE, "fail")])

    def test_rerun_line_names_the_launcher_when_not_on_path(self):
        out = os.path.join(self.work, "failing-2.h5")
        result = run([os.path.join(VENV, "bin", "swa-harness"), "run", "ci.yaml", "--filter", ONE,
                      "--dut", "mutant:window_plus_one", "--out", out], environment(SYSTEM_PATH), cwd=self.work)
        self.assertEqual(result.returncode, 1, said(result))
        lines = [line.strip() for line in result.stdout.splitlines() if re.match(r"\s+\S+ run .* --out ", line)]
        self.assertTrue(lines, said(result))
        self.assertEqual(shlex.split(lines[0])[0], os.path.join(VENV, "bin", "swa-harness"), lines[0])


def main():
    global BUILD, SOURCE
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    BUILD, SOURCE = (os.path.realpath(a) for a in sys.argv[1:3])
    sys.argv[1:] = []
    missing = missing_packages()
    if missing:
        print("skipped: missing Debian package(s) " + ", ".join(missing) + " (scripts/debian-packages.txt)")
        return SKIPPED
    return 0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
