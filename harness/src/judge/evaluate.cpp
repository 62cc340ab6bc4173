#include "swa/harness/judge/evaluate.hpp"

#include <bit>
#include <chrono>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <limits>
#include <optional>

#include "swa/baseline.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/judge/cache_check.hpp"

namespace swa::harness {
namespace {

// The cache is part of the contract: a DUT whose cache differs from the golden model fails even
// when its outputs are right (a consistent off-by-one slot is still wrong for the next kernel).
void judge_cache(ResultRow& r, const CacheChecker& checker) {
  r.cache_mismatches = checker.mismatches();
  if (checker.mismatches() == 0) return;
  if (!is_failure(r.status)) r.status = Verdict::fail;
  r.reason += (r.reason.empty() ? "" : "; ") + std::string("KV cache differs from the golden cache model in ") +
              std::to_string(checker.mismatches()) + " places, first " + checker.first_mismatch() +
              " (cache_check: false or --no-cache-check for a private cache layout)";
}

}  // namespace

std::uint32_t output_fill_bits(DType dt) {
  switch (dt) {
    case DType::fp32: return 0x7fc5a5a5u;
    case DType::fp16: return 0x7e5au;
    case DType::bf16: return 0x7fe5u;
  }
  return 0x7fc5a5a5u;
}

bool is_output_fill(DType dt, double x) {
  const std::uint32_t bits = output_fill_bits(dt);
  const double fill = load_from(dt, &bits);  // little-endian: a 2-byte dtype reads the low half
  return std::bit_cast<std::uint64_t>(fill) == std::bit_cast<std::uint64_t>(x);
}

DutOutput run_dut(dut::Dut& dut, const Problem& pr, dut::ScheduleObserver* observer) {
  DutOutput r;
  const dut::Support support = dut.supports(pr.params);
  if (!support.run) {
    r.outcome = Verdict::skip;
    r.message = clean_text(support.skip_reason);  // a DUT's words: untrusted text
    return r;
  }
  const DType dt = pr.params.dtype;
  const std::size_t n = static_cast<std::size_t>(pr.seq_offsets.back()) * pr.params.heads_q * pr.params.head_size;
  // The output in its dtype, every element NaN, written once (no zeroing first).
  const std::size_t elem = dtype_bytes(dt);
  const auto storage = std::make_unique_for_overwrite<unsigned char[]>(n * elem);
  const std::uint32_t nan_bits = output_fill_bits(dt);
  if (elem == 4)
    std::fill_n(reinterpret_cast<std::uint32_t*>(storage.get()), n, nan_bits);
  else
    std::fill_n(reinterpret_cast<std::uint16_t*>(storage.get()), n, static_cast<std::uint16_t>(nan_bits));
  AttnParams p = pr.params;
  p.out = storage.get();
  const auto t0 = std::chrono::steady_clock::now();
  dut::Status status;
  try {
    status = dut::run_schedule(dut, p, observer);
  } catch (const std::exception& e) {
    status = dut::Status::failure(std::string("exception: ") + e.what());
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!status.ok) {
    r.outcome = status.declined ? Verdict::skip : Verdict::error;
    r.message = clean_text(status.message);
    return r;
  }
  r.out = load_all(dt, storage.get(), n);
  return r;
}

Reference::Reference(const Scenario& s, GoldenCache* cache) {
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto t0 = clock::now();
  const ProblemSpec spec = s.problem_spec();
  std::string key;
  if (cache) {
    key = GoldenCache::key(s.id());
    // A hit gives the inputs as well: nothing is drawn or computed.
    if (auto entry = cache->load(key); entry && build_problem(spec, problem, std::move(entry->inputs))) {
      golden = std::move(entry->golden);
      baseline_errors = std::move(entry->baseline_errors);
      cache_ = cache;
      key_ = std::move(key);
      baseline_count_ = entry->baseline_count;
      if (baseline_errors.phases.size() != phases_of(problem.params).size())  // an entry written for another schedule
        baseline_errors = harness::baseline_errors(problem.params, golden.out, baseline());
      times.from_cache = true;
      times.golden = seconds(t0, clock::now());
      return;
    }
  }
  build_problem(spec, problem);
  const auto t1 = clock::now();
  times.inputs = seconds(t0, t1);
  golden = golden::run(problem.params);
  const auto t2 = clock::now();
  baseline_ = baseline::attention(problem.params);
  const auto t3 = clock::now();
  baseline_errors = harness::baseline_errors(problem.params, golden.out, *baseline_);
  times.golden = seconds(t1, t2);
  times.baseline = seconds(t2, t3);
  if (cache) cache->store(key, golden, *baseline_, baseline_errors, problem);
}

const std::vector<float>& Reference::baseline() const {
  if (!baseline_) {
    if (cache_) baseline_ = cache_->load_baseline(key_, baseline_count_);
    if (!baseline_) baseline_ = baseline::attention(problem.params);
  }
  return *baseline_;
}

std::vector<float> Reference::take_baseline() {
  baseline();
  std::vector<float> taken = std::move(*baseline_);
  baseline_.reset();
  return taken;
}

namespace {

ProblemFile problem_file(const Scenario& s, ProblemFile f, ProblemFileKind kind, std::vector<double> out,
                         std::vector<double> lse, std::vector<float> baseline) {
  f.kind = kind;
  describe_case(f, s);
  f.reference = std::move(out);
  f.reference_lse = std::move(lse);
  f.baseline = std::move(baseline);
  return f;
}

}  // namespace

ProblemFile problem_file(const Scenario& s, const Reference& ref, ProblemFileKind kind) {
  return problem_file(s, problem_inputs(ref.problem.params), kind, ref.golden.out, ref.golden.lse, ref.baseline());
}

ProblemFile problem_file(const Scenario& s, Reference&& ref, ProblemFileKind kind) {
  // The problem's float Q, K and V are the file's tensors when the params read them packed (every
  // problem built here): moved, not read back through the strides into new memory (768 MB at 32768
  // tokens, Hq 32, Hkv 8, D 128).
  std::vector<float> baseline = ref.take_baseline();  // first: computing it again reads the inputs
  Problem& pr = ref.problem;
  const AttnParams& p = pr.params;
  AttnParams contiguous = p;
  set_contiguous_strides(contiguous);
  const bool packed = !pr.q.empty() &&  // drawn, not read from a cache entry
                      p.q_row_stride == contiguous.q_row_stride && p.q_head_stride == contiguous.q_head_stride &&
                      p.k_row_stride == contiguous.k_row_stride && p.k_head_stride == contiguous.k_head_stride &&
                      p.v_row_stride == contiguous.v_row_stride && p.v_head_stride == contiguous.v_head_stride;
  ProblemFile inputs = packed ? problem_inputs(p, std::move(pr.q), std::move(pr.k), std::move(pr.v)) : problem_inputs(p);
  return problem_file(s, std::move(inputs), kind, std::move(ref.golden.out), std::move(ref.golden.lse),
                      std::move(baseline));
}

ResultRow unjudged_row(const Scenario& s, const std::string& dut, Verdict verdict, const std::string& reason) {
  ResultRow r = result_row(s.id(), dut, s.dtype, s.mode, s.tolerance);
  r.status = verdict;
  r.reason = reason;
  return r;
}

Evaluation evaluate(const Scenario& s, const Reference& ref, dut::Dut& dut, const std::string& name,
                    const Tolerance& tolerance, bool check_cache, std::size_t cache_details) {
  const Problem& pr = ref.problem;
  std::optional<CacheChecker> checker;
  const dut::CacheReport cache = dut.traits().cache;
  if (check_cache && s.mode != RunMode::prefill && cache != dut::CacheReport::none) checker.emplace(pr, cache);
  if (checker) checker->keep_details(cache_details);
  DutOutput run = run_dut(dut, pr, checker ? &*checker : nullptr);
  Evaluation e;
  if (run.outcome != Verdict::pass) {
    e.row = unjudged_row(s, name, run.outcome, run.message);
    e.row.run_ms = run.ms;
    return e;
  }
  e.row = judge(pr.params, tolerance, name, run.out, ref.golden.out, ref.baseline_errors);
  e.row.scenario_id = s.id();
  e.row.run_ms = run.ms;
  e.output_status = e.row.status;
  if (checker) judge_cache(e.row, *checker);
  if (checker) e.cache_details = checker->details();
  e.out = std::move(run.out);
  return e;
}

}  // namespace swa::harness
