// swa-harness golden: one case's inputs from its seed, the fp64 golden and the same-precision
// baseline, to a problem file. Its options are the case parameter table's keys.
#include <algorithm>
#include <chrono>
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/enum_names.hpp"
#include "swa/harness/case/case_schema.hpp"
#include "swa/harness/judge/evaluate.hpp"
#include "swa/harness/case/problem_file.hpp"

namespace swa::cli {
namespace {

std::string option_name(std::string_view key) {
  std::string name(key);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

int cmd_golden(const std::vector<std::string>& args) {
  std::string out, api_text = "generic";
  std::vector<std::string> values(harness::case_params().size());
  GoldenCacheArgs golden_cache_args;
  po::options_description desc(
      "swa-harness golden: generate one case's Q/K/V from its seed, run the fp64 golden and the same-precision "
      "baseline, and write a problem file (harness/README.md): /q /k /v, /reference/{out,lse,baseline}, /case");
  auto add = desc.add_options();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const harness::CaseParam& p = harness::case_params()[i];
    const std::string name = option_name(p.key);
    std::string help = p.allowed;
    if (p.key == "batch") help = "prompt lengths, comma-separated: " + help;
    if (p.key == "mode") help += " (default: decode with --decode-steps, chunked_prefill with --chunk, else prefill)";
    if (p.key == "kv_heads") help += " (default: --heads)";
    add(name.c_str(), po::value(&values[i]), help.c_str());
  }
  add("seq-lens", po::value(&values[1]), "the same as --batch (its earlier name)");
  add("api", po::value(&api_text)->default_value(api_text), "generic|atb: whose mask rules the case follows");
  add("out", po::value(&out)->required(), "output FILE.h5 (written to a temporary, then renamed)");
  add_golden_cache_options(desc, golden_cache_args);
  po::variables_map vm;
  if (!parse_options("golden", args, desc, vm)) return kOk;
  if (!vm.count("batch") && !vm.count("seq-lens")) throw UsageError("option --batch (or --seq-lens) is required");
  if (api_text != "generic" && api_text != "atb")
    throw UsageError("option --api: '" + api_text + "' is not one of generic|atb");

  harness::Scenario s;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const harness::CaseParam& p = harness::case_params()[i];
    if (!vm.count(option_name(p.key)) && !(p.key == "batch" && vm.count("seq-lens"))) continue;
    const std::string given = p.key == "batch" && vm.count("seq-lens") ? "seq-lens" : option_name(p.key);
    if (auto error = p.set(s, values[i])) throw UsageError("option --" + given + ": " + *error);
  }
  if (!vm.count("kv-heads")) s.kv_heads = s.heads;
  if (!vm.count("mode"))
    s.mode = s.decode_steps > 0 ? RunMode::decode : s.chunk > 0 ? RunMode::chunked_prefill : RunMode::prefill;
  harness::normalise(s);
  if (auto fault = harness::scenario_fault(s, api_text == "atb" ? harness::Api::atb : harness::Api::generic))
    throw UsageError("option --" + option_name(fault->key) + ": " + fault->message);
  const std::int64_t need = harness::estimate_memory_bytes(s.problem_spec());
  const std::int64_t limit = harness::default_memory_limit_bytes();
  if (need > limit)
    throw UsageError("option --batch: this problem needs about " + human_bytes(need) + ", over the limit of " +
                     human_bytes(limit) + " (half the machine's memory); shorten it or use fewer --heads");

  const std::unique_ptr<harness::GoldenCache> golden_cache = open_golden_cache(vm, golden_cache_args);
  const auto t0 = std::chrono::steady_clock::now();
  harness::Reference ref(s, golden_cache.get());
  const auto t1 = std::chrono::steady_clock::now();
  const harness::ProblemFile f = harness::problem_file(s, std::move(ref), harness::ProblemFileKind::golden);
  harness::write_problem_file(out, f);
  const auto t2 = std::chrono::steady_clock::now();
  const auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const harness::ReferenceTimes& t = ref.times;
  std::cout << "wrote " << out << ": " << s.id() << ", " << f.tokens << " tokens, " << seconds(t0, t2) << " s: inputs "
            << t.inputs << " s, " << (t.from_cache ? "golden and baseline read from the golden cache " : "golden ")
            << t.golden << " s" << (t.from_cache ? std::string() : ", baseline " + std::to_string(t.baseline) + " s")
            << ", cache and file " << (seconds(t0, t1) - t.inputs - t.golden - t.baseline) + seconds(t1, t2) << " s\n";
  if (golden_cache) std::cerr << golden_cache_summary(*golden_cache) << "\n";
  return kOk;
}

}  // namespace swa::cli
