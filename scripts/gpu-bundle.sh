#!/usr/bin/env bash
# Builds, then gathers into build-gpu/ what scripts/gpu-checks.sh needs on a machine that has a GPU
# but not this project's Debian packages: swa-harness, swa-bench, the CUDA tests, the CUDA DUT
# library and every shared library they load except glibc's own. Carry build-gpu/ there (it stays
# under 64 MiB) and run scripts/gpu-checks.sh from the repository root.
# Its own build (SWA_BUILD_DIR, default build-gpu-host/): host code for any x86-64-v3 CPU, since the
# GPU machine's CPU may differ from this one, and sm_90 machine code only, which keeps the bundle
# under the device tool's 64 MiB. Arguments go to cmake after these defaults and override them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SWA_BUILD_DIR:-$root/build-gpu-host}
SWA_BUILD_DIR=$build "$root/scripts/build.sh" -DSWA_NATIVE_ARCH=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
  -DCMAKE_CUDA_ARCHITECTURES=90-real "$@"
bundle=${SWA_GPU_BUNDLE:-$root/build-gpu}
bins=(harness/swa-harness harness/swa-bench dut/cuda/tests/dut_cuda_test dut/cuda/tests/dut_cuda_logic_test)
for b in "${bins[@]}"; do
  [[ -x "$build/$b" ]] || { echo "gpu-bundle: $build/$b was not built (is nvcc 12+ installed?)" >&2; exit 2; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for b in "${bins[@]}"; do cp "$build/$b" "$bundle/bin/"; done
cp "$build/dut/cuda/libswa_dut_cuda.so" "$bundle/lib/"
# glibc stays the machine's own; everything else travels (Boost, HDF5 and its deps, yaml-cpp, cudart).
for f in "${bins[@]/#/$build/}" "$build/dut/cuda/libswa_dut_cuda.so"; do ldd "$f"; done \
  | awk '/=> \//{print $3}' | sort -u \
  | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64)\.so' \
  | while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
echo "gpu-bundle: $(du -sh "$bundle" | cut -f1) in $bundle"
