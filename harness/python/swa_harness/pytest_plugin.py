"""pytest plugin for swa-harness: `pytest -p swa_harness.pytest_plugin`, or
`pytest_plugins = ["swa_harness.pytest_plugin"]` in conftest.py.

    import swa_harness
    from my_kernels import attention

    @swa_harness.sweep("scenarios/ci.yaml", sweep="window_edges")
    def test_attention(scenario, swa_check):
        swa_check(scenario, attention)

The test runs once per scenario and is named by its ID, so `-k` and `--lf` work. swa_check runs the
kernel through the scenario's whole schedule in this process (the KV cache checked call by call) and
fails with the verdict's reason, the worst element and the `swa-harness run` and `bisect` commands
that reproduce it with the same kernel as --dut python:. --swa-out FILE.h5 and --swa-junit FILE.xml
keep the session's rows as `run` writes them.
"""
import os
import shlex

import pytest

import swa_harness

_session_rows = None


def pytest_addoption(parser):
    group = parser.getgroup("swa-harness")
    group.addoption("--swa-out", metavar="FILE.h5", help="write the session's swa-harness rows as a results file")
    group.addoption("--swa-junit", metavar="FILE.xml", help="write the session's swa-harness rows as JUnit XML")


def pytest_configure(config):
    global _session_rows
    config.addinivalue_line("markers", "swa_sweep(path, sweep=None, filter=None): one test per scenario of the sweep")
    _session_rows = swa_harness._core.Session()


def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker("swa_sweep")
    if mark is None or "scenario" not in metafunc.fixturenames:
        return
    path = _sweep_path(mark, metafunc.definition)
    found = swa_harness.scenarios(path, **mark.kwargs)
    if not found:
        raise pytest.UsageError(f"swa_harness.sweep({mark.args[0]!r}, {mark.kwargs}) selects no scenario")
    metafunc.parametrize("scenario", found, ids=[s.id for s in found])


def _sweep_path(mark, node):
    """The mark's sweep file: as given, or relative to the test file's folder when not found as given."""
    path = mark.args[0]
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(os.path.dirname(str(node.fspath)), path)
    return os.path.abspath(path)


def reproduce_commands(sweep_file, scenario, target):
    """The commands that rerun and bisect the scenario with the kernel as --dut python:."""
    common = [sweep_file, "--filter", scenario.id, "--dut", "python:" + target]
    run = shlex.join([swa_harness.HARNESS, "run", *common, "--out", "repro.h5"])
    bisect = shlex.join([swa_harness.HARNESS, "bisect", *common, "--out", "bisect-out"])
    return run, bisect


@pytest.fixture
def swa_check(request):
    """swa_check(scenario, kernel, profile=None, check_cache=True): runs the kernel on the scenario
    through the harness; a fail or an error fails the test with what it found. Returns the Verdict."""
    mark = request.node.get_closest_marker("swa_sweep")
    sweep_file = _sweep_path(mark, request.node) if mark else "SWEEP.yaml"

    def check(scenario, kernel, profile=None, check_cache=True):
        target = kernel if isinstance(kernel, str) else swa_harness.python_target(kernel)
        verdict = swa_harness.check(scenario, target, profile, check_cache)
        _session_rows.add(verdict._reference, verdict._row)
        if verdict.status == "skip":
            pytest.skip(verdict.reason)
        if not verdict.passed:
            run, bisect = reproduce_commands(sweep_file, scenario, target)
            pytest.fail(f"{verdict.status}: {verdict.reason}\n{verdict.worst()}\nreproduce: {run}\ndiagnose:  {bisect}",
                        pytrace=False)
        return verdict

    return check


def pytest_sessionfinish(session):
    out, junit = session.config.getoption("--swa-out"), session.config.getoption("--swa-junit")
    if (out or junit) and _session_rows is not None:
        command = "pytest " + " ".join(session.config.invocation_params.args)
        _session_rows.write(os.path.abspath(out) if out else "", os.path.abspath(junit) if junit else "", "", command)
