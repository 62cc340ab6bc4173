// The precision readings of the table (readings_precision.hpp).
#include "readings_precision.hpp"

#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include "swa/dtype.hpp"
#include "swa/kv_format.hpp"

namespace swa::harness {
namespace {

using golden::Reading;
using Settings = std::vector<ReadingSetting>;
auto& setting = reading_setting;

bool narrow(const AttnParams& p) { return p.dtype != DType::fp32; }

std::string number(double x, int digits) {
  std::ostringstream o;
  o.precision(digits);
  o << x;
  return o.str();
}

}  // namespace

using namespace golden;

std::vector<ReadingSetting> rounding_settings(const AttnParams& p) {
  if (!narrow(p)) {
    // An fp32 case: one intermediate held in fp16 or bf16 (a half argument, a half scratch buffer).
    Settings s;
    for (const DType t : {DType::fp16, DType::bf16}) {
      const std::string type = t == DType::fp16 ? "fp16" : "bf16";
      struct Value {
        const char* name;
        const char* words;
        bool Reading::*flag;
      };
      const Value values[] = {{"scores", "the scores", &Reading::round_scores},
                              {"probabilities", "the unnormalised probabilities", &Reading::round_probabilities},
                              {"row_sum", "the softmax's row sum", &Reading::round_row_sum},
                              {"pv_accumulator", "the P.V accumulator", &Reading::accumulate_in_dtype},
                              {"sink", "the sink logit", &Reading::round_sink},
                              {"keys", "K", &Reading::round_keys},
                              {"values", "V", &Reading::round_values}};
      for (const Value& v : values) {
        if (v.flag == &Reading::round_sink && !p.sinks) continue;
        const auto flag = v.flag;
        s.push_back(setting(std::string(v.name) + "_rounded_to_" + type, "holds " + std::string(v.words) + " in " + type,
                            [flag, t](Reading& r) { r.*flag = true, r.round_type = t; }));
      }
      // K and V both: a cache or staging buffer narrower than the layer (value storage's class).
      s.push_back(setting("kv_stored_as_" + type, "holds K and V in " + type + " (a cache or staging buffer narrower than the layer's fp32)",
                          [t](Reading& r) { r.round_keys = r.round_values = true, r.round_type = t; }));
    }
    return s;
  }
  Settings s{setting("scores_rounded_to_dtype", "rounds the scores to the inputs' dtype before the softmax",
                          [](Reading& r) { r.round_scores = true; }),
                  setting("probabilities_rounded_to_dtype", "rounds the unnormalised probabilities to the inputs' dtype before P.V",
                          [](Reading& r) { r.round_probabilities = true; }),
                  setting("row_sum_rounded_to_dtype", "rounds the softmax's row sum to the inputs' dtype",
                          [](Reading& r) { r.round_row_sum = true; }),
                  setting("fp16_pv_accumulation", "accumulates P.V in the inputs' dtype",
                          [](Reading& r) { r.accumulate_in_dtype = true; })};
  if (p.sinks)
    s.push_back(setting("sink_rounded_to_dtype", "rounds the sink logit to the inputs' dtype", [](Reading& r) { r.round_sink = true; }));
  return s;
}

std::vector<ReadingSetting> running_state_settings(const AttnParams& p) {
  Settings s;
  const std::vector<DType> types = narrow(p) ? std::vector<DType>{DType::fp32} : std::vector<DType>{DType::fp16, DType::bf16};
  for (const DType t : types)
    for (const bool sum : {true, false})
      for (const int tile : {16, 32, 48, 64, 128})
        for (const bool newest : {false, true}) {
          const std::string type = t == DType::fp32 ? std::string(dtype_name(p.dtype)) : std::string(dtype_name(t));
          const std::string what = sum ? "row_sum" : "accumulator";
          s.push_back(setting("running_" + what + "_in_" + type + "_per_" + std::to_string(tile) + "_key_tile",
                              "holds the online softmax's running " + std::string(sum ? "row sum" : "P.V accumulator") + " in " +
                                  type + ", rounded after every " + std::to_string(tile) + "-key tile (tiles walked " +
                                  (newest ? "newest to oldest" : "oldest to newest") + ")",
                              [t, sum, tile, newest](Reading& r) {
                                r.state_tile = tile, r.state_newest_first = newest, r.round_type = t;
                                (sum ? r.state_round_sum : r.state_round_acc) = true;
                              }));
        }
  // A kernel that walks the cache's keys and then the call's own, its state spilled between the stages.
  if (p.mode != RunMode::prefill)
    for (const DType t : types)
      for (const int held : {0, 1, 2}) {  // the row sum, the accumulator, both
        const std::string type = t == DType::fp32 ? std::string(dtype_name(p.dtype)) : std::string(dtype_name(t));
        const char* what[] = {"row_sum", "accumulator", "state"};
        const char* words[] = {"row sum", "P.V accumulator", "row sum and P.V accumulator"};
        s.push_back(setting("running_" + std::string(what[held]) + "_in_" + type + "_between_stages",
                            "spills the online softmax's running " + std::string(words[held]) + " to " + type +
                                " between its two stages (the cache's keys, then the call's own)",
                            [t, held](Reading& r) {
                              r.state_tile = -1, r.round_type = t;
                              r.state_round_sum = held != 1, r.state_round_acc = held != 0;
                            }));
      }
  return s;
}

std::vector<ReadingSetting> fp8_settings(const AttnParams& p) {
  Settings s;
  if (!is_fp8(p.kv_format)) return s;
  const KvFormat other = p.kv_format == KvFormat::fp8_e4m3 ? KvFormat::fp8_e5m2 : KvFormat::fp8_e4m3;
  s.push_back(setting("fp8_other_format", std::string("quantises K/V to ") + (other == KvFormat::fp8_e4m3 ? "e4m3" : "e5m2"),
                      [other](Reading& r) { r.fp8_format = other; }));
  s.push_back(setting("fp8_rounds_toward_zero", "encodes FP8 rounding toward zero", [](Reading& r) { r.fp8_rounding = Fp8Rounding::toward_zero; }));
  s.push_back(setting("fp8_rounds_ties_away", "encodes FP8 rounding ties away from zero", [](Reading& r) { r.fp8_rounding = Fp8Rounding::ties_away; }));
  s.push_back(setting("fp8_no_saturation", "encodes FP8 without saturating (beyond the largest: NaN or inf)", [](Reading& r) { r.fp8_saturates = false; }));
  // A saturation bound taken from another type: the other FP8 format's, the FNUZ e4m3's, fp16's.
  const double own_max = p.kv_format == KvFormat::fp8_e4m3 ? 448 : 57344;
  for (const auto& [bound, type] : {std::pair<double, const char*>{448, "e4m3"}, {240, "e4m3fnuz"}, {57344, "e5m2"}, {65504, "fp16"}})
    if (bound != own_max)
      s.push_back(setting("fp8_clamped_at_" + number(bound, 6),
                          std::string("clamps the values it encodes to +-") + number(bound, 6) + " (" + type +
                              "'s largest) before rounding them to " + (p.kv_format == KvFormat::fp8_e4m3 ? "e4m3" : "e5m2"),
                          [bound](Reading& r) { r.fp8_clamp = bound; }));
  s.push_back(setting("fp8_v_read_with_k_descale", "reads V with k_descale", [](Reading& r) { r.v_descale = DescaleRule::other; }));
  // The descales held in a half type (a kernel argument or a scale tensor in fp16/bf16).
  for (const DType t : {DType::bf16, DType::fp16})
    for (const bool on_encode : {false, true})
      s.push_back(setting("fp8_descales_in_" + std::string(dtype_name(t)) + (on_encode ? "" : "_on_read"),
                          "holds k_descale and v_descale in " + std::string(dtype_name(t)) +
                              (on_encode ? " (encoding and reading)" : " where it reads the codes back (encoding with the exact ones)"),
                          [t, on_encode](Reading& r) { r.descale_type = t, r.descale_rounded_on_encode = on_encode; }));
  if (p.mode != RunMode::prefill) {
    // The cache's read path alone: a call's own rows, quantised on load, read as the spec.
    const std::pair<const char*, std::function<void(Reading&)>> cached[] = {
        {"fp8_v_read_with_k_descale", [](Reading& r) { r.v_descale = DescaleRule::other; }},
        {"fp8_k_read_with_v_descale", [](Reading& r) { r.k_descale = DescaleRule::other; }},
        {"fp8_descale_twice", [](Reading& r) { r.k_descale = r.v_descale = DescaleRule::twice; }},
        {"fp8_descale_not_applied", [](Reading& r) { r.k_descale = r.v_descale = DescaleRule::none_on_read; }}};
    const char* words[] = {"reads the V codes it reads back from the cache with k_descale",
                           "reads the K codes it reads back from the cache with v_descale",
                           "multiplies the K/V it reads back from the cache by their descale twice",
                           "reads the K/V codes back from the cache without their descale"};
    for (std::size_t i = 0; i < 4; ++i) {
      const auto change = cached[i].second;
      s.push_back(setting(cached[i].first, std::string(words[i]) + " (a call's own rows, quantised on load, read right)",
                          [change](Reading& r) { change(r), r.descale_cached_only = true; }));
    }
  }
  s.push_back(setting("fp8_k_read_with_v_descale", "reads K with v_descale", [](Reading& r) { r.k_descale = DescaleRule::other; }));
  s.push_back(setting("fp8_descale_twice", "multiplies K and V by their descale twice when reading them",
                      [](Reading& r) { r.k_descale = r.v_descale = DescaleRule::twice; }));
  s.push_back(setting("fp8_descale_twice", "multiplies V by v_descale twice when reading it", [](Reading& r) { r.v_descale = DescaleRule::twice; }));
  s.push_back(setting("fp8_descale_twice", "multiplies K by k_descale twice when reading it", [](Reading& r) { r.k_descale = DescaleRule::twice; }));
  s.push_back(setting("fp8_descale_not_applied", "reads the FP8 codes without multiplying by the descale",
                      [](Reading& r) { r.k_descale = r.v_descale = DescaleRule::none_on_read; }));
  s.push_back(setting("fp8_descale_inverted", "stores fp8(x * descale) and reads code / descale",
                      [](Reading& r) { r.k_descale = r.v_descale = DescaleRule::inverted; }));
  if (p.mode != RunMode::prefill)
    s.push_back(setting("fp8_chunk_keys_unquantised", "reads a prompt call's own K/V rows unquantised (before the cache's FP8)",
                        [](Reading& r) { r.fp8_chunk_keys_unquantised = true; }));
  if (p.mode == RunMode::decode)
    s.push_back(setting("fp8_decode_key_unquantised",
                        "reads a decode step's own K/V (its new token, as it holds them before the store) unquantised, the "
                        "cached keys through FP8",
                        [](Reading& r) { r.fp8_decode_key_unquantised = true; }));
  // Encoding by a multiply with the descale's reciprocal, held in the dtype or a half type.
  for (const DType t : {DType::fp32, DType::fp16, DType::bf16}) {
    const std::string type = t == DType::fp32 ? std::string(dtype_name(p.dtype)) : std::string(dtype_name(t));
    s.push_back(setting("fp8_encodes_by_reciprocal_in_" + type,
                        "encodes x * (1 / descale) with the reciprocal held in " + type + " instead of x / descale",
                        [t](Reading& r) { r.fp8_encode_by_reciprocal = true, r.fp8_encode_reciprocal = t; }));
  }
  return s;
}

}  // namespace swa::harness
