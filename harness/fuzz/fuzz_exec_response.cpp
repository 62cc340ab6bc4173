// libFuzzer target: any bytes as an exec DUT's response file, through the exec DUT itself (its checks,
// swa-h5-probe in a process of its own, then the harness's read of /out and /cache). The harness must
// turn every input into a DUT error or a read; never crash, hang or write outside the buffers.
//
// The problem is fixed: decode with a ring cache (so /cache is read too), fp16, two sequences. Seeds
// come from a real DUT: with SWA_FUZZ_SEED_FROM set to an exec command (the numpy example) and
// SWA_FUZZ_SEED_TO to the corpus folder, the initializer runs that DUT once and keeps its response
// there (harness/fuzz/README.md).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "swa/dut/dut.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/case/problem.hpp"
#include "swa/harness/duts/exec_dut.hpp"

namespace {

swa::harness::Problem& problem() {
  static swa::harness::Problem* p = [] {
    swa::harness::ProblemSpec spec;
    spec.seq_lens = {7, 4};
    spec.heads_q = 2;
    spec.heads_kv = 1;
    spec.head_size = 16;
    spec.band = swa::causal_band();
    spec.band.left = 3;
    spec.dtype = swa::DType::fp16;
    spec.mode = swa::RunMode::decode;
    spec.decode_steps = 2;
    spec.seed = 11;
    auto* built = new swa::harness::Problem;
    swa::harness::build_problem(spec, *built);
    return built;
  }();
  return *p;
}

// The schedule through `dut`, into an output buffer of the problem's size (ASan sees a write past it).
swa::dut::Status run(swa::dut::Dut& dut) {
  static std::vector<unsigned char> out(
      static_cast<std::size_t>(problem().seq_offsets.back()) * problem().params.heads_q *
      problem().params.head_size * swa::dtype_bytes(problem().params.dtype));
  swa::AttnParams p = problem().params;
  p.out = out.data();
  return swa::dut::run_schedule(dut, p);
}

const std::string& response_path() {
  static const std::string path = "/tmp/swa-fuzz-response-" + std::to_string(::getpid()) + ".h5";
  return path;
}

// An exec DUT whose command hands back `source` as its response.
std::unique_ptr<swa::dut::Dut> dut_answering_with(const std::string& source) {
  return swa::harness::make_exec_dut("f() { cp " + swa::harness::shell_quote(source) + " \"$2\"; }; f", 30.0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* from = std::getenv("SWA_FUZZ_SEED_FROM");
  const char* to = std::getenv("SWA_FUZZ_SEED_TO");
  if (from && to) {
    const std::string keep = std::string(to) + "/seed-decode-ring-fp16.h5";
    auto seed = swa::harness::make_exec_dut(std::string("f() { ") + from + " \"$1\" \"$2\" && cp \"$2\" " +
                                                swa::harness::shell_quote(keep) + "; }; f",
                                            120.0);
    const swa::dut::Status s = run(*seed);
    std::fprintf(stderr, "seed response %s: %s\n", keep.c_str(), s.ok ? "kept" : s.message.c_str());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (FILE* f = std::fopen(response_path().c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  static const std::unique_ptr<swa::dut::Dut> dut = dut_answering_with(response_path());
  try {
    (void)run(*dut);
  } catch (const std::exception&) {
  }
  return 0;
}
