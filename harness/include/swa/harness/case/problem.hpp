#pragma once
#include <cstdint>
#include <vector>

#include "swa/atb_masks.hpp"
#include "swa/harness/case/inputs.hpp"
#include "swa/params.hpp"

namespace swa::harness {

// What a problem is made of, before any buffer exists.
struct ProblemSpec {
  std::vector<std::int32_t> seq_lens;  // total tokens per sequence (prompt + decode steps)
  int heads_q = 1;
  int heads_kv = 1;
  int head_size = 64;
  WindowBand band = causal_band();
  float scale = 0.f;  // 0: 1/sqrt(head_size)
  float softcap = 0.f;
  bool sinks = false;  // one learned logit per query head, drawn from the seed
  DType dtype = DType::fp32;
  KvFormat kv_format = KvFormat::dtype;  // FP8: descales drawn by generate_kv_descales
  RunMode mode = RunMode::prefill;
  CachePolicy cache = CachePolicy::ring_modulo;
  int page_size = 16;  // paged: the pool's order drawn by draw_page_order
  int chunk = 0;
  int decode_steps = 0;
  std::uint64_t seed = 0;
  InputDistribution inputs = InputDistribution::normal;
  MaskFormat mask = MaskFormat::none;  // an ATB mask tensor for the DUT
  AtbSample mask_generator = AtbSample::python;  // the doc sample that builds it, and its block rule
  // Kernel parameters that pass through unchanged (Scenario::kernel): build_problem starts the
  // problem's params from these and sets everything else.
  AttnParams kernel;
};

// Inputs generated from the spec's seed and the params pointing at them. Q, K and V are kept in
// dtype storage (what kernels read) and, when drawn, also as floats (the dtype-rounded values, for
// files and bisect). Built from a golden cache entry's storage, the floats stay empty (a run reads
// none of them; problem_inputs reads the storage through the params). Not copyable: params points
// into it.
struct Problem {
  ProblemSpec spec;
  std::vector<std::int64_t> seq_offsets;
  std::vector<float> q, k, v;
  std::vector<unsigned char> q_storage, k_storage, v_storage;
  std::vector<float> mask;
  std::vector<float> sinks;  // [heads_q] when spec.sinks
  std::vector<std::int32_t> page_order;  // [pool_pages] with a paged cache
  AttnParams params;

  Problem() = default;
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
};

// Q, K and V in dtype storage, as a golden cache entry keeps them.
struct ProblemTensors {
  std::vector<unsigned char> q, k, v;
};

// Throws std::invalid_argument when the spec is inconsistent (see swa::validate). With `given`, Q, K
// and V are taken from it (moved) instead of drawn, and the float copies are not made; false when
// their sizes do not fit the spec (nothing is built then).
void build_problem(const ProblemSpec& spec, Problem& out);
bool build_problem(const ProblemSpec& spec, Problem& out, ProblemTensors&& given);

// Bytes the golden, the baseline and one DUT hold at once for this spec (inputs in float and in
// dtype storage, fp64 golden inputs and output, baseline and DUT outputs).
std::int64_t estimate_memory_bytes(const ProblemSpec& spec);
// Half the machine's physical memory: the default limit on estimate_memory_bytes.
std::int64_t default_memory_limit_bytes();

}  // namespace swa::harness
