#include "torch_cpu.hpp"

#include <cstdio>
#include <memory>
#include <sstream>

namespace swa::bench {

void torch_cpu_row(const TorchCpuOptions& options, const BenchSettings& settings, const std::string& case_name,
                   DType dtype, const Shape& shape, bool decode, std::vector<PerfRow>& rows,
                   std::vector<std::string>& notes) {
  std::ostringstream cmd;
  cmd << shell_quote(options.python) << " " << shell_quote(options.script) << " --mode " << (decode ? "decode" : "prefill")
      << " --s " << shape.s << " --w " << shape.w << " --d " << shape.d << " --hq " << shape.hq << " --hkv " << shape.hkv
      << " --dtype " << dtype_name(dtype) << " --warmups " << settings.warmups << " --repeats " << settings.repeats
      << " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.str().c_str(), "r"), pclose);
  if (!pipe) {
    notes.push_back("PyTorch: could not start " + cmd.str());
    return;
  }
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe.get())) out += buf;
  std::vector<std::string> f;
  std::stringstream line(out.substr(0, out.find('\n')));
  for (std::string x; std::getline(line, x, ',');) f.push_back(x);
  const bool timed = f.size() == 8 && f[1] != "error" && (f[0].rfind("sdpa", 0) == 0 || f[0].rfind("eager", 0) == 0);
  if (!timed) {
    std::string said = out.substr(0, 300);
    for (char& c : said) c = c == '\n' ? ' ' : c;
    notes.push_back("PyTorch " + case_name + ": " + (said.empty() ? "no output from " + cmd.str() : said));
    return;
  }
  PerfRow r = row_for("torch_" + case_name, "torch-" + f[0], dtype, shape, decode ? "decode" : "prefill", "none");
  r.set_timing({std::stod(f[3]), std::stod(f[4]), std::stod(f[5]), settings.repeats});
  r.timer = "host wall clock, torch " + f[7] + ", " + f[6] + " threads";
  const WindowBand band =
      shape.w > 0 ? band_from_window(shape.w, WindowConvention::keys_including_self) : causal_band();
  const std::int64_t keys = std::min<std::int64_t>(shape.s + 1, shape.w > 0 ? shape.w : shape.s + 1);
  const std::int64_t pairs = decode ? keys * shape.batch : band_pair_count(band, shape.s) * shape.batch;
  r.gflops = attention_gflops(shape.d, pairs, shape.hq, r.time_ms);
  rows.push_back(r);
}

}  // namespace swa::bench
