#include "band.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "swa/golden.hpp"

namespace swa::harness {
namespace {

bool matches(const std::vector<double>& out, const std::vector<double>& ref, double threshold) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double a = out[i], b = ref[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!((std::isnan(a) && std::isnan(b)) || a == b)) return false;
      continue;
    }
    if (std::abs(a - b) > threshold) return false;
  }
  return true;
}

std::string bound_words(std::int64_t b) { return b < 0 ? "unbounded" : std::to_string(b); }

std::string band_words(WindowBand b) {
  return "[i - " + bound_words(b.left) + ", i + " + bound_words(b.right) + "]";
}

}  // namespace

std::optional<WindowBand> measure_band(const Problem& pr, const std::vector<double>& out, double threshold) {
  const AttnParams& base = pr.params;
  if (base.mask != nullptr) return std::nullopt;
  const WindowBand b = base.band;
  std::set<std::int64_t> lefts = {-1}, rights = {-1};
  if (b.left >= 0)
    for (std::int64_t d = -4; d <= 4; ++d)
      if (b.left + d >= 0) lefts.insert(b.left + d);
  if (b.left >= 0 && b.right > 0) lefts.insert({std::max<std::int64_t>(0, b.left - b.right), b.left + b.right});
  for (std::int64_t d = -2; d <= 2; ++d)
    if (b.right + d >= 0) rights.insert(b.right + d);
  // Nearest to the case's band first, so the smallest change that explains the output is the one named.
  std::vector<std::pair<std::int64_t, WindowBand>> order;
  for (std::int64_t l : lefts)
    for (std::int64_t r : rights) {
      const WindowBand w{l, r};
      if (w == b) continue;
      const std::int64_t dl = l < 0 || b.left < 0 ? (l == b.left ? 0 : 100) : std::abs(l - b.left);
      const std::int64_t dr = r < 0 ? 100 : std::abs(r - b.right);
      order.push_back({dl + dr, w});
    }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [distance, w] : order) {
    AttnParams p = base;
    p.band = w;
    // Keys right of the query exist in prefill only; the golden's output does not depend on the
    // cache, and a linear one holds any band.
    if (p.mode != RunMode::prefill && w.right != 0) continue;
    if (p.mode != RunMode::prefill && (p.cache == CachePolicy::paged || w.left < 0)) p.cache = CachePolicy::linear;
    if (matches(out, golden::run(p).out, threshold)) return w;
  }
  return std::nullopt;
}

namespace {

// How one bound of the DUT's band follows the case's window_left (L) and window_right (R): its value
// on the case, and its change when L grows by one and when R grows by one (nullopt: not measured).
struct BoundRule {
  std::int64_t value = 0, case_value = 0;
  std::optional<std::int64_t> per_left, per_right;
};

std::optional<std::int64_t> change(std::int64_t base, std::optional<WindowBand> wider, std::int64_t WindowBand::*side) {
  if (!wider || base < 0 || (*wider).*side < 0) return std::nullopt;
  return (*wider).*side - base;
}

std::string offset_words(std::int64_t offset) {
  return offset == 0 ? std::string() : (offset > 0 ? " + " : " - ") + std::to_string(std::abs(offset));
}

}  // namespace

std::optional<Finding> band_finding(WindowBand case_band, WindowBand base, std::optional<WindowBand> wider_left,
                                    std::optional<WindowBand> wider_right) {
  if (base == case_band) return std::nullopt;
  std::vector<std::string> evidence;
  evidence.push_back("the DUT's output is the golden's with the band " + band_words(base) + " instead of the case's " +
                     band_words(case_band) + " (every element within the baseline-level threshold)");
  const BoundRule left{base.left, case_band.left, change(base.left, wider_left, &WindowBand::left),
                       change(base.left, wider_right, &WindowBand::left)};
  const BoundRule right{base.right, case_band.right, change(base.right, wider_left, &WindowBand::right),
                        change(base.right, wider_right, &WindowBand::right)};
  std::vector<std::string> names;
  bool measured = true;
  // The left bound: the case's L, plus a constant, fixed, or pulled in by R.
  if (left.value != left.case_value) {
    std::ostringstream o;
    std::string name;
    const std::int64_t offset = left.value - left.case_value;
    if (left.value < 0) {
      name = "no_window";
      o << "it attends every earlier key: the window is not applied";
    } else if (!left.per_left) {
      measured = false;
      name = offset == 1 ? "window_plus_one" : offset == -1 ? "window_minus_one" : "window_left_off_by_" + std::to_string(offset);
      o << "measured on this case only (no wider case gave a band)";
      if (offset > 0 && offset == case_band.right) o << "; the left edge moved by R: i - (L + R), the window's whole span";
    } else if (*left.per_left == 1 && left.per_right && *left.per_right == -1) {
      name = "window_left_from_right_edge";
      o << "its left bound grows with window_left and shrinks as window_right grows: it is window_left - window_right"
        << offset_words(offset + case_band.right) << ", as if the window were measured back from the right edge i + R";
    } else if (*left.per_left == 1) {
      name = offset == 1 ? "window_plus_one" : offset == -1 ? "window_minus_one" : "window_left_off_by_" + std::to_string(offset);
      o << "with one more key on the left its bound moves by one too: it is window_left" << offset_words(offset)
        << " at every window";
    } else if (*left.per_left == 0) {
      name = "window_left_fixed";
      o << "with one more key on the left its bound stays " << left.value << ": the DUT does not take it from window_left";
    } else {
      name = "band_differs";
      o << "its left bound moves by " << *left.per_left << " when window_left grows by one";
    }
    names.push_back(name);
    evidence.push_back(o.str());
  }
  // The right bound: future keys in a causal case; else the case's R plus a constant, fixed, or
  // following window_left instead.
  if (right.value != right.case_value) {
    std::ostringstream o;
    std::string name;
    const std::int64_t offset = right.value - right.case_value;
    if (right.case_value == 0) {
      name = "future_keys";
      o << (right.value < 0 ? "it attends every later key of the sequence: no causal bound"
                            : "it attends " + std::to_string(right.value) + " key(s) after the query, where the case is "
                              "causal: the causal bound is off");
    } else if (right.per_left && *right.per_left == 1 && (!right.per_right || *right.per_right == 0)) {
      name = "window_right_follows_left";
      o << "with one more key on the left its right bound grows by one, and with one more on the right it does not: "
           "the right bound follows window_left"
        << (left.per_left ? "" : " (window_right not varied)") << ", not window_right";
    } else if (!right.per_right) {
      measured = false;
      name = right.value == 0 ? "window_right_ignored" : offset > 0 ? "window_right_off_by_one" : "window_right_minus_one";
      o << "measured on this case only, so the rule is from it alone (at window_right 1, \"ignored\" and \"one key "
           "short\" are the same output)";
    } else if (*right.per_right == 0 && right.value == 0) {
      name = "window_right_ignored";
      o << "with one more key on the right it still sees none after the query: the right window is ignored";
    } else if (*right.per_right == 1) {
      name = offset == 1 ? "window_right_off_by_one" : offset == -1 ? "window_right_minus_one"
                                                                    : "window_right_off_by_" + std::to_string(offset);
      o << "with one more key on the right its bound moves by one too: it sees window_right" << offset_words(offset)
        << " keys after the query";
    } else {
      name = "band_differs";
      o << "its right bound moves by " << *right.per_right << " when window_right grows by one";
    }
    names.push_back(name);
    evidence.push_back(o.str());
  }
  const std::string name = names.size() == 1 ? names.front() : "band_differs";
  return Finding{name, FindingSource::band_measured, evidence, measured ? Confidence::high : Confidence::medium,
                 measured ? "the band was measured on the case and with one more key on each side it has"
                          : "the band was measured on this case only"};
}

}  // namespace swa::harness
