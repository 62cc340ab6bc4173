// swa-harness self-check: the golden's cache, chunk and decode paths against its own dense
// definition on generated inputs, plus the compressed-mask decoder on matched pairings. A user
// runs it to trust a fresh build before trusting its verdicts.
#include <cmath>
#include <iomanip>
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/golden.hpp"
#include "swa/harness/base/join.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/mask_decoder.hpp"

namespace swa::cli {
namespace {

constexpr double kBound = 1e-13;

struct Case {
  std::vector<std::int32_t> seq_lens;
  std::int64_t window;
  RunMode mode;
  int chunk;
  int decode_steps;
};

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    ref = std::max(ref, std::abs(b[i]));
  }
  return ref > 0 ? diff / ref : (diff > 0 ? INFINITY : 0.0);
}

std::string describe(const Case& c, CachePolicy cache) {
  return std::string(mode_name(c.mode)) + " " + std::string(cache_name(cache)) + " W=" + std::to_string(c.window) +
         " C=" + std::to_string(c.chunk) + " T=" + std::to_string(c.decode_steps) + " seq=[" +
         harness::join(c.seq_lens, ",") + "]";
}

}  // namespace

int cmd_self_check(const std::vector<std::string>& args) {
  std::uint64_t seed = 1;
  po::options_description desc("swa-harness self-check: golden schedules vs the dense definition, mask decoder");
  desc.add_options()("seed", po::value(&seed)->default_value(seed), "seed of the generated inputs");
  po::variables_map vm;
  if (!parse_options("self-check", args, desc, vm)) return kOk;

  const Case cases[] = {
      {{64, 1, 37}, 16, RunMode::chunked_prefill, 23, 0},  // C > W, wrap inside a chunk, length-1 sequence
      {{64}, 16, RunMode::chunked_prefill, 16, 0},         // C = W: wrap at chunk boundaries
      {{50}, 16, RunMode::chunked_prefill, 5, 0},          // C < W, C does not divide the prompt
      {{30}, 64, RunMode::chunked_prefill, 7, 0},          // W >= seq: causal
      {{40}, 1, RunMode::chunked_prefill, 3, 0},           // W = 1
      {{48, 21}, 16, RunMode::decode, 0, 20},              // prefill then decode steps
      {{48, 21}, 16, RunMode::decode, 9, 20},              // chunked prefill then decode
  };
  int failures = 0, checks = 0;
  std::cout << std::scientific << std::setprecision(2);
  for (const Case& c : cases)
    for (CachePolicy cache : kAllCachePolicies) {
      harness::ProblemSpec spec;
      spec.seq_lens = c.seq_lens;
      spec.heads_q = 4;
      spec.heads_kv = 2;
      spec.head_size = 64;
      spec.band = band_from_window(c.window, WindowConvention::keys_including_self);
      spec.dtype = DType::bf16;
      spec.seed = seed + checks;
      spec.mode = c.mode;
      spec.cache = cache;
      spec.chunk = c.chunk;
      spec.decode_steps = c.decode_steps;
      harness::Problem pr;
      harness::build_problem(spec, pr);
      const double diff = max_relative_difference(golden::attention_scheduled(pr.params).out,
                                                  golden::attention_dense(pr.params).out);
      const bool ok = diff <= kBound;
      failures += !ok;
      ++checks;
      std::cout << (ok ? "PASS " : "FAIL ") << describe(c, cache) << ": max relative difference to dense " << diff
                << "\n";
    }
  int decoder_failures = 0;
  for (int d : {64, 128, 160, 256})
    for (std::int64_t w : {3, 129, 385, 512, 4096})
      for (AtbSample s : kAllAtbSamples) {
        const MaskCheckCase mc = check_compressed_mask(d, w, s, s);
        const bool ok = mc.error.empty() && !mc.result.differs;
        failures += !ok;
        decoder_failures += !ok;
        ++checks;
        if (!ok)
          std::cout << "FAIL swa-compress D=" << d << " W=" << w << " " << sample_name(s) << ": " << mc.error
                    << mc.result.detail << "\n";
      }
  std::cout << (decoder_failures == 0 ? "PASS" : "FAIL") << " swa-compress tile-walk decoder, matched generator and "
            << "block rule: " << 40 - decoder_failures << " of 40 cases consistent\n";
  std::cout << "self-check: " << checks - failures << " passed, " << failures << " failed\n";
  return failures == 0 ? kOk : kCheckFailed;
}

}  // namespace swa::cli
