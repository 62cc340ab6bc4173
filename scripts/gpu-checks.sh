#!/usr/bin/env bash
# On a machine with a GPU, from the repository root, with build-gpu/ from scripts/gpu-bundle.sh
# (or SWA_GPU_BUNDLE): the checks of the CUDA DUT, each step's log in ${OUT:-gpu-out}/.
#   logic      host/device index logic (no GPU needed)
#   kernels    dut_cuda_test: every kernel vs the golden, CPU vs CUDA, 50 reruns, masks, errors
#   memcheck   compute-sanitizer memcheck on the small cases through every kernel
#   racecheck  compute-sanitizer racecheck on the same
#   sweep      scenarios/ci.yaml with --dut cuda,cpu: every CUDA row passes
#   bench      swa-bench --dut cuda, PyTorch FlexAttention/SDPA beside it (SWA_PYTHON, default python3)
# Steps to run: arguments (default: all, in that order). Exit 1 if any step failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${SWA_GPU_BUNDLE:-$root/build-gpu}
out=${OUT:-$root/gpu-out}
py=${SWA_PYTHON:-python3}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(logic kernels memcheck racecheck sweep bench)
status=0

run_step() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - t0)) s; last lines of $out/$name.log:"
  tail -n 12 "$out/$name.log" | sed 's/^/   | /'
  [[ $rc -eq 0 ]] || status=1
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed (see $out/nvidia-smi.txt)"
for step in "${steps[@]}"; do
  case $step in
    logic) run_step logic "$bundle/bin/dut_cuda_logic_test" --report_level=short ;;
    kernels) run_step kernels "$bundle/bin/dut_cuda_test" --log_level=test_suite --report_level=short ;;
    memcheck) run_step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
                "$bundle/bin/dut_cuda_test" --run_test=sanitizer_smoke ;;
    racecheck) run_step racecheck compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
                 "$bundle/bin/dut_cuda_test" --run_test=sanitizer_smoke ;;
    sweep) run_step sweep "$py" "$root/harness/tests/test_cuda_sweep.py" "$bundle/bin/swa-harness" "$root/scenarios/ci.yaml" ;;
    bench) run_step bench "$bundle/bin/swa-bench" --dut cuda --torch-python "$py" \
             --torch-script "$root/harness/bench/torch_swa.py" ;;
    *) echo "gpu-checks: unknown step '$step' (logic|kernels|memcheck|racecheck|sweep|bench)" >&2; exit 2 ;;
  esac
done
exit $status
