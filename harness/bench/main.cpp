// swa-bench: kernel timings with warm-ups and medians, each quoted against the same run's SGEMM.
#include <boost/program_options.hpp>
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>

#include "cases.hpp"
#include "cuda_bench.hpp"
#include "swa/harness/run/meta.hpp"
#include "swa/harness/run/ceilings.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "torch_cpu.hpp"

namespace po = boost::program_options;
using namespace swa;
using namespace swa::bench;

namespace {

struct Plan {
  Shape prefill, swa_long, causal_long;
  std::vector<std::int64_t> contexts;
  Shape decode;
  int sgemm_n;
  // Decode over the whole context (no window) through a linear cache: bandwidth-bound, quoted
  // against the STREAM triad over `triad_elements` doubles per array, measured right before and
  // right after each such case (TriadBeside).
  std::vector<std::int64_t> bandwidth_contexts;
  std::int64_t triad_elements;
};

Plan full_plan() {
  return {{8192, 1024, 128, 32, 8, 1}, {16384, 4096, 128, 8, 2, 1}, {16384, 0, 128, 8, 2, 1},
          {4096, 8192, 16384, 32768, 65536}, {0, 4096, 128, 32, 8, 1}, 2048, {16384, 32768, 65536}, 1 << 25};
}

Plan quick_plan() {
  return {{1024, 256, 128, 8, 2, 1}, {2048, 512, 64, 4, 2, 1}, {2048, 0, 64, 4, 2, 1}, {512, 2048}, {0, 512, 64, 8, 2, 1},
          512, {2048}, 1 << 20};
}

// K and V bytes one decode step reads: every visible key of every kv head, per sequence.
double decode_bytes_read(const PerfRow& r) {
  const std::int64_t keys = r.window > 0 ? std::min(r.tokens + 1, r.window) : r.tokens + 1;
  return 2.0 * static_cast<double>(r.batch * keys * r.kv_heads * r.head_size) *
         static_cast<double>(dtype_bytes(*parse_dtype(r.dtype)));
}
double decode_gbs(const PerfRow& r) { return r.mode == "decode" ? decode_bytes_read(r) / (r.time_ms * 1e6) : 0; }

// The triad measured right before and right after one bandwidth case. A machine's memory can change
// speed within a run (a Zen 5 here read the triad at 43-47 GB/s in one period and 73-79 in the next,
// dut/README.md), so the triad at the start of a run can belong to another period than a case
// minutes later. The case is quoted against the faster of the two, the stricter reading.
struct TriadBeside {
  double before = 0, after = 0;
  double faster() const { return std::max(before, after); }
};

// triad_beside_gbs: the faster triad beside a whole-context decode case, empty for the others.
void print_csv(const std::vector<PerfRow>& rows, const std::map<std::string, TriadBeside>& beside = {}) {
  std::cout << "case,dut,dtype,mode,cache,S,W,D,Hq,Hkv,batch,time_ms,min_ms,max_ms,repeats,gflops,sgemm_gflops,"
               "ratio_to_sgemm,kv_bytes,read_gbs,timer,triad_beside_gbs\n";
  for (const auto& r : rows) {
    std::cout << r.scenario_id << "," << r.dut << "," << r.dtype << "," << r.mode << "," << r.cache << "," << r.tokens << ","
              << r.window << "," << r.head_size << "," << r.heads << "," << r.kv_heads << "," << r.batch << "," << r.time_ms << ","
              << r.min_ms << "," << r.max_ms << "," << r.repeats << "," << r.gflops << ","
              << r.ceiling_gflops << "," << r.ceiling_fraction << "," << r.kv_bytes << "," << decode_gbs(r) << "," << r.timer << ",";
    if (const auto t = beside.find(r.scenario_id); t != beside.end()) std::cout << t->second.faster();
    std::cout << "\n";
  }
}

void print_table(const std::vector<PerfRow>& rows) {
  std::cout << std::left << std::setw(26) << "case" << std::setw(20) << "dut" << std::setw(6) << "dtype"
            << std::setw(13) << "cache" << std::right << std::setw(7) << "S" << std::setw(6) << "W" << std::setw(5)
            << "D" << std::setw(4) << "Hq" << std::setw(4) << "Hkv" << std::setw(11) << "median ms" << std::setw(10)
            << "GFLOP/s" << std::setw(8) << "/SGEMM" << std::setw(14) << "KV bytes" << std::setw(8) << "GB/s" << "\n";
  for (const auto& r : rows)
    std::cout << std::left << std::setw(26) << r.scenario_id << std::setw(20) << r.dut << std::setw(6) << r.dtype
              << std::setw(13) << r.cache << std::right << std::setw(7) << r.tokens << std::setw(6) << r.window << std::setw(5)
              << r.head_size << std::setw(4) << r.heads << std::setw(4) << r.kv_heads << std::setw(11) << std::fixed
              << std::setprecision(3) << r.time_ms << std::setw(10) << std::setprecision(1) << r.gflops
              << std::setw(8) << std::setprecision(3) << r.ceiling_fraction << std::setw(14) << r.kv_bytes << std::setw(8)
              << std::setprecision(2) << decode_gbs(r) << "\n";
}

// The whole-context decode cases that ran, each as GB/s read against the triad beside it.
void print_bandwidth_targets(const std::map<std::string, PerfRow>& by_case, const Plan& plan,
                             const std::map<std::string, TriadBeside>& beside) {
  for (auto c : plan.bandwidth_contexts) {
    const std::string name = "decode_full_linear_" + std::to_string(c);
    if (!by_case.count(name) || !beside.count(name)) continue;
    const double read = decode_gbs(by_case.at(name));
    const TriadBeside& t = beside.at(name);
    std::cout << std::fixed << std::setprecision(3) << "  fp16 decode, linear cache, whole context " << c << ": "
              << read << " GB/s read = " << read / t.faster() << " of the STREAM triad beside it (" << std::setprecision(2)
              << t.before << " GB/s before, " << t.after << " after; the faster)   (target >= 0.5)\n";
  }
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
  std::cout << "  bf16 prefill / SGEMM rate:            " << by_case.at("prefill_bf16").ceiling_fraction
            << "   (target >= 1.5)\n";
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
  desc.add_options()("help,h", "show this help")("version", "print the version and exit")
      ("dut", po::value(&dut)->default_value(dut),
       "the DUT to time (cpu, baseline, mutant:none; cuda: its kernels by device events, beside PyTorch)")
      ("torch-python", po::value(&cuda_options.torch_python)->default_value(cuda_options.torch_python),
       "the Python with PyTorch that times the same shapes in the same run (CPU: SDPA or eager attention with a "
       "window mask, harness/bench/torch_cpu_swa.py; cuda: FlexAttention and SDPA)")
      ("torch-script", po::value(&cuda_options.torch_script)->default_value(cuda_options.torch_script),
       "--dut cuda: harness/bench/torch_swa.py, where this checkout has it")
      ("no-torch", "skip the PyTorch comparison")
      ("format", po::value(&format)->default_value(format), "table|csv")
      ("quick", "small shapes, for a smoke test")
      ("grid", "--dut cuda: also 8 prefill shapes around the target (D 64/256; S 4k/32k; W 512/1k), each beside PyTorch")
      ("only", po::value(&only), "regex: run only the matching cases (SGEMM always runs)")
      ("warmups", po::value(&settings.warmups)->default_value(1), "untimed runs before timing")
      ("repeats", po::value(&settings.repeats)->default_value(5), "timed runs; the median is reported");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (format != "table" && format != "csv") throw po::error("option --format: '" + format + "' is not one of table|csv");
    if (settings.repeats < 1 || settings.warmups < 0) throw po::error("option --repeats must be >= 1, --warmups >= 0");
    if (const auto isa = harness::cpu_isa_setting_error()) throw po::error(*isa);
  } catch (const po::error& e) {
    std::cerr << "swa-bench: error: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << harness::version_line("swa-bench") << "\n";
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
  if (vm.count("grid") && dut != "cuda") {
    std::cerr << "swa-bench: error: option --grid: only with --dut cuda (got --dut " << dut << ")\n";
    return 2;
  }
  if (vm.count("grid") && vm.count("quick")) {
    std::cerr << "swa-bench: error: options --grid and --quick: choose one (the grid is full-size shapes)\n";
    return 2;
  }
  if (dut == "cuda") {
    cuda_options.quick = vm.count("quick") > 0;
    cuda_options.grid = vm.count("grid") > 0;
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
  std::vector<PerfRow> rows, torch_rows;
  std::vector<std::string> torch_notes;
  double triad = 0;
  std::map<std::string, TriadBeside> triad_beside;
  try {
    const double sgemm = harness::sgemm_ceiling_gflops(plan.sgemm_n, settings.warmups, settings.repeats);
    triad = harness::triad_bandwidth_gbs(plan.triad_elements, settings.warmups, settings.repeats);
    auto add = [&](const std::string& name, auto&& make) {
      if (!filter->found_in(name)) return;
      rows.push_back(make());
      rows.back().set_ceiling(sgemm, "SGEMM " + std::to_string(plan.sgemm_n) + "^3, " + harness::cpu_sgemm_name() + ", same run");
      if (format == "table") std::cerr << "  done " << name << "\n";
    };
    for (DType dt : kAllDTypes)
      add("prefill_" + std::string(dtype_name(dt)), [&] { return bench_prefill("prefill_" + std::string(dtype_name(dt)), dut, dt, plan.prefill, settings); });
    add("dense_masked_fp32", [&] { return bench_prefill("dense_masked_fp32", "dense-masked", DType::fp32, plan.prefill, once); });
    add("swa_long", [&] { return bench_prefill("swa_long", dut, DType::fp32, plan.swa_long, settings); });
    add("causal_long", [&] { return bench_prefill("causal_long", dut, DType::fp32, plan.causal_long, settings); });
    for (auto c : plan.contexts)
      for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear, CachePolicy::paged}) {
        const std::string kind = cache == CachePolicy::ring_modulo ? "ring" : std::string(cache_name(cache));
        const std::string name = "decode_" + kind + "_" + std::to_string(c);
        Shape shape = plan.decode;
        shape.s = c;
        add(name, [&] { return bench_decode(name, dut, DType::fp16, shape, cache, settings); });
      }
    for (auto c : plan.bandwidth_contexts) {
      const std::string name = "decode_full_linear_" + std::to_string(c);
      Shape shape = plan.decode;
      shape.s = c;
      shape.w = 0;
      add(name, [&] {
        TriadBeside& t = triad_beside[name];
        t.before = harness::triad_bandwidth_gbs(plan.triad_elements, settings.warmups, settings.repeats);
        PerfRow row = bench_decode(name, dut, DType::fp16, shape, CachePolicy::linear, settings);
        t.after = harness::triad_bandwidth_gbs(plan.triad_elements, settings.warmups, settings.repeats);
        return row;
      });
    }
    if (!vm.count("no-torch") && !cuda_options.torch_python.empty()) {
      const TorchCpuOptions torch{cuda_options.torch_python};
      const std::string decode_case = "decode_linear_" + std::to_string(plan.contexts.front());
      Shape decode_shape = plan.decode;
      decode_shape.s = plan.contexts.front();
      const struct {
        std::string name;
        DType dtype;
        Shape shape;
        bool decode;
      } peers[] = {{"prefill_fp32", DType::fp32, plan.prefill, false},
                   {"prefill_bf16", DType::bf16, plan.prefill, false},
                   {decode_case, DType::fp16, decode_shape, true}};
      for (const auto& peer : peers) {
        if (!filter->found_in("torch_" + peer.name)) continue;
        const std::size_t before = torch_rows.size();
        // PyTorch's CPU bf16 matmul has no fast path in Debian's 1.13 (minutes per prefill): one timed run.
        const BenchSettings torch_settings = peer.dtype == DType::bf16 && !peer.decode ? BenchSettings{0, 1} : settings;
        torch_cpu_row(torch, torch_settings, peer.name, peer.dtype, peer.shape, peer.decode, torch_rows, torch_notes);
        if (torch_rows.size() > before) torch_rows.back().set_ceiling(rows.empty() ? 0 : rows.front().ceiling_gflops, "same run");
        if (format == "table") std::cerr << "  done torch " << peer.name << "\n";
      }
      rows.insert(rows.end(), torch_rows.begin(), torch_rows.end());
    }
  } catch (const std::exception& e) {
    std::cerr << "swa-bench: error: " << e.what() << "\n";
    return 2;
  }
  for (const auto& note : torch_notes) std::cerr << "note: " << note << "\n";
  if (format == "csv") {
    print_csv(rows, triad_beside);
    return 0;
  }
  print_table(rows);
  std::map<std::string, PerfRow> by_case;
  for (const auto& r : rows) by_case[r.scenario_id] = r;
  if (only.empty()) print_targets(by_case, dut, plan);
  if (only.empty() || !triad_beside.empty()) {
    if (!only.empty()) std::cout << "\ntargets (" << dut << ", this run's whole-context decode cases):\n";
    print_bandwidth_targets(by_case, plan, triad_beside);
  }
  for (const auto& t : torch_rows) {
    const std::string ours = t.scenario_id.substr(std::string("torch_").size());
    if (by_case.count(ours))
      std::cout << "  PyTorch (" << t.dut << ") / " << dut << " time, " << ours << ": " << std::setprecision(2)
                << t.time_ms / by_case.at(ours).time_ms << "   (> 1: " << dut << " is faster)\n";
  }
  std::cout << "SGEMM " << plan.sgemm_n << "^3 (" << harness::cpu_sgemm_name() << ", same run): " << std::setprecision(1) << (rows.empty() ? 0.0 : rows.front().ceiling_gflops)
            << " GFLOP/s; STREAM triad (" << (plan.triad_elements >> 20) << " Mi doubles per array, same run): "
            << std::setprecision(2) << triad << " GB/s at the start\n";
  if (dut == "cpu") std::cout << "CPU kernels: " << harness::cpu_kernel_path() << "\n";
  return 0;
}
