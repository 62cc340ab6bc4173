#include "cuda_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "swa/harness/duts/dut_registry.hpp"

namespace swa::bench {
namespace {

struct CudaPlan {
  Shape prefill, causal, decode;
  std::vector<std::int64_t> contexts;
};

CudaPlan full_plan() {
  return {{16384, 4096, 128, 32, 8, 1}, {16384, 0, 128, 32, 8, 1}, {0, 4096, 128, 32, 8, 4}, {4096, 16384, 65536}};
}
// The prefill grid (issue 57): head sizes at the target shape, then sequence lengths and windows
// around it at D 128; Hq 32, Hkv 8, one sequence each. Eight shapes (the target shape itself is in
// the plan above), sized for a lent GPU's minutes: FlexAttention compiles once per shape.
struct GridShape {
  DType dtype;
  Shape shape;
};
std::vector<GridShape> grid_shapes() {
  std::vector<GridShape> g;
  for (DType dt : {DType::fp16, DType::bf16})
    for (int d : {64, 256}) g.push_back({dt, {16384, 4096, d, 32, 8, 1}});
  for (std::int64_t s : {4096, 32768}) g.push_back({DType::fp16, {s, 4096, 128, 32, 8, 1}});
  for (std::int64_t w : {512, 1024}) g.push_back({DType::fp16, {16384, w, 128, 32, 8, 1}});
  return g;
}

std::string grid_suffix(const GridShape& g) {
  return std::string(dtype_name(g.dtype)) + "_s" + std::to_string(g.shape.s) + "_w" + std::to_string(g.shape.w) + "_d" +
         std::to_string(g.shape.d);
}

CudaPlan quick_plan() { return {{1024, 256, 64, 8, 2, 1}, {1024, 0, 64, 8, 2, 1}, {0, 256, 64, 8, 2, 2}, {512, 2048}}; }

// Bytes a decode step must move: each sequence's visible K and V rows, its query and its output.
std::int64_t decode_bytes(const PerfRow& r) {
  const std::int64_t keys = std::min<std::int64_t>(r.tokens + 1, r.window);
  const std::int64_t elem = static_cast<std::int64_t>(dtype_bytes(*parse_dtype(r.dtype)));
  return r.batch * (2 * keys * r.kv_heads * r.head_size + 2 * r.heads * r.head_size) * elem;
}

// FlexAttention and SDPA rows from harness/bench/torch_swa.py, or notes saying why not.
void torch_rows(const CudaBenchOptions& options, const BenchSettings& settings, DType dtype, const Shape& shape,
                const std::string& case_suffix, CudaBenchResult& result) {
  std::ostringstream cmd;
  cmd << options.torch_python << " " << shell_quote(options.torch_script) << " --s " << shape.s << " --w " << shape.w
      << " --d " << shape.d << " --hq " << shape.hq << " --hkv " << shape.hkv << " --dtype " << dtype_name(dtype)
      << " --warmups " << std::max(2, settings.warmups) << " --repeats " << settings.repeats << " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.str().c_str(), "r"), pclose);
  if (!pipe) {
    result.notes.push_back("PyTorch: could not start " + cmd.str());
    return;
  }
  char buf[4096];
  const std::int64_t pairs = band_pair_count(
      shape.w > 0 ? band_from_window(shape.w, WindowConvention::keys_including_self) : causal_band(), shape.s);
  while (std::fgets(buf, sizeof buf, pipe.get())) {
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() >= 3 && (f[0] == "flex" || f[0] == "sdpa") && f[1] == "error") {
      result.notes.push_back("PyTorch " + f[0] + " " + std::string(dtype_name(dtype)) + ": " + line.substr(f[0].size() + 7));
      continue;
    }
    if (f.size() != 5 || (f[0] != "flex" && f[0] != "sdpa")) {
      if (!line.empty()) result.notes.push_back("PyTorch said: " + line.substr(0, 300));
      continue;
    }
    PerfRow r = row_for("torch_" + f[0] + "_" + case_suffix, f[0] == "flex" ? "torch-flex" : "torch-sdpa", dtype, shape,
                        "prefill", "none");
    r.set_timing({std::stod(f[2]), std::stod(f[3]), std::stod(f[4]), settings.repeats});
    r.timer = "device events";
    r.gflops = attention_gflops(shape.d, pairs, shape.hq, r.time_ms);
    result.rows.push_back(r);
  }
}

const PerfRow* find(const CudaBenchResult& r, const std::string& name) {
  for (const auto& row : r.rows)
    if (row.scenario_id == name) return &row;
  return nullptr;
}

// "  <what> prefill S= W= D= Hq= Hkv=: cuda X TFLOP/s[, FlexAttention Y TFLOP/s, cuda/flex Z]", no newline.
void print_against_flex(const std::string& what, const PerfRow& ours, const PerfRow* flex) {
  std::cout << std::setprecision(1) << "  " << what << " prefill S=" << ours.tokens << " W=" << ours.window
            << " D=" << ours.head_size << " Hq=" << ours.heads << " Hkv=" << ours.kv_heads << ": cuda "
            << ours.gflops / 1e3 << " TFLOP/s";
  if (flex)
    std::cout << ", FlexAttention " << flex->gflops / 1e3 << " TFLOP/s, cuda/flex " << std::setprecision(3)
              << ours.gflops / flex->gflops;
}

// A row's figures as soon as it is timed, so a run stopped part-way (a step's time limit on a lent
// GPU) still leaves what it measured in its log.
void print_progress(const PerfRow& row) {
  std::cerr << "  done " << row.scenario_id << ": " << row.time_ms << " ms, " << row.gflops / 1000.0 << " TFLOP/s\n";
}
void print_progress(const CudaBenchResult& result, std::size_t first_new, const std::string& what) {
  if (first_new == result.rows.size()) std::cerr << "  done " << what << ": no rows (see the notes)\n";
  for (std::size_t i = first_new; i < result.rows.size(); ++i) print_progress(result.rows[i]);
}

}  // namespace

CudaBenchResult run_cuda_bench(const BenchSettings& settings, const CudaBenchOptions& options, const harness::IdPattern& filter,
                               bool progress) {
  const CudaPlan plan = options.quick ? quick_plan() : full_plan();
  CudaBenchResult result;
  result.copy_bandwidth_gbps = harness::cuda_copy_bandwidth_gbps();
  auto add = [&](const std::string& name, auto&& make) {
    if (!filter.found_in(name)) return;
    result.rows.push_back(make());
    if (progress) print_progress(result.rows.back());
  };
  for (DType dt : {DType::fp16, DType::bf16, DType::fp32}) {
    const std::string suffix = std::string(dtype_name(dt));
    add("prefill_" + suffix, [&] { return bench_prefill("prefill_" + suffix, "cuda", dt, plan.prefill, settings); });
    if (dt != DType::fp32 && !options.torch_python.empty() && filter.found_in("torch_" + suffix)) {
      const std::size_t before = result.rows.size();
      torch_rows(options, settings, dt, plan.prefill, suffix, result);
      if (progress) print_progress(result, before, "torch " + suffix);
    }
  }
  if (options.grid)
    for (const GridShape& g : grid_shapes()) {
      const std::string suffix = grid_suffix(g);
      add("grid_" + suffix, [&] { return bench_prefill("grid_" + suffix, "cuda", g.dtype, g.shape, settings); });
      if (!options.torch_python.empty() && filter.found_in("torch_" + suffix)) {
        const std::size_t before = result.rows.size();
        torch_rows(options, settings, g.dtype, g.shape, suffix, result);
        if (progress) print_progress(result, before, "torch " + suffix);
      }
    }
  add("prefill_causal_fp16", [&] { return bench_prefill("prefill_causal_fp16", "cuda", DType::fp16, plan.causal, settings); });
  for (auto c : plan.contexts)
    for (CachePolicy cache : {CachePolicy::ring_modulo, CachePolicy::linear}) {
      const std::string name = std::string("decode_") + (cache == CachePolicy::linear ? "linear_" : "ring_") + std::to_string(c);
      Shape shape = plan.decode;
      shape.s = c;
      add(name, [&] { return bench_decode(name, "cuda", DType::fp16, shape, cache, settings); });
    }
  return result;
}

void print_cuda_targets(const CudaBenchResult& result) {
  std::cout << std::fixed << "\ntargets (cuda, this run; " << harness::cuda_device() << "):\n";
  for (const char* dt : {"fp16", "bf16"}) {
    const PerfRow* ours = find(result, std::string("prefill_") + dt);
    const PerfRow* flex = find(result, std::string("torch_flex_") + dt);
    const PerfRow* sdpa = find(result, std::string("torch_sdpa_") + dt);
    if (!ours) continue;
    print_against_flex(dt, *ours, flex);
    if (flex) std::cout << " (target >= 1: issue 20, prefill at FlexAttention's throughput)";
    if (sdpa) std::cout << std::setprecision(1) << ", SDPA (explicit mask) " << sdpa->gflops / 1e3 << " TFLOP/s";
    std::cout << "\n";
  }
  for (const GridShape& g : grid_shapes()) {
    const std::string suffix = grid_suffix(g);
    if (const PerfRow* ours = find(result, "grid_" + suffix)) {
      print_against_flex("grid " + std::string(dtype_name(g.dtype)), *ours, find(result, "torch_flex_" + suffix));
      std::cout << "\n";
    }
  }
  if (const PerfRow *swa = find(result, "prefill_fp16"), *causal = find(result, "prefill_causal_fp16"); swa && causal) {
    const double pair_ratio =
        static_cast<double>(band_pair_count(causal_band(), causal->tokens)) /
        band_pair_count(band_from_window(swa->window, WindowConvention::keys_including_self), swa->tokens);
    std::cout << std::setprecision(3) << "  causal / SWA fp16 prefill time: "
              << causal->time_ms / swa->time_ms << " (pair-count ratio " << pair_ratio << ")\n";
  }
  std::cout << std::setprecision(1) << "  copy bandwidth (device-to-device, read + write, this run): "
            << result.copy_bandwidth_gbps << " GB/s\n";
  for (const auto& r : result.rows) {
    if (r.mode != "decode") continue;
    const std::int64_t bytes = decode_bytes(r);
    const double floor_ms = bytes / (result.copy_bandwidth_gbps * 1e6);
    std::cout << std::setprecision(4) << "  " << r.scenario_id << ": step " << r.time_ms * 1e3 << " us, reads "
              << bytes << " B, bandwidth floor " << floor_ms * 1e3 << " us, floor/step " << std::setprecision(3)
              << floor_ms / r.time_ms << " (target >= 0.5: within 2x of the floor)\n";
  }
  for (const auto& n : result.notes) std::cout << "  note: " << n << "\n";
}

}  // namespace swa::bench
