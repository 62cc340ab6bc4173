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
keep the session's rows as `run` writes them, after run's checks of --out and --junit (--swa-force as
run's --force).
"""
import os
import shlex
import sys

import pytest

import swa_harness

_session_rows = None
_outputs = {}         # option -> absolute path, for those of --swa-out and --swa-junit given
_force = False
_sweeps_read = set()  # every sweep file the session's tests read (absolute paths)
_row_sweeps = set()   # the sweep file of each row kept (None: a test without a swa_sweep mark)
_write_errors = []    # what could not be written at the end, for the terminal summary


def pytest_addoption(parser):
    group = parser.getgroup("swa-harness")
    group.addoption("--swa-out", metavar="FILE.h5", help="write the session's swa-harness rows as a results file")
    group.addoption("--swa-junit", metavar="FILE.xml", help="write the session's swa-harness rows as JUnit XML")
    group.addoption("--swa-force", action="store_true",
                    help="replace --swa-out or --swa-junit even when the file there is not a results or JUnit file")


def _guard(option, force):
    """run's checks of its --out or --junit (swa_harness._core.guard_output: the command line's own
    code) for `option`'s path, against the other output and the sweep files read so far; ValueError
    naming the option, the path and why."""
    others = [("a sweep file the tests read", s) for s in sorted(_sweeps_read)]
    if option == "--swa-out":
        others.insert(0, ("--swa-junit", _outputs.get("--swa-junit", "")))
    kind = "results" if option == "--swa-out" else "junit"
    swa_harness._core.guard_output(option, _outputs[option], kind, force, others, "--swa-force")


def _refuse_bad_outputs(force):
    try:
        for option in _outputs:
            _guard(option, force)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_configure(config):
    global _session_rows, _outputs, _force
    config.addinivalue_line("markers", "swa_sweep(path, sweep=None, filter=None): one test per scenario of the sweep")
    _session_rows = swa_harness._core.Session()
    _sweeps_read.clear()
    _row_sweeps.clear()
    _write_errors.clear()
    _outputs = {option: os.path.abspath(value) if value else value
                for option in ("--swa-out", "--swa-junit") if (value := config.getoption(option)) is not None}
    _force = bool(config.getoption("--swa-force"))
    # Before anything is collected: the folders and one file for both. A foreign file is refused once
    # collection has read the sweep files, so that a sweep file is refused as one (--swa-force or not).
    _refuse_bad_outputs(force=True)


def pytest_collection_finish(session):
    if sys.exc_info()[0] is None:  # (called as collection ends even by an error, which must stay the one said)
        _refuse_bad_outputs(_force)  # every check, before any test runs; again before writing


def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker("swa_sweep")
    if mark is None or "scenario" not in metafunc.fixturenames:
        return
    path = _sweep_path(mark, metafunc.definition)
    _sweeps_read.add(path)
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
        _row_sweeps.add(sweep_file if mark else None)
        if verdict.status == "skip":
            pytest.skip(verdict.reason)
        if not verdict.passed:
            run, bisect = reproduce_commands(sweep_file, scenario, target)
            pytest.fail(f"{verdict.status}: {verdict.reason}\n{verdict.worst()}\nreproduce: {run}\ndiagnose:  {bisect}",
                        pytrace=False)
        return verdict

    return check


def pytest_sessionfinish(session):
    if not _outputs or _session_rows is None or session.exitstatus == pytest.ExitCode.USAGE_ERROR:
        return  # none asked for, or an option refused before anything ran
    command = "pytest " + " ".join(session.config.invocation_params.args)
    # The sweep file, when every row came from one (the report's rerun commands name it); else none.
    sweep_file = next(iter(_row_sweeps)) if len(_row_sweeps) == 1 else None
    sweep_file = sweep_file if sweep_file and os.path.isfile(sweep_file) else ""
    for option, path in _outputs.items():
        try:
            _guard(option, _force)  # again: the path may have changed while the tests ran
            if option == "--swa-out":
                _session_rows.write(path, "", sweep_file, command)
            else:
                _session_rows.write("", path, sweep_file, command)
        except ValueError as e:
            _write_errors.append(f"{e}; the session's {len(_session_rows)} rows were not written there")
        except Exception as e:  # noqa: BLE001 (HDF5's or the OS's: each said, no row lost silently)
            _write_errors.append(f"option {option}: cannot write {path}: {e}; "
                                 f"the session's {len(_session_rows)} rows are not in it")
    if _write_errors:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # 3, as run's exit 3: the results were not stored
        if session.config.pluginmanager.get_plugin("terminalreporter") is None:
            for line in _write_errors:
                print(f"swa-harness: ERROR: {line}", file=sys.stderr)


def pytest_terminal_summary(terminalreporter):
    if _write_errors:
        terminalreporter.section("swa-harness: results not stored", sep="=", red=True, bold=True)
        for line in _write_errors:
            terminalreporter.write_line(f"ERROR: {line}", red=True)
