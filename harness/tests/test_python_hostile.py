#!/usr/bin/env python3
"""Hostile and careless python: kernels, one table. Each kernel (it raises, hangs, exits, forks,
prints, allocates, returns the wrong shape or dtype, ...) runs through ci.yaml's three FEW scenarios;
each entry says what must come of it: the harness's exit status, every row's status, and a regex
every row's reason (or, for a refused target, the harness's stderr) must match. Whatever the kernel
does, the sweep finishes, pybind11's "Unable to cast ..." never replaces the kernel's own words, and
no process of the test is left running.

To add a hostile kernel, add one entry to KERNELS (a kernel that runs) or TARGETS (one refused
before anything runs, exit 2):

    Case("name",                     # the test is test_name
         "my_function",              # FUNCTION: a function of HOSTILE (the shared kernels.py) ...
         source=None,                # ... or a module's own text (written to TMP/name.py)
         args=("--in-process",),     # more options of `swa-harness run` ({tmp} is the class's folder)
         exit=1, status="error",     # the harness's exit status; each row's status (None: no rows)
         reason=r"regex")            # matched against each row's reason, or stderr when exit is 2

HOSTILE's kernels may call `good(p)`, the correct NumPy example (numpy_kernel.py, copied beside it).

usage: test_python_hostile.py PATH/TO/swa-harness CI_YAML EXAMPLES_DIR PATH/TO/libswa_python_dut.so
       [unittest arguments: a class or a test, -k PATTERN]
"""
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = CI = EXAMPLES = LIBRARY = None
# Two small prefill scenarios and one decode scenario of ci.yaml.
FEW = "mode=prefill/seqs=70-1-33/hq=8/hkv=2/d=64/w=(1|16)/mask=none/fp32/|" \
      "mode=decode/seqs=90-1-47/hq=8/hkv=2/d=64/w=8/chunk=5/steps=12/cache=ring-modulo/mask=none/fp32/"
UNABLE_TO_CAST = "Unable to cast"  # pybind11's words where a text could not cross to C++


HOSTILE = r'''
    import ctypes, multiprocessing, os, sys, threading, time
    import numpy as np
    from numpy_kernel import attention as good  # the correct example, copied beside this file

    def describe():
        return {"name": "hostile"}

    def fills_zeros(p):
        p.out[...] = 0

    # raise, hang, exit
    def segfault(p):
        ctypes.string_at(0)

    def raises(p):
        raise KeyError("no such tile")

    def raises_surrogate(p):
        raise ValueError("bad \udc80 tile")

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    def raises_unprintable(p):
        raise Unprintable()

    def hangs(p):
        time.sleep(3600)

    def leaks_thread(p):
        threading.Thread(target=time.sleep, args=(3600,), name="forgotten", daemon=True).start()
        p.out[...] = 0

    def exits(p):
        sys.exit(0)

    def os_exit(p):
        os._exit(0)

    # fork
    def forks_sleeper(p):
        if os.fork() == 0:  # a child that outlives the call
            time.sleep(3600)
            os._exit(0)
        good(p)

    def forks_exiting_child(p):
        pid = os.fork()
        if pid == 0:
            os._exit(7)  # a forked child's os._exit really ends it
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 7:
            raise RuntimeError(f"the forked child ended with wait status {status}, not exit 7")
        good(p)

    def multiprocessing_child(p):
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
        child.start()  # multiprocessing ends its forked child with os._exit
        child.join(60)
        if child.exitcode != 0:
            raise RuntimeError(f"the multiprocessing child ended with {child.exitcode}")
        good(p)

    # print
    def prints(p):
        for i in range(1000):
            print(f"\x1b[2J\x1b[31;1mline {i}\x07\x1b]0;title\x07 \u00e9 \u4e2d", end="\r\n" if i % 2 else "\n")
        sys.stdout.flush()
        sys.stdout.buffer.write(b"\xff\xfe\x00\x80 raw bytes \xc3\x28\n" * 2000)
        sys.stdout.flush()
        os.write(1, b"\x1b[?1049h\x1b[2J\x00" * 20000)
        os.write(2, b"\x1b[31m\xff" * 5000)
        good(p)

    # allocate
    def allocates(p):
        hold = np.ones(2 << 30, dtype=np.uint8)  # 2 GB, touched
        good(p)
        return None if hold[-1] else 0

    # wrong shapes
    def wrong_shape(p):
        return np.zeros((1, 2))

    def returns_scalar(p):
        return 0.0

    def returns_one_row_short(p):
        return np.zeros((p.out.shape[0] - 1,) + p.out.shape[1:], np.float32)

    # wrong dtypes
    def returns_float64(p):
        good(p)
        return p.out.astype(np.float64)

    def returns_list(p):
        good(p)
        return p.out.tolist()

    def returns_ints(p):
        return np.zeros(p.out.shape, np.int32)

    def returns_strings(p):
        return np.full(p.out.shape, "x")

    # p.kernel_ms: a number of milliseconds or None
    def kernel_ms_text(p):
        good(p)
        p.kernel_ms = "fast"

    def kernel_ms_true(p):
        good(p)
        p.kernel_ms = True

    def kernel_ms_nan(p):
        good(p)
        p.kernel_ms = float("nan")

    # supports() answers
    def s_array(p):
        return np.array([True, False])

    class Undecided:
        def __bool__(self):
            raise RuntimeError("cannot decide")

    def s_undecided(p):
        return Undecided()

    def s_surrogate(p):
        return "no \udc80 tiles for this"

    def s_numpy_false(p):
        return np.False_

    def s_numpy_true(p):
        return np.True_

    def s_os_exit(p):
        os._exit(3)
'''


def supports_kernel(answer):
    """HOSTILE with supports = the named answer of HOSTILE's supports() answers."""
    return HOSTILE + f"\n    supports = {answer}\n"


@dataclasses.dataclass
class Case:
    name: str
    function: str
    source: str = None       # None: HOSTILE (kernels.py); else the module's text (TMP/NAME.py)
    args: tuple = ()
    exit: int = 1
    status: str = "error"    # every row's; None: no rows are written (exit 2)
    reason: str = None       # regex: each row's reason, or stderr when exit is 2 (None: not checked)
    stderr: str = None       # regex the harness's stderr must match too
    target: str = None       # the --dut text ({path}: the module's file, {tmp}); default python:{path}:FUNCTION
    seconds: float = 300     # the run must end within this
    env: dict = None         # more environment of the harness ({tmp}, {library} replaced)
    skip: str = None         # why the entry does not run yet
    files: dict = None       # more files in the class's folder: name -> text ({tmp} replaced)


KERNELS = [
    # raise, hang, exit
    Case("segfault", "segfault", reason=r"killed by signal 11 \(Segmentation fault\)",
         stderr=r"Fatal Python error: Segmentation fault"),
    Case("exception", "raises", reason=r"raises\(\) raised KeyError: 'no such tile' \(at kernels\.py:\d+ in raises\)",
         stderr=r"Traceback \(most recent call last\)"),
    Case("exception_text_not_utf8", "raises_surrogate",
         reason=r"raises_surrogate\(\) raised ValueError: bad \\udc80 tile \(at kernels\.py:\d+ in raises_surrogate\)"),
    Case("exception_text_not_utf8_in_process", "raises_surrogate", args=("--in-process",),
         reason=r"raises_surrogate\(\) raised ValueError: bad \\udc80 tile"),
    Case("exception_whose_str_raises", "raises_unprintable",
         reason=r"raises_unprintable\(\) raised Unprintable: <str\(\) of the Unprintable raised RuntimeError> "
                r"\(at kernels\.py:\d+ in raises_unprintable\)"),
    Case("hang", "hangs", args=("--dut-timeout", "2"), reason=r"timed out after 2 s"),
    Case("leaked_thread", "leaks_thread", reason=r"left 1 thread\(s\) running after it returned: forgotten"),
    Case("sys_exit", "exits", reason=r"raised SystemExit"),
    Case("os_exit", "os_exit", reason=r"os_exit\(\) called os\._exit\(0\) \(at kernels\.py:\d+ in os_exit\)"),
    Case("os_exit_in_process", "os_exit", args=("--in-process",), reason=r"os_exit\(\) called os\._exit\(0\)"),
    Case("the_users_own_SWA_PYTHON_DUT_does_not_change_the_target", "raises",
         env={"SWA_PYTHON_DUT": "{tmp}/kernels.py:segfault"}, reason=r"raises\(\) raised KeyError"),
    Case("a_wrong_but_quiet_kernel_fails_in_process_too", "fills_zeros", args=("--in-process",), status="fail"),
    # fork: the sweep finishes, a forked child's os._exit really ends it, nothing is left running
    Case("fork_a_child_that_sleeps", "forks_sleeper", exit=0, status="pass"),
    Case("fork_a_child_that_calls_os_exit", "forks_exiting_child", exit=0, status="pass"),
    Case("fork_a_child_that_calls_os_exit_in_process", "forks_exiting_child", args=("--in-process",),
         exit=0, status="pass"),
    Case("multiprocessing_fork_child", "multiprocessing_child", exit=0, status="pass"),
    # print: text, escape codes, bytes that are not UTF-8, on stdout and stderr; the sweep finishes
    Case("print_text_escape_codes_and_bytes", "prints", exit=0, status="pass"),
    # allocate: --dut-memory-mb is another change's; enable this entry once it is in.
    Case("allocate_past_the_memory_limit", "allocates", args=("--dut-memory-mb", "200"),
         reason=r"held \d+ MiB of memory, over its limit of 200 MiB \(--dut-memory-mb\), and was killed"),
    # wrong shapes
    Case("wrong_shape", "wrong_shape", reason=r"returned an array of shape \(1, 2\); p\.out is \(\d+, \d+, 64\)"),
    Case("returns_a_scalar", "returns_scalar", reason=r"returned an array of shape \(\); p\.out is"),
    Case("returns_one_row_short", "returns_one_row_short", reason=r"returned an array of shape \(\d+, 8, 64\); p\.out is"),
    # wrong dtypes: a float64 array and a list are rounded and written; ints are numbers (wrong ones
    # here); strings cannot be written
    Case("returns_float64", "returns_float64", exit=0, status="pass"),
    Case("returns_a_list", "returns_list", exit=0, status="pass"),
    Case("returns_ints", "returns_ints", status="fail"),
    Case("returns_strings", "returns_strings", reason=r"its return value cannot be written to p\.out: ValueError"),
    Case("kernel_ms_text", "kernel_ms_text", reason=r"p\.kernel_ms must be None or a non-negative number of milliseconds, not 'fast'"),
    Case("kernel_ms_a_bool", "kernel_ms_true", reason=r"p\.kernel_ms must be None or a non-negative number of milliseconds, not True"),
    Case("kernel_ms_nan", "kernel_ms_nan", reason=r"p\.kernel_ms must be None or a non-negative number of milliseconds, not nan"),
    # supports(): what the glue cannot read is an error row naming it
    Case("supports_returns_an_array", "raises", source=supports_kernel("s_array"),
         reason=r"supports\(\) returned array\(\[ True, False\]\) \(a ndarray\); it must return True, False, None, "
                r"or a string"),
    Case("supports_returns_an_undecided_object", "raises", source=supports_kernel("s_undecided"),
         reason=r"supports\(\) returned <.*Undecided object at 0x.* \(a Undecided\); it must return True, False"),
    Case("supports_declines_with_text_not_utf8", "raises", source=supports_kernel("s_surrogate"), exit=0,
         status="skip", reason=r"^no \\udc80 tiles for this$"),
    Case("supports_declines_with_numpy_false", "raises", source=supports_kernel("s_numpy_false"), exit=0,
         status="skip", reason=r"^declined by supports\(\)$"),
    Case("supports_runs_it_with_numpy_true", "raises", source=supports_kernel("s_numpy_true"),
         reason=r"raises\(\) raised KeyError"),
    Case("supports_calls_os_exit", "raises", source=supports_kernel("s_os_exit"),
         reason=r"supports\(\) called os\._exit\(3\) \(at supports_calls_os_exit\.py:\d+ in s_os_exit\)"),
    Case("supports_calls_os_exit_in_process", "raises", source=supports_kernel("s_os_exit"), args=("--in-process",),
         reason=r"supports\(\) called os\._exit\(3\)"),
    # describe(): a name that is not UTF-8 runs
    Case("describe_name_not_utf8", "raises",
         source="import numpy as np\ndef describe():\n    return {'name': 'bad\\udc80name'}\n"
                "def raises(p):\n    raise KeyError('x')\n",
         reason=r"raises\(\) raised KeyError: 'x'"),
    # a .py file whose path holds ':'
    Case("a_path_with_colons", "fills_zeros", target="python:{tmp}/run:3/k.py:fills_zeros", status="fail",
         files={"run:3/k.py": "def fills_zeros(p, zero=0):\n    p.out[...] = zero\n"}),
    Case("a_path_with_colons_and_a_keyword", "fills_zeros", target="python:{tmp}/run:3/k.py:fills_zeros:zero=0",
         status="fail", files={"run:3/k.py": "def fills_zeros(p, zero=0):\n    p.out[...] = zero\n"}),
    # what swa_python_dut.py answers is read by python_dut.cpp with a guard: a text it cannot read is
    # named, not pybind11's bare words (a glue that lets a lone surrogate through, planted)
    Case("the_plugin_names_an_answer_it_cannot_read", "raises", env={"SWA_PYTHON_DUT_LIBRARY": "{tmp}/lib/{library}"},
         reason=r"swa_python_dut\.py's answer to (prefill|chunked_prefill|decode_step) could not be read as "
                r"\(rc, message, kernel_ms\): \(1, 'bad \\udc80 words', -1\.0\)"),
]

def Refused(name, function, **fields):
    """An entry of TARGETS: refused before anything runs, exit 2, `reason` matched against stderr."""
    return Case(name, function, exit=2, status=None, **fields)


TARGETS = [
    Refused("not_target_function", None, target="python:{tmp}/k.py", reason=r"is not python:TARGET:FUNCTION"),
    Refused("no_such_file", None, target="python:{tmp}/none.py:f", reason=r"no Python file .*none\.py"),
    Refused("no_such_module", None, target="python:no_such_module_here:f",
         reason=r"ModuleNotFoundError: No module named 'no_such_module_here'"),
    Refused("syntax_error", "f", source="def f(p):\n  x = = 1\n", reason=r"SyntaxError: .*syntax_error\.py, line 2"),
    Refused("exception_at_import", "f", source="raise RuntimeError('no device')\n",
         reason=r"RuntimeError: no device \(at exception_at_import\.py:1\)"),
    Refused("exception_at_import_text_not_utf8", "f", source="raise RuntimeError('no \\udc80 device')\n",
         reason=r"RuntimeError: no \\udc80 device \(at exception_at_import_text_not_utf8\.py:1\)"),
    Refused("exception_at_import_in_process", "f", source="raise RuntimeError('no \\udc80 device')\n",
         args=("--in-process",), reason=r"RuntimeError: no \\udc80 device"),
    Refused("no_such_function", "g", source="def f(p): pass\n", reason=r"has no function g \(its functions: f\)"),
    Refused("unknown_keyword", None, source="def f(p): pass\n", target="python:{path}:f:colour=red",
         reason=r"unexpected keyword argument 'colour'"),
    Refused("not_key_value", None, source="def f(p): pass\n", target="python:{path}:f:=red", reason=r"is not key=value"),
    Refused("describe_unknown_name", "f", source="def describe(): return {'dtypes': ['fp64']}\ndef f(p): pass\n",
         reason=r"describe\(\)\['dtypes'\]: 'fp64' is not one of fp32\|fp16\|bf16"),
    Refused("describe_unknown_key", "f", source="def describe(): return {'colour': 1}\ndef f(p): pass\n",
         reason=r"describe\(\) returned the key 'colour'; allowed: name, "),
    Refused("describe_key_not_utf8", "f", source="def describe(): return {'col\\udc80our': 1}\ndef f(p): pass\n",
         reason=r"describe\(\) returned the key 'col\\udc80our'; allowed: name, "),
    Refused("describe_int_over_64_bits", "f", source="def describe(): return {'query_tile': 2**70}\ndef f(p): pass\n",
         reason=r"describe\(\)\['query_tile'\] must be an integer 0\.\.2147483647, not 1180591620717411303424"),
    Refused("describe_int_over_32_bits", "f", source="def describe(): return {'key_tile': 2**40}\ndef f(p): pass\n",
         reason=r"describe\(\)\['key_tile'\] must be an integer 0\.\.2147483647, not 1099511627776"),
    Refused("describe_int_over_64_bits_in_process", "f", args=("--in-process",),
         source="def describe(): return {'query_tile': 2**70}\ndef f(p): pass\n",
         reason=r"describe\(\)\['query_tile'\] must be an integer 0\.\.2147483647"),
    Refused("describe_calls_os_exit", "f", source="import os\ndef describe(): os._exit(0)\ndef f(p): pass\n",
         reason=r"called os\._exit\(0\) \(at describe_calls_os_exit\.py:2\)"),
    Refused("describe_calls_os_exit_in_process", "f", args=("--in-process",),
         source="import os\ndef describe(): os._exit(0)\ndef f(p): pass\n", reason=r"called os\._exit\(0\)"),
    Refused("os_exit_at_import_in_process", "f", args=("--in-process",), source="import os\nos._exit(0)\n",
         reason=r"called os\._exit\(0\) \(at os_exit_at_import_in_process\.py:2\)"),
    Refused("a_colon_path_without_a_function", None, target="python:{tmp}/run:4/k.py", files={"run:4/k.py": "def f(p): pass\n"},
         reason=r"names the file .*run:4/k\.py but no FUNCTION"),
    Refused("a_colon_path_that_is_not_there", None, target="python:{tmp}/run:5/k.py:f", reason=r"no Python file .*run"),
    # python_dut.cpp's guard around the traits: a description it cannot read is named (planted glue)
    Refused("the_plugin_names_a_description_it_cannot_read", "f", source="def f(p): pass\n",
         env={"SWA_PYTHON_DUT_LIBRARY": "{tmp}/lib/{library}"},
         reason=r"could not be read as the plugin's traits at 'name' = 'x\\udc80"),
    # --dut-timeout bounds the load too (an import or a describe() that hangs)
    Refused("import_hangs", "f", source="import time\ntime.sleep(3600)\ndef f(p): pass\n", args=("--dut-timeout", "3"),
         seconds=30, reason=r"timed out after 3 s"),
    Refused("describe_hangs", "f", source="import time\ndef describe():\n    time.sleep(3600)\ndef f(p): pass\n",
         args=("--dut-timeout", "3"), seconds=30, reason=r"timed out after 3 s"),
]

# A glue that lets through what the real one never does, to see python_dut.cpp's guards: a name
# and a message holding a lone surrogate, which pybind11 cannot cast to std::string.
PLANTED_GLUE = r'''
import importlib.util
_spec = importlib.util.spec_from_file_location("_real_swa_python_dut", {real!r})
real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real)
LoadError = real.LoadError


def load(spec, choices):
    d = real.load(spec, choices)
    if "the_plugin_names_a_description" in spec:
        d["name"] = "x\udc80"
    return d


def call(spec, op, index, fields, cache):
    rc, message, ms = real.call(spec, op, index, fields, cache)
    return (rc, message, ms) if op == "supports" else (1, "bad \udc80 words", -1.0)
'''


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def rows(path):
    with h5py.File(path) as f:
        table = results_table(f)
    return {text(r["scenario_id"]): (text(r["status"]), text(r["reason"])) for r in table}


def processes_with(marker):
    """PIDs of this machine's processes whose environment holds `marker` (this test's own target)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def end_processes_with(marker):
    """Kills what this test started and left (each carries `marker` in its environment); their PIDs."""
    left = processes_with(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


class Table(unittest.TestCase):
    """Runs the entries of CASES, one test each, in one folder per class: TMP/kernels.py (HOSTILE),
    numpy_kernel.py beside it, an entry's own module as TMP/NAME.py."""

    CASES = []

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="swa-hostile-")
        cls.tmp = cls.folder.name
        # Every process a run starts carries this in its environment: the test's own, to look for.
        cls.marker = f"SWA_HOSTILE_TEST={cls.tmp}"
        with open(os.path.join(cls.tmp, "kernels.py"), "w") as f:
            f.write(textwrap.dedent(HOSTILE))
        shutil.copy(os.path.join(EXAMPLES, "numpy_kernel.py"), cls.tmp)
        lib = os.path.join(cls.tmp, "lib")
        os.mkdir(lib)
        shutil.copy(LIBRARY, lib)
        with open(os.path.join(lib, "swa_python_dut.py"), "w") as f:
            f.write(PLANTED_GLUE.format(real=os.path.join(os.path.dirname(LIBRARY), "swa_python_dut.py")))

    @classmethod
    def tearDownClass(cls):
        end_processes_with(cls.marker)
        cls.folder.cleanup()

    def fill(self, value, path=""):
        return value.format(tmp=self.tmp, path=path, library=os.path.basename(LIBRARY))

    def run_case(self, case):
        if case.skip:
            self.skipTest(case.skip)
        path = os.path.join(self.tmp, "kernels.py")
        if case.source is not None:
            path = os.path.join(self.tmp, case.name + ".py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(case.source))
        for name, body in (case.files or {}).items():
            os.makedirs(os.path.dirname(os.path.join(self.tmp, name)), exist_ok=True)
            with open(os.path.join(self.tmp, name), "w") as f:
                f.write(self.fill(body))
        dut = self.fill(case.target, path) if case.target else f"python:{path}:{case.function}"
        out = os.path.join(self.tmp, case.name + ".h5")
        env = dict(os.environ, SWA_HOSTILE_TEST=self.tmp)
        env.update({k: self.fill(v) for k, v in (case.env or {}).items()})
        command = [HARNESS, "run", CI, "--filter", FEW, "--dut", dut, "--out", out,
                   *(self.fill(a) for a in case.args)]
        start = time.time()
        harness = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                   start_new_session=True)
        try:
            stdout, stderr = harness.communicate(timeout=case.seconds + 30)
        except subprocess.TimeoutExpired:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.communicate()
            end_processes_with(self.marker)
            self.fail(f"{dut} still ran after {case.seconds + 30} s (it should end within {case.seconds} s)")
        seconds = time.time() - start
        stdout, stderr = (x.decode("utf-8", "backslashreplace") for x in (stdout, stderr))
        left = end_processes_with(self.marker)
        said = f"{dut}\nexit {harness.returncode}\n{stdout[-2000:]}\n{stderr[-3000:]}"
        self.assertEqual(harness.returncode, case.exit, said)
        self.assertLess(seconds, case.seconds, said)
        self.assertEqual(left, [], "a process of this test's kernel was still running")
        self.assertNotIn(UNABLE_TO_CAST, stdout + stderr)
        self.assertNotIn("\x1b", stdout + stderr)  # the kernel's escape codes do not reach the console
        if case.stderr:
            self.assertRegex(stderr, case.stderr)
        if case.status is None:
            self.assertRegex(stderr, case.reason)
            self.assertNotIn("At:", stderr)  # one line, not the embedding's trace
            self.assertFalse(os.path.exists(out))
            return
        got = rows(out)
        self.assertEqual(len(got), 3, got)  # the sweep finished: a row per scenario
        for scenario, (status, reason) in got.items():
            self.assertEqual(status, case.status, (scenario, reason))
            if case.reason is not None:
                self.assertRegex(reason, case.reason, scenario)
            self.assertNotIn(UNABLE_TO_CAST, reason)


def table(cls, cases):
    """`cls` with a test_NAME per case."""
    for case in cases:
        def test(self, case=case):
            self.run_case(case)
        test.__doc__ = f"{case.name}: python:...:{case.function} -> exit {case.exit}, {case.status} {case.reason!r}"
        assert not hasattr(cls, "test_" + case.name), case.name
        setattr(cls, "test_" + case.name, test)
    return cls


class HostileKernels(Table):
    """Kernels that load and then misbehave: each scenario's row says how."""


class BadTargets(Table):
    """Targets refused before anything runs: exit 2 and one line naming the problem."""


table(HostileKernels, KERNELS)
table(BadTargets, TARGETS)


class OtherEntryPoints(unittest.TestCase):
    """The same TARGET parse where python: targets are named outside --dut."""

    def test_the_exec_adapter_loads_a_path_with_colons(self):
        adapter = os.path.join(EXAMPLES, "..", "..", "python", "exec_adapter.py")
        with tempfile.TemporaryDirectory() as tmp:
            os.mkdir(os.path.join(tmp, "run:1"))
            with open(os.path.join(tmp, "run:1", "k.py"), "w") as f:
                f.write("def f(p, zero=0):\n    p.out[...] = zero\n")
            r = subprocess.run(["/usr/bin/python3", adapter, "--time", tmp, f"{tmp}/run:1/k.py:f:zero=0"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"^0 requests")


if __name__ == "__main__":
    HARNESS, CI, EXAMPLES, LIBRARY = (os.path.abspath(a) for a in sys.argv[1:5])
    del sys.argv[1:5]
    unittest.main(verbosity=2)
