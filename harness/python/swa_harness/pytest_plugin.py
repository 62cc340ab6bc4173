"""pytest plugin for swa-harness: `pytest -p swa_harness.pytest_plugin`, or
`pytest_plugins = ["swa_harness.pytest_plugin"]` in conftest.py.

    import swa_harness
    from my_kernels import attention

    @swa_harness.sweep("scenarios/ci.yaml", sweep="window_edges")
    def test_attention(scenario, swa_check):
        swa_check(scenario, attention)

The test runs once per scenario, named by its ID with `=` written `:` (test_id(): pytest's `-k` takes
no `=`), so `-k 'w:16/ and cache:paged'` and `--lf` work; several sweep marks on one test run the
union of their scenarios. swa_check runs the kernel through the scenario's whole schedule in this
process (the KV cache checked call by call) and fails with the verdict's reason, the worst element
and the `swa-harness run` and `bisect` commands that reproduce it with the same kernel as --dut
python: (the real scenario ID). --swa-out FILE.h5 and --swa-junit FILE.xml keep the session's rows
as `run` writes them, after run's checks of --out and --junit (--swa-force as run's --force); under
pytest-xdist each worker writes its rows to a private folder of the controller, which checks the
outputs before any test runs and merges the rows at the end (`swa-harness merge`).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

import swa_harness

_session_rows = None
_outputs = {}         # option -> absolute path, for those of --swa-out and --swa-junit given
_force = False
_sweeps_read = set()  # every sweep file the session's tests read (absolute paths)
_row_sweeps = set()   # the sweep file of each row checked (None: a test without a swa_sweep mark)
_row_keys = set()     # (scenario ID, DUT) of each row kept: a results file has one row per pair (the first)
_write_errors = []    # what could not be written at the end, for the terminal summary
_scenario_files = {}  # id(Scenario) -> (the Scenario, its sweep file), for every scenario a mark gave a test
# pytest-xdist: the controller's private folder its workers write their rows to, and its workers' ids.
_xdist_dir = None
_xdist_workers = []

# The characters of an identifier of pytest's -k (and -m): letters, digits and _ - . : / + [ ] \.
_NOT_IN_K = re.compile(r"[^\w:+\-./\[\]\\]")
SWEEP_USAGE = "swa_harness.sweep(path, sweep=None, filter=None)"


def test_id(scenario_id):
    """The pytest ID of a scenario's test: its ID with `=` written `:` (and any other character -k
    cannot take written `_`), e.g. mode:prefill/seqs:70-1-33/.../w:16/..., which `-k` selects."""
    return _NOT_IN_K.sub("_", scenario_id.replace("=", ":")) or "scenario"


test_id.__test__ = False  # a helper, not a test pytest should collect where it is imported


def pytest_addoption(parser):
    group = parser.getgroup("swa-harness")
    group.addoption("--swa-out", metavar="FILE.h5", help="write the session's swa-harness rows as a results file")
    group.addoption("--swa-junit", metavar="FILE.xml", help="write the session's swa-harness rows as JUnit XML")
    group.addoption("--swa-force", action="store_true",
                    help="replace --swa-out or --swa-junit even when the file there is not a results or JUnit file")


def _is_worker(config):
    return hasattr(config, "workerinput")  # a pytest-xdist worker


def _is_controller(config):
    return config.pluginmanager.getplugin("dsession") is not None  # pytest-xdist's controller (-n, --dist)


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
    global _session_rows, _outputs, _force, _xdist_dir
    config.addinivalue_line("markers", "swa_sweep(path, sweep=None, filter=None): one test per scenario of the sweep")
    _session_rows = swa_harness._core.Session()
    for kept in (_sweeps_read, _row_sweeps, _row_keys, _write_errors, _scenario_files, _xdist_workers):
        kept.clear()
    _outputs = {option: os.path.abspath(value) if value else value
                for option in ("--swa-out", "--swa-junit") if (value := config.getoption(option)) is not None}
    _force = bool(config.getoption("--swa-force"))
    if _is_worker(config):
        # The controller checks the outputs and writes them; a worker writes its rows to its folder.
        _xdist_dir = config.workerinput.get("swa_harness_dir")
        return
    _xdist_dir = None
    # Before anything is collected: the folders and one file for both. A foreign file is refused once
    # collection has read the sweep files, so that a sweep file is refused as one (--swa-force or not).
    _refuse_bad_outputs(force=True)


@pytest.hookimpl(tryfirst=True)  # on a worker, before xdist tells the controller its collection is done
def pytest_collection_finish(session):
    if sys.exc_info()[0] is not None:  # (called as collection ends even by an error, which must stay the one said)
        return
    if _is_worker(session.config):
        if _xdist_dir:  # the sweep files it read, for the controller's checks before any test runs
            _write_json(os.path.join(_xdist_dir, f"sweeps-{session.config.workerinput['workerid']}.json"),
                        sorted(_sweeps_read))
        return
    _refuse_bad_outputs(_force)  # every check, before any test runs; again before writing


# ---- pytest-xdist: the controller's side (hooks xdist calls; none without it) ----------------------
@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Each worker, as xdist starts it: the private folder it writes its rows to."""
    global _xdist_dir
    if not _outputs:
        return
    if _xdist_dir is None:
        _xdist_dir = tempfile.mkdtemp(prefix="swa-harness-pytest-")
    node.workerinput["swa_harness_dir"] = _xdist_dir
    _xdist_workers.append(node.workerinput["workerid"])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """A worker collected (the controller collects nothing): the checks that need the sweep files
    the tests read, before xdist sends any test (it waits for every worker's collection)."""
    if not _outputs or _xdist_dir is None:
        return
    try:
        with open(os.path.join(_xdist_dir, f"sweeps-{node.workerinput['workerid']}.json")) as f:
            _sweeps_read.update(json.load(f))
    except FileNotFoundError:
        pass  # its collection failed; pytest says why
    _refuse_bad_outputs(_force)


def _write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


# ---- the tests -------------------------------------------------------------------------------------
def _mark_text(mark):
    args = [repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items() if v is not None]
    return f"swa_harness.sweep({', '.join(args)})"


def _mark_spec(mark, node):
    """(sweep file, keyword arguments of swa_harness.scenarios) of a swa_sweep mark; a collection error
    naming the test and the mark when it is not one swa_harness.sweep() makes."""
    if (len(mark.args) != 1 or not isinstance(mark.args[0], (str, os.PathLike))
            or set(mark.kwargs) - {"sweep", "filter"}
            or any(v is not None and not isinstance(v, str) for v in mark.kwargs.values())):
        raise pytest.Collector.CollectError(f"{node.nodeid}: {_mark_text(mark)} is not {SWEEP_USAGE} "
                                            "(the path a text, sweep and filter texts or None)")
    return _sweep_path(mark, node), {k: v for k, v in mark.kwargs.items() if v is not None}


def pytest_generate_tests(metafunc):
    """One test per scenario of every swa_sweep mark of the test (the union, in pytest's order of
    marks: the one nearest the function first); a scenario two marks select in one sweep file (the
    same ID) is one test, as `run` keeps one scenario per ID; the same ID from two sweep files is two
    tests, each ID prefixed by its file's name."""
    node = metafunc.definition
    marks = list(node.iter_markers("swa_sweep"))
    if not marks or "scenario" not in metafunc.fixturenames:
        return
    chosen, seen = [], set()  # (scenario, sweep file) and the (sweep file, ID) pairs among them
    for mark in marks:
        path, kwargs = _mark_spec(mark, node)
        _sweeps_read.add(path)
        try:
            found = swa_harness.scenarios(path, **kwargs)
        except swa_harness.Error as e:
            raise pytest.Collector.CollectError(f"{node.nodeid}: {_mark_text(mark)}: {e}") from None
        if not found:
            raise pytest.Collector.CollectError(f"{node.nodeid}: {_mark_text(mark)} selects no scenario")
        for s in found:
            if (path, s.id) not in seen:
                seen.add((path, s.id))
                chosen.append((s, path))
    ids = [test_id(s.id) for s, _ in chosen]
    files = list(dict.fromkeys(path for _, path in chosen))
    labels = {p: os.path.basename(p) for p in files}
    if len(set(labels.values())) < len(files):  # two sweep files of one name: named from the test's folder
        labels = {p: os.path.relpath(p, os.path.dirname(str(node.fspath))) for p in files}
    counts = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    ids = [test_id(labels[path]) + "/" + i if counts[i] > 1 else i for i, (_, path) in zip(ids, chosen)]
    taken = set()
    for n, i in enumerate(ids):  # (two IDs that read the same once written for -k: numbered)
        k = 2
        while ids[n] in taken:
            ids[n], k = f"{i}-{k}", k + 1
        taken.add(ids[n])
    for s, path in chosen:
        _scenario_files[id(s)] = (s, path)
    metafunc.parametrize("scenario", [s for s, _ in chosen], ids=ids)


def _sweep_path(mark, node):
    """The mark's sweep file: as given, or relative to the test file's folder when not found as given."""
    path = os.fspath(mark.args[0])
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

    def check(scenario, kernel, profile=None, check_cache=True):
        known = _scenario_files.get(id(scenario))
        if known and known[0] is scenario:  # a scenario a mark gave: its own sweep file
            sweep_file = known[1]
        elif mark and mark.args:
            sweep_file = _sweep_path(mark, request.node)
        else:
            sweep_file = None
        target = kernel if isinstance(kernel, str) else swa_harness.python_target(kernel)
        verdict = swa_harness.check(scenario, target, profile, check_cache)
        key = (verdict.row["scenario_id"], verdict.row["dut"])
        if key not in _row_keys:  # one row per (scenario, DUT), as every results file: the first
            _row_keys.add(key)
            _session_rows.add(verdict._reference, verdict._row)
        _row_sweeps.add(sweep_file)  # (a row two sweep files gave is from neither alone: whichever is kept)
        if verdict.status == "skip":
            pytest.skip(verdict.reason)
        if not verdict.passed:
            run, bisect = reproduce_commands(sweep_file or "SWEEP.yaml", scenario, target)
            pytest.fail(f"{verdict.status}: {verdict.reason}\n{verdict.worst()}\nreproduce: {run}\ndiagnose:  {bisect}",
                        pytrace=False)
        return verdict

    return check


# ---- the session's end -----------------------------------------------------------------------------
def _one_sweep_file(row_sweeps):
    """The sweep file, when every row came from one (the report's rerun commands name it); else ''."""
    sweep_file = next(iter(row_sweeps)) if len(row_sweeps) == 1 else None
    return sweep_file if sweep_file and os.path.isfile(sweep_file) else ""


@pytest.hookimpl(trylast=True)  # under xdist, after its controller has stopped the workers
def pytest_sessionfinish(session):
    config = session.config
    if _is_worker(config):
        if _xdist_dir:
            _store_worker_rows(config)
        return
    try:
        if not _outputs or _session_rows is None or session.exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # none asked for, or an option refused before anything ran
        command = "pytest " + " ".join(config.invocation_params.args)
        if _is_controller(config):
            _write_workers_rows(command)
        else:
            _write_rows(command)
        if _write_errors:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # 3, as run's exit 3: the results were not stored
            if config.pluginmanager.get_plugin("terminalreporter") is None:
                for line in _write_errors:
                    print(f"swa-harness: ERROR: {line}", file=sys.stderr)
    finally:
        if _xdist_dir and not _is_worker(config):
            shutil.rmtree(_xdist_dir, ignore_errors=True)


def _write_rows(command):
    sweep_file = _one_sweep_file(_row_sweeps)
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


def _store_worker_rows(config):
    """A worker's end: its rows as a results file and JUnit XML in the controller's folder, and what
    it kept (rows-ID.json, written last: the files are complete when it is there)."""
    worker = config.workerinput["workerid"]
    stored = {"rows": len(_session_rows), "sweeps": sorted(_row_sweeps, key=lambda s: s or ""), "error": None,
              "results": os.path.join(_xdist_dir, f"rows-{worker}.h5") if "--swa-out" in _outputs else "",
              "junit": os.path.join(_xdist_dir, f"rows-{worker}.xml") if "--swa-junit" in _outputs else ""}
    if len(_session_rows):
        try:
            _session_rows.write(stored["results"], stored["junit"], "", f"pytest worker {worker}")
        except Exception as e:  # noqa: BLE001 (said by the controller, naming the worker)
            stored["error"] = str(e)
    _write_json(os.path.join(_xdist_dir, f"rows-{worker}.json"), stored)


def _write_workers_rows(command):
    """The controller's end under xdist: every worker's rows merged into --swa-out (`swa-harness
    merge`, after a file of no rows that carries the session's meta) and --swa-junit."""
    parts, row_sweeps, lost = [], set(), []
    for worker in sorted(set(_xdist_workers), key=lambda w: (len(w), w)):
        try:
            with open(os.path.join(_xdist_dir, f"rows-{worker}.json")) as f:
                stored = json.load(f)
        except (OSError, ValueError):
            lost.append(worker)  # it crashed or was stopped before storing its rows
            continue
        if stored["error"]:
            _write_errors.append(f"pytest-xdist worker {worker} could not store its {stored['rows']} rows: "
                                 f"{stored['error']}; they are not in {' or '.join(_outputs.values())}")
        elif stored["rows"]:
            parts.append(stored)
            row_sweeps.update(stored["sweeps"])
    if lost:
        many = len(lost) > 1
        _write_errors.append(f"pytest-xdist worker{'s' * many} {', '.join(lost)} stopped before storing "
                             f"{'their' if many else 'its'} rows (crashed or killed): the rows of the tests "
                             f"{'they' if many else 'it'} ran are not in {' or '.join(_outputs.values())}")
    rows = sum(p["rows"] for p in parts)
    sweep_file = _one_sweep_file(row_sweeps)
    for option, path in _outputs.items():
        try:
            _guard(option, _force)  # again: the path may have changed while the tests ran
        except ValueError as e:
            _write_errors.append(f"{e}; the session's {rows} rows were not written there")
            continue
        try:
            if option == "--swa-out":
                head = os.path.join(_xdist_dir, "meta.h5")  # no rows: the session's meta, first of the merge
                swa_harness._core.Session().write(head, "", sweep_file, command)
                merge = subprocess.run([swa_harness.HARNESS, "merge", head, *(p["results"] for p in parts), "-o", path]
                                       + ["--force"] * _force, capture_output=True, text=True)
                if merge.returncode != 0:
                    raise OSError(f"swa-harness merge exited with {merge.returncode}: {merge.stderr.strip()}")
            else:
                _write_atomically(path, _merged_junit([p["junit"] for p in parts]))
        except Exception as e:  # noqa: BLE001 (HDF5's or the OS's: each said, no row lost silently)
            _write_errors.append(f"option {option}: cannot write {path}: {e}; the session's {rows} rows are not in it")


_JUNIT = re.compile(r'<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites>\n<testsuite ([^>]*)>\n(.*)'
                    r'</testsuite>\n</testsuites>\n', re.S)
_TESTCASE = re.compile(r'  <testcase ([^>]*)>(.*?)</testcase>\n', re.S)  # (the text inside is escaped: no '<' but tags)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def _merged_junit(paths):
    """The workers' JUnit files (the harness's own: write_junit's) as one, in write_junit's form: each
    test case as its worker wrote it, one per (scenario, DUT), the first; ValueError on any other file."""
    cases, seen = [], set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        whole = _JUNIT.fullmatch(text)
        found = list(_TESTCASE.finditer(whole.group(2))) if whole else []
        if not whole or str(len(found)) != dict(_ATTRIBUTE.findall(whole.group(1))).get("tests") \
                or len(found) != text.count("<testcase "):
            raise ValueError(f"{path} is not a JUnit XML file of the harness's form")
        for case in found:
            attributes = dict(_ATTRIBUTE.findall(case.group(1)))
            key = (attributes.get("classname"), attributes.get("name"))
            if key not in seen:
                seen.add(key)
                cases.append((case.group(0), case.group(2), float(attributes.get("time", 0))))
    counts = {tag: sum(bool(re.search(f"<{tag}[ />]", body)) for _, body, _ in cases)
              for tag in ("failure", "error", "skipped")}
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
            f'<testsuite name="swa_harness" tests="{len(cases)}" failures="{counts["failure"]}" '
            f'errors="{counts["error"]}" skipped="{counts["skipped"]}" time="{sum(t for _, _, t in cases):g}">\n'
            + "".join(text for text, _, _ in cases) + "</testsuite>\n</testsuites>\n")


def _write_atomically(path, text):
    """The file whole or not at all: a temporary file beside it, renamed over it."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def pytest_terminal_summary(terminalreporter):
    if _write_errors:
        terminalreporter.section("swa-harness: results not stored", sep="=", red=True, bold=True)
        for line in _write_errors:
            terminalreporter.write_line(f"ERROR: {line}", red=True)
