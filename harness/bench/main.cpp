// swa-bench: kernel timings with warm-ups and medians, each quoted against the same run's SGEMM.
#include <boost/program_options.hpp>
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>

#include "cases.hpp"
#include "cuda_bench.hpp"

namespace po = boost::program_options;
using namespace swa;
using namespace swa::bench;

namespace {

struct Plan {
  Shape prefill, swa_long, causal_long;
  std::vector<std::int64_t> contexts;
  Shape decode;
  int sgemm_n;
};

Plan full_plan() {
  return {{8192, 1024, 128, 32, 8, 1}, {16384, 4096, 128, 8, 2, 1}, {16384, 0, 128, 8, 2, 1},
          {4096, 8192, 16384, 32768, 65536}, {0, 4096, 128, 32, 8, 1}, 2048};
}

Plan quick_plan() {
  return {{1024, 256, 128, 8, 2, 1}, {2048, 512, 64, 4, 2, 1}, {2048, 0, 64, 4, 2, 1}, {512, 2048}, {0, 512, 64, 8, 2, 1},
          512};
}

void print_csv(const std::vector<PerfRow>& rows) {
  std::cout << "case,dut,dtype,mode,cache,S,W,D,Hq,Hkv,batch,time_ms,min_ms,max_ms,repeats,gflops,sgemm_gflops,"
               "ratio_to_sgemm,kv_bytes,timer\n";
  for (const auto& r : rows)
    std::cout << r.scenario_id << "," << r.dut << "," << r.dtype << "," << r.mode << "," << r.cache << "," << r.tokens << ","
              << r.window << "," << r.head_size << "," << r.heads << "," << r.kv_heads << "," << r.batch << "," << r.time_ms << ","
              << r.min_ms << "," << r.max_ms << "," << r.repeats << "," << r.gflops << ","
              << r.ceiling_gflops << "," << r.ceiling_fraction << "," << r.kv_bytes << "," << r.timer << "\n";
}

void print_table(const std::vector<PerfRow>& rows) {
  std::cout << std::left << std::setw(22) << "case" << std::setw(14) << "dut" << std::setw(6) << "dtype"
            << std::setw(13) << "cache" << std::right << std::setw(7) << "S" << std::setw(6) << "W" << std::setw(5)
            << "D" << std::setw(4) << "Hq" << std::setw(4) << "Hkv" << std::setw(11) << "median ms" << std::setw(10)
            << "GFLOP/s" << std::setw(8) << "/SGEMM" << std::setw(14) << "KV bytes" << "\n";
  for (const auto& r : rows)
    std::cout << std::left << std::setw(22) << r.scenario_id << std::setw(14) << r.dut << std::setw(6) << r.dtype
              << std::setw(13) << r.cache << std::right << std::setw(7) << r.tokens << std::setw(6) << r.window << std::setw(5)
              << r.head_size << std::setw(4) << r.heads << std::setw(4) << r.kv_heads << std::setw(11) << std::fixed
              << std::setprecision(3) << r.time_ms << std::setw(10) << std::setprecision(1) << r.gflops
              << std::setw(8) << std::setprecision(3) << r.ceiling_fraction << std::setw(14) << r.kv_bytes << "\n";
}

// The targets, computed from this run's rows.
void print_targets(const std::map<std::string, PerfRow>& by_case, const std::string& dut, const Plan& plan) {
  auto t = [&](const std::string& name) { return by_case.at(name).time_ms; };
  std::cout << std::fixed << std::setprecision(3) << "\ntargets (" << dut << ", this run):\n";
  std::cout << "  fp32 prefill / SGEMM rate:            " << by_case.at("prefill_fp32").ceiling_fraction
            << "   (target >= 0.5)\n";
  std::cout << "  dense-masked time / " << dut << " time:       " << t("dense_masked_fp32") / t("prefill_fp32")
            << "   (target >= 10)\n";
  const double pair_ratio = static_cast<double>(band_pair_count(causal_band(), plan.causal_long.s)) /
                            band_pair_count(band_from_window(plan.swa_long.w, WindowConvention::keys_including_self),
                                            plan.swa_long.s);
  std::cout << "  causal / SWA time at S=" << plan.swa_long.s << ", W=" << plan.swa_long.w << ": "
            << t("causal_long") / t("swa_long") << "   (pair-count ratio " << pair_ratio << ", target within 15%)\n";
  std::vector<double> steps;
  for (auto c : plan.contexts) steps.push_back(t("decode_ring_" + std::to_string(c)));
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::cout << "  ring decode step over contexts " << plan.contexts.front() << ".." << plan.contexts.back()
            << ": " << 100 * (sorted.front() / median - 1) << "% .. +" << 100 * (sorted.back() / median - 1)
            << "% around the median, last/first " << steps.back() / steps.front() << "   (target flat within +-10%)\n";
  std::cout << "  KV bytes at context " << plan.contexts.back() << ": ring "
            << by_case.at("decode_ring_" + std::to_string(plan.contexts.back())).kv_bytes << ", linear "
            << by_case.at("decode_linear_" + std::to_string(plan.contexts.back())).kv_bytes << "\n";
  std::cout << "  fp16 / fp32 prefill time: " << t("prefill_fp16") / t("prefill_fp32")
            << ", bf16 / fp32: " << t("prefill_bf16") / t("prefill_fp32") << "   (target <= 1.5)\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dut = "cpu", format = "table", only;
  BenchSettings settings;
  CudaBenchOptions cuda_options;
  po::options_description desc(
      "swa-bench: SWA kernel timings (warm-ups, then the median), GFLOP/s = 4 D pairs Hq / time with pairs "
      "counted exactly, each against the same run's Eigen SGEMM");
  desc.add_options()("help,h", "show this help")
      ("dut", po::value(&dut)->default_value(dut),
       "the DUT to time (cpu, baseline, mutant:none; cuda: its kernels by device events, beside PyTorch)")
      ("torch-python", po::value(&cuda_options.torch_python)->default_value(cuda_options.torch_python),
       "--dut cuda: the Python with PyTorch that times FlexAttention and SDPA in the same run")
      ("torch-script", po::value(&cuda_options.torch_script)->default_value(cuda_options.torch_script),
       "--dut cuda: harness/bench/torch_swa.py, where this checkout has it")
      ("no-torch", "--dut cuda: skip the PyTorch comparison")
      ("format", po::value(&format)->default_value(format), "table|csv")
      ("quick", "small shapes, for a smoke test")
      ("only", po::value(&only), "regex: run only the matching cases (SGEMM always runs)")
      ("warmups", po::value(&settings.warmups)->default_value(1), "untimed runs before timing")
      ("repeats", po::value(&settings.repeats)->default_value(5), "timed runs; the median is reported");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (format != "table" && format != "csv") throw po::error("option --format: '" + format + "' is not one of table|csv");
    if (settings.repeats < 1 || settings.warmups < 0) throw po::error("option --repeats must be >= 1, --warmups >= 0");
  } catch (const po::error& e) {
    std::cerr << "swa-bench: error: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  std::optional<harness::IdPattern> filter;
  try {
    filter.emplace(only.empty() ? ".*" : only);
  } catch (const std::invalid_argument& e) {
    std::cerr << "swa-bench: error: option --only: '" << only << "' is not a regular expression (RE2 syntax: " << e.what()
              << ")\n";
    return 2;
  }
  if (dut == "cuda") {
    cuda_options.quick = vm.count("quick") > 0;
    if (vm.count("no-torch")) cuda_options.torch_python.clear();
    try {
      const CudaBenchResult result = run_cuda_bench(settings, cuda_options, *filter, format == "table");
      if (format == "csv") {
        print_csv(result.rows);
      } else {
        print_table(result.rows);
        print_cuda_targets(result);
      }
    } catch (const std::exception& e) {
      std::cerr << "swa-bench: error: " << e.what() << "\n";
      return 2;
    }
    return 0;
  }
  const Plan plan = vm.count("quick") ? quick_plan() : full_plan();
  const BenchSettings once{settings.warmups, std::max(1, std::min(settings.repeats, 2))};  // the slow dense baseline
  std::vector<PerfRow> rows;
  try {
    const double sgemm = harness::sgemm_ceiling_gflops(plan.sgemm_n, settings.warmups, settings.repeats);
    auto add = [&](const std::string& name, auto&& make) {
      if (!filter->found_in(name)) return;
      rows.push_back(make());
      rows.back().set_ceiling(sgemm, "Eigen SGEMM " + std::to_string(plan.sgemm_n) + "^3, same run");
      if (format == "table") std::cerr << "  done " << name << "\n";
    };
    for (DType dt : kAllDTypes)
      add("prefill_" + std::string(dtype_name(dt)), [&] { return bench_prefill("prefill_" + std::string(dtype_name(dt)), dut, dt, plan.prefill, settings); });
    add("dense_masked_fp32", [&] { return bench_prefill("dense_masked_fp32", "dense-masked", DType::fp32, plan.prefill, once); });
    add("swa_long", [&] { return bench_prefill("swa_long", dut, DType::fp32, plan.swa_long, settings); });
    add("causal_long", [&] { return bench_prefill("causal_long", dut, DType::fp32, plan.causal_long, settings); });
    for (auto c : plan.contexts)
      for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear}) {
        const std::string name = std::string("decode_") + (cache == CachePolicy::linear ? "linear_" : "ring_") + std::to_string(c);
        Shape shape = plan.decode;
        shape.s = c;
        add(name, [&] { return bench_decode(name, dut, DType::fp16, shape, cache, settings); });
      }
  } catch (const std::exception& e) {
    std::cerr << "swa-bench: error: " << e.what() << "\n";
    return 2;
  }
  if (format == "csv") {
    print_csv(rows);
    return 0;
  }
  print_table(rows);
  std::map<std::string, PerfRow> by_case;
  for (const auto& r : rows) by_case[r.scenario_id] = r;
  if (only.empty()) print_targets(by_case, dut, plan);
  std::cout << "SGEMM " << plan.sgemm_n << "^3 (Eigen, same run): " << std::setprecision(1) << rows.front().ceiling_gflops
            << " GFLOP/s\n";
  return 0;
}
