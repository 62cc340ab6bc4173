// swa-harness mask-check: where do the doc's compressed-mask generators and a tiled kernel's
// block rule disagree with the window they stand for?
#include <iomanip>
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/atb_masks.hpp"
#include "swa/mask_decoder.hpp"
#include "swa/window.hpp"

namespace swa::cli {
namespace {

// The doc's prose ("skip when m - n > windowLen") against its own sample code (i - W < j <= i).
void print_prose_versus_code(std::int64_t window) {
  const WindowBand code = band_from_window(window, WindowConvention::keys_including_self);
  const WindowBand prose = band_from_window(window, WindowConvention::atb_prose);
  std::cout << "SWA_NORM, W=" << window << ": the sample code attends " << *band_keys_including_self(code)
            << " keys (i-W < j <= i); the prose 'skip when m-n > windowLen' attends " << *band_keys_including_self(prose)
            << " (first difference at q=" << window << ", k=0: code masked, prose visible)\n";
}

}  // namespace

int cmd_mask_check(const std::vector<std::string>& args) {
  std::string head_sizes_text = "64,80,96,128,160,192,256";
  std::string windows_text = "1,2,3,127,128,129,383,384,385,512,4096";
  std::string generator_text, rule_text;
  po::options_description desc(
      "swa-harness mask-check: decode SWA_COMPRESS masks as a tiled kernel reads them and compare with the "
      "window\nEvery generator x block-rule pairing is checked; the exit status is that of the chosen pairing");
  desc.add_options()
      ("head-sizes", po::value(&head_sizes_text)->default_value(head_sizes_text), "comma-separated head sizes")
      ("windows", po::value(&windows_text)->default_value(windows_text), "comma-separated windows W")
      ("generator", po::value(&generator_text)->default_value("python"), "python|cpp: the chosen mask generator")
      ("block-rule", po::value(&rule_text), "python|cpp: the chosen kernel block rule (default: the generator's)");
  po::variables_map vm;
  if (!parse_options("mask-check", args, desc, vm)) return kOk;
  const auto head_sizes = parse_int_list("--head-sizes", head_sizes_text, 1, 1024);
  const auto windows = parse_int_list("--windows", windows_text, 1, 1 << 16);
  const AtbSample chosen_gen = require_choice("--generator", generator_text, parse_sample(generator_text), "python|cpp");
  const AtbSample chosen_rule =
      vm.count("block-rule") ? require_choice("--block-rule", rule_text, parse_sample(rule_text), "python|cpp")
                             : chosen_gen;

  print_prose_versus_code(3);
  std::cout << "\nSWA_COMPRESS: mask generator x kernel block rule, " << head_sizes.size() << " head sizes x "
            << windows.size() << " windows\n";
  int chosen_failures = 0;
  std::vector<MaskCheckCase> disagreements;
  std::cout << std::left << std::setw(10) << "generator" << std::setw(12) << "block-rule" << std::setw(12)
            << "consistent" << "differ\n";
  for (AtbSample gen : kAllAtbSamples)
    for (AtbSample rule : kAllAtbSamples) {
      int ok = 0, total = 0;
      for (auto d : head_sizes)
        for (auto w : windows) {
          const MaskCheckCase c = check_compressed_mask(static_cast<int>(d), w, gen, rule);
          ++total;
          if (c.error.empty() && !c.result.differs) {
            ++ok;
            continue;
          }
          disagreements.push_back(c);
          if (gen == chosen_gen && rule == chosen_rule) ++chosen_failures;
        }
      std::cout << std::setw(10) << sample_name(gen) << std::setw(12) << sample_name(rule) << std::setw(12) << ok
                << total - ok << (gen == chosen_gen && rule == chosen_rule ? "   <- chosen" : "") << "\n";
    }
  if (!disagreements.empty()) {
    std::cout << "\nDisagreements (D, W, generator B/T, kernel B/T):\n";
    for (const auto& c : disagreements) {
      std::cout << "  D=" << c.head_size << " W=" << c.window << " generator=" << sample_name(c.generator)
                << " block-rule=" << sample_name(c.block_rule);
      if (!c.error.empty()) {
        std::cout << ": " << c.error << "\n";
        continue;
      }
      std::cout << " gen B=" << c.generated.block << " T=" << c.generated.effective_window << " kernel B="
                << c.assumed.block << " T=" << c.assumed.effective_window << ": " << c.result.detail << "\n";
    }
  }
  std::cout << "\nchosen pairing generator=" << sample_name(chosen_gen) << " block-rule=" << sample_name(chosen_rule)
            << ": " << (chosen_failures == 0 ? "consistent" : std::to_string(chosen_failures) + " disagreements")
            << "\n";
  return chosen_failures == 0 ? kOk : kCheckFailed;
}

}  // namespace swa::cli
