#!/usr/bin/env bash
# On a machine with a GPU, from the repository root, with build-gpu/ from scripts/gpu-bundle.sh
# (or SWA_GPU_BUNDLE): the checks of the CUDA DUT, each step's log in ${OUT:-gpu-out}/.
#   logic      host/device index logic (no GPU needed)
#   kernels    dut_cuda_test: every kernel vs the golden, CPU vs CUDA, 50 reruns, masks, errors
#   memcheck   compute-sanitizer memcheck on the small cases through every kernel
#   racecheck  compute-sanitizer racecheck on the same
#   sweep      scenarios/ci.yaml with --dut cuda,cpu: every CUDA row passes
#   full       scenarios/full.yaml the same way, with a job per CPU (not in the default set: about
#              200 s on a 16-core host, mostly the golden; name it: gpu-checks.sh full)
#   bench      swa-bench --dut cuda, PyTorch FlexAttention/SDPA beside it (SWA_PYTHON, default python3)
#   grid       swa-bench --dut cuda --grid: 8 more prefill shapes (D 64/256, S 4k/32k, W 512/1k), each
#              beside FlexAttention and SDPA (not in the default set: name it, gpu-checks.sh grid)
# Steps to run: arguments, in order (default: every step but full). With no arguments, kernels and
# sweep run beside memcheck and racecheck (a lent GPU's time is short: about 60 s for those four on
# an H200), then bench alone, since it times. Each step is stopped after SWA_STEP_TIMEOUT seconds
# (default 300), so a hung kernel costs one step, not the lease. Exit 1 if any step failed or timed out.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${SWA_GPU_BUNDLE:-$root/build-gpu}
out=${OUT:-$root/gpu-out}
py=${SWA_PYTHON:-python3}
step_timeout=${SWA_STEP_TIMEOUT:-300}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step_command() {
  case $1 in
    logic) echo "$bundle/bin/dut_cuda_logic_test --report_level=short" ;;
    kernels) echo "$bundle/bin/dut_cuda_test --log_level=test_suite --report_level=short" ;;
    memcheck) echo "compute-sanitizer --tool memcheck --error-exitcode 1 $bundle/bin/dut_cuda_test --run_test=sanitizer_smoke" ;;
    racecheck) echo "compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 $bundle/bin/dut_cuda_test --run_test=sanitizer_smoke" ;;
    sweep) echo "$py $root/harness/tests/test_cuda_sweep.py $bundle/bin/swa-harness $root/scenarios/ci.yaml" ;;
    full) echo "$py $root/harness/tests/test_cuda_sweep.py $bundle/bin/swa-harness $root/scenarios/full.yaml $(nproc)" ;;
    bench) echo "$bundle/bin/swa-bench --dut cuda --torch-python $py --torch-script $root/harness/bench/torch_swa.py" ;;
    grid) echo "$bundle/bin/swa-bench --dut cuda --grid --only ^(grid|torch_[a-z0-9]+_s) --torch-python $py --torch-script $root/harness/bench/torch_swa.py" ;;
    *) return 1 ;;
  esac
}

# Runs one step into $out/NAME.log and writes its summary (command, exit, time, last lines) to
# $out/NAME.summary, so steps that run side by side do not interleave their reports.
run_step() {
  local name=$1 t0=$SECONDS rc
  local cmd
  cmd=$(step_command "$name")
  # shellcheck disable=SC2086  # the command's words are split on purpose
  timeout -k 10 "$step_timeout" $cmd > "$out/$name.log" 2>&1
  rc=$?
  {
    echo "== $name: $cmd"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then echo "   TIMED OUT after ${step_timeout} s (SWA_STEP_TIMEOUT)"; fi
    echo "   exit $rc after $((SECONDS - t0)) s; last lines of $out/$name.log:"
    tail -n 12 "$out/$name.log" | sed 's/^/   | /'
  } > "$out/$name.summary"
  return $rc
}

steps=("$@")
for step in "${steps[@]}"; do
  step_command "$step" > /dev/null ||
    { echo "gpu-checks: unknown step '$step' (logic|kernels|memcheck|racecheck|sweep|full|bench|grid)" >&2; exit 2; }
done
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed (see $out/nvidia-smi.txt)"
status=0
if [[ ${#steps[@]} -gt 0 ]]; then
  for step in "${steps[@]}"; do
    run_step "$step" || status=1
    cat "$out/$step.summary"
  done
  exit $status
fi
run_step logic || status=1
( run_step kernels; a=$?; run_step sweep; b=$?; [[ $a -eq 0 && $b -eq 0 ]] ) &
correctness=$!
( run_step memcheck; a=$?; run_step racecheck; b=$?; [[ $a -eq 0 && $b -eq 0 ]] ) &
sanitizers=$!
wait "$correctness" || status=1
wait "$sanitizers" || status=1
run_step bench || status=1
for step in logic kernels sweep memcheck racecheck bench; do cat "$out/$step.summary"; done
exit $status
