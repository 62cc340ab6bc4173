#!/usr/bin/env bash
# The README's test command: install what is missing, build, run every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${SWA_BUILD_DIR:-$root/build}"
# The tests' golden cache lives in the build tree, apart from the user's (harness/README.md, "Golden cache").
export XDG_CACHE_HOME="$PWD/test-cache"
ctest --output-on-failure -j "$(nproc)" "$@"
