// swa-harness: the command-line entry point. One subcommand per file.
#include <csignal>
#include <malloc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string_view>

#include "commands.hpp"
#include "options.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/duts/dut_registry.hpp"
#include "swa/harness/run/meta.hpp"

namespace {

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>&);
};

constexpr Subcommand kSubcommands[] = {
    {"mask", "write an ATB mask tensor (swa-norm, swa-compress, causal, norm-compress) to HDF5", swa::cli::cmd_mask},
    {"mask-check", "decode compressed masks as a tiled kernel would and compare with the window",
     swa::cli::cmd_mask_check},
    {"golden", "generate inputs, run the fp64 golden and the same-precision baseline, write HDF5",
     swa::cli::cmd_golden},
    {"run", "run a sweep against DUTs: HDF5 results, JUnit, console summary", swa::cli::cmd_run},
    {"list", "print the expanded scenario IDs of a sweep file", swa::cli::cmd_list},
    {"merge", "join shard result files", swa::cli::cmd_merge},
    {"submit", "run a sweep as a Slurm job array (a shard per task) with a merge job after it", swa::cli::cmd_submit},
    {"collect", "merge the shards of a submit folder; name the unfinished ones and how to rerun them",
     swa::cli::cmd_collect},
    {"bisect", "turn a failing scenario into a diagnosis and a minimal reproduction", swa::cli::cmd_bisect},
    {"report", "HTML and Markdown reports from results files; --compare BASE CAND for regressions", swa::cli::cmd_report},
    {"self-check", "check the golden's cache, chunk and decode paths against the dense definition",
     swa::cli::cmd_self_check},
};

void print_usage(std::ostream& out) {
  out << "usage: swa-harness <command> [options]   (swa-harness <command> --help for its options;\n"
         "       swa-harness --version)\n\ncommands:\n";
  for (const auto& s : kSubcommands) out << "  " << s.name << std::string(12 - s.name.size(), ' ') << s.summary << "\n";
}

// A sweep allocates and frees tensors of a few MB per scenario. glibc's defaults give each back to
// the kernel on free (mmap above 128 KiB at first, trimming above 128 KiB), so every scenario paid
// page faults and zeroing again: a quarter of a warm-cache ci.yaml run. Kept in the heap instead;
// a tensor over 32 MiB (the largest threshold glibc takes) is still mapped on its own.
void keep_freed_tensors_in_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

// A command's exit status once what it printed has reached stdout: output that could not be written
// (`list > /dev/full`, a closed pipe) is the command's failure, never an exit 0 with a truncated list.
int stdout_written(std::string_view command, int status) {
  std::cout.flush();
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return status;
  const int error = errno;
  std::cerr << "swa-harness " << command << ": error: cannot write to standard output ("
            << (error ? std::strerror(error) : "write error") << "): what it printed is incomplete\n";
  return status == swa::cli::kOk || status == swa::cli::kCheckFailed ? swa::cli::kNotStored : status;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_tensors_in_the_heap();
  // A file-size limit (ulimit -f) must end a run as a full disk does (exit 3, the rows kept), not by
  // the signal: ignored, a write past it fails with EFBIG, which the results store reports.
  // platform::Child gives every child the default action back.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? swa::cli::kBadInput : swa::cli::kOk;
  }
  if (std::string_view(argv[1]) == "--version" || std::string_view(argv[1]) == "-V") {
    std::cout << swa::harness::version_line("swa-harness") << "\n";
    return stdout_written("--version", swa::cli::kOk);
  }
  const std::string_view name = argv[1];
  for (const auto& s : kSubcommands) {
    if (s.name != name) continue;
    if (const auto isa = swa::harness::cpu_isa_setting_error()) {
      std::cerr << "swa-harness " << name << ": error: " << *isa << "\n";
      return swa::cli::kBadInput;
    }
    try {
      return stdout_written(name, s.run(std::vector<std::string>(argv + 2, argv + argc)));
    } catch (const swa::cli::UsageError& e) {
      // Cleaned, not cut: a message quotes what it refuses (a path, a plugin's or a file's text), which
      // may hold escape codes or bytes that are not UTF-8; a DUT's own text was capped where it entered.
      std::cerr << "swa-harness " << name << ": error: " << swa::harness::clean_text(e.what(), std::string::npos)
                << "\n(see swa-harness " << name << " --help)\n";
      return swa::cli::kBadInput;
    } catch (const std::exception& e) {
      std::cerr << "swa-harness " << name << ": error: " << swa::harness::clean_text(e.what(), std::string::npos) << "\n";
      return swa::cli::kBadInput;
    }
  }
  std::cerr << "swa-harness: unknown command '" << name << "'\n";
  print_usage(std::cerr);
  return swa::cli::kBadInput;
}
