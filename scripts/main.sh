#!/usr/bin/env bash
# The README's main command: install what is missing, build, then run the main job into
# ${SWA_RESULTS_DIR:-results}/: the golden self-check, the compressed-mask consistency check, the
# mask and golden exports, the default sweep (scenarios/ci.yaml: HDF5 results, JUnit XML, console
# summary), the perf sweep (scenarios/perf.yaml), and the report of both.
# Exits with the default sweep's status (0 all pass, 1 some fail).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
bin=${SWA_BUILD_DIR:-$root/build}/harness/swa-harness
out=${SWA_RESULTS_DIR:-$root/results}
mkdir -p "$out"

echo "== golden self-check"
"$bin" self-check | tee "$out/self-check.txt"

echo "== compressed-mask check (doc's python generator with its own block rule)"
"$bin" mask-check | tee "$out/mask-check.txt"

echo "== mask exports"
"$bin" mask --type swa-norm --window 3 --max-seq 5 --dtype fp16 --out "$out/mask_swa_norm_w3_n5_fp16.h5"
"$bin" mask --type swa-norm --window 3 --max-seq 5 --dtype bf16 --out "$out/mask_swa_norm_w3_n5_bf16.h5"
for gen in python cpp; do
  "$bin" mask --type swa-compress --window 4096 --head-size 128 --dtype fp16 --generator "$gen" \
    --out "$out/mask_swa_compress_w4096_d128_fp16_$gen.h5"
done

echo "== golden example (chunked prefill then decode through the compact ring)"
"$bin" golden --batch 300,1,77 --heads 8 --kv-heads 2 --head-size 128 --window 64 --chunk 48 \
  --decode-steps 16 --cache ring-compact --dtype bf16 --seed 1 --out "$out/golden_example.h5"

echo "== default sweep: scenarios/ci.yaml"
status=0
"$bin" run "$root/scenarios/ci.yaml" --jobs "$(nproc)" --out "$out/results.h5" --junit "$out/results.xml" \
  | tee "$out/console.txt" || status=$?

echo "== perf sweep: scenarios/perf.yaml"
"$bin" run "$root/scenarios/perf.yaml" --out "$out/perf.h5" | tail -n 1 || status=$?

echo "== report"
"$bin" report "$out/results.h5" "$out/perf.h5" -o "$out/report"
cp "$out/report/summary.md" "$out/summary.md"

echo "main job done: results in $out, report at $out/report/report.html (sweep exit status $status)"
exit "$status"
