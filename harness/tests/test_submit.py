#!/usr/bin/python3
"""`swa-harness submit` and `collect` without a scheduler: the scripts, bad input, and collection.

usage: test_submit.py PATH/TO/swa-harness CI_YAML COMPARE_RESULTS_SCRIPT

A real Slurm runs the scripts in test_slurm.py (label slurm). Here `sbatch` is a stand-in on PATH
that records its arguments and prints a job id, and the array script is run by hand with
SLURM_ARRAY_TASK_ID set, the way a Slurm node would run it; so every check here runs on any machine.
"""
import json
import os
import shutil
import re
import stat
import subprocess
import sys
import tempfile
import unittest

import h5py

HARNESS = CI = COMPARE = None
FILTER = "^mode=decode/seqs=60/hq=4/"  # 6 scenarios


def harness(*args, env=None, cwd=None, timeout=600):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def fake_sbatch(folder, exit_code=0, message="", warning=""):
    """An sbatch that appends its arguments to folder/sbatch.calls and prints the next job id
    (after `warning` on stderr, as sbatch does for a deprecated option)."""
    path = os.path.join(folder, "sbatch")
    with open(path, "w") as f:
        f.write(f"""#!/bin/bash
echo "$*" >> {folder}/sbatch.calls
n=$(wc -l < {folder}/sbatch.calls)
{"echo " + repr(warning) + " >&2" if warning else ""}
{"echo " + repr(message) + " >&2; exit " + str(exit_code) if exit_code else 'echo "$((100 + n));cluster"'}
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH=folder + ":" + os.environ["PATH"])


def read(path):
    with open(path) as f:
        return f.read()


def run_task(out, shard, env=None):
    """One array task, as slurmd would start it."""
    e = dict(env or os.environ, SLURM_ARRAY_TASK_ID=str(shard), SLURM_JOB_ID=str(200 + shard))
    return subprocess.run(["bash", os.path.join(out, "array.sbatch")], capture_output=True, text=True, env=e, timeout=600)


class Scripts(unittest.TestCase):
    def test_dry_run_prints_both_scripts_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            dut = "exec:/usr/bin/python3 /opt/team's dut.py --mode fast"
            r = harness("submit", CI, "--slurm", "--shards", "3", "--out", out, "--partition", "gpu", "--time", "1:30:00",
                        "--gpus-per-task", "1", "--cpus-per-task", "4", "--max-parallel", "2", "--sbatch-arg",
                        "--account=lab", "--dut", dut, "--dry-run")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(os.path.exists(out), "a dry run wrote the folder")
            text = r.stdout
            for line in ["#SBATCH --array=0-2%2", "#SBATCH --partition=gpu", "#SBATCH --time=1:30:00",
                         "#SBATCH --gpus-per-task=1", "#SBATCH --cpus-per-task=4", "#SBATCH --account=lab",
                         "#SBATCH --requeue", f"#SBATCH --output={out}/logs/shard-%a.log", "--resume",
                         f"#SBATCH --output={out}/logs/merge.log", f"collect {out}",
                         f"sbatch --parsable --dependency=afterany:ARRAY_JOB_ID {out}/merge.sbatch"]:
                self.assertIn(line, text)
            # The exec: command reaches the run as one word, its quote and spaces intact.
            run_line = next(l for l in text.splitlines() if " run " in l and "--shard" in l)
            words = subprocess.run(["bash", "-c", 'printf "%s\\n" ' + run_line.split(" run ", 1)[1].replace('"$dir', '"DIR')
                                    .replace('"$shard', '"K')], capture_output=True, text=True).stdout.splitlines()
            self.assertIn(dut, words)
            total = len(harness("list", CI).stdout.split())
            self.assertIn(f"{total} scenarios in 3 shards", text)

    def test_bad_input_is_refused_by_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            cases = [
                (["--shards", "0"], "--shards"),
                (["--shards", "2", "--time", "1:2:3:4"], "--time: '1:2:3:4' is not a Slurm time limit"),
                (["--shards", "2", "--partition", "a b"], "--partition: 'a b'"),
                (["--shards", "2", "--sbatch-arg", "--array=0-9"], "--array is set by submit itself"),
                (["--shards", "2", "--sbatch-arg", "--account lab"], "--sbatch-arg: '--account lab'"),
                (["--shards", "2", "--sbatch-arg", "--time=5"], "use submit's own --time"),
                (["--shards", "2", "--dut", "nonesuch"], "option --dut"),
                (["--shards", "2", "--filter", "no-such-scenario"], "no scenario selected"),
                (["--shards", "2", "--gpus-per-task", "-1"], "--gpus-per-task"),
                # sbatch's abbreviations of the options submit sets are those options
                (["--shards", "2", "--sbatch-arg", "--arr=0-3"], "--array is set by submit itself"),
                (["--shards", "2", "--sbatch-arg", "--no-req"], "--no-requeue is set by submit itself"),
                # values that overflowed std::regex's stack
                (["--shards", "2", "--time", "1" * 40000], "--time: 40000 characters"),
                (["--shards", "2", "--sbatch-arg", "--comment=" + "x" * 40000], "--sbatch-arg: a value of 40010"),
                (["--shards", "2", "--partition", "p" * 40000], "--partition: 40000 characters"),
            ]
            for extra, message in cases:
                r = harness("submit", CI, "--slurm", "--out", out, *extra, "--dry-run")
                self.assertEqual(r.returncode, 2, f"{extra}: {r.stdout}{r.stderr}")
                self.assertIn(message, r.stderr, extra)
            r = harness("submit", CI, "--shards", "2", "--out", out, "--dry-run")
            self.assertEqual(r.returncode, 2)
            self.assertIn("--slurm is required", r.stderr)
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", os.path.join(tmp, "a b"), "--dry-run")
            self.assertEqual(r.returncode, 2)
            self.assertIn("option --out", r.stderr)
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", os.path.join(tmp, "run-%j"), "--dry-run")
            self.assertEqual(r.returncode, 2)
            self.assertIn("holds '%', which Slurm expands", r.stderr)
            self.assertFalse(os.path.exists(out))
            # A newline in the sweep file's name would be a line of its own in the scripts.
            injected = os.path.join(tmp, "ci\necho INJECTED\n.yaml")
            shutil.copy(CI, injected)
            r = harness("submit", injected, "--slurm", "--shards", "2", "--out", out, "--dry-run")
            self.assertEqual(r.returncode, 2, r.stdout)
            self.assertIn("the sweep file's path holds a control character", r.stderr)
            self.assertNotIn("INJECTED", r.stdout)

    def test_no_sbatch_and_a_used_folder_are_refused_before_anything_is_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            env = dict(os.environ, PATH=tmp)  # no sbatch anywhere
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, env=env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("sbatch is not on PATH", r.stderr)
            self.assertFalse(os.path.exists(out))
            os.makedirs(out)
            with open(os.path.join(out, "keep.txt"), "w") as f:
                f.write("results of last night")
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, env=fake_sbatch(tmp))
            self.assertEqual(r.returncode, 2)
            self.assertIn("not an empty folder", r.stderr)
            self.assertEqual(os.listdir(out), ["keep.txt"])

    def test_sbatch_refusing_is_reported_with_its_message(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            env = fake_sbatch(tmp, exit_code=1, message="sbatch: error: invalid partition specified: nope")
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, env=env)
            self.assertEqual(r.returncode, 2)
            self.assertIn("invalid partition specified: nope", r.stderr)
            self.assertIn(f"sbatch --parsable {out}/array.sbatch", r.stderr)


    def test_a_warning_on_sbatch_s_stderr_is_not_a_refusal(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            env = fake_sbatch(tmp, warning="sbatch: warning: --cpus-per-task is deprecated here")
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("warning: --cpus-per-task is deprecated here", r.stderr)  # shown, not swallowed
            self.assertEqual(len(read(os.path.join(tmp, "sbatch.calls")).splitlines()), 2)  # array and merge, once each


class CiMatrixExamples(unittest.TestCase):
    """scripts/ci-matrix/: valid YAML, real subcommands, and as many shards as the matrix has jobs."""

    def test_examples_use_real_commands_and_consistent_shard_counts(self):
        import yaml
        folder = os.path.join(os.path.dirname(COMPARE), "ci-matrix")
        commands = set(re.findall(r"(?m)^  (\w[\w-]*)  ", harness("--help").stdout))
        for name in ("github-actions.yml", "gitlab-ci.yml"):
            text = read(os.path.join(folder, name))
            doc = yaml.safe_load(text)
            used = set(re.findall(r"swa-harness (\w[\w-]*)", text))
            self.assertTrue(used and used <= commands, f"{name}: {used - commands} are not swa-harness commands")
            if name == "github-actions.yml":
                self.assertEqual(len(doc["jobs"]["shard"]["strategy"]["matrix"]["shard"]), int(doc["env"]["SHARDS"]))
            else:
                self.assertEqual(doc["swa-shard"]["parallel"], int(doc["variables"]["SHARDS"]))


class Collect(unittest.TestCase):
    def test_unfinished_shards_are_named_with_their_rerun_and_the_merge_equals_one_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            env = fake_sbatch(tmp)
            r = harness("submit", CI, "--slurm", "--shards", "4", "--out", out, "--filter", FILTER, "--dut",
                        "baseline,cpu", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("array job 101", r.stdout)
            self.assertIn("merge job 102 (afterany:101)", r.stdout)
            with open(os.path.join(tmp, "sbatch.calls")) as f:
                calls = f.read().splitlines()
            self.assertEqual(calls, [f"--parsable {out}/array.sbatch", f"--parsable --dependency=afterany:101 {out}/merge.sbatch"])
            record = json.loads(read(os.path.join(out, "submission.json")))
            self.assertEqual((record["array_job_id"], record["merge_job_id"], record["shards"]), ("101", "102", 4))

            for k in (0, 2):
                t = run_task(out, k)
                self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
            with open(os.path.join(out, "shard-3.end"), "w") as f:
                f.write("garbage\n")
            r = harness("collect", out)
            self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
            summary = read(os.path.join(out, "summary.txt"))
            self.assertEqual(summary in r.stdout, True)
            self.assertRegex(summary, r"(?m)^1\s+-/2\s+-\s+no end record")
            self.assertRegex(summary, r"(?m)^3\s+-/1\s+-\s+no end record")
            self.assertIn("shard-3.end: not an end record", summary)
            self.assertIn("2 of 4 shards finished; 3 of 6 scenarios, 6 result rows", summary)
            self.assertIn(f"--array=1,3 {out}/array.sbatch", summary)
            with h5py.File(os.path.join(out, "merged.h5")) as f:
                self.assertEqual(len(f["scenarios"]), 3)

            for k in (1, 3):
                self.assertEqual(run_task(out, k).returncode, 0)
            r = harness("collect", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("4 of 4 shards finished; 6 of 6 scenarios, 12 result rows, 0 failing", r.stdout)
            self.assertNotIn("rerun", r.stdout)
            one = os.path.join(tmp, "one.h5")
            self.assertEqual(harness("run", CI, "--filter", FILTER, "--dut", "baseline,cpu", "--out", one).returncode, 0)
            c = subprocess.run(["/usr/bin/python3", COMPARE, one, os.path.join(out, "merged.h5")], capture_output=True, text=True)
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)

    def test_failing_rows_and_a_broken_task_are_told_apart(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sub")
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, "--filter", FILTER, "--dut",
                        "mutant:window_minus_one", env=fake_sbatch(tmp))
            self.assertEqual(r.returncode, 0, r.stderr)
            t = run_task(out, 0)
            self.assertEqual(t.returncode, 0, "failing rows are a finished task to Slurm: " + t.stdout + t.stderr)
            self.assertEqual(read(os.path.join(out, "shard-0.end")).split()[0], "1")
            os.remove(os.path.join(out, "sweep.yaml"))  # shard 1's run cannot start
            t = run_task(out, 1)
            self.assertEqual(t.returncode, 2, t.stdout + t.stderr)
            with open(os.path.join(out, "sweep.yaml"), "w") as f:
                f.write(read(CI))
            r = harness("collect", out)
            self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"(?m)^0\s+3/3\s+0\s+finished, some rows fail")
            self.assertRegex(r.stdout, r"(?m)^1\s+-/3\s+0\s+stopped: invalid input .* \[exit 2\]")
            self.assertIn("--array=1 ", r.stdout)

    def two_shards_with_shard_0_run(self, tmp):
        """A submission of FILTER's 6 scenarios in 2 shards (sbatch faked) whose shard 0 has run; its folder."""
        out = os.path.join(tmp, "sub")
        r = harness("submit", CI, "--slurm", "--shards", "2", "--out", out, "--filter", FILTER, "--dut", "cpu",
                    env=fake_sbatch(tmp))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run_task(out, 0).returncode, 0)
        return out

    def test_collect_checks_which_scenarios_a_shard_holds_not_how_many(self):
        # shard-1.h5 a link to shard-0.h5 (as many rows, the wrong scenarios): shard 1 is not
        # finished, its file stays out of the merge, and the warning says why.
        with tempfile.TemporaryDirectory() as tmp:
            out = self.two_shards_with_shard_0_run(tmp)
            os.symlink(os.path.join(out, "shard-0.h5"), os.path.join(out, "shard-1.h5"))
            shutil.copy(os.path.join(out, "shard-0.end"), os.path.join(out, "shard-1.end"))
            r = harness("collect", out)
            self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
            self.assertIn("shard-1.h5 holds 3 scenario(s) that are not shard 1's", r.stdout + r.stderr)
            self.assertIn("1 of 2 shards finished; 3 of 6 scenarios", r.stdout)
            with h5py.File(os.path.join(out, "merged.h5")) as f:
                self.assertEqual(len(f["scenarios"]), 3)

    def test_collect_trusts_no_file_it_did_not_write(self):
        # A FIFO as an end record is named and refused unread (it blocked collect before); a sweep.yaml
        # edited after submission is refused by its digest, before any shard is judged by it.
        with tempfile.TemporaryDirectory() as tmp:
            out = self.two_shards_with_shard_0_run(tmp)
            self.assertRegex(json.loads(read(os.path.join(out, "submission.json")))["sweep_digest"], "^[0-9a-f]{64}$")
            os.mkfifo(os.path.join(out, "shard-1.end"))
            r = harness("collect", out, timeout=60)
            self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
            self.assertIn("shard-1.end: not a regular file (a FIFO, a device, a folder): refused unread", r.stdout)
            self.assertIn("1 of 2 shards finished", r.stdout)
            with open(os.path.join(out, "sweep.yaml"), "a") as f:
                f.write("# edited after submission\n")
            r = harness("collect", out)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(os.path.join(out, "sweep.yaml") + " is not the sweep that was submitted", r.stderr)
            os.remove(os.path.join(out, "submission.json"))
            os.mkfifo(os.path.join(out, "submission.json"))
            r = harness("collect", out, timeout=60)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("submission.json: not a regular file", r.stderr)

    def test_a_folder_submit_did_not_make_is_refused_by_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = harness("collect", tmp)
            self.assertEqual(r.returncode, 2)
            self.assertIn(os.path.join(tmp, "submission.json") + ": cannot be read", r.stderr)
            with open(os.path.join(tmp, "submission.json"), "w") as f:
                json.dump({"format": "swa-harness submission 1", "harness": "/x"}, f)
            r = harness("collect", tmp)
            self.assertEqual(r.returncode, 2)
            self.assertIn("field 'workdir' is missing", r.stderr)


if __name__ == "__main__":
    HARNESS, CI, COMPARE = map(os.path.abspath, sys.argv[1:4])
    del sys.argv[1:4]
    unittest.main(verbosity=2)
