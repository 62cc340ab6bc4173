#!/usr/bin/env bash
# For `git bisect run`: build the commit under test and run one scenario against one DUT.
# Exit 0 when it passes (good), 1 when it fails (bad), 125 when this commit cannot be built or the
# scenario cannot run on it (skip).
#
#   git bisect start BAD_COMMIT GOOD_COMMIT
#   git bisect run scripts/git-bisect-scenario.sh scenarios/ci.yaml 'SCENARIO_ID' cpu
#   git bisect reset
#
# The sweep file and the script are read from the commit under test; copy them outside the work
# tree first if they may not exist at older commits. The build goes to ${SWA_BISECT_BUILD:-build-bisect}.
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 SWEEP.yaml SCENARIO_ID DUT" >&2
  exit 125
fi
sweep=$1 id=$2 dut=$3
root=$(git rev-parse --show-toplevel) || exit 125
build=${SWA_BISECT_BUILD:-$root/build-bisect}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$build.log" 2>&1 || exit 125
cmake --build "$build" -j "$(nproc)" --target swa-harness >> "$build.log" 2>&1 || exit 125
"$build/harness/swa-harness" run "$sweep" --filter "$id" --dut "$dut" --out "$build/bisect.h5" > "$build/run.log" 2>&1
status=$?
case $status in
  0) exit 0 ;;
  1) exit 1 ;;
  *) exit 125 ;;  # invalid input at this commit (e.g. the scenario or DUT did not exist yet)
esac
