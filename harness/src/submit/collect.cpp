// Collecting a submission: how each shard's task ended, and one results file from what they stored.
#include <set>
#include <csignal>
#include <fstream>
#include <sstream>

#include "swa/harness/submit/slurm.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/case/sweep_file.hpp"
#include "swa/harness/judge/verdict_enum.hpp"

namespace swa::harness::slurm {
namespace fs = std::filesystem;

const char* outcome_text(ShardOutcome o) {
  switch (o) {
    case ShardOutcome::finished_passing: return "finished, every row passes";
    case ShardOutcome::finished_failing: return "finished, some rows fail";
    case ShardOutcome::bad_input: return "stopped: invalid input or an internal error (see its log)";
    case ShardOutcome::not_stored: return "stopped: its results could not be written (a full disk?)";
    case ShardOutcome::interrupted: return "interrupted by SIGTERM/SIGINT (time limit, scancel, requeue)";
    case ShardOutcome::failed: return "failed (see its log)";
    case ShardOutcome::no_end_record:
      return "no end record: killed outright (time limit, node failure), still running, or never started";
  }
  return "?";
}

bool finished(ShardOutcome o) { return o == ShardOutcome::finished_passing || o == ShardOutcome::finished_failing; }

std::vector<int> Collection::unfinished() const {
  std::vector<int> out;
  for (const auto& s : shards)
    if (!finished(s.outcome)) out.push_back(s.shard);
  return out;
}

bool Collection::any_results() const {
  for (const auto& s : shards)
    if (s.stored) return true;
  return false;
}

namespace {

ShardOutcome outcome_of(int exit_code) {
  switch (exit_code) {
    case 0: return ShardOutcome::finished_passing;
    case 1: return ShardOutcome::finished_failing;
    case 2: return ShardOutcome::bad_input;
    case 3: return ShardOutcome::not_stored;
    case 128 + SIGTERM:
    case 128 + SIGINT: return ShardOutcome::interrupted;
    default: return ShardOutcome::failed;
  }
}

// The task script writes "EXIT RESTARTS TIME" once its run has ended.
void read_end_record(const fs::path& path, ShardState& state, std::vector<std::string>& warnings) {
  std::error_code absent;
  if (!fs::exists(fs::symlink_status(path, absent))) return;
  std::istringstream in;
  try {
    in.str(read_small_file(path, 4096));
  } catch (const std::exception& e) {
    warnings.push_back(std::string(e.what()) + "; the shard counts as unfinished");
    return;
  }
  int exit_code = -1, restarts = 0;
  if (!(in >> exit_code >> restarts) || exit_code < 0 || exit_code > 255) {
    warnings.push_back(path.string() + ": not an end record (\"EXIT RESTARTS TIME\"); the shard counts as unfinished");
    return;
  }
  state.exit_code = exit_code;
  state.restarts = restarts;
  state.outcome = outcome_of(exit_code);
}

}  // namespace

Collection collect(const Submission& s) {
  // The shards ran the sweep as submitted; judging them by an edited or replaced one would merge
  // the wrong scenarios or call them unfinished.
  if (!s.sweep_digest.empty()) {
    const std::string now = snapshot_digest(s);
    if (now != s.sweep_digest)
      throw std::runtime_error(sweep_snapshot(s).string() + " is not the sweep that was submitted (SHA-256 " + now +
                               ", " + record_path(s).string() + " recorded " + s.sweep_digest +
                               "): it was edited or replaced after submission; put the submitted one back, "
                               "or submit again into a new folder");
  }
  SweepLoadOptions load;
  load.memory_limit_bytes = std::int64_t{1} << 62;  // the tasks judged the sizes; here only IDs are kept
  // The scenario cap stays the one submit expanded the snapshot under: a sweep.yaml replaced since
  // cannot make collect expand 10^12 scenarios.
  const SweepFile sweep = load_sweep_file(sweep_snapshot(s).string(), load);
  // --shard K/N keeps the selected scenarios whose index i has i % N == K (select_scenarios).
  const std::vector<Scenario> selected = select_scenarios(sweep, s.sweep_name, s.filter, {0, 1});
  std::vector<std::set<std::string>> shard_ids(static_cast<std::size_t>(s.shards));
  for (std::size_t i = 0; i < selected.size(); ++i)
    shard_ids[i % shard_ids.size()].insert(selected[i].id());
  Collection c;
  std::vector<fs::path> readable;
  for (int k = 0; k < s.shards; ++k) {
    ShardState state;
    state.shard = k;
    const std::set<std::string>& expected = shard_ids[static_cast<std::size_t>(k)];
    state.expected = expected.size();
    read_end_record(shard_end_record(s, k), state, c.warnings);
    const fs::path file = shard_results(s, k);
    if (fs::exists(file)) try {
        // Which scenarios, not how many: a shard file that is another's (a link), or a sweep.yaml
        // edited since submission, holds IDs this shard does not have.
        std::size_t stored = 0, foreign = 0;
        std::string first_foreign;
        for (const ScenarioRow& row : read_results(file).scenarios) {
          if (expected.count(row.id)) {
            ++stored;
          } else if (foreign++ == 0) {
            first_foreign = row.id;
          }
        }
        state.stored = stored;
        if (foreign > 0) {
          c.warnings.push_back(file.string() + " holds " + std::to_string(foreign) + " scenario(s) that are not shard " +
                               std::to_string(k) + "'s (first: " + first_foreign +
                               "): another shard's file, or a sweep.yaml edited after submission; left out of the merge");
          if (finished(state.outcome)) state.outcome = ShardOutcome::failed;
        } else {
          readable.push_back(file);
        }
      } catch (const std::exception& e) {
        state.unreadable = e.what();
        if (finished(state.outcome)) state.outcome = ShardOutcome::failed;  // its rows are not in the merge
      }
    else if (finished(state.outcome) && state.expected > 0)
      state.outcome = ShardOutcome::failed;
    // A finished run with fewer scenarios than its shard holds cannot be taken as whole.
    if (finished(state.outcome) && state.stored.value_or(0) < state.expected) state.outcome = ShardOutcome::failed;
    c.shards.push_back(state);
  }
  if (!readable.empty()) c.merged = merge_results(readable, c.warnings);
  return c;
}

std::string summary_text(const Submission& s, const Collection& c) {
  std::ostringstream o;
  std::size_t expected = 0, stored = 0;
  for (const auto& st : c.shards) {
    expected += st.expected;
    stored += st.stored.value_or(0);
  }
  o << "sweep " << s.sweep_source << " in " << s.shards << " shards"
    << (s.array_job_id.empty() ? std::string() : ", array job " + s.array_job_id) << " (" << s.dir.string() << ")\n";
  o << "shard  scenarios      restarts  end\n";
  for (const auto& st : c.shards) {
    std::ostringstream scen;
    scen << (st.stored ? std::to_string(*st.stored) : std::string("-")) << "/" << st.expected;
    o << std::left;
    o.width(7);
    o << st.shard;
    o.width(15);
    o << scen.str();
    o.width(10);
    o << (st.exit_code < 0 ? std::string("-") : std::to_string(st.restarts));
    o << outcome_text(st.outcome);
    if (st.exit_code >= 0 && !finished(st.outcome)) o << " [exit " << st.exit_code << "]";
    if (!st.unreadable.empty()) o << " [results file unreadable: " << st.unreadable << "]";
    o << "\n";
  }
  std::size_t failing = 0;
  for (const auto& r : c.merged.results) failing += is_failure(r.status);
  const auto unfinished = c.unfinished();
  o << "merged: " << (c.shards.size() - unfinished.size()) << " of " << c.shards.size() << " shards finished; "
    << stored << " of " << expected << " scenarios, " << c.merged.results.size() << " result rows, " << failing
    << " failing";
  if (c.any_results()) o << " -> " << merged_results(s).string() << ", " << merged_junit(s).string();
  o << "\n";
  if (!unfinished.empty()) {
    o << "unfinished shards:";
    for (int k : unfinished) o << " " << k;
    o << " (their logs: " << (s.dir / "logs").string() << "/shard-K.log)\n"
      << "rerun just them (each resumes from the rows its file holds), then merge again:\n  "
      << rerun_command(s, unfinished) << "\n";
  }
  for (const auto& w : c.warnings) o << "warning: " << w << "\n";
  return o.str();
}

}  // namespace swa::harness::slurm
