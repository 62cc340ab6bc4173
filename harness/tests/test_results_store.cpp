#define BOOST_TEST_MODULE harness_results_store
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scratch_dir.hpp"
#include "swa/harness/base/durable_file.hpp"
#include "swa/harness/store/results_store.hpp"

namespace fs = std::filesystem;
using namespace swa::harness;

namespace {

ScenarioRow scenario(const std::string& id) {
  ScenarioRow s;
  s.id = id;
  s.sweep = "test";
  return s;
}

ResultRow row(const std::string& id, std::string dut, Verdict status) {
  ResultRow r;
  r.scenario_id = id;
  r.dut = std::move(dut);
  r.status = status;
  return r;
}

std::vector<ResultRow> rows_of(const std::string& id) {
  return {row(id, std::string(1, 'a'), Verdict::pass), row(id, std::string(1, 'b'), Verdict::fail)};
}

Meta meta() {
  Meta m;
  m.sweep_file = "test.yaml";
  m.sweep_text = "sweeps: {}";
  return m;
}

std::set<std::string> scenario_ids(const ResultsContents& c) {
  std::set<std::string> ids;
  for (const auto& s : c.scenarios) ids.insert(s.id);
  return ids;
}

// `jobs` threads each add `each` scenarios (begin, add, end), calling after_each(i) after the i-th.
struct JobsAdded {
  std::uint64_t last_ticket = 0;
  std::set<std::thread::id> threads;
};
JobsAdded add_from_jobs(ResultsStore& store, int jobs, int each, const std::function<void(int)>& after_each = {}) {
  std::vector<std::uint64_t> tickets(jobs);
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j)
    threads.emplace_back([&, j] {
      for (int i = 0; i < each; ++i) {
        const std::string id = "job" + std::to_string(j) + "/s" + std::to_string(i);
        store.begin(id);
        tickets[j] = std::max(tickets[j], store.add(scenario(id), rows_of(id), {}, std::nullopt).ticket);
        store.end(id);
        if (after_each) after_each(i);
      }
    });
  JobsAdded added;
  for (auto& t : threads) {
    added.threads.insert(t.get_id());
    t.join();
  }
  added.last_ticket = *std::max_element(tickets.begin(), tickets.end());
  return added;
}

}  // namespace

// Jobs add rows while commits write the file with the store's lock released (results_store.hpp):
// a commit must record as committed only the rows its copy held, so that the rows added during its
// write are still written by a later commit or by flush().
BOOST_AUTO_TEST_CASE(rows_added_while_a_commit_writes_all_reach_the_file) {
  const swa::test::ScratchDir scratch("swa_results_store_test");
  const fs::path path = scratch.path() / "r.h5";
  constexpr int kJobs = 2, kEach = 400;
  std::uint64_t last_ticket = 0;
  {
    ResultsStore store(path, meta(), false);
    last_ticket = add_from_jobs(store, kJobs, kEach).last_ticket;
    store.flush();
    BOOST_TEST(store.committed_ticket() == last_ticket);
    BOOST_TEST(store.scenarios_stored() == std::size_t{kJobs * kEach});
    const ResultsContents file = read_results(path);
    BOOST_TEST(file.scenarios.size() == std::size_t{kJobs * kEach});
    BOOST_TEST(file.results.size() == std::size_t{2 * kJobs * kEach});
    BOOST_TEST(scenario_ids(file).size() == std::size_t{kJobs * kEach});
  }
  BOOST_TEST(last_ticket == std::uint64_t{kJobs * kEach});
  BOOST_TEST(!fs::exists(path.string() + ".inflight"), "the in-flight list stays after every row was committed");
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A row added while a commit writes is not in that commit: the commit records only its copy's rows
// as committed (the ticket the console prints up to, the in-flight list of what a kill would lose),
// and a later commit writes the row.
BOOST_AUTO_TEST_CASE(a_row_added_during_a_commit_stays_pending_until_the_next_one) {
  const swa::test::ScratchDir scratch("swa_results_store_test");
  const fs::path path = scratch.path() / "r.h5";
  Meta big = meta();
  big.sweep_text.append(std::size_t{24} << 20, '#');  // a commit writes and syncs 24 MB: time to add during it
  ResultsStore store(path, big, false);
  // Past the longest wait between commits (one second): the next add commits.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::thread first([&] { store.add(scenario("s1"), rows_of("s1"), {}, std::nullopt); });
  const fs::path temporary = temporary_for(path);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(temporary) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  const bool seen = fs::exists(temporary);
  store.begin("s2");
  const std::uint64_t second = store.add(scenario("s2"), rows_of("s2"), {}, std::nullopt).ticket;
  store.end("s2");
  first.join();
  BOOST_REQUIRE_MESSAGE(seen, "the commit of s1 was not seen writing " << temporary);
  BOOST_TEST(second == 2u);
  BOOST_TEST(store.committed_ticket() == 1u);
  BOOST_TEST(store.scenarios_stored() == 1u);
  BOOST_TEST(scenario_ids(read_results(path)) == std::set<std::string>{"s1"}, boost::test_tools::per_element());
  BOOST_TEST(read_text(path.string() + ".inflight") == "s2\n");
  store.flush();
  BOOST_TEST(store.committed_ticket() == 2u);
  BOOST_TEST(scenario_ids(read_results(path)) == (std::set<std::string>{"s1", "s2"}), boost::test_tools::per_element());
}

// A commit that cannot write the file takes every pending row with it, and names their scenarios;
// the store then holds what the file holds.
BOOST_AUTO_TEST_CASE(a_failed_commit_names_every_pending_scenario_and_keeps_the_committed_rows) {
  const swa::test::ScratchDir scratch("swa_results_store_test");
  const fs::path dir = scratch.path() / "gone";
  fs::create_directories(dir);
  const fs::path path = dir / "r.h5";
  ResultsStore store(path, meta(), false);
  store.add(scenario("kept"), rows_of("kept"), {}, std::nullopt);
  store.flush();
  const std::uint64_t committed = store.committed_ticket();
  fs::remove_all(dir);  // the next rewrite fails: its folder is gone
  store.add(scenario("lost1"), rows_of("lost1"), {}, std::nullopt);
  store.add(scenario("lost2"), rows_of("lost2"), {}, std::nullopt);
  std::vector<std::string> lost;
  try {
    store.flush();
    BOOST_FAIL("flush wrote into a folder that is gone");
  } catch (const ResultsNotWritten& e) {
    lost = e.scenario_ids;
  }
  BOOST_TEST(lost == (std::vector<std::string>{"lost1", "lost2"}), boost::test_tools::per_element());
  BOOST_TEST(store.committed_ticket() == committed);
  BOOST_TEST(store.scenarios_stored() == 1u);
  const std::vector<ResultRow> held = store.results();
  BOOST_REQUIRE(held.size() == 2u);
  BOOST_TEST(held[0].scenario_id == "kept");
  BOOST_TEST(held[1].scenario_id == "kept");
  store.flush();  // nothing pending now: no second failure
}

// commit_in_background(): the commits run on the store's own thread (never on a job's), each tells
// on_commit, and flush() leaves every row in the file, as without it.
BOOST_AUTO_TEST_CASE(background_commits_run_off_the_jobs_threads_and_reach_the_file) {
  const swa::test::ScratchDir scratch("swa_results_store_test");
  const fs::path path = scratch.path() / "r.h5";
  constexpr int kJobs = 2, kEach = 300;
  ResultsStore store(path, meta(), false);
  store.commit_in_background();
  std::mutex seen_mutex;
  std::set<std::thread::id> committers;
  store.on_commit([&] {
    std::lock_guard lock(seen_mutex);
    committers.insert(std::this_thread::get_id());
  });
  std::set<std::thread::id> adders = add_from_jobs(store, kJobs, kEach, [](int i) {
                                        if (i == kEach / 2)  // a commit falls due
                                          std::this_thread::sleep_for(std::chrono::milliseconds(1100));
                                      }).threads;
  adders.insert(std::this_thread::get_id());
  store.flush();
  store.on_commit(nullptr);
  BOOST_TEST(store.committed_ticket() == std::uint64_t{kJobs * kEach});
  BOOST_TEST(read_results(path).scenarios.size() == std::size_t{kJobs * kEach});
  BOOST_REQUIRE_MESSAGE(!committers.empty(), "no commit ran in the background");
  for (const auto& id : committers) BOOST_TEST(!adders.contains(id), "a commit ran on a job's thread");
}

// A background commit that fails is thrown by the next add(), which names its own scenario too (its
// rows join nothing), and the store keeps what the file holds.
BOOST_AUTO_TEST_CASE(a_failed_background_commit_is_thrown_by_the_next_add) {
  const swa::test::ScratchDir scratch("swa_results_store_test");
  const fs::path dir = scratch.path() / "gone";
  fs::create_directories(dir);
  const fs::path path = dir / "r.h5";
  ResultsStore store(path, meta(), false);
  store.commit_in_background();
  store.add(scenario("kept"), rows_of("kept"), {}, std::nullopt);
  store.flush();
  std::mutex told_mutex;
  std::condition_variable told_cv;
  int told = 0;
  store.on_commit([&] {
    std::lock_guard lock(told_mutex);
    ++told;
    told_cv.notify_all();
  });
  fs::remove_all(dir);  // the next rewrite fails: its folder is gone
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the next add's commit is due
  store.add(scenario("lost1"), rows_of("lost1"), {}, std::nullopt);
  {
    std::unique_lock lock(told_mutex);
    BOOST_REQUIRE(told_cv.wait_for(lock, std::chrono::seconds(20), [&] { return told > 0; }));
  }
  std::vector<std::string> lost;
  try {
    store.add(scenario("lost2"), rows_of("lost2"), {}, std::nullopt);
    BOOST_FAIL("add went on after a background commit failed");
  } catch (const ResultsNotWritten& e) {
    lost = e.scenario_ids;
  }
  store.on_commit(nullptr);
  BOOST_TEST(lost == (std::vector<std::string>{"lost1", "lost2"}), boost::test_tools::per_element());
  BOOST_TEST(store.scenarios_stored() == 1u);
  const std::vector<ResultRow> held = store.results();
  BOOST_REQUIRE(held.size() == 2u);
  BOOST_TEST(held[0].scenario_id == "kept");
  store.flush();  // the failure was thrown once: nothing pending, no second failure
}
