#!/usr/bin/env python3
"""The READMEs a newcomer reads first, run as written: every fenced code block of README.md,
harness/python/README.md and dut/python/README.md is either run here (in a fresh folder that holds
only `build`, `scenarios` and `dut` as links to this checkout, as a user's checkout would) or named
below as an illustration, with the reason. A block that is neither fails the test, so a new block is
run from the day it is written.

What is not run as written is said in RUN_AS_WRITTEN_EXCEPT, beside the block.

usage: test_readme.py REPO_ROOT BUILD_DIR
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

import h5py

ROOT = BUILD = None
DOCS = ("README.md", "harness/python/README.md", "dut/python/README.md")

# Blocks that show a shape, not a thing to run: (document, first line) -> why not run.
ILLUSTRATIONS = {
    ("dut/python/README.md", "def attention(p, **keyword_arguments):"):
        "a signature whose body is `...`: the numpy and torch examples are the runnable kernels",
}

# Indented (four-space) blocks: commands another check runs as written. A new one must be added here.
RUN_ELSEWHERE = {
    "scripts/main.sh": "the main job: no test runs it whole (its sweeps and report take many minutes); the tour "
                       "block runs its parts",
    "scripts/test.sh": "the test command: .ci/run runs it, and so this test",
    "/usr/bin/python3 -m venv --system-site-packages V && V/bin/pip install --no-build-isolation --no-index .":
        "harness/tests/test_install.py installs into a venv with it and runs what it installed",
}

# Lines of a block the test does not run as they are, and why (the rest of the block is run as written).
RUN_AS_WRITTEN_EXCEPT = {
    "scripts/build.sh": "the suite's own build made build/ already; a second build inside a test would "
                        "only repeat it",
}


def code_blocks(document):
    """(line number, language, text, the paragraph just before) of each fenced block."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, language = i, m.group(1)
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = []
        for line in reversed(lines[:start]):
            if not line.strip() or line.startswith("```"):
                if before:
                    break
                continue
            before.insert(0, line)
        blocks.append((start + 1, language, "\n".join(body) + "\n", " ".join(before)))
        i += 1
    return blocks


def logical_commands(text):
    """A shell block's commands: backslash-continued lines joined, blank and comment-only lines dropped."""
    commands, pending = [], ""
    for line in text.split("\n"):
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        if pending.strip() and not pending.strip().startswith("#"):
            commands.append(pending.rstrip("\n"))
        pending = ""
    return commands


class Readmes(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="swa-readme-")
        self.here = self._tmp.name
        os.symlink(BUILD, os.path.join(self.here, "build"))
        for name in ("scenarios", "dut"):
            os.symlink(os.path.join(ROOT, name), os.path.join(self.here, name))

    def tearDown(self):
        self._tmp.cleanup()

    def shell(self, commands, expected, env=None):
        """Runs `commands` one after another in one bash (so variables carry over, as in a terminal);
        each must exit with expected(command). Returns each command's output."""
        outputs = []
        environment = dict(os.environ, **(env or {}))
        script = ""
        for n, command in enumerate(commands):
            script += f"{{\n{command}\n}} > out-{n}.txt 2>&1; echo \"$?\" > rc-{n}.txt\n"
        subprocess.run(["bash", "-c", script], cwd=self.here, env=environment, timeout=1800, check=False)
        for n, command in enumerate(commands):
            with open(os.path.join(self.here, f"out-{n}.txt"), errors="replace") as f:
                output = f.read()
            with open(os.path.join(self.here, f"rc-{n}.txt")) as f:
                rc = int(f.read())
            self.assertEqual(rc, expected(command), f"{command}\n{output[-3000:]}")
            outputs.append(output)
        return outputs

    def test_every_block_is_run_or_named(self):
        known = set(ILLUSTRATIONS) | set(HOW)
        for document in DOCS:
            for line, _, text, _ in code_blocks(document):
                first = text.split("\n", 1)[0].strip()
                with self.subTest(f"{document}:{line}"):
                    self.assertIn((document, first), known,
                                  f"{document}:{line} is a code block this test neither runs nor names as an "
                                  f"illustration (its first line: {first!r}); add it to HOW or ILLUSTRATIONS")

    def test_every_indented_command_is_run_somewhere(self):
        for document in DOCS:
            with open(os.path.join(ROOT, document), encoding="utf-8") as f:
                lines = f.read().split("\n")
            fenced = False
            for n, line in enumerate(lines):
                fenced ^= line.startswith("```")
                if not fenced and re.match(r"^    [^ \-*|]", line) and (n == 0 or not lines[n - 1].strip()):
                    with self.subTest(f"{document}:{n + 1}"):
                        self.assertIn(line.strip(), RUN_ELSEWHERE,
                                      f"{document}:{n + 1} is an indented command no test runs; run it or add it to "
                                      f"RUN_ELSEWHERE with the check that runs it")

    def block(self, document, first):
        for line, language, text, before in code_blocks(document):
            if text.split("\n", 1)[0].strip() == first:
                return text, before
        self.fail(f"{document} has no block starting {first!r} any more")

    def test_the_tour(self):
        text, _ = self.block("README.md", "H=build/harness/swa-harness")
        commands = logical_commands(text)
        # The run with a mutant fails by design (exit 1), and bisect reproduces it (exit 1); everything else
        # must succeed.
        outputs = self.shell(commands, lambda c: 1 if "mutant:" in c and (" run " in c or " bisect " in c) else 0)
        joined = "\n".join(outputs)
        # The repro's rerun line bisect printed pastes from another folder with nothing on PATH.
        rerun = re.search(r"rerun it with\n +(.+)\n", joined).group(1)
        with tempfile.TemporaryDirectory() as elsewhere:
            p = subprocess.run(rerun, shell=True, cwd=elsewhere, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PATH="/usr/bin:/bin"))
            self.assertEqual(p.returncode, 1, rerun + "\n" + p.stdout[-2000:] + p.stderr[-2000:])
            self.assertEqual(os.listdir(elsewhere), [])
        self.assertTrue(os.path.exists(os.path.join(self.here, "why", "rerun.h5")))
        self.assertRegex(joined, r"failures: \d+ in \d+ group")
        self.assertTrue(os.path.exists(os.path.join(self.here, "report", "report.html")))
        self.assertTrue(os.path.exists(os.path.join(self.here, "why", "report.txt")))
        with h5py.File(os.path.join(self.here, "mine.h5"), "r") as f:
            statuses = {int(s) for s in f["results"]["status"]}
        self.assertNotIn(2, statuses, "the example plugin fails ci.yaml")

    def test_the_quickstart_passes_ci_yaml(self):
        text, before = self.block("README.md", "import numpy as np")
        name = re.search(r"Save this as `([\w.]+)`", before).group(1)
        command = re.search(r"and run `([^`]+)`", before).group(1)
        with open(os.path.join(self.here, name), "w") as f:
            f.write(text)
        outputs = self.shell([command + " --out quickstart.h5"], lambda c: 0)
        self.assertRegex(outputs[0], r"\n(\d+) passed, 0 failed, \d+ skipped")
        passed = int(re.search(r"\n(\d+) passed, 0 failed", outputs[0]).group(1))
        self.assertGreater(passed, 10, outputs[0][-2000:])
        # The README says what it runs, in numbers: they must be this run's.
        skipped = int(re.search(r"\n\d+ passed, 0 failed, (\d+) skipped", outputs[0]).group(1))
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = " ".join(f.read().split())
        claim = re.search(r"(\d+) of ci.yaml's (\d+) cases pass .*? the other (\d+) are skips", readme)
        self.assertIsNotNone(claim, "README.md no longer says how many ci.yaml cases the quickstart runs")
        self.assertEqual(tuple(map(int, claim.groups())), (passed, passed + skipped, skipped),
                         "README.md's counts of what the quickstart runs are not this run's")
        # The README says the block is the example file: the same code.
        with open(os.path.join(ROOT, "dut", "external", "examples", "quickstart_kernel.py")) as f:
            example = f.read()
        code = lambda t: [l.split("#")[0].rstrip() for l in t.split("\n") if l.split("#")[0].strip()]
        block_code = code(text)
        self.assertTrue(all(l in code(example) for l in block_code),
                        "README.md's quickstart and dut/external/examples/quickstart_kernel.py differ")

    def test_the_python_module_block(self):
        text, _ = self.block("harness/python/README.md", "scripts/build.sh                                   # or scripts/test.sh")
        commands = [c for c in logical_commands(text) if c.split("#")[0].strip() not in RUN_AS_WRITTEN_EXCEPT]
        outputs = self.shell(commands, lambda c: 0)
        self.assertRegex(outputs[-1], r"^\d+\n$")

    def test_the_pytest_block(self):
        text, _ = self.block("harness/python/README.md",
                             "# test_my_kernel.py; run: PYTHONPATH=build/python pytest -p swa_harness.pytest_plugin test_my_kernel.py")
        name, command = re.match(r"# (\S+); run: (.+)$", text.split("\n", 1)[0]).groups()
        with open(os.path.join(self.here, name), "w") as f:
            f.write(text)
        # `my_kernel` is the reader's own: here the NumPy example, which runs every case of the sweep.
        with open(os.path.join(ROOT, "dut", "external", "examples", "numpy_kernel.py")) as src, \
                open(os.path.join(self.here, "my_kernel.py"), "w") as dst:
            dst.write(src.read())
        outputs = self.shell([command], lambda c: 0)
        self.assertRegex(outputs[0], r"\d+ passed")
        self.assertNotRegex(outputs[0], r"\d+ failed")

    def test_the_python_dut_commands(self):
        text, _ = self.block("dut/python/README.md",
                             "swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/numpy_kernel.py:attention")
        commands = logical_commands(text)
        # The module and the file the second and third lines name are the reader's: here the NumPy
        # example under those names, taking the third line's keyword arguments.
        with open(os.path.join(ROOT, "dut", "external", "examples", "numpy_kernel.py")) as f:
            kernel = f.read() + "\n\ndef swa(p, block=None, fast=None):\n    return attention(p)\n"
        os.makedirs(os.path.join(self.here, "mypkg"))
        for path in ("mypkg/__init__.py", "mypkg/kernels.py", "kernels.py"):
            with open(os.path.join(self.here, path), "w") as f:
                f.write("" if path.endswith("__init__.py") else kernel)
        # The first line runs all of ci.yaml as written; the other two name the same kernel another way,
        # so they run one sweep of it (window_edges), each to its own file.
        runs = [commands[0] + " --out first.h5"]
        runs += [c.split("#")[0].rstrip() + f" --sweep window_edges --out other-{n}.h5" for n, c in enumerate(commands[1:])]
        path = os.path.join(BUILD, "harness") + os.pathsep + os.environ["PATH"]
        outputs = self.shell(runs, lambda c: 0, env={"PATH": path, "PYTHONPATH": self.here})
        for output in outputs:
            self.assertRegex(output, r"\n[1-9]\d* passed, 0 failed")


HOW = {
    ("README.md", "H=build/harness/swa-harness"): Readmes.test_the_tour,
    ("README.md", "import numpy as np"): Readmes.test_the_quickstart_passes_ci_yaml,
    ("harness/python/README.md", "scripts/build.sh                                   # or scripts/test.sh"):
        Readmes.test_the_python_module_block,
    ("harness/python/README.md",
     "# test_my_kernel.py; run: PYTHONPATH=build/python pytest -p swa_harness.pytest_plugin test_my_kernel.py"):
        Readmes.test_the_pytest_block,
    ("dut/python/README.md",
     "swa-harness run scenarios/ci.yaml --dut python:dut/external/examples/numpy_kernel.py:attention"):
        Readmes.test_the_python_dut_commands,
}

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ROOT, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
