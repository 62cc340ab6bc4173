#!/usr/bin/env python3
"""Two runs at once, and a run killed outright (kill -9): no run's rows lost, nothing of it left.

usage: test_concurrency.py PATH/TO/swa-harness PATH/TO/numpy_dut.py

- Two `run`s on one --out: the second exits 2 before it runs anything, naming the file and the
  first run's pid; the first keeps every row; a run after it succeeds; the lock file of a run killed
  outright does not block the next one (results_store.hpp, platform/lock_file.hpp).
- An exec: DUT's command dies with a harness killed by SIGKILL (PR_SET_PDEATHSIG); what the command
  started and its scratch folder are removed by the next run with an exec DUT, and a live owner's
  processes and folders are not (platform/README.md).

Every process a test starts carries SWA_CONCURRENCY_TEST=<its own marker> in its environment; the
clean-up ends only processes with that marker.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_h5 import results_table  # noqa: E402

HARNESS = EXAMPLE = None
MARK = "SWA_CONCURRENCY_TEST"
SWEEP = "sweeps:\n  small:\n    matrix: {window: [4, 8, 16]}\n"
SCENARIOS = 3


def text(x):
    return x.decode() if isinstance(x, bytes) else x


def stored_pairs(path):
    with h5py.File(path) as f:
        return [(text(r["scenario_id"]), text(r["dut"])) for r in results_table(f)]


def environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def marked(marker):
    """The pids of the processes whose environment has MARK=marker."""
    entry = f"{MARK}={marker}".encode()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and entry in environ_of(p)]


def gone(pid):
    """No such process, or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def gone_within(pid, seconds):
    deadline = time.time() + seconds
    while not gone(pid) and time.time() < deadline:
        time.sleep(0.05)
    return gone(pid)


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def owner_tag_of_self():
    """platform::owner_tag() of this process: "<pid>-<start ticks>-<pid namespace inode>"."""
    with open("/proc/self/stat") as f:
        stat = f.read()
    start = stat[stat.rfind(")") + 2:].split()[19]  # field 22
    return f"{os.getpid()}-{start}-{os.stat('/proc/self/ns/pid').st_ino}"


class Marked(unittest.TestCase):
    """Runs the harness with an environment of this test's own, and ends its processes at the end."""

    def setUp(self):
        self.marker = uuid.uuid4().hex
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.scratch = os.path.join(self.tmp, "scratch")  # the harness's TMPDIR: its scratch folders
        os.mkdir(self.scratch)
        self.env = dict(os.environ, **{MARK: self.marker, "TMPDIR": self.scratch})
        self.sweep = os.path.join(self.tmp, "small.yaml")
        with open(self.sweep, "w") as f:
            f.write(SWEEP)
        self.addCleanup(self.end_marked)

    def end_marked(self):
        for pid in marked(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def start(self, *args, env=None):
        return subprocess.Popen([HARNESS, *map(str, args)], env=env or self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace")

    def run_harness(self, *args):
        return subprocess.run([HARNESS, *map(str, args)], env=self.env, capture_output=True, text=True,
                              errors="replace", timeout=600)

    def slow_dut(self, seconds):
        """An exec: DUT that sleeps `seconds` before each call (the describe request too)."""
        return f"exec:sleep {seconds}; /usr/bin/python3 {EXAMPLE}"


class TwoRunsOnOneOut(Marked):
    def test_the_second_run_is_refused_and_the_first_keeps_every_row(self):
        out = os.path.join(self.tmp, "r.h5")
        first = self.start("run", self.sweep, "--dut", self.slow_dut(1), "--out", out)
        try:
            lock = out + ".lock"
            wait_for(lambda: os.path.exists(lock) and f"pid {first.pid} " in open(lock).read(), 60,
                     "the first run's lock file")
            with open(lock) as f:
                holder = f.read()
            self.assertIn("swa-harness run", holder)
            self.assertIn(f"--out {out}", holder)
            t0 = time.time()
            second = self.run_harness("run", self.sweep, "--dut", "cpu", "--out", out)
            self.assertIsNone(first.poll(), "the first run ended before the second was refused: the test proves nothing")
            self.assertEqual(second.returncode, 2, second.stderr[-2000:])
            self.assertIn(f"{out} is being written by another run: pid {first.pid} on ", second.stderr)
            self.assertIn("wait for it or give another --out", second.stderr)
            self.assertNotIn("PASS", second.stdout)  # it ran nothing
            self.assertLess(time.time() - t0, 30)
            self.assertTrue(os.path.exists(lock), "the refused run removed the first run's lock file")
            _, err = first.communicate(timeout=600)
            self.assertEqual(first.returncode, 0, err[-2000:])
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        pairs = stored_pairs(out)
        self.assertEqual(len(pairs), SCENARIOS, pairs)
        self.assertEqual({d for _, d in pairs}, {self.slow_dut(1)})
        self.assertFalse(os.path.exists(out + ".lock"), "the lock file outlived the run")
        after = self.run_harness("run", self.sweep, "--dut", "cpu", "--out", out)
        self.assertEqual(after.returncode, 0, after.stderr[-2000:])
        self.assertEqual({d for _, d in stored_pairs(out)}, {"cpu"})
        self.assertFalse(os.path.exists(out + ".lock"))

    def test_the_lock_file_of_a_run_killed_outright_does_not_block_the_next(self):
        out = os.path.join(self.tmp, "r.h5")
        killed = self.start("run", self.sweep, "--dut", self.slow_dut(2), "--out", out)
        try:
            wait_for(lambda: os.path.exists(out + ".lock") and f"pid {killed.pid} " in open(out + ".lock").read(),
                     60, "the run's lock file")
        finally:
            killed.kill()
            killed.communicate()
        self.assertTrue(os.path.exists(out + ".lock"), "kill -9 runs no clean-up: its lock file stays")
        after = self.run_harness("run", self.sweep, "--dut", "cpu", "--out", out, "--resume")
        self.assertEqual(after.returncode, 0, after.stderr[-2000:])
        self.assertEqual(len(stored_pairs(out)), SCENARIOS)
        self.assertFalse(os.path.exists(out + ".lock"))


class ExecDutOfAKilledHarness(Marked):
    def test_the_command_dies_with_the_harness_and_the_next_run_ends_the_rest(self):
        pids = os.path.join(self.tmp, "pids")
        os.mkdir(pids)
        script = os.path.join(self.tmp, "dut.sh")
        with open(script, "w") as f:
            f.write('case "$1" in *describe.h5) exit 3;; esac\n'  # no description: it runs everything
                    f'echo $$ > {pids}/child.tmp && mv {pids}/child.tmp {pids}/child\n'
                    'sleep 9861 &\n'                          # a grandchild in its group
                    f'echo $! > {pids}/grandchild.tmp\n'
                    'setsid sleep 9862 </dev/null >/dev/null 2>&1 &\n'  # and one in a session of its own
                    f'echo $! >> {pids}/grandchild.tmp && mv {pids}/grandchild.tmp {pids}/grandchild\n'
                    'exec sleep 9863\n')
        out = os.path.join(self.tmp, "r.h5")
        harness = self.start("run", self.sweep, "--dut", f"exec:exec /bin/sh {script}", "--out", out,
                             "--exec-timeout", "600")
        try:
            wait_for(lambda: os.path.exists(os.path.join(pids, "grandchild")), 60, "the DUT's grandchildren")
            with open(os.path.join(pids, "child")) as f:
                child = int(f.read())
            with open(os.path.join(pids, "grandchild")) as f:
                grandchildren = [int(line) for line in f.read().split()]
            stale = [d for d in os.listdir(self.scratch) if d.startswith("swa-exec")]
            self.assertEqual(len(stale), 1, stale)  # the request's folder (the describe request's is gone)
            self.assertIn(f".{harness.pid}-", stale[0])
        finally:
            harness.kill()
            harness.communicate()
        self.assertTrue(gone_within(child, 5), f"the exec DUT's command (pid {child}) outlived the harness")
        # The rest lives on until the next run with an exec DUT: nothing of the dead harness is left to end it.
        for pid in grandchildren:
            self.assertFalse(gone(pid), f"pid {pid} ended before the next run: the test proves nothing")
        self.assertTrue(os.path.isdir(os.path.join(self.scratch, stale[0])))

        # What a live owner (this test) holds is not the next run's to take: a folder named as a live
        # harness's, and a process in its scope.
        live_tag = owner_tag_of_self()
        live_folder = os.path.join(self.scratch, f"swa-exec.{live_tag}-{os.getpid()}-0")
        os.mkdir(live_folder)
        live_env = dict(self.env, SWA_PROCESS_SCOPE=f"{live_tag}x0123456789abcdef.0")
        live = subprocess.Popen(["sleep", "9864"], env=live_env)
        self.addCleanup(live.wait)
        self.addCleanup(live.kill)
        # And a folder of a dead owner whose pid is now taken by this test (another start time).
        reused_folder = os.path.join(self.scratch, f"swa-exec-describe.{os.getpid()}-1-{live_tag.split('-')[2]}-5-0")
        os.mkdir(reused_folder)

        quick = self.run_harness("run", self.sweep, "--filter", "/w=4/", "--dut",
                                 f"exec:/usr/bin/python3 {EXAMPLE}", "--out", os.path.join(self.tmp, "quick.h5"))
        self.assertEqual(quick.returncode, 0, quick.stderr[-2000:])
        for pid in grandchildren:
            self.assertTrue(gone_within(pid, 5), f"pid {pid}, left by the killed harness's DUT, outlived the next run")
        self.assertFalse(os.path.exists(os.path.join(self.scratch, stale[0])), "the dead run's scratch folder was kept")
        self.assertFalse(os.path.exists(reused_folder), "a folder whose owner's pid was reused was kept")
        self.assertTrue(os.path.isdir(live_folder), "a live run's scratch folder was removed")
        self.assertIsNone(live.poll(), "a live owner's process was ended")
        self.assertEqual([d for d in os.listdir(self.scratch) if d.startswith("swa-exec")],
                         [os.path.basename(live_folder)])


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    HARNESS, EXAMPLE = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
