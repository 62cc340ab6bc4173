// bisect: the readings search on the DUT's own inputs, and the probes that hold a finding to other
// cases the DUT fails (look-alike readings told apart, an exact variant held to a probe); the rows
// written as zeros told beside the finding.
#include "bisection.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "judgement.hpp"
#include "recover.hpp"
#include "swa/harness/base/join.hpp"

namespace swa::harness {
namespace {

// The parts of two scenario IDs that differ ("w=24 there, w=16 here"), from the IDs' key=value parts.
std::string scenario_difference(const Scenario& there, const Scenario& here) {
  auto parts = [](const std::string& id) {
    std::vector<std::string> out;
    std::stringstream in(id);
    for (std::string part; std::getline(in, part, '/');) out.push_back(part);
    return out;
  };
  const std::vector<std::string> a = parts(there.id()), b = parts(here.id());
  std::vector<std::string> differ;
  for (const std::string& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) {
      const std::string key = x.substr(0, x.find('='));
      const auto same_key = std::find_if(b.begin(), b.end(), [&](const std::string& y) { return y.substr(0, y.find('=')) == key; });
      differ.push_back(x + " there, " + (same_key != b.end() ? *same_key : "none") + " here");
    }
  for (const std::string& y : b) {
    const std::string key = y.substr(0, y.find('='));
    if (std::none_of(a.begin(), a.end(), [&](const std::string& x) { return x.substr(0, x.find('=')) == key; }))
      differ.push_back("none there, " + y + " here");
  }
  return differ.empty() ? "nothing in their IDs (the same case)" : join(differ, "; ");
}

}  // namespace

// On the DUT's own inputs, the readings of the spec (golden/readings.hpp) one knob at a time, then in
// pairs, until one reproduces every row of the output within its limit.
void Bisection::search_for_a_reading() {
  r_ << "\n4b. Reproduce: no variant reproduces the output to the baseline-level threshold; the golden computed with "
        "the spec read another way (harness/src/bisect/readings_table.cpp), on the DUT's own inputs\n";
  if (o_.against != "golden") {
    r_ << "   Not searched: the reference is another DUT (--against), not the golden the readings change.\n";
    return;
  }
  progress("readings: searching the readings of the spec for one that reproduces the output");
  const AttnParams& p = first_.reference->problem.params;
  summary_.readings = search_readings(p, first_.out, first_.ref, first_.row_limit, [&](const std::string& l) { progress(l); });
  const ReadingSearch& found = *summary_.readings;
  r_ << "   " << found.evaluated << " readings evaluated in " << found.seconds << " s.\n";
  if (!found.reproducing.empty()) {
    reading_ = found.reproducing.front();
    alike_ = found.reproducing;
    for (const ReadingTrial& t : found.reproducing)
      r_ << "   REPRODUCES " << t.name() << ": the DUT " << t.words() << "; every one of the " << t.rows
         << " rows within its limit (" << t.failing << " failing against the golden), worst difference " << t.worst_difference
         << ", at most " << t.worst_share << " of a row's limit\n";
    r_ << "   Diagnosis: " << reading_->name() << ". The reading reproduces the output.\n\n";
    return;
  }
  if ((placement_ = fit_output_placement(p, first_.out, first_.ref, first_.row_limit)))
    r_ << "   Placed: " << placement_->placed << " of the " << placement_->failing
       << " failing rows are each exactly one other row's golden output (output_rows_misplaced).\n";
  else if ((key_runs_ = fit_key_runs(first_.reference->problem, first_.out, first_.ref, first_.row_limit,
                                      {{first_.traits.query_tile, first_.traits.key_tile}}))) {
    if (!key_runs_->reproduced && !non_finite_summary(original_, first_).empty()) key_runs_.reset();  // NaN rows tell more
    else r_ << "   Keys measured: each failing row measured is a run of its own keys; " << key_runs_->name << ".\n"; }
  if (found.closest)
    r_ << "   None reproduces the output. The closest, " << found.closest->name() << " (the DUT " << found.closest->words()
       << "), leaves " << found.closest->failing_within << " of the " << found.closest->failing
       << " failing rows compared within their limit (worst: " << found.closest->worst_share << " of a row's limit).\n";
  else if (found.spec_within_noise)
    r_ << "   None searched: every failing row is within one unit of the DUT's storage of the golden itself, so no "
          "reading can be told from the spec on it.\n";
  else
    r_ << "   None applies: no row fails by its max-abs limit.\n";
}

bool Bisection::tell_apart(const Scenario& x, const BisectRun& e) {
  std::vector<ReadingTrial> kept;
  std::vector<std::string> dropped;
  for (const ReadingTrial& t : alike_) {
    const ReadingTrial here = check_reading(e.reference->problem.params, t, e.out, e.ref, search_limits(*summary_.readings, e.row_limit));
    if (here.reproduces)
      kept.push_back(t);
    else
      dropped.push_back(t.name() + " (the DUT " + t.words() + "): " + std::to_string(here.rows - here.rows_within) + " of " +
                        std::to_string(here.rows) + " rows over their limit on " + x.id());
  }
  if (kept.empty()) return false;  // another failure, or none of them: this case tells nothing apart
  told_apart_.insert(told_apart_.end(), dropped.begin(), dropped.end());
  alike_ = std::move(kept);
  if (alike_.front().name() != reading_->name() || alike_.front().words() != reading_->words()) {
    reading_ = alike_.front();
    r_ << "   On " << x.id() << " only " << alike_.size() << " of the readings still reproduce; the simplest: " << reading_->name()
       << " (the DUT " << reading_->words() << ").\n";
  }
  return true;
}

// Look-alikes left after the reduction, run on the probes of look_alike_probes (reductions.cpp); each
// costs one run of the DUT.
void Bisection::tell_apart_on_probes() {
  std::set<std::string> names;
  for (const ReadingTrial& t : alike_) names.insert(t.name() + "|" + t.words());
  const std::vector<Scenario> probes = look_alike_probes(original_);
  progress("readings: " + std::to_string(names.size()) + " reading(s) reproduce; held to " + std::to_string(probes.size()) +
           " more cases");
  for (const Scenario& x : probes) {
    BisectRun e;
    try {
      e = evaluate_case(x, o_);
    } catch (const std::exception&) {
      continue;  // a probe the case's limits refuse (a window past the sequence): no evidence
    }
    if (!e.error.empty() || !e.fails || !e.output_fails) continue;
    // A case the DUT fails that no reading left reproduces: the reading is not the whole cause.
    if (!tell_apart(x, e) && refuted_.empty()) {
      const ReadingTrial here =
          check_reading(e.reference->problem.params, *reading_, e.out, e.ref, search_limits(*summary_.readings, e.row_limit));
      refuted_ = x.id() + ": " + std::to_string(here.rows - here.rows_within) + " of " + std::to_string(here.rows) +
                 " rows over their limit";
    }
  }
}

Finding Bisection::reading_finding() const {
  const ReadingTrial t = check_reading(minimal_eval_.reference->problem.params, *reading_, minimal_eval_.out, minimal_eval_.ref,
                                       search_limits(*summary_.readings, minimal_eval_.row_limit));
  ConfidenceEvidence ce;
  ce.failing_rows = t.failing;
  ce.reproduced_rows = t.reproduces ? t.failing : t.failing_within;
  ce.contradictions = refuted_.empty() ? 0 : 1;
  const ConfidenceRule rule = confidence_from(ce);
  std::ostringstream first, second;
  first.precision(3);
  first << "The DUT computes the golden with the spec read one way differently: it " << t.words() << ".";
  second.precision(3);
  second << "Reproduced on the minimal case: " << t.rows_within << " of its " << t.rows << " (token, head) rows within their limit, the "
         << t.failing << " failing ones included; worst |DUT - reading| " << t.worst_difference << ", at most " << t.worst_share
         << " of a row's limit (" << summary_.readings->evaluated << " readings evaluated)"
         << (t.boundary_rows > 0 ? "; " + std::to_string(t.boundary_rows) + " row(s) off by one rounding of the narrower "
                                   "intermediate (its value on a rounding boundary, which the DUT's fp32 and the reading's "
                                   "fp64 round apart)" : "")
         << (summary_.readings->limit_share < 1 ? "; no row fails by its max-abs limit (the outputs fail by L2 alone), so rows are "
                                                  "held to a tenth of it, where the golden "
                                                  "leaves the failing ones out"
                                                : "")
         << ".";
  Finding f{reading_->name(), FindingSource::reading_reproduced, {first.str(), second.str()}, rule.confidence, rule.why};
  f.reproduced = t.reproduces;
  {
    std::vector<std::string> others;
    std::size_t more = 0;
    for (const ReadingTrial& t : alike_)
      if (t.name() != reading_->name() || t.words() != reading_->words())  // not the same reading
        (others.size() < 3 ? others.push_back(t.name() + " (" + t.words() + ")") : void(++more));
    if (!others.empty())
      f.evidence.push_back("Also reproducing every failing case tried, not told apart by them: " + join(others, "; ") +
                           (more ? "; and " + std::to_string(more) + " more (summary.json lists them)" : std::string()) + ".");
    if (!refuted_.empty())
      f.evidence.push_back("It does not reproduce every case the DUT fails: on " + refuted_ +
                           " (another cause, or one this reading only resembles there).");
    if (!told_apart_.empty())
      f.evidence.push_back("Told apart from " + std::to_string(told_apart_.size()) + " reading(s) that reproduced the first case: " +
                           join(told_apart_, "; ") + ".");
  }
  return f;
}

bool Bisection::variant_holds_on_a_probe() {
  progress("variants: " + diag_.best + " gives the output as its facts do; held to a probe");
  for (const Scenario& x : look_alike_probes(original_)) {
    BisectRun e;
    try {
      e = evaluate_case(x, o_);
    } catch (const std::exception&) {
      continue;  // a probe the case's limits refuse: no evidence
    }
    if (!e.error.empty() || !e.fails || !e.output_fails) continue;
    const Diagnosis d = diagnose(e);
    const bool holds = d.explained && d.best == diag_.best && d.ranked.front().first <= e.threshold;
    r_ << "   The variant " << diag_.best << (holds ? " reproduces" : " does not reproduce") << " the probe " << x.id()
       << " the DUT fails too" << (holds ? ".\n" : ": the facts of the output lead.\n");
    return holds;
  }
  return true;
}

// Some failing rows, not all, hold exactly 0: a fact of the output beside whatever explains the
// others; the finding itself when nothing else is told and they are most of the failing rows.
void Bisection::tell_the_zero_rows() {
  const ZeroRows& z = zero_rows_;
  if (z.zero == 0 || every_failing_row_zero(z) || cache_only_) return;
  std::ostringstream o;
  o << z.zero << " of the " << z.failing << " failing (token, head) rows of " << original_.id()
    << " hold exactly 0 in every element (written as zeros over the harness's NaN fill: never computed, computed over "
       "no key, over values that are zeros (memory never written), or zeroed afterwards); the other "
    << z.failing - z.zero << " are not 0" << (where_zero_.empty() ? "" : ". The rows exactly 0, by position: " + where_zero_);
  if (summary_.finding.confidence == Confidence::abstained && z.zero * 2 >= z.failing && summary_.finding.name != "rows_not_computed") {
    summary_.finding = {"rows_not_computed", FindingSource::none, {o.str(), summary_.finding.evidence.empty() ? "" :
                        "What the rows that are not 0 tell: " + summary_.finding.evidence.front()},
                        Confidence::medium, "most failing rows, not all, are exactly 0; the others are not told"};
    return;
  }
  summary_.finding.evidence.push_back(o.str() + ".");
}

// A DUT that keeps state across calls (a counter, a cached plan or mask keyed too coarsely, a buffer
// not reset) passes a scenario run first and fails it after others.
bool Bisection::fails_after_earlier_calls() {
  constexpr int kRunsBefore = 2;
  progress("reproduce: the DUT passes; it runs the scenario again after " + std::to_string(kRunsBefore) + " more run(s) of it");
  auto found = [&](const BisectRun& again, const std::string& after, const std::string& evidence) {
    r_ << "   Its first run here passes; run again by the DUT " << after << ", it fails: " << again.reason << "\n";
    summary_.reproduces = true;
    summary_.reason = again.reason;
    summary_.max_abs = again.max_abs;
    summary_.finding = {"fails_after_earlier_calls", FindingSource::none,
                        {"The DUT keeps state from one call to the next: the scenario's first run here passes (max abs error " +
                             std::to_string(first_.max_abs) + "); run again " + after + ", same inputs, it fails (" + again.reason + ").",
                         evidence},
                        Confidence::high, "computed: the same inputs pass on the first run and fail on a later one"};
    summary_.finding.reproduced = true;
    return true;
  };
  if (const BisectRun again = evaluate_case(original_, o_, kRunsBefore); again.error.empty() && again.fails)
    return found(again, "after " + std::to_string(kRunsBefore) + " more run(s) of it",
                 "A counter, a cached plan or a workspace that one call leaves for the next (not reset per launch) "
                 "makes a later call compute something else; which scenarios ran before decides whether it fails.");
  std::string tried = "first and after " + std::to_string(kRunsBefore) + " more run(s) of it";
  if (!o_.ran_before.empty()) {
    progress("reproduce: it runs the scenario after the " + std::to_string(o_.ran_before.size()) + " the sweep ran before it");
    // A worker of its own each time: one that ran this case already holds what this case leaves.
    BisectOptions fresh = o_;
    fresh.dut_options.fresh_worker = true;
    const BisectRun after_all = evaluate_case(original_, fresh, 0, o_.ran_before);
    if (after_all.error.empty() && after_all.fails) {
      // The one scenario that suffices, nearest first: what the DUT carried from it.
      for (auto x = o_.ran_before.rbegin(); x != o_.ran_before.rend(); ++x) {
        const BisectRun after_one = evaluate_case(original_, fresh, 0, {*x});
        if (after_one.error.empty() && after_one.fails)
          return found(after_one, "right after the scenario " + x->id(),
                       "What that scenario's call leaves in the DUT (a plan, a mask or a table cached under a key "
                       "that does not hold everything it depends on, a buffer not reset) is used by this one; the "
                       "two differ in: " + scenario_difference(*x, original_) + ".");
      }
      return found(after_all, "after the " + std::to_string(o_.ran_before.size()) + " scenarios the sweep ran before it",
                   "No one of them alone makes it fail: state the DUT builds up over several calls.");
    }
    tried += ", and after the " + std::to_string(o_.ran_before.size()) + " scenarios the sweep ran before it";
  }
  r_ << "   The failure does not reproduce: the DUT passes this scenario, " << tried << ".\n";
  return false;
}

}  // namespace swa::harness
