// swa-harness submit: a sweep as a Slurm job array, one shard per task, and a merge job after it.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "commands.hpp"
#include "options.hpp"
#include "run_request.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/base/text.hpp"
#include "swa/harness/submit/slurm.hpp"
#include "swa/harness/case/tolerance.hpp"
#include "swa/platform/child_process.hpp"

namespace swa::cli {
namespace {
namespace fs = std::filesystem;
namespace slurm = harness::slurm;

// Runs argv (no shell) and returns how it ended and its stdout; its stderr (sbatch's warnings and
// refusals) goes to ours as it comes, so a warning is never read as a job id or a refusal.
platform::Finished run_captured(const std::vector<std::string>& argv) {
  platform::ChildSpec spec;
  spec.argv = argv;
  spec.stderr_to = platform::Stream::inherit;
  spec.own_group = false;  // in the terminal's group, as a command typed there: Ctrl-C reaches it too
  spec.outside_scope = true;  // the jobs it submits are the scheduler's, not this process's descendants
  try {
    return platform::run_to_end(std::move(spec));
  } catch (const std::system_error& e) {
    throw std::runtime_error(std::string("cannot run ") + argv[0] + ": " + e.what());
  }
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED.
void check_time_limit(const std::string& t) {
  if (t.size() > 32) throw UsageError("option --time: " + std::to_string(t.size()) + " characters is no Slurm time limit");
  static const std::regex form(R"(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE)");
  if (!std::regex_match(t, form))
    throw UsageError("option --time: '" + t +
                     "' is not a Slurm time limit (MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, "
                     "DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS or UNLIMITED)");
}

// An extra sbatch option becomes an #SBATCH line: one word, not one of those the scripts depend on.
void check_sbatch_arg(const std::string& a) {
  // A bound before the regex: std::regex recurses per character (40 000 overflowed the stack).
  if (a.size() > 1024)
    throw UsageError("option --sbatch-arg: a value of " + std::to_string(a.size()) + " characters (at most 1024)");
  static const std::regex form(R"(--[a-z][a-z0-9-]*(=[^\s'"\\]+)?)");
  if (!std::regex_match(a, form))
    throw UsageError("option --sbatch-arg: '" + a +
                     "' is not one sbatch option of the form --name or --name=value (no spaces or quotes)");
  static const std::set<std::string> owned = {"--array", "--output", "--error", "--open-mode", "--chdir",
                                              "--job-name", "--ntasks", "--cpus-per-task", "--partition",
                                              "--time", "--gpus-per-task", "--requeue", "--no-requeue",
                                              "--dependency", "--wrap"};
  // sbatch takes any unambiguous prefix of a long option (--arr for --array): a prefix of one of ours is ours.
  std::string name = a.substr(0, a.find('='));
  for (const std::string& o : owned)
    if (name.size() > 2 && o.rfind(name, 0) == 0) name = o;
  if (owned.count(name))
    throw UsageError("option --sbatch-arg: " + name + " is set by submit itself" +
                     (name == "--partition" || name == "--time" || name == "--gpus-per-task" || name == "--cpus-per-task"
                          ? "; use submit's own " + name
                          : std::string("; the scripts depend on it")));
}

std::string job_name_for(const std::string& sweep_path) {
  std::string stem = fs::path(sweep_path).stem().string(), name = "swa-";
  for (char c : stem) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return name.substr(0, 64);
}


// submit's own options, beside the request's.
struct SubmitArgs {
  std::string out, partition, time_limit;
  std::vector<std::string> sbatch_args;
  int shards = 0, max_parallel = 0, cpus_per_task = 1, gpus_per_task = 0;
};

void add_submit_options(po::options_description& desc, SubmitArgs& a) {
  desc.add_options()
      ("slurm", "submit to Slurm (the scheduler supported; sbatch must be on PATH unless --dry-run)")
      ("shards", po::value(&a.shards)->required(), "array tasks, each running every N-th scenario (1..10000)")
      ("out", po::value(&a.out)->required(), "the submission's folder (new or empty)")
      ("partition", po::value(&a.partition), "Slurm partition of every job")
      ("time", po::value(&a.time_limit), "time limit of each array task (Slurm form, e.g. 30, 1:30:00, 1-0)")
      ("gpus-per-task", po::value(&a.gpus_per_task)->default_value(0), "GPUs per array task (0: none requested)")
      ("cpus-per-task", po::value(&a.cpus_per_task)->default_value(1), "CPUs per array task (its OMP_NUM_THREADS)")
      ("max-parallel", po::value(&a.max_parallel)->default_value(0), "array tasks running at once (0: no limit)")
      ("sbatch-arg", po::value(&a.sbatch_args), "another #SBATCH option for both jobs, e.g. --account=lab (repeatable)")
      ("dry-run", "print the two scripts and the sbatch commands; write and submit nothing");
}

void check_submit_options(const po::variables_map& vm, const SubmitArgs& a) {
  if (!vm.count("slurm"))
    throw UsageError("option --slurm is required: Slurm is the scheduler submit supports (for CI matrices see "
                     "scripts/ci-matrix/ and run --shard K/N)");
  require_range("--shards", a.shards, 1, 10000);
  require_range("--cpus-per-task", a.cpus_per_task, 1, 4096);
  require_range("--gpus-per-task", a.gpus_per_task, 0, 64);
  require_range("--max-parallel", a.max_parallel, 0, 10000);
  if (vm.count("time")) check_time_limit(a.time_limit);
  if (vm.count("partition") && a.partition.size() > 1024)
    throw UsageError("option --partition: " + std::to_string(a.partition.size()) + " characters (at most 1024)");
  if (vm.count("partition") && !std::regex_match(a.partition, std::regex(R"([A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*)")))
    throw UsageError("option --partition: '" + a.partition + "' is not a partition name (letters, digits, _ . -; "
                     "several separated by commas)");
  for (const auto& sbatch_arg : a.sbatch_args) check_sbatch_arg(sbatch_arg);
}

// sbatch reads #SBATCH lines without shell quoting: the folders they name must be plain words, with no
// control character (a newline would be a script line of its own), and no '%' in --out: Slurm expands
// %j, %a, ... in the #SBATCH --output paths under it.
void check_script_paths(const slurm::Submission& s) {
  for (const auto& [option, folder] : {std::pair{"--out", s.dir}, std::pair{"the working folder", s.workdir}})
    if (folder.string().find_first_of(" \t\n'\"\\$`") != std::string::npos)
      throw UsageError(std::string(option == std::string("--out") ? "option --out: " : "the working folder ") +
                       folder.string() + " holds a space, a quote, a backslash, $ or `, which #SBATCH lines cannot carry; "
                       "use a plain path");
  auto control = [](const std::string& t) {
    return std::any_of(t.begin(), t.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  };
  if (control(s.sweep_source))
    throw UsageError("the sweep file's path holds a control character (a newline, ...): it would be a line of its own "
                     "in the scripts; rename it");
  if (control(s.dir.string()) || control(s.workdir.string()))
    throw UsageError("option --out or the working folder holds a control character; use a plain path");
  if (s.dir.string().find('%') != std::string::npos)
    throw UsageError("option --out: " + s.dir.string() + " holds '%', which Slurm expands in #SBATCH --output paths "
                     "(%j, %a, ...); use a folder without it");
}

slurm::Submission submission_of(const po::variables_map& vm, const RunRequest& request, const SubmitArgs& a) {
  slurm::Submission s;
  s.shards = a.shards;
  s.max_parallel = a.max_parallel;
  s.cpus_per_task = a.cpus_per_task;
  s.gpus_per_task = a.gpus_per_task;
  s.partition = a.partition;
  s.time_limit = a.time_limit;
  s.sbatch_args = a.sbatch_args;
  s.sweep_source = fs::absolute(request.sweep_path).lexically_normal().string();
  s.sweep_name = sweep_option(vm, request);
  s.filter = filter_option(vm, request);
  s.job_name = job_name_for(request.sweep_path);
  s.workdir = fs::current_path();
  s.dir = fs::absolute(a.out).lexically_normal();
  check_script_paths(s);
  std::error_code ec;
  s.harness = fs::canonical("/proc/self/exe", ec);
  if (ec) throw UsageError("cannot find this swa-harness binary's path (/proc/self/exe): " + ec.message());
  return s;
}

// The submission's folder: the sweep's copy the tasks run, both scripts and the record.
void write_submission(slurm::Submission& s, const std::string& sweep_path, const std::string& array_text,
                      const std::string& merge_text) {
  std::error_code ec;
  if (fs::exists(s.dir, ec) && !(fs::is_directory(s.dir, ec) && fs::is_empty(s.dir, ec)))
    throw UsageError("option --out: " + s.dir.string() +
                     " exists and is not an empty folder; give a new folder (to rerun the unfinished shards of an "
                     "earlier submission, use the command in its summary.txt)");
  if (!on_path("sbatch"))
    throw UsageError("sbatch is not on PATH: run submit on a Slurm login node (Debian: slurm-client), or pass "
                     "--dry-run to print the scripts");
  try {
    fs::create_directories(s.dir / "logs");
    fs::copy_file(sweep_path, slurm::sweep_snapshot(s));
    s.sweep_digest = slurm::snapshot_digest(s);
    harness::write_file_atomically(slurm::array_script_path(s), array_text);
    harness::write_file_atomically(slurm::merge_script_path(s), merge_text);
    slurm::write_record(s);
  } catch (const std::exception& e) {
    throw UsageError("option --out: cannot write the submission into " + s.dir.string() + ": " + e.what());
  }
}

// Submits the array job, then the merge job after it, and says how to watch them. Returns the exit status.
int submit_jobs(slurm::Submission& s, const std::string& sweep_path, const std::string& plan, const std::string& array_submit) {
  const platform::Finished array = run_captured({"sbatch", "--parsable", slurm::array_script_path(s).string()});
  const auto array_id = slurm::parsable_job_id(array.output);
  if (array.ending.shell_status() != 0 || !array_id) {
    std::cerr << "swa-harness submit: sbatch refused the array job (exit " << array.ending.shell_status() << "):\n" << array.output
              << "the scripts are in " << s.dir.string() << "; once the cause is fixed: " << array_submit << "\n";
    return kBadInput;
  }
  s.array_job_id = *array_id;
  const platform::Finished merge = run_captured({"sbatch", "--parsable", "--dependency=afterany:" + s.array_job_id,
                                       slurm::merge_script_path(s).string()});
  const auto merge_id = slurm::parsable_job_id(merge.output);
  if (merge.ending.shell_status() == 0 && merge_id) s.merge_job_id = *merge_id;
  slurm::write_record(s);
  std::cout << "submitted " << plan << " from " << sweep_path << "\n"
            << "  array job " << s.array_job_id << " (tasks 0-" << s.shards - 1 << "): " << slurm::array_script_path(s).string()
            << "\n    each task writes " << (s.dir / "shard-K.h5").string() << ", log " << (s.dir / "logs/shard-K.log").string()
            << "\n";
  if (s.merge_job_id.empty()) {
    std::cerr << "swa-harness submit: the array job is submitted but sbatch refused the merge job (exit "
              << merge.ending.shell_status() << "):\n" << merge.output << "submit it once the cause is fixed: sbatch --dependency=afterany:"
              << s.array_job_id << " " << harness::shell_quote(slurm::merge_script_path(s).string()) << "\n";
    return kBadInput;
  }
  std::cout << "  merge job " << s.merge_job_id << " (afterany:" << s.array_job_id
            << "): writes " << slurm::summary_path(s).string() << ", merged.h5, merged.xml and report/\n"
            << "watch:\n  squeue -j " << s.array_job_id << "," << s.merge_job_id << "\n  sacct -j " << s.array_job_id
            << "," << s.merge_job_id << " --format=JobID,JobName,State,ExitCode,Elapsed\n"
            << "afterwards:\n  cat " << slurm::summary_path(s).string() << "\n";
  return kOk;
}

}  // namespace

int cmd_submit(const std::vector<std::string>& args) {
  RunRequest request;
  SubmitArgs a;
  po::options_description desc(
      "swa-harness submit SWEEP.yaml --slurm --shards N --out DIR: run a sweep as a Slurm job array\n"
      "Writes DIR/array.sbatch (one shard per array task, each into DIR/shard-K.h5 with --resume, so a requeued\n"
      "task continues) and DIR/merge.sbatch (afterany: `collect` merges whatever finished, lists the shards that\n"
      "did not with the command that reruns them, and writes the report), submits both and prints their job ids.\n"
      "DIR must be new or empty, on a file system the nodes share; DIR/sweep.yaml is a copy of the sweep file the\n"
      "tasks run, and every task runs `run` with the options below that run has. Exit status: 0 submitted (or\n"
      "--dry-run printed), 2 invalid input or sbatch refused");
  po::positional_options_description positional;
  add_request_options(desc, positional, request);  // the golden cache's for every task; a shared folder serves them all
  add_submit_options(desc, a);
  po::variables_map vm;
  if (!parse_options("submit", args, desc, vm, &positional)) return kOk;
  check_submit_options(vm, a);
  const harness::DutOptions dut_options = dut_options_of(vm, request, 1);
  const harness::SweepFile file = load_sweep_or_usage_error(request.sweep_path);
  const auto scenarios = harness::select_scenarios(file, sweep_option(vm, request), filter_option(vm, request), {0, 1});
  if (scenarios.empty()) throw UsageError("no scenario selected (check --sweep and --filter)");
  slurm::Submission s = submission_of(vm, request, a);
  check_request(vm, request, scenarios, dut_options);
  s.run_args = run_arguments(vm, request);

  const std::string array_text = slurm::array_script(s), merge_text = slurm::merge_script(s);
  const std::string array_submit = "sbatch --parsable " + harness::shell_quote(slurm::array_script_path(s).string());
  const std::string merge_submit = "sbatch --parsable --dependency=afterany:ARRAY_JOB_ID " +
                                   harness::shell_quote(slurm::merge_script_path(s).string());
  const std::size_t empty_shards = a.shards > static_cast<int>(scenarios.size()) ? a.shards - scenarios.size() : 0;
  const std::string plan = std::to_string(scenarios.size()) + " scenarios in " + std::to_string(a.shards) + " shards" +
                           (empty_shards ? " (" + std::to_string(empty_shards) + " of them empty: they succeed with 0 scenarios)" : "");
  if (vm.count("dry-run")) {
    std::cout << "# dry run: " << plan << "; nothing written, nothing submitted\n"
              << "# ---- " << slurm::array_script_path(s).string() << "\n" << array_text
              << "# ---- " << slurm::merge_script_path(s).string() << "\n" << merge_text
              << "# ---- would run\n" << array_submit << "\n" << merge_submit << "\n";
    return kOk;
  }
  write_submission(s, request.sweep_path, array_text, merge_text);
  return submit_jobs(s, request.sweep_path, plan, array_submit);
}

}  // namespace swa::cli
