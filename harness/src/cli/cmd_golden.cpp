// swa-harness golden: inputs from a seed, the fp64 golden and the same-precision baseline, to HDF5.
#include <chrono>
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/baseline.hpp"
#include "swa/golden.hpp"
#include "swa/harness/golden_file.hpp"

namespace swa::cli {

int cmd_golden(const std::vector<std::string>& args) {
  std::string seq_lens_text, cache_text = "ring-modulo", dtype_text, inputs_text = "normal", out;
  std::int64_t heads = 0, kv_heads = 0, head_size = 0, window = 0, chunk = 0, decode_steps = 0;
  std::uint64_t seed = 0;
  po::options_description desc(
      "swa-harness golden: generate Q/K/V from a seed, run the fp64 golden and the same-precision baseline, and "
      "write /q /k /v (float32, dtype-rounded), /out and /lse (float64), /baseline, /seq_lens and /prompt_lens");
  desc.add_options()
      ("seq-lens", po::value(&seq_lens_text)->required(), "prompt lengths, comma-separated (e.g. 5,17)")
      ("heads", po::value(&heads)->required(), "query heads Hq")
      ("kv-heads", po::value(&kv_heads)->required(), "kv heads Hkv; must divide Hq")
      ("head-size", po::value(&head_size)->required(), "head size D")
      ("window", po::value(&window)->required(), "window W: query i sees key j iff i-W < j <= i")
      ("chunk", po::value(&chunk)->default_value(0), "chunked prefill: C tokens per chunk through the cache (0: off)")
      ("decode-steps", po::value(&decode_steps)->default_value(0), "T decode steps after the prompt (0: none)")
      ("cache", po::value(&cache_text)->default_value(cache_text), "ring-modulo|ring-compact|linear")
      ("dtype", po::value(&dtype_text)->required(), "fp32|fp16|bf16")
      ("inputs", po::value(&inputs_text)->default_value(inputs_text), "normal|uniform|large-logit|outlier|constant-rows")
      ("seed", po::value(&seed)->required(), "seed of the counter-based generator")
      ("out", po::value(&out)->required(), "output FILE.h5 (written to a temporary, then renamed)");
  po::variables_map vm;
  if (!parse_options("golden", args, desc, vm)) return kOk;

  harness::ProblemSpec spec;
  spec.heads_q = static_cast<int>(require_range("--heads", heads, 1, 1024));
  spec.heads_kv = static_cast<int>(require_range("--kv-heads", kv_heads, 1, spec.heads_q));
  if (spec.heads_q % spec.heads_kv != 0)
    throw UsageError("option --kv-heads (" + std::to_string(kv_heads) + ") must divide --heads (" +
                     std::to_string(heads) + ")");
  spec.head_size = static_cast<int>(require_range("--head-size", head_size, 1, 1024));
  spec.band = band_from_window(require_range("--window", window, 1, std::int64_t{1} << 31),
                               WindowConvention::keys_including_self);
  spec.chunk = static_cast<int>(require_range("--chunk", chunk, 0, 1 << 30));
  spec.decode_steps = static_cast<int>(require_range("--decode-steps", decode_steps, 0, 1 << 20));
  spec.cache = require_choice("--cache", cache_text, parse_cache(cache_text), "ring-modulo|ring-compact|linear");
  spec.dtype = require_choice("--dtype", dtype_text, parse_dtype(dtype_text), dtype_choices());
  spec.inputs = require_choice("--inputs", inputs_text, harness::parse_distribution(inputs_text),
                               harness::distribution_choices());
  spec.seed = seed;
  spec.mode = spec.decode_steps > 0 ? RunMode::decode : spec.chunk > 0 ? RunMode::chunked_prefill : RunMode::prefill;
  for (auto prompt : parse_int_list("--seq-lens", seq_lens_text, 1, 1 << 24))
    spec.seq_lens.push_back(static_cast<std::int32_t>(prompt + spec.decode_steps));

  const std::int64_t need = harness::estimate_memory_bytes(spec);
  const std::int64_t limit = harness::default_memory_limit_bytes();
  if (need > limit)
    throw UsageError("this problem needs about " + human_bytes(need) + ", over the limit of " + human_bytes(limit) +
                     " (half the machine's memory); shorten --seq-lens or use fewer --heads");

  harness::Problem problem;
  harness::build_problem(spec, problem);
  const auto t0 = std::chrono::steady_clock::now();
  const golden::Output g = golden::run(problem.params);
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<float> base = baseline::attention(problem.params);
  harness::write_golden_file(out, problem, g, base);
  std::cout << "wrote " << out << ": " << problem.seq_offsets.back() << " tokens, mode " << mode_name(spec.mode)
            << (spec.mode == RunMode::prefill ? std::string() : ", cache " + std::string(cache_name(spec.cache)))
            << ", golden " << std::chrono::duration<double>(t1 - t0).count() << " s\n";
  return kOk;
}

}  // namespace swa::cli
