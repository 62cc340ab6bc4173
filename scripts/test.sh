#!/usr/bin/env bash
# The README's test command: install what is missing, build, run every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${SWA_BUILD_DIR:-$root/build}"
# Each test's golden cache is the build tree's test-cache/, apart from the user's (CTest sets
# XDG_CACHE_HOME per test: harness/testing.cmake), so a plain `ctest` runs the same.
# The exhaustive sets (label `exhaustive`) run only when asked for: `scripts/test.sh -L exhaustive`.
# CTest takes one -LE, so the user's own -LE REGEX becomes -LE 'exhaustive|REGEX'.
args=() exclude=exhaustive
while (($#)); do
  if [[ $1 == *exhaustive* ]]; then
    exclude=""
  fi
  if [[ $1 == -LE && $# -gt 1 ]]; then
    args+=(-LE "exhaustive|$2")
    exclude=""
    shift 2
    continue
  fi
  args+=("$1")
  shift
done
[[ -n $exclude ]] && args+=(-LE "$exclude")
ctest --output-on-failure -j "$(nproc)" "${args[@]}"
