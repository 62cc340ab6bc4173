// swa-harness collect: the shards of a `submit` folder merged, and the ones that did not finish named.
#include <iostream>

#include "commands.hpp"
#include "swa/harness/base/host.hpp"
#include "options.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/store/junit.hpp"
#include "swa/harness/submit/slurm.hpp"
#include "swa/harness/store/summary.hpp"
#include "swa/harness/judge/verdict_enum.hpp"

namespace swa::cli {

// 4: some shards did not finish; the merged file holds what the others (and partial ones) stored.
constexpr int kShardsUnfinished = 4;

int cmd_collect(const std::vector<std::string>& args) {
  std::string dir;
  po::options_description desc(
      "swa-harness collect DIR: merge the shards of a folder `swa-harness submit` made (the merge job runs this)\n"
      "Writes DIR/merged.h5 and DIR/merged.xml from every readable shard file, finished or not, and DIR/summary.txt:\n"
      "how each array task ended, and the command that reruns just the unfinished shards.\n"
      "Exit status: 0 every shard finished and every row passes, 1 some rows fail, 2 invalid input,\n"
      "3 the merged files could not be written, 4 some shards did not finish");
  desc.add_options()("dir", po::value(&dir)->required(), "the submission's folder (positional)");
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  if (!parse_options("collect", args, desc, vm, &positional)) return kOk;
  harness::slurm::Submission s;
  try {
    s = harness::slurm::read_record(dir);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  harness::slurm::Collection c;
  try {
    c = harness::slurm::collect(s);
  } catch (const std::runtime_error& e) {  // SweepError too: DIR/sweep.yaml unreadable, edited or replaced
    throw UsageError(e.what());
  }
  try {
    if (c.any_results()) {
      harness::write_results(harness::slurm::merged_results(s), c.merged);
      harness::write_junit(harness::slurm::merged_junit(s), s.sweep_source, c.merged.results);
    }
    harness::write_file_atomically(harness::slurm::summary_path(s), harness::slurm::summary_text(s, c));
  } catch (const std::exception& e) {
    std::cout << harness::slurm::summary_text(s, c);
    std::cerr << "swa-harness collect: the merged files could not be written: " << e.what() << "\n";
    return kNotStored;
  }
  if (c.any_results())
    harness::print_summary(std::cout, c.merged.results, s.sweep_source, {},
                           {harness::command_word("swa-harness"), harness::slurm::merged_results(s).string()});
  std::cout << harness::slurm::summary_text(s, c);
  if (!c.unfinished().empty()) return kShardsUnfinished;
  for (const auto& r : c.merged.results)
    if (harness::is_failure(r.status)) return kCheckFailed;
  return kOk;
}

}  // namespace swa::cli
