#!/usr/bin/python3
"""The golden cache: a warm rerun reads every golden, results are the same with and without it, a
corrupt or truncated entry is recomputed, the size cap evicts the least recently used entries, and
bad options are refused with exit 2.

usage: test_golden_cache.py PATH/TO/swa-harness CI_YAML COMPARE_RESULTS_SCRIPT
"""
import ctypes
import glob
import os
import re
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

HARNESS = CI = COMPARE = None
SWEEP = ("--sweep", "caches", "--filter", "w=33/chunk=[0-9]+/(steps=12/)?cache=ring-modulo/mask=none/fp32/", "--dut", "cpu,baseline")  # 6 scenarios


def harness(*args, env=None):
    return subprocess.run([HARNESS, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def counts(stderr):
    m = re.search(r"golden cache (.*): (\d+) read, (\d+) computed and stored", stderr)
    assert m, stderr
    return int(m.group(2)), int(m.group(3))


def same_results(a, b):
    r = subprocess.run(["/usr/bin/python3", COMPARE, a, b], capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


class _Xxh128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def xxh3_128_canonical(data):
    """XXH3-128 of `data` as an entry stores it (canonical: big-endian high, then low), from libxxhash."""
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_128bits.restype = _Xxh128
    lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h = lib.XXH3_128bits(data, len(data))
    return h.high64.to_bytes(8, "big") + h.low64.to_bytes(8, "big")


def forge(path):
    """What anyone who can write the folder can do without a key: move the golden's first value and
    store a valid XXH3 checksum for the new bytes."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    out, lse, _, phases, q, k, v = struct.unpack_from("<7Q", data, 72)
    first = 128 + (out + lse + 4 + 3 * phases) * 8 + q + k + v
    struct.pack_into("<d", data, 128, struct.unpack_from("<d", data, 128)[0] + 1.0)
    data[first:first + 16] = xxh3_128_canonical(bytes(data[:first]))
    with open(path, "wb") as f:
        f.write(data)


class GoldenCacheTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.cache = os.path.join(self.dir, "cache")

    def tearDown(self):
        self.tmp.cleanup()

    def run_sweep(self, name, *extra):
        out = os.path.join(self.dir, name + ".h5")
        r = harness("run", CI, *SWEEP, "--out", out, *extra)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return out, r

    def entries(self):
        return sorted(glob.glob(os.path.join(self.cache, "*.golden")))

    def test_warm_rerun_reads_every_golden_and_changes_nothing(self):
        cold, r = self.run_sweep("cold", "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (0, 6))
        self.assertEqual(len(self.entries()), 6)
        warm, r = self.run_sweep("warm", "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (6, 0))
        uncached, r = self.run_sweep("uncached", "--no-golden-cache")
        self.assertNotIn("golden cache", r.stderr)
        for other in (warm, uncached):
            ok, why = same_results(cold, other)
            self.assertTrue(ok, why)

    def test_golden_file_is_bitwise_the_same_from_the_cache(self):
        args = ("golden", "--batch", "40,9", "--heads", "4", "--kv-heads", "2", "--head-size", "64", "--window", "7",
                "--dtype", "bf16", "--seed", "5", "--golden-cache", self.cache)
        outs = []
        for name in ("a", "b"):
            out = os.path.join(self.dir, name + ".h5")
            r = harness(*args, "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            outs.append(out)
        self.assertIn("read from the golden cache", r.stdout)
        with h5py.File(outs[0]) as a, h5py.File(outs[1]) as b:
            # Every dataset, the inputs too: a hit reads them from the entry instead of drawing them.
            names = []
            a.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            self.assertTrue({"reference/out", "reference/lse", "reference/baseline"} <= set(names), names)
            self.assertTrue(any(n.endswith("k") for n in names) and any(n.endswith("v") for n in names), names)
            for name in names:
                x, y = a[name][()], b[name][()]
                self.assertEqual(np.asarray(x).tobytes(), np.asarray(y).tobytes(), name)
            self.assertTrue(np.isfinite(a["reference"]["out"][()]).all())

    def test_corrupt_and_truncated_entries_are_recomputed(self):
        cold, _ = self.run_sweep("cold", "--golden-cache", self.cache)
        flipped, truncated = self.entries()[:2]
        with open(flipped, "r+b") as f:  # one bit in the middle: in the part every hit reads
            f.seek(os.path.getsize(flipped) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x10]))
        with open(truncated, "r+b") as f:
            f.truncate(os.path.getsize(truncated) - 9)
        again, r = self.run_sweep("again", "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (4, 2))
        self.assertIn("2 corrupt entries deleted and recomputed", r.stderr)
        ok, why = same_results(cold, again)
        self.assertTrue(ok, why)
        _, r = self.run_sweep("third", "--golden-cache", self.cache)  # the recomputed entries are good
        self.assertEqual(counts(r.stderr), (6, 0))

    def test_special_oversized_and_stale_files_in_the_folder_are_refused_unopened(self):
        # A FIFO named like an entry (opening it would block), a symlink, a sparse file whose header
        # declares sizes consistent with its 1 TiB (reading it would allocate them), and temporaries
        # of stores that died: the run finishes, the three entries are recomputed, the stale
        # temporary is removed and a fresh one (a store in flight elsewhere) is kept.
        self.run_sweep("cold", "--golden-cache", self.cache)
        fifo, link, sparse = self.entries()[:3]
        os.remove(fifo)
        os.mkfifo(fifo)
        os.remove(link)
        os.symlink("/dev/zero", link)
        with open(sparse, "r+b") as f:
            header = bytearray(f.read(8 + 64 + 7 * 8))
            tib = 1 << 40
            out = (tib - (8 + 64 + 7 * 8) - 2 * 16) // 8 - 4  # no lse, phases, inputs or baseline
            header[72:128] = out.to_bytes(8, "little") + bytes(48)
            f.seek(0)
            f.write(header)
            f.truncate(tib)
        stale, fresh = (os.path.join(self.cache, f"{'0' * 64}.golden.tmp.{n}.1") for n in (999991, 999992))
        for path in (stale, fresh):
            with open(path, "wb") as f:
                f.write(b"x" * 1000)
        two_hours_ago = time.time() - 7200
        os.utime(stale, (two_hours_ago, two_hours_ago))
        again, r = self.run_sweep("again", "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (3, 3))
        self.assertIn("3 corrupt entries deleted and recomputed", r.stderr)
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.exists(fresh))
        for path in (fifo, link, sparse):
            self.assertTrue(os.path.isfile(path) and not os.path.islink(path), path)  # recomputed in their place
            self.assertLess(os.path.getsize(path), 1 << 30)

    def test_a_corrupt_baseline_is_read_only_for_a_dump_and_computed_again(self):
        # A hit reads the golden, its errors and the inputs; the baseline's output (the entry's last
        # part, a quarter of its bytes) only when a file holds it. A bit flipped there goes unseen by a
        # run without dumps; a run that dumps finds it, deletes the entry and dumps the baseline
        # computed again.
        self.run_sweep("cold", "--golden-cache", self.cache)
        entry = self.entries()[0]
        with open(entry, "r+b") as f:  # the last baseline value, before that part's checksum
            f.seek(os.path.getsize(entry) - 16 - 4)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x10]))
        _, r = self.run_sweep("warm", "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (6, 0))
        self.assertNotIn("corrupt", r.stderr)
        dumped, r = self.run_sweep("dumped", "--golden-cache", self.cache, "--dump", "all")
        self.assertEqual(counts(r.stderr), (6, 0))
        self.assertIn("1 corrupt entries deleted and recomputed", r.stderr)
        self.assertEqual(len(self.entries()), 5)
        fresh, _ = self.run_sweep("fresh", "--no-golden-cache", "--dump", "all")
        files = sorted(os.listdir(dumped + ".dumps"))
        self.assertEqual(len(files), 6)
        self.assertEqual(files, sorted(os.listdir(fresh + ".dumps")))
        for name in files:
            with h5py.File(os.path.join(dumped + ".dumps", name)) as a, h5py.File(os.path.join(fresh + ".dumps", name)) as b:
                for ds in ("reference/baseline", "reference/out"):
                    self.assertEqual(a[ds][()].tobytes(), b[ds][()].tobytes(), name + " " + ds)

    def key_file(self, size=32, mode=0o600):
        path = os.path.join(self.dir, f"key-{size}-{mode:o}")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        os.chmod(path, mode)
        return path

    def test_a_forged_entry_passes_unkeyed_and_is_refused_under_a_key(self):
        # Unkeyed, the checksum guards against corruption only: a forged entry is read as good (what
        # README's trust statement says). Under --golden-cache-key its HMAC does not check: the entry
        # is deleted and recomputed, and the results are those of a run without any cache.
        cold, _ = self.run_sweep("cold", "--golden-cache", self.cache)
        forge(self.entries()[0])
        r = harness("run", CI, *SWEEP, "--out", os.path.join(self.dir, "forged.h5"), "--golden-cache", self.cache)
        self.assertEqual(counts(r.stderr), (6, 0))
        self.assertEqual(r.returncode, 1, "the forgery changed no verdict: the test proves nothing")

        key = self.key_file()
        keyed_cache = os.path.join(self.dir, "keyed")
        self.cache = keyed_cache
        cold, r = self.run_sweep("keyed-cold", "--golden-cache", keyed_cache, "--golden-cache-key", key)
        self.assertIn("(keyed)", r.stderr)
        self.assertEqual(counts(r.stderr), (0, 6))
        forge(self.entries()[0])
        again, r = self.run_sweep("keyed-forged", "--golden-cache", keyed_cache, "--golden-cache-key", key)
        self.assertEqual(counts(r.stderr), (5, 1))
        self.assertIn("1 corrupt entries deleted and recomputed", r.stderr)
        ok, why = same_results(cold, again)
        self.assertTrue(ok, why)
        # Another key (or none) names other files: nothing of this key's is read.
        _, r = self.run_sweep("other-key", "--golden-cache", keyed_cache, "--golden-cache-key", self.key_file(size=33))
        self.assertEqual(counts(r.stderr), (0, 6))
        _, r = self.run_sweep("no-key", "--golden-cache", keyed_cache)
        self.assertEqual(counts(r.stderr), (0, 6))

    def test_a_key_file_others_can_read_or_of_the_wrong_size_is_refused(self):
        cases = [(("--golden-cache-key", self.key_file(mode=0o644)), "can be read or written by others (mode 644)"),
                 (("--golden-cache-key", self.key_file(size=8)), "holds 8 bytes; a key is 16..4096 bytes"),
                 (("--golden-cache-key", self.dir), "is not a regular file"),
                 (("--golden-cache-key", os.path.join(self.dir, "absent")), "No such file"),
                 (("--golden-cache-key", self.key_file(), "--no-golden-cache"), "a key is for a cache")]
        for args, message in cases:
            with self.subTest(message):
                r = harness("run", CI, *SWEEP, "--out", os.path.join(self.dir, "never.h5"), *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("option", r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.dir, "never.h5")))

    def test_size_cap_evicts_least_recently_used_first(self):
        self.run_sweep("measure", "--golden-cache", self.cache)
        entries = sum(os.path.getsize(p) for p in self.entries())
        for p in self.entries():
            os.remove(p)
        # A cap that holds this run's entries and `recent` but not `old` as well.
        mib = 1 << 20
        cap_mb = (entries + mib) // mib + 1
        old, recent = (os.path.join(self.cache, n + ".golden") for n in ("old", "recent"))
        for path, size in ((old, 2 * mib), (recent, mib // 2)):
            with open(path, "wb") as f:
                f.write(b"\0" * size)
        os.utime(old, (time.time() - 86400, time.time() - 86400))
        os.utime(recent, (time.time() + 86400, time.time() + 86400))  # used after this run's entries
        _, r = self.run_sweep("capped", "--golden-cache", self.cache, "--golden-cache-max-mb", str(cap_mb))
        self.assertFalse(os.path.exists(old), "the least recently used entry stays over the cap")
        self.assertTrue(os.path.exists(recent), "a recently used entry was evicted")
        self.assertEqual(len(self.entries()), 7, "an entry of this run was evicted though the cap held it")
        self.assertIn("1 evicted", r.stderr)
        total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(self.cache, "*.golden")))
        self.assertLessEqual(total, cap_mb * mib)
        # A cap below the run's entries keeps the folder under it whatever is stored.
        tiny = os.path.join(self.dir, "tiny")
        self.run_sweep("tiny", "--golden-cache", tiny, "--golden-cache-max-mb", "1")
        self.assertLessEqual(sum(os.path.getsize(p) for p in glob.glob(os.path.join(tiny, "*"))), mib)

    def test_default_folder_follows_xdg_cache_home(self):
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.dir, "xdg"))
        out = os.path.join(self.dir, "default.h5")
        r = harness("run", CI, *SWEEP, "--out", out, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(glob.glob(os.path.join(self.dir, "xdg", "swa-harness", "golden", "*.golden"))), 6)

    def test_bad_options_exit_2_naming_the_option(self):
        afile = os.path.join(self.dir, "a-file")
        open(afile, "w").close()
        out = os.path.join(self.dir, "x.h5")
        bad = [(("--golden-cache", afile), "--golden-cache: " + afile + " is not a folder"),
               (("--golden-cache", ""), "--golden-cache: empty folder name"),
               (("--golden-cache", self.cache, "--no-golden-cache"), "--no-golden-cache"),
               (("--golden-cache-max-mb", "0"), "--golden-cache-max-mb")]
        for extra, needle in bad:
            r = harness("run", CI, *SWEEP, "--out", out, *extra)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertIn(needle, r.stderr)
            self.assertFalse(os.path.exists(out))
        # submit makes the same checks (one shared function), before writing anything.
        sub = os.path.join(self.dir, "sub-bad")
        for extra, needle in bad:
            r = harness("submit", CI, "--slurm", "--shards", "2", "--out", sub, "--dry-run", *extra)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertIn(needle, r.stderr)
            self.assertFalse(os.path.exists(sub))

    def test_submit_forwards_the_folder_to_every_task(self):
        r = harness("submit", CI, "--slurm", "--shards", "2", "--out", os.path.join(self.dir, "sub"), "--dry-run",
                    "--golden-cache", "rel/cache", "--golden-cache-max-mb", "64")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--golden-cache " + os.path.join(os.getcwd(), "rel/cache") + " --golden-cache-max-mb 64", r.stdout)
        key = self.key_file()
        with open(key, "rb") as f:
            secret = f.read()
        r = harness("submit", CI, "--slurm", "--shards", "2", "--out", os.path.join(self.dir, "sub"), "--dry-run",
                    "--golden-cache", "rel/cache", "--golden-cache-key", key)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--golden-cache-key " + key, r.stdout)  # the path; each task reads the key itself
        self.assertNotIn(secret.hex(), r.stdout)
        r = harness("submit", CI, "--slurm", "--shards", "2", "--out", os.path.join(self.dir, "sub"), "--dry-run",
                    "--golden-cache", "x", "--no-golden-cache")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--no-golden-cache", r.stderr)


if __name__ == "__main__":
    HARNESS, CI, COMPARE = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
