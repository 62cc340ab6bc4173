#include "swa/harness/duts/exec_dut.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>

#include "swa/harness/base/h5.hpp"
#include "swa/harness/base/h5_probe.hpp"
#include "swa/harness/base/interrupt.hpp"
#include "swa/harness/case/problem_file.hpp"
#include "swa/harness/duts/exec_description.hpp"
#include "swa/platform/child_process.hpp"
#include "swa/platform/process_scope.hpp"

namespace fs = std::filesystem;

namespace swa::harness {
namespace {

// An `error` attribute that starts so declines the case (EXEC_PROTOCOL.md): a skip row, not an error.
constexpr std::string_view kDeclined = "not supported:";

// The exec DUT's scratch folders are TMPDIR/swa-exec.OWNER-PID-N (a request's) and
// TMPDIR/swa-exec-describe.OWNER-PID-N (the describe request's, exec_description.cpp), OWNER the
// harness's platform::owner_tag(), so that a later run can tell the folders of a dead run.
constexpr std::string_view kScratchName = "swa-exec";

// The owner tag in the name of a scratch folder of the exec DUT ("" when it is not one).
std::string scratch_owner(const std::string& name) {
  if (name.rfind(kScratchName, 0) != 0) return {};
  std::size_t dot = kScratchName.size();
  if (name.compare(dot, 9, "-describe") == 0) dot += 9;
  if (dot >= name.size() || name[dot] != '.') return {};
  // OWNER is "<pid>-<start>-<pidns>": the first three of the five '-' fields that follow.
  std::size_t end = dot + 1;
  for (int dash = 0; dash < 3 && end != std::string::npos; ++dash) end = name.find('-', end + 1);
  return end == std::string::npos ? std::string() : name.substr(dot + 1, end - dot - 1);
}

// What a harness killed outright (kill -9, the OOM killer, a node's watchdog) left of its exec DUTs:
// the processes of its calls that were not the command itself (which dies with the harness,
// ChildSpec::die_with_parent), a shell's children and setsid daemons found by their scope token, and
// then their scratch folders. Only what names a dead owner: another run on the machine is not touched.
void end_what_dead_runs_left() {
  platform::end_orphaned_scopes();
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (ec) return;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string(), owner = scratch_owner(name);
    struct stat st {};
    if (owner.empty() || ::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
      continue;
    if (platform::owner_state(owner) != platform::OwnerState::dead) continue;
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

// The calls of a schedule: the chunks, then the decode steps.
int schedule_calls(const AttnParams& p) {
  if (p.mode == RunMode::prefill) return 1;
  return dut::chunk_count(p) + (p.mode == RunMode::decode ? p.decode_steps : 0);
}

// The most bytes a response can need: /out and /cache (or every /caches/C) as float32, plus room
// for HDF5's own structure.
std::uintmax_t response_size_limit(const AttnParams& p, bool cache_per_call) {
  const std::uintmax_t out = static_cast<std::uintmax_t>(total_tokens(p)) * p.heads_q * p.head_size * 4;
  const std::uintmax_t cache =
      p.mode == RunMode::prefill
          ? 0
          : 2 * static_cast<std::uintmax_t>(dut::kv_cache_storage_slots(dut::kv_cache_layout(p))) * p.heads_kv *
                p.head_size * 4 * static_cast<std::uintmax_t>(cache_per_call ? schedule_calls(p) : 1);
  return 2 * (out + cache) + (std::uintmax_t{16} << 20) +
         (cache_per_call ? std::uintmax_t{64} << 10 : 0) * static_cast<std::uintmax_t>(schedule_calls(p));
}

std::string tail_of(const std::string& text, std::size_t chars) {
  return text.size() > chars ? "..." + text.substr(text.size() - chars) : text;
}

class ExecDut final : public dut::Dut {
 public:
  ExecDut(std::string command, double timeout) : command_(std::move(command)), timeout_(timeout) {}
  std::string name() const override { return "exec:" + command_; }
  dut::Support supports(const AttnParams& p) const override {
    if (const std::string why = outside_description(description(), p); !why.empty())
      return dut::Support::skip("exec: " + why + " (its answer to the describe request)");
    return dut::Support::yes();
  }

  // The process runs the whole schedule from one request, so the first call does all the work and
  // leaves the cache the process ended with, or (cache_per_call) the cache after each call, which
  // each later call then hands on.
  dut::Status prefill(const AttnParams& p) override { return run(p, nullptr); }
  dut::Status chunked_prefill(const AttnParams& p, dut::KvCache& cache, int chunk_index) override {
    if (chunk_index == 0) return run(p, &cache);
    return hand_on(cache, chunk_index);
  }
  dut::Status decode_step(const AttnParams& p, dut::KvCache& cache, int step) override {
    return hand_on(cache, dut::chunk_count(p) + step);
  }
  dut::Traits traits() const override {
    dut::Traits t;
    const ExecDescription& d = description();
    t.cache = d.cache_per_call ? dut::CacheReport::every_call : dut::CacheReport::end_of_schedule;
    t.whole_schedule_per_call = true;
    t.name = d.name;
    return t;
  }

 private:
  const ExecDescription& description() const { return exec_description(command_, timeout_); }

  // The cache the process left after call `call` (cache_per_call), into the harness's cache.
  dut::Status hand_on(dut::KvCache& cache, int call) {
    if (!description().cache_per_call) return dut::Status::success();
    if (call >= static_cast<int>(snapshots_.size()))
      return dut::Status::failure("exec: no cache for call " + std::to_string(call));
    const Snapshot& s = snapshots_[static_cast<std::size_t>(call)];
    cache.k = s.k;
    cache.v = s.v;
    for (std::size_t b = 0; b < cache.tokens_written.size(); ++b) {
      cache.geometry[b].base = s.base[b];
      cache.tokens_written[b] = s.written[b];
    }
    return dut::Status::success();
  }

  dut::Status run(const AttnParams& p, dut::KvCache* cache) {
    if (!description().problem.empty()) return dut::Status::failure("exec: " + description().problem);
    const bool per_call = cache && description().cache_per_call;
    const ScratchFolder scratch(std::string(kScratchName) + "." + platform::owner_tag());
    const fs::path& dir = scratch.path();
    const fs::path request = dir / "request.h5", response = dir / "response.h5";
    write_problem_file(request, problem_inputs(p));
    if (per_call) {
      const h5::Handle f = h5::open_file_readwrite(request);
      h5::write_attr(f.id(), "cache_per_call", std::int64_t{1});
    }
    std::string errors;
    if (dut::Status s = spawn(request, response, errors); !s.ok) return s;
    const fs::file_status status = fs::symlink_status(response);
    if (!fs::exists(status)) return fail("wrote no response file", errors);
    if (status.type() != fs::file_type::regular)
      return fail("left a response that is not a regular file (a symlink, a FIFO, ...): refused unread", errors);
    const std::uintmax_t most = response_size_limit(p, per_call), size = fs::file_size(response);
    if (size > most)
      return fail("wrote a response of " + std::to_string(size) + " bytes, over the " +
                      std::to_string(most) + " this problem's /out and /cache can take: refused unread",
                  errors);
    // Read whole in a process of its own first: a damaged response can crash libhdf5 or loop, and
    // indirection (external links or storage, virtual datasets) can block on a FIFO.
    const double probe_bound = 10.0 + 2.0 * static_cast<double>(size >> 20);
    if (const std::string why = h5::probe_in_child(response, most, probe_bound); !why.empty())
      return fail(why.rfind("is refused unread", 0) == 0 ? "wrote a response that " + why
                                                          : "wrote an unreadable response (the response " + why + ")",
                  errors);
    return read_response(p, cache, response, errors);
  }

  // Runs the command on the request; its stdout and stderr are kept (their last 64 KiB) for the reasons.
  dut::Status spawn(const fs::path& request, const fs::path& response, std::string& output) const {
    platform::Ending ending;
    try {
      ending = run_exec_command(command_, request, response, timeout_, output);
    } catch (const std::exception& e) {
      return dut::Status::failure("exec: '" + command_ + "' could not be started: " + e.what());
    }
    if (ending.kind == platform::Ending::Kind::timed_out)
      return dut::Status::failure("exec: '" + command_ + "' " + ending.describe());
    if (!ending.ok()) return fail(ending.describe(), output);
    return dut::Status::success();
  }

  dut::Status fail(const std::string& what, const std::string& output) const {
    return dut::Status::failure("exec: '" + command_ + "' " + what + "; stderr: " + tail_of(output, 600));
  }

  dut::Status read_response(const AttnParams& p, dut::KvCache* cache, const fs::path& response,
                            const std::string& errors) {
    try {
      h5::Handle f = h5::open_file_readonly(response);
      if (H5Aexists(f.id(), "error") > 0) {
        const std::string said = h5::read_string_attr(f.id(), "error");
        if (said.rfind(kDeclined, 0) == 0)
          return dut::Status::decline("exec: the DUT does not support this case:" + said.substr(kDeclined.size()));
        return dut::Status::failure("exec: the DUT reported: " + said);
      }
      const std::vector<hsize_t> dims = h5::dataset_dims(f.id(), "out");  // the shape first, then the data
      const std::vector<hsize_t> want = {static_cast<hsize_t>(total_tokens(p)), static_cast<hsize_t>(p.heads_q),
                                         static_cast<hsize_t>(p.head_size)};
      if (dims != want) {
        std::ostringstream o;
        o << "exec: response /out has shape [";
        for (std::size_t i = 0; i < dims.size(); ++i) o << (i ? "," : "") << dims[i];
        o << "], expected [" << want[0] << "," << want[1] << "," << want[2] << "]";
        return dut::Status::failure(o.str());
      }
      const std::vector<float> out = h5::read_floats(f.id(), "out");
      auto* bytes = static_cast<unsigned char*>(p.out);
      const std::size_t elem = dtype_bytes(p.dtype);
      for (std::int64_t r = 0; r < static_cast<std::int64_t>(want[0]); ++r)
        for (int h = 0; h < p.heads_q; ++h)
          store_all_as(p.dtype, &out[(r * p.heads_q + h) * p.head_size], static_cast<std::size_t>(p.head_size),
                       bytes + (r * p.out_row_stride + h * p.out_head_stride) * elem);
      if (!cache) return dut::Status::success();
      if (!description().cache_per_call) return read_cache(f.id(), "cache", *cache);
      // /caches/C for every call C of the schedule, kept to hand on; the first is this call's.
      for (int call = 0, calls = schedule_calls(p); call < calls; ++call) {
        const std::string group = "caches/" + std::to_string(call);
        if (!h5::exists(f.id(), group))
          return dut::Status::failure("exec: the DUT described cache_per_call = 1, but its response has no /" + group +
                                      " (the cache after call " + std::to_string(call) + " of " +
                                      std::to_string(calls) + ")");
        if (dut::Status s = read_cache(f.id(), group, *cache); !s.ok) return s;
        snapshots_.push_back({cache->k, cache->v, {}, cache->tokens_written});
        for (const auto& g : cache->geometry) snapshots_.back().base.push_back(g.base);
      }
      return hand_on(*cache, 0);
    } catch (const h5::Error& e) {
      return fail(std::string("wrote an unreadable response (") + e.what() + ")", errors);
    }
  }

  // /cache: the KV cache the process ended the schedule with, in the harness's layout (or /caches/C,
  // the cache after call C). Without it the cache says it was not reported (tokens_written -1),
  // which the cache check names.
  dut::Status read_cache(hid_t file, const std::string& group, dut::KvCache& cache) const {
    if (!h5::exists(file, group)) {
      std::fill(cache.tokens_written.begin(), cache.tokens_written.end(), -1);
      return dut::Status::success();
    }
    const auto batch = static_cast<hsize_t>(cache.tokens_written.size());
    // A paged cache's K/V are the page pool [pool_pages, page_size, ...]; its page tables are the harness's.
    const std::vector<hsize_t> want = {cache.paged() ? static_cast<hsize_t>(cache.pages) : batch,
                                       static_cast<hsize_t>(cache.paged() ? cache.page_size : cache.slots),
                                       static_cast<hsize_t>(cache.heads_kv), static_cast<hsize_t>(cache.head_size)};
    const std::vector<hsize_t> k_dims = h5::dataset_dims(file, group + "/k"), v_dims = h5::dataset_dims(file, group + "/v"),
                               b_dims = h5::dataset_dims(file, group + "/base"),
                               t_dims = h5::dataset_dims(file, group + "/tokens_written");
    if (k_dims != want || v_dims != want || b_dims != std::vector<hsize_t>{batch} || t_dims != b_dims)
      return dut::Status::failure(std::string("exec: response /" + group + " has the wrong shapes: k and v must be ") +
                                  (cache.paged() ? "[pool_pages, page_size, " : "[batch, cache_slots, ") +
                                  "kv_heads, head_size] = [" + std::to_string(want[0]) + "," + std::to_string(want[1]) +
                                  "," + std::to_string(want[2]) + "," + std::to_string(want[3]) +
                                  "], base and tokens_written [batch]");
    const std::vector<float> k = h5::read_floats(file, group + "/k"), v = h5::read_floats(file, group + "/v");
    const std::vector<std::int64_t> base = h5::read_int64s(file, group + "/base");
    const std::vector<std::int64_t> written = h5::read_int64s(file, group + "/tokens_written");
    if (is_fp8(cache.format)) {
      // FP8 codes, as integers 0..255 of any HDF5 integer or float type.
      auto code = [](float x) { return x >= 0.f && x <= 255.f && x == static_cast<float>(static_cast<int>(x)); };
      for (std::size_t i = 0; i < k.size(); ++i) {
        if (!code(k[i]) || !code(v[i]))
          return dut::Status::failure("exec: response /" + group + "/k or /" + group + "/v element " + std::to_string(i) + " is " +
                                      std::to_string(code(k[i]) ? v[i] : k[i]) +
                                      ": with an FP8 kv_format they hold FP8 codes, integers 0..255");
        cache.k[i] = static_cast<unsigned char>(k[i]);
        cache.v[i] = static_cast<unsigned char>(v[i]);
      }
    } else {
      store_all_as(cache.dtype, k.data(), k.size(), cache.k.data());
      store_all_as(cache.dtype, v.data(), v.size(), cache.v.data());
    }
    for (std::size_t b = 0; b < batch; ++b) {
      cache.geometry[b].base = base[b];
      cache.tokens_written[b] = written[b];
    }
    return dut::Status::success();
  }

  struct Snapshot {
    std::vector<unsigned char> k, v;
    std::vector<std::int64_t> base, written;
  };
  std::string command_;
  double timeout_;
  std::vector<Snapshot> snapshots_;  // cache_per_call: the cache after each call of this schedule
};

}  // namespace

std::unique_ptr<dut::Dut> make_exec_dut(const std::string& command, double timeout_seconds) {
  // Once per process, before its first exec DUT's first command (the describe request).
  static std::once_flag cleaned;
  std::call_once(cleaned, end_what_dead_runs_left);
  return std::make_unique<ExecDut>(command, timeout_seconds);
}

}  // namespace swa::harness
