#pragma once
// A softmax row over runs of its own keys, computed for every run at once (key_runs.cpp and
// key_weights.cpp measure failing rows with it), and the small row helpers both share.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "key_run_rules.hpp"
#include "swa/harness/case/problem.hpp"

namespace swa::harness::key_run_rules {

// A key counted `delta` more times than the spec's run counts it (+1: twice, or once outside the
// run; -1: left out).
struct SignedKey {
  std::int64_t key = 0;
  int delta = 0;
  bool operator==(const SignedKey&) const = default;
};

// The golden's softmax over every run of a row's own keys at once: exponentials against the row's
// overall max, prefix sums in extended precision (a run's sum is a difference of two).
class RowRuns {
 public:
  RowRuns(const Problem& pr, const RowPlace& r);
  std::int64_t keys() const { return n_; }
  int dims() const { return d_; }
  // The largest |o - run's output| is at most `limit`; an empty run (first > last) outputs 0.
  // `zeros` more keys of score 0 and value 0 in the denominator (unwritten, zeroed slots read as keys).
  bool matches(std::int64_t first, std::int64_t last, const double* o, double limit, std::int64_t zeros = 0) const;
  // The run [first, last] with `extra` keys counted their delta more times.
  bool matches_weighted(std::int64_t first, std::int64_t last, const std::vector<SignedKey>& extra, const double* o,
                        double limit) const;
  // The number of zero keys that, added to the run, gives `o` (solved on its largest element), or -1.
  std::int64_t zero_keys_giving(std::int64_t first, std::int64_t last, const double* o, double limit) const;
  // One key's weight against the row's max, and its weighted value's element x.
  long double weight(std::int64_t j) const { return den_[j + 1] - den_[j]; }
  long double weighted_value(std::int64_t j, int x) const { return num_[(j + 1) * d_ + x] - num_[j * d_ + x]; }
  long double run_weight(std::int64_t first, std::int64_t last) const { return den_[last + 1] - den_[first]; }
  long double run_value(std::int64_t first, std::int64_t last, int x) const { return num_[(last + 1) * d_ + x] - num_[first * d_ + x]; }
  long double sink() const { return sink_; }
  // The row's largest score (or sink logit): weights are against it.
  double top() const { return top_; }

 private:
  int d_;
  std::int64_t n_;
  std::vector<long double> num_, den_;
  long double sink_ = 0, zero_ = 0;
  double top_ = 0;
};

// A run's key for sets of runs: -1 for the run of no key.
std::int64_t run_key(std::int64_t first, std::int64_t last, std::int64_t n);

enum class CallKind { prefill, chunk, decode };
CallKind kind_of(const RowPlace& r);
// The call kinds in words when they are fewer than the case has ("" when every kind is in scope).
std::string scope_words(const AttnParams& p, const std::set<CallKind>& scope);

const double* row_of(const std::vector<double>& v, const Problem& pr, const RowPlace& r);
bool finite_row(const double* o, int d);
double max_abs_between(const double* a, const double* b, int d);
// The row's limit (per packed row), and whether the DUT's row passes against the golden's.
double limit_of(const std::vector<double>& row_limit, const Problem& pr, const RowPlace& r);
bool row_passes(const Problem& pr, const std::vector<double>& out, const std::vector<double>& ref,
                const std::vector<double>& row_limit, const RowPlace& r);

}  // namespace swa::harness::key_run_rules
