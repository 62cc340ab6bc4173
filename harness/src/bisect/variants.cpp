// The golden variants bisect tries: each is the output of a reference with one suspected bug.
#include <limits>
#include <utility>

#include "swa/dut/mutant_dut.hpp"
#include "swa/golden.hpp"
#include "swa/harness/bisect/bisect.hpp"

namespace swa::harness {
namespace {

// The fp64 golden with a different band.
Variant band_variant(std::string name, std::string meaning, std::function<std::optional<WindowBand>(WindowBand)> change) {
  return {std::move(name), std::move(meaning), [change](const Problem& pr) -> std::optional<std::vector<double>> {
            const std::optional<WindowBand> band = change(pr.params.band);
            if (!band) return std::nullopt;
            AttnParams p = pr.params;
            p.band = *band;
            // The golden's output does not depend on the cache; a linear one holds any band (a ring
            // needs a window, a paged pool is sized for the case's own band).
            if (p.mode != RunMode::prefill && (p.cache == CachePolicy::paged || p.band.left < 0)) p.cache = CachePolicy::linear;
            return golden::run(p).out;
          }};
}

// A plain fp32 kernel with one fault (dut/mutants): the same bug, independent of the DUT's code.
Variant fault_variant(dut::Fault fault, std::string meaning, bool needs_ring = false, bool needs_gqa = false,
                      std::function<bool(const AttnParams&)> applies = {}) {
  return {std::string(dut::fault_name(fault)), std::move(meaning),
          [=](const Problem& pr) -> std::optional<std::vector<double>> {
            const AttnParams& base = pr.params;
            const bool ring = base.cache == CachePolicy::ring_modulo || base.cache == CachePolicy::ring_compact;
            if (needs_ring && (base.mode == RunMode::prefill || !ring)) return std::nullopt;
            if (needs_gqa && (base.heads_kv < 2 || base.heads_q == base.heads_kv)) return std::nullopt;
            if (applies && !applies(base)) return std::nullopt;
            auto dut = dut::make_mutant(fault);
            return run_to_output(*dut, pr);
          }};
}

// The fp64 golden with one score semantic dropped or changed; nullopt when the case does not use it.
Variant semantics_variant(std::string name, std::string meaning, std::function<bool(AttnParams&)> change) {
  return {std::move(name), std::move(meaning), [change](const Problem& pr) -> std::optional<std::vector<double>> {
            AttnParams p = pr.params;
            if (!change(p)) return std::nullopt;
            return golden::run(p).out;
          }};
}

bool paged(const AttnParams& p) { return p.mode != RunMode::prefill && p.cache == CachePolicy::paged; }

}  // namespace

const std::vector<Variant>& bisect_variants() {
  static const std::vector<Variant> variants = {
      band_variant("window_plus_one", "attends W+1 keys (the FlexAttention / ATB-prose reading of the window)",
                   [](WindowBand b) -> std::optional<WindowBand> {
                     if (b.left < 0) return std::nullopt;
                     return WindowBand{b.left + 1, b.right};
                   }),
      {"window_minus_one", "attends W-1 keys (loses the oldest key of the window)",
       [](const Problem& pr) -> std::optional<std::vector<double>> {
         const WindowBand b = pr.params.band;
         if (b.left < 0) return std::nullopt;
         // W = 1 leaves no key at all: every row outputs 0 (FlashAttention's rule for empty rows).
         if (b.left == 0) return std::vector<double>(static_cast<std::size_t>(total_tokens(pr.params)) * pr.params.heads_q * pr.params.head_size, 0.0);
         AttnParams p = pr.params;
         p.band.left -= 1;
         return golden::run(p).out;
       }},
      band_variant("no_window", "ignores the window: plain causal attention",
                   [](WindowBand b) -> std::optional<WindowBand> {
                     if (b.left < 0) return std::nullopt;
                     return causal_band();
                   }),
      fault_variant(dut::Fault::ring_slot_off_by_one, "writes position p into ring slot(p)+1", true),
      fault_variant(dut::Fault::stale_slot_after_wrap, "a ring write that wraps leaves the old K/V in the slot", true),
      fault_variant(dut::Fault::gqa_modulo_mapping, "maps query head h to kv head h % Hkv instead of h / (Hq/Hkv)", false, true),
      fault_variant(dut::Fault::fp16_pv_accumulation, "accumulates P.V in fp16"),
      fault_variant(dut::Fault::no_max_subtraction, "computes the softmax without subtracting the row max"),
      semantics_variant("sinks_ignored", "leaves the attention sinks out of the softmax denominator",
                        [](AttnParams& p) { return std::exchange(p.sinks, nullptr) != nullptr; }),
      fault_variant(dut::Fault::sink_in_numerator, "adds the sink's weight to the output as if the sink were a key with value 1",
                    false, false, [](const AttnParams& p) { return p.sinks != nullptr; }),
      semantics_variant("softcap_ignored", "does not soft-cap the scores",
                        [](AttnParams& p) { return std::exchange(p.softcap, 0.f) != 0.f; }),
      fault_variant(dut::Fault::softcap_after_mask,
                    "soft-caps after masking: every hidden key it computed gets the score -cap instead of -inf", false,
                    false, [](const AttnParams& p) { return p.softcap > 0.f; }),
      semantics_variant("window_right_off_by_one", "a two-sided window sees R+1 keys after the query",
                        [](AttnParams& p) { return p.band.right > 0 && (p.band.right += 1); }),
      semantics_variant("window_right_ignored", "ignores the right side of a two-sided window (causal)",
                        [](AttnParams& p) { return p.band.right > 0 && !(p.band.right = 0); }),
      semantics_variant("fp8_kv_ignored", "reads K/V at the dtype's precision: never quantises them to the FP8 KV format",
                        [](AttnParams& p) { return is_fp8(std::exchange(p.kv_format, KvFormat::dtype)); }),
      semantics_variant("fp8_other_format", "quantises K/V to the other FP8 format (e4m3 for e5m2, or the reverse)",
                        [](AttnParams& p) {
                          if (!is_fp8(p.kv_format)) return false;
                          p.kv_format = p.kv_format == KvFormat::fp8_e4m3 ? KvFormat::fp8_e5m2 : KvFormat::fp8_e4m3;
                          return true;
                        }),
      fault_variant(dut::Fault::fp8_no_saturation,
                    "quantises K/V to FP8 without saturating: values beyond the largest become NaN (e4m3) or inf (e5m2)",
                    false, false, [](const AttnParams& p) { return is_fp8(p.kv_format); }),
      fault_variant(dut::Fault::fp8_descale_twice, "multiplies FP8 K/V by the descale twice when reading them", false,
                    false, [](const AttnParams& p) { return is_fp8(p.kv_format); }),
      fault_variant(dut::Fault::page_table_off_by_one,
                    "paged cache: reads position p through logical page (p + 1) / page_size", false, false, paged),
      fault_variant(dut::Fault::page_freed_early,
                    "paged cache: frees a page one query early, while the window's oldest key is still in it", false,
                    false, paged),
      fault_variant(dut::Fault::recycled_page_read,
                    "paged cache: a decode step reads the new position's slot before writing it (the recycled page's "
                    "old K/V)",
                    false, false, paged),
  };
  return variants;
}

}  // namespace swa::harness
