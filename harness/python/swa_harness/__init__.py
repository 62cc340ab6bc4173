"""swa-harness from Python: sweeps, problems, goldens and verdicts, with the harness's own C++.

    import swa_harness
    for s in swa_harness.scenarios("scenarios/ci.yaml", sweep="window_edges"):
        pb = swa_harness.problem(s)                  # inputs (the bits every DUT gets), golden, baseline
        verdict = swa_harness.judge(s, my_output)    # the verdict, metrics and reason `run` gives
        verdict = swa_harness.check(s, my_kernel)    # a python: kernel through the whole schedule

harness/python/README.md is the manual. Build with the project (`scripts/build.sh`); then
PYTHONPATH=build/python makes it importable with /usr/bin/python3.
"""
import functools
import inspect
import os
import subprocess

from . import _core
from ._paths import HARNESS
from .results import Results, load  # a results file as typed records (results.py)

# "0.1.0": the project's version, as `swa-harness --version` and every results file's /meta say it.
__version__ = _core.version().split()[1]

__all__ = ["Error", "Scenario", "Problem", "Verdict", "scenarios", "problem", "judge", "check", "run", "sweep",
           "python_target", "golden_cache", "choices", "HARNESS"]
__all__ += ["load", "Results"]

Scenario = _core.Scenario
choices = _core.choices


class Error(Exception):
    """A bad sweep, filter, profile, DUT or argument: the message the command line would print."""


class Verdict:
    """A row of /results: status (pass, warn, fail, skip, error), reason, and every metric by its column name."""

    def __init__(self, row, output=None, reference=None):
        self.row = row.cells()
        self._row, self._reference = row, reference  # for a session's results file
        self.output = output  # the DUT's output, float32 [tokens, heads, head_size], when it ran

    status = property(lambda self: self.row["status"])
    reason = property(lambda self: self.row["reason"])
    passed = property(lambda self: self.row["status"] in ("pass", "warn"))

    def __getattr__(self, name):
        try:
            return self.row[name]
        except KeyError:
            raise AttributeError(name) from None

    def worst(self):
        """The worst element, in words."""
        r = self.row
        if r["worst_seq"] < 0:
            return "no element measured"
        return (f"worst element: sequence {r['worst_seq']}, token {r['worst_token']}, head {r['worst_head']}, "
                f"dim {r['worst_dim']} (max abs error {r['max_abs']:.6g})")

    def __repr__(self):
        return f"<Verdict {self.status}: {self.reason[:120]}>"


class Problem:
    """A scenario's problem: q, k, v in the storage dtype (float32, float16, or bf16 bits as uint16),
    seq_lens, seq_offsets, mask, sinks, the fp64 golden output and the same-precision baseline."""

    def __init__(self, scenario):
        self.scenario = scenario
        self._reference = _core.Reference(scenario)
        for name, value in self._reference.arrays().items():
            setattr(self, name, value)

    def judge(self, out, profile=None):
        try:
            return Verdict(self._reference.judge(out, profile), out, self._reference)
        except ValueError as e:
            raise Error(str(e)) from None

    def check(self, kernel, profile=None, check_cache=True):
        spec = kernel if isinstance(kernel, str) else python_target(kernel)
        try:
            row, out = self._reference.evaluate_function(spec, profile, check_cache)
        except ValueError as e:
            raise Error(str(e)) from None
        return Verdict(row, out, self._reference)


def scenarios(path, sweep=None, filter=None):
    """The scenarios of a sweep file (of one sweep; those whose ID matches `filter`, an exact ID or a regex)."""
    try:
        return list(_core.scenarios(os.fspath(path), sweep, filter))
    except ValueError as e:
        raise Error(str(e)) from None


def problem(scenario):
    return Problem(scenario)


def golden_cache(folder):
    """Where problems read and store their golden and baseline, as run's --golden-cache: a folder, or
    None to compute every one (--no-golden-cache). Default: run's default folder."""
    try:
        _core.set_golden_cache(None if folder is None else os.fspath(folder))
    except ValueError as e:
        raise Error(str(e)) from None


def judge(scenario, out, profile=None):
    """The verdict of `run` for an output (float, [tokens, heads, head_size]) of the scenario. The KV
    cache is not judged: use check() for a kernel with a cache."""
    return Problem(scenario).judge(out, profile)


def check(scenario, kernel, profile=None, check_cache=True):
    """Runs `kernel` (a function as for --dut python:, or its TARGET:FUNCTION text) through the
    scenario's schedule in this process, with the KV cache checked call by call: the verdict of
    `run --dut python:...`."""
    return Problem(scenario).check(kernel, profile, check_cache)


def python_target(kernel):
    """TARGET:FUNCTION[:key=value...] for a module-level function (or a functools.partial of one with
    keyword arguments), as --dut python: takes it."""
    kwargs = {}
    if isinstance(kernel, functools.partial):
        if kernel.args:
            raise Error("a functools.partial for python: takes keyword arguments only")
        kwargs, kernel = dict(kernel.keywords), kernel.func
    name = getattr(kernel, "__qualname__", "")
    if not inspect.isfunction(kernel) or "." in name or "<" in name:
        raise Error(f"{kernel!r} is not a module-level function: python: imports a function by its module and name")
    module = inspect.getmodule(kernel)
    path = getattr(module, "__file__", None)
    if not path:
        raise Error(f"{kernel.__name__} comes from no file")
    if ":" in path and not path.endswith(".py"):  # python: finds a TARGET holding ':' by its ending .py
        raise Error(f"{kernel.__name__} comes from {path}: a path with ':' must be a .py file for python:")
    for key, value in kwargs.items():
        if ":" in str(value) or "=" in str(value):
            raise Error(f"keyword argument {key}={value!r}: a value for python: has no ':' or '='")
    return ":".join([os.path.abspath(path), kernel.__name__] + [f"{k}={v}" for k, v in kwargs.items()])


def run(sweep_file, dut, out, junit=None, sweep=None, filter=None, jobs=1, extra=()):
    """`swa-harness run` itself (the same HDF5 and JUnit): `dut` a DUT name, a list of them, or a
    module-level Python function (run as --dut python:FILE:FUNCTION). Returns the command's exit
    status (0: every row passed, 1: some did not); raises Error with its message on exit 2."""
    duts = dut if isinstance(dut, (list, tuple)) else [dut]
    names = [d if isinstance(d, str) else "python:" + python_target(d) for d in duts]
    args = [HARNESS, "run", os.fspath(sweep_file), "--out", os.fspath(out), "--jobs", str(jobs)]
    for name in names:
        args += ["--dut", name]
    if junit:
        args += ["--junit", os.fspath(junit)]
    if sweep:
        args += ["--sweep", sweep]
    if filter:
        args += ["--filter", filter]
    r = subprocess.run(args + list(extra), capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise Error(r.stderr.strip() or f"swa-harness run exited with {r.returncode}")
    return r.returncode


def sweep(path, sweep=None, filter=None):
    """A pytest mark: the test runs once per scenario (its `scenario` argument), named by the ID with
    `=` written `:` (pytest's -k takes no `=`). Stacked, every mark counts: the union of their
    scenarios. Needs the plugin: `pytest -p swa_harness.pytest_plugin` (or pytest_plugins in conftest.py)."""
    import pytest
    if not isinstance(path, (str, os.PathLike)):
        raise Error(f"swa_harness.sweep: path {path!r} is not a sweep file's path")
    for name, value in (("sweep", sweep), ("filter", filter)):
        if value is not None and not isinstance(value, str):
            raise Error(f"swa_harness.sweep: {name}={value!r} is not a text (or None)")
    return pytest.mark.swa_sweep(os.fspath(path), sweep=sweep, filter=filter)
