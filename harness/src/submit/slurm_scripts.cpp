// The scripts and the record `swa-harness submit` writes into a submission's folder.
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/submit/slurm.hpp"

namespace swa::harness::slurm {
namespace fs = std::filesystem;

fs::path sweep_snapshot(const Submission& s) { return s.dir / "sweep.yaml"; }
fs::path array_script_path(const Submission& s) { return s.dir / "array.sbatch"; }
fs::path merge_script_path(const Submission& s) { return s.dir / "merge.sbatch"; }
fs::path record_path(const Submission& s) { return s.dir / "submission.json"; }
fs::path shard_results(const Submission& s, int shard) { return s.dir / ("shard-" + std::to_string(shard) + ".h5"); }
fs::path shard_end_record(const Submission& s, int shard) {
  return s.dir / ("shard-" + std::to_string(shard) + ".end");
}
fs::path shard_log(const Submission& s, int shard) { return s.dir / "logs" / ("shard-" + std::to_string(shard) + ".log"); }
fs::path merged_results(const Submission& s) { return s.dir / "merged.h5"; }
fs::path merged_junit(const Submission& s) { return s.dir / "merged.xml"; }
fs::path summary_path(const Submission& s) { return s.dir / "summary.txt"; }
fs::path report_dir(const Submission& s) { return s.dir / "report"; }


namespace {

std::string q(const fs::path& p) { return shell_quote(p.string()); }

// The #SBATCH lines both scripts share: where they run and on what.
void common_directives(std::ostream& o, const Submission& s) {
  o << "#SBATCH --chdir=" << s.workdir.string() << "\n";
  o << "#SBATCH --ntasks=1\n";
  o << "#SBATCH --cpus-per-task=" << s.cpus_per_task << "\n";
  if (!s.partition.empty()) o << "#SBATCH --partition=" << s.partition << "\n";
  for (const auto& a : s.sbatch_args) o << "#SBATCH " << a << "\n";
}

}  // namespace

std::string array_script(const Submission& s) {
  std::ostringstream o;
  o << "#!/bin/bash\n"
    << "# One shard of " << s.sweep_source << " per array task; written by swa-harness submit.\n"
    << "# A requeued task (node failure, preemption, scontrol requeue) resumes from the rows its shard\n"
    << "# file holds. Rerun some shards: sbatch --array=K,L " << array_script_path(s).string() << "\n"
    << "#SBATCH --job-name=" << s.job_name << "\n"
    << "#SBATCH --array=0-" << s.shards - 1 << (s.max_parallel > 0 ? "%" + std::to_string(s.max_parallel) : "") << "\n"
    << "#SBATCH --output=" << (s.dir / "logs" / "shard-%a.log").string() << "\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --requeue\n";
  if (!s.time_limit.empty()) o << "#SBATCH --time=" << s.time_limit << "\n";
  if (s.gpus_per_task > 0) o << "#SBATCH --gpus-per-task=" << s.gpus_per_task << "\n";
  common_directives(o, s);
  o << "set -u\n"
    << "shard=${SLURM_ARRAY_TASK_ID:?run this script with sbatch: it is one Slurm array task}\n"
    << "dir=" << q(s.dir) << "\n"
    << "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-" << s.cpus_per_task << "}\n"
    << "echo \"shard $shard/" << s.shards << ": job ${SLURM_JOB_ID:-?}, restart ${SLURM_RESTART_COUNT:-0}, on $(hostname) "
       "at $(date -Is)\"\n"
    << "rm -f \"$dir/shard-$shard.end\"\n"
    // A trapped TERM (time limit, scancel, requeue) runs only once the run has stored what finished
    // and exited 143; an untrapped one would kill bash before the end record is written.
    << "trap 'echo \"shard $shard: SIGTERM at $(date -Is)\"' TERM\n"
    << q(s.harness) << " run \"$dir/sweep.yaml\" --shard \"$shard/" << s.shards << "\" --out \"$dir/shard-$shard.h5\" "
    << "--junit \"$dir/shard-$shard.xml\" --resume --jobs 1";
  if (s.sweep_name) o << " --sweep " << shell_quote(*s.sweep_name);
  if (s.filter) o << " --filter " << shell_quote(*s.filter);
  for (const auto& a : s.run_args) o << " " << shell_quote(a);
  o << "\n"
    << "status=$?\n"
    << "echo \"$status ${SLURM_RESTART_COUNT:-0} $(date -Is)\" > \"$dir/shard-$shard.end.tmp\" && "
       "mv -f \"$dir/shard-$shard.end.tmp\" \"$dir/shard-$shard.end\"\n"
    << "echo \"shard $shard: swa-harness run exited $status at $(date -Is)\"\n"
    << "# 0: every row passed; 1: the shard ran whole and some rows fail (the merge reports them). Either\n"
    << "# is a finished task to Slurm; anything else is a failed one.\n"
    << "[ \"$status\" -le 1 ] && exit 0\n"
    << "exit \"$status\"\n";
  return o.str();
}

std::string merge_script(const Submission& s) {
  std::ostringstream o;
  o << "#!/bin/bash\n"
    << "# Merges the shards of " << s.sweep_source << " once the array job has ended (afterany), lists the\n"
    << "# shards that did not finish with the command that reruns just them, and writes the report.\n"
    << "#SBATCH --job-name=" << s.job_name << "-merge\n"
    << "#SBATCH --output=" << (s.dir / "logs" / "merge.log").string() << "\n"
    << "#SBATCH --open-mode=append\n";
  common_directives(o, s);
  o << "set -u\n"
    << "echo \"merge: job ${SLURM_JOB_ID:-?} on $(hostname) at $(date -Is)\"\n"
    << q(s.harness) << " collect " << q(s.dir) << "\n"
    << "status=$?\n"
    << "if [ -f " << q(merged_results(s)) << " ]; then\n"
    << "  " << q(s.harness) << " report " << q(merged_results(s)) << " -o " << q(report_dir(s))
    << " || echo \"merge: the report was not written (see above)\"\n"
    << "fi\n"
    << "# collect: 0 every shard finished and passed, 1 some rows fail, 4 some shards did not finish.\n"
    << "exit $status\n";
  return o.str();
}

std::string snapshot_digest(const Submission& s) {
  const std::string bytes = read_small_file(sweep_snapshot(s), std::size_t{1} << 30);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL cannot compute a SHA-256");
  return hex_of(digest, size);
}

void write_record(const Submission& s) {
  nlohmann::json j;
  j["format"] = "swa-harness submission 1";
  j["dir"] = s.dir.string();
  j["harness"] = s.harness.string();
  j["workdir"] = s.workdir.string();
  j["sweep_source"] = s.sweep_source;
  j["sweep_name"] = s.sweep_name ? nlohmann::json(*s.sweep_name) : nlohmann::json(nullptr);
  j["filter"] = s.filter ? nlohmann::json(*s.filter) : nlohmann::json(nullptr);
  j["job_name"] = s.job_name;
  j["shards"] = s.shards;
  j["max_parallel"] = s.max_parallel;
  j["cpus_per_task"] = s.cpus_per_task;
  j["gpus_per_task"] = s.gpus_per_task;
  j["partition"] = s.partition;
  j["time_limit"] = s.time_limit;
  j["sbatch_args"] = s.sbatch_args;
  j["run_args"] = s.run_args;
  j["array_job_id"] = s.array_job_id;
  j["merge_job_id"] = s.merge_job_id;
  j["sweep_digest"] = s.sweep_digest;
  write_file_atomically(record_path(s), j.dump(2) + "\n");
}

Submission read_record(const fs::path& dir) {
  Submission s;
  s.dir = fs::absolute(dir);
  const fs::path path = record_path(s);
  std::string text;
  try {
    text = read_small_file(path, std::size_t{16} << 20);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (is " + dir.string() + " a folder `swa-harness submit --out` made?)");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": not JSON (" + e.what() + ")");
  }
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(name)) throw std::runtime_error(path.string() + ": field '" + name + "' is missing");
    return j.at(name);
  };
  try {
    if (field("format") != "swa-harness submission 1")
      throw std::runtime_error(path.string() + ": field 'format' is not 'swa-harness submission 1'");
    s.harness = field("harness").get<std::string>();
    s.workdir = field("workdir").get<std::string>();
    s.sweep_source = field("sweep_source").get<std::string>();
    if (!field("sweep_name").is_null()) s.sweep_name = field("sweep_name").get<std::string>();
    if (!field("filter").is_null()) s.filter = field("filter").get<std::string>();
    s.job_name = field("job_name").get<std::string>();
    s.shards = field("shards").get<int>();
    s.max_parallel = field("max_parallel").get<int>();
    s.cpus_per_task = field("cpus_per_task").get<int>();
    s.gpus_per_task = field("gpus_per_task").get<int>();
    s.partition = field("partition").get<std::string>();
    s.time_limit = field("time_limit").get<std::string>();
    s.sbatch_args = field("sbatch_args").get<std::vector<std::string>>();
    s.run_args = field("run_args").get<std::vector<std::string>>();
    s.array_job_id = field("array_job_id").get<std::string>();
    s.merge_job_id = field("merge_job_id").get<std::string>();
    if (j.contains("sweep_digest")) s.sweep_digest = j.at("sweep_digest").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": a field has the wrong type (" + e.what() + ")");
  }
  if (s.shards < 1 || s.shards > 100000)
    throw std::runtime_error(path.string() + ": field 'shards' is " + std::to_string(s.shards) + ", not 1..100000");
  return s;
}

std::optional<std::string> parsable_job_id(const std::string& sbatch_output) {
  std::string first = sbatch_output.substr(0, sbatch_output.find_first_of(";\n"));
  while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return first;
}

std::string rerun_command(const Submission& s, const std::vector<int>& shards) {
  std::string list;
  for (std::size_t i = 0; i < shards.size(); ++i) list += (i ? "," : "") + std::to_string(shards[i]);
  return "jid=$(sbatch --parsable --array=" + list + " " + q(array_script_path(s)) +
         ") && sbatch --dependency=afterany:${jid%%;*} " + q(merge_script_path(s));
}

}  // namespace swa::harness::slurm
