"""`swa-harness` on a venv's PATH: the console script (pyproject.toml) that execs the command line
installed with this package (_paths.HARNESS), its arguments passed through, so the exit code and the
signals are the binary's own. It tells the binary which file started it (SWA_HARNESS_LAUNCHER, with
SWA_HARNESS_LAUNCHED naming the binary), so the commands it prints name this script, the word that
pastes (harness/src/base/host.cpp, command_word).
"""
import os
import signal
import sys

from ._paths import HARNESS


def main():
    if not os.access(HARNESS, os.X_OK):
        sys.stderr.write(f"swa-harness: error: the command line {HARNESS} is missing or not executable "
                         "(reinstall the swa_harness package)\n")
        sys.exit(2)
    launcher = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if launcher and os.path.isfile(launcher):
        os.environ["SWA_HARNESS_LAUNCHER"] = launcher
        os.environ["SWA_HARNESS_LAUNCHED"] = HARNESS
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(HARNESS, [launcher or HARNESS, *sys.argv[1:]])
    except OSError as e:
        sys.stderr.write(f"swa-harness: error: cannot run {HARNESS}: {e.strerror}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
