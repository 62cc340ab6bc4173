#pragma once
// Running a DUT on a scenario and judging it: the one path the runner, bisect and perf mode share.
// The output is poisoned with NaN first (an element the DUT never writes fails), the schedule goes
// through dut::run_schedule, the KV cache is checked against the golden cache model, and the
// verdict is verdict.hpp's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/golden.hpp"
#include "swa/harness/judge/cache_check.hpp"
#include "swa/harness/judge/golden_cache.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/judge/results.hpp"
#include "swa/harness/case/scenario.hpp"
#include "swa/harness/judge/verdict.hpp"

namespace swa::harness {

// The NaN every output element holds before a DUT runs: a quiet NaN whose payload no arithmetic makes
// (x86 and CUDA compute 0xffc00000, NumPy's nan is 0x7fc00000): fp32 0x7fc5a5a5, fp16 0x7e5a, bf16
// 0x7fe5. An element that holds it after the call was never written; any other NaN was computed.
std::uint32_t output_fill_bits(DType dt);
// Whether x, an output element as run_dut reads it back (the dtype to float to double), is the fill.
bool is_output_fill(DType dt, double x);

// What one run of a DUT gave.
struct DutOutput {
  Verdict outcome = Verdict::pass;  // pass: it ran; skip: supports() said no; error: it failed or threw
  std::string message;              // why, when not pass
  std::vector<float> out;           // its output read back from the dtype (when it ran)
  double ms = 0;                    // host wall time of the whole schedule
};
DutOutput run_dut(dut::Dut& dut, const Problem& problem, dut::ScheduleObserver* observer = nullptr);

// Where a Reference's time went, in seconds.
struct ReferenceTimes {
  double inputs = 0, golden = 0, baseline = 0;  // golden: the golden, or on a hit the cache read (inputs too)
  bool from_cache = false;                      // inputs, golden and baseline read from the golden cache
};

// A scenario's problem with its fp64 golden and same-precision baseline, computed once for every
// DUT, or read from `cache` when it holds them (and stored there when it does not). Not copyable:
// the problem's params point into it. Not for two threads at once: baseline() may read the cache.
struct Reference {
  explicit Reference(const Scenario& s, GoldenCache* cache = nullptr);
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  Problem problem;
  golden::Output golden;
  BaselineErrors baseline_errors;  // the verdicts' limits, computed once for every DUT
  ReferenceTimes times;

  // The baseline's output (dumps, repro and golden files). On a cache hit it is read from the entry
  // at the first call, or computed again (the same bits) when the entry has gone meanwhile.
  const std::vector<float>& baseline() const;
  std::vector<float> take_baseline();  // baseline(), moved out

 private:
  mutable std::optional<std::vector<float>> baseline_;
  GoldenCache* cache_ = nullptr;  // where baseline() reads it, with key_ and baseline_count_
  std::string key_;
  std::uint64_t baseline_count_ = 0;
};

struct Evaluation {
  ResultRow row;           // the metrics and the verdict (row.status)
  std::vector<float> out;  // the DUT's output, when it ran
  Verdict output_status = Verdict::pass;       // the outputs' verdict alone, before the cache check
  std::vector<CacheMismatch> cache_details;    // with cache_details > 0: the first differences as values
};
// check_cache: compare the DUT's KV cache with the golden model (when the mode has a cache and the
// DUT reports one).
// `name` is the DUT as the run names it (the row's `dut`).
Evaluation evaluate(const Scenario& s, const Reference& ref, dut::Dut& dut, const std::string& name,
                    const Tolerance& tolerance, bool check_cache, std::size_t cache_details = 0);

// The scenario's problem file of `kind`: its inputs, its case, and the golden (output and LSE) and
// baseline as the reference. Dumps and repros add the DUTs' outputs.
ProblemFile problem_file(const Scenario& s, const Reference& ref, ProblemFileKind kind);
// The same, taking the reference's outputs instead of copying them (the problem stays usable).
ProblemFile problem_file(const Scenario& s, Reference&& ref, ProblemFileKind kind);

// A row with a verdict but no metrics: a DUT that could not be made, a golden of zeros.
ResultRow unjudged_row(const Scenario& s, const std::string& dut, Verdict verdict, const std::string& reason);

}  // namespace swa::harness
