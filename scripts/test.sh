#!/usr/bin/env bash
# The README's test command: install what is missing, build, run every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${SWA_BUILD_DIR:-$root/build}"
# Each test's golden cache is the build tree's test-cache/, apart from the user's (CTest sets
# XDG_CACHE_HOME per test: harness/testing.cmake), so a plain `ctest` runs the same.
ctest --output-on-failure -j "$(nproc)" "$@"
