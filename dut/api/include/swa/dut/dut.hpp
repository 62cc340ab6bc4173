#pragma once
// The one interface every device under test implements: the CPU and CUDA kernels, the mutants,
// and external backends. A DUT reads the inputs and writes params.out in params.dtype; it reports
// errors as values and never calls the golden.
#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "swa/dut/kv_cache.hpp"
#include "swa/params.hpp"

namespace swa::dut {

struct Status {
  bool ok = true;
  std::string message;
  bool declined = false;  // not ok because the DUT does not support the case (a skip, not an error)

  static Status success() { return {}; }
  static Status failure(std::string why) { return {false, std::move(why)}; }
  // What a DUT that can only tell by running says of a case it does not support (a process DUT's
  // "not supported: REASON"); the row is a skip with the reason.
  static Status decline(std::string why) { return {false, std::move(why), true}; }
};

struct Support {
  bool run = true;
  std::string skip_reason;  // why not, when run is false

  static Support yes() { return {}; }
  static Support skip(std::string why) { return {false, std::move(why)}; }
};

// When the KV cache a DUT leaves behind can be compared with the golden cache model.
enum class CacheReport {
  every_call,       // after every chunk and decode step: the DUT keeps its cache in the KvCache it is handed
  end_of_schedule,  // only after the whole schedule: the DUT runs the schedule at once (a process DUT)
  none,             // never: the DUT keeps no cache (it recomputes the dense result)
};

// Facts a DUT states about itself. The harness reads them instead of assuming constants: bisect
// reduces only to head sizes the DUT runs and reports the failing row's place in the DUT's own query
// tile; the cache check asks when the cache can be compared. Zero or empty: not stated.
struct Traits {
  int query_tile = 0;           // query rows per work tile
  int key_tile = 0;             // keys per inner tile (0 also when it varies with the head size)
  std::vector<int> head_sizes;  // the head sizes it runs, ascending (empty: any)
  bool times_own_kernels = false;  // last_kernel_ms() reports device time
  CacheReport cache = CacheReport::every_call;
  // The first call of a schedule does the whole schedule (a process DUT); its later calls are
  // no-ops, so its decode steps cannot be timed one by one.
  bool whole_schedule_per_call = false;
  // What the DUT calls itself in the console's tables (a plugin's traits.name): is_short_name, or
  // empty for its --dut name. Files keep the --dut name.
  std::string name;
};

// A name fit for a console column: 1 to 32 of A-Z a-z 0-9 _ . + - (a DUT's own name, a --dut label).
inline bool is_short_name(std::string_view name) {
  return !name.empty() && name.size() <= 32 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
  });
}

class Dut {
 public:
  virtual ~Dut() = default;
  virtual std::string name() const = 0;

  // Run it, or skip it with a reason (an unsupported case is a skip, not a failure).
  virtual Support supports(const AttnParams& p) const = 0;

  // Every row of every sequence at once (p.mode == prefill).
  virtual Status prefill(const AttnParams& p) = 0;

  // Rows [chunk_begin(b), chunk_end(b)) of each sequence's prompt: attend to `cache` plus the chunk,
  // write the outputs, then write the chunk's K/V into `cache`. Sequences whose prompt is shorter
  // than chunk_index * chunk have nothing to do.
  virtual Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) = 0;

  // Row prompt_len(b) + step of each sequence: write its K/V into `cache`, then attend to the cache.
  virtual Status decode_step(const AttnParams& p, KvCache& cache, int step) = 0;

  // Device time of the last call's kernels in milliseconds, apart from host<->device copies, for
  // DUTs that can measure it (the CUDA DUT times its kernels with events); nullopt otherwise.
  virtual std::optional<double> last_kernel_ms() const { return std::nullopt; }

  virtual Traits traits() const { return {}; }
};

// Sees the cache after each call of a schedule (the harness checks it against the golden's model).
class ScheduleObserver {
 public:
  virtual ~ScheduleObserver() = default;
  virtual void after_chunk(const AttnParams& p, const KvCache& cache, int chunk_index) = 0;
  virtual void after_decode_step(const AttnParams& p, const KvCache& cache, int step) = 0;
};

// Drives p's schedule through the three entry points: the harness's only way to run a DUT.
Status run_schedule(Dut& dut, const AttnParams& p, ScheduleObserver* observer = nullptr);

}  // namespace swa::dut
