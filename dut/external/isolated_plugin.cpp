#include "swa/dut/isolated_plugin.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "abi_convert.hpp"
#include "swa/kernel_fields.hpp"
#include "swa/platform/child_process.hpp"
#include "swa/platform/install_layout.hpp"
#include "swa/platform/outside_text.hpp"
#include "swa/platform/process_memory.hpp"
#include "worker_protocol.hpp"

#ifndef SWA_DUT_WORKER_PATH
#define SWA_DUT_WORKER_PATH "swa-dut-worker"
#endif

namespace swa::dut {
namespace {

using worker::Op;
using worker::Reply;
using worker::Request;

// Where a job has a core to spare (run --jobs N on 2N cores or more), each side polls for the other's
// next message before it sleeps: waking a sleeping process costs each call tens of microseconds and
// cold caches (worker_protocol.hpp's Request::spin_us). On ci.yaml through python: (5312 calls, 3100
// of them under 0.5 ms) the worker's polling took 0.5 s and the harness's 0.9 s off a 16 s run.
constexpr std::uint32_t kWorkerSpinMicroseconds = 1000;  // the harness checks the last call meanwhile
constexpr std::chrono::microseconds kReplySpin{300};      // most of those calls end within it

bool job_has_a_core_to_spare() { return omp_get_max_threads() >= 2; }  // runner.cpp: the job's threads

std::string worker_path() {
  const char* env = std::getenv("SWA_DUT_WORKER");
  if (env && *env) return env;
  return platform::installed_or_built(std::string(platform::kInstalledLibexec) + "/swa-dut-worker", SWA_DUT_WORKER_PATH);
}

// Shared memory with a worker, kept across schedules and grown when a schedule needs more: a new
// memfd per schedule cost its pages' allocation, zeroing and faults in both processes every time
// (ci.yaml with the CPU plugin: most of the isolation overhead).
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { release(); }

  // Room for `bytes`; false when the memory cannot be had. A new memfd gets a new id.
  bool reserve(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    if (bytes <= capacity_) return true;
    release();
    const std::size_t capacity = std::max(bytes, 2 * old_capacity_);
    fd_ = memfd_create("swa-dut-tensors", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(capacity)) != 0) return false;
    void* m = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) return false;
    map_ = static_cast<unsigned char*>(m);
    capacity_ = old_capacity_ = capacity;
    static std::atomic<std::uint64_t> next_id{0};
    id_ = ++next_id;
    return true;
  }
  unsigned char* data() const { return map_; }
  int fd() const { return fd_; }
  std::uint64_t id() const { return id_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void release() {
    if (map_) munmap(map_, capacity_);
    if (fd_ >= 0) close(fd_);
    map_ = nullptr;
    fd_ = -1;
    capacity_ = 0;
    id_ = 0;
  }
  int fd_ = -1;
  unsigned char* map_ = nullptr;
  std::size_t capacity_ = 0, old_capacity_ = 0;
  std::uint64_t id_ = 0;
};

// One swa-dut-worker process, its socket and the shared memory it has mapped.
class Worker {
 public:
  Worker(platform::Child process, int sock, std::string console_name, std::chrono::microseconds reply_spin)
      : process_(std::move(process)), sock_(sock), console_name_(std::move(console_name)), reply_spin_(reply_spin) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() { stop(); }

  // Starts a worker for `plugin` and loads it; throws std::runtime_error saying why not.
  static std::unique_ptr<Worker> start(const std::string& path, const WorkerLimits& limits, const PluginHosting& hosting) {
    const std::string plugin = hosting.subject(path);
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
      throw std::runtime_error(plugin + ": socketpair failed: " + std::strerror(errno));
    const std::string exe = worker_path();
    const std::string fd_text = "3";
    // The worker's environment: the harness's, with OpenMP set up as the plugin would find it
    // in-process. Threads: what the calling harness thread would give it (run --jobs N shares the
    // cores among its jobs); without that, N workers each start a thread per core. Idle threads
    // sleep unless the user chose otherwise: spinning threads of two processes on one machine starve
    // each other (ci.yaml with the CPU plugin: 2.4x slower than in-process with spinning).
    std::vector<std::string> env_text;
    bool has_wait_policy = false;
    auto set_by_hosting = [&](const std::string& entry) {  // the hosting's value wins over the harness's
      for (const std::string& h : hosting.env) {
        const auto eq = h.find('=');
        if (eq != std::string::npos && entry.compare(0, eq + 1, h, 0, eq + 1) == 0) return true;
      }
      return false;
    };
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      if (entry.rfind("OMP_NUM_THREADS=", 0) == 0 || set_by_hosting(entry)) continue;
      has_wait_policy = has_wait_policy || entry.rfind("OMP_WAIT_POLICY=", 0) == 0;
      env_text.push_back(entry);
    }
    env_text.push_back("OMP_NUM_THREADS=" + std::to_string(omp_get_max_threads()));
    env_text.insert(env_text.end(), hosting.env.begin(), hosting.env.end());
    if (!has_wait_policy) env_text.emplace_back("OMP_WAIT_POLICY=passive");
    platform::ChildSpec spec;
    spec.argv = {exe, path, fd_text};
    spec.env = std::move(env_text);
    spec.pass_fds = {fds[1]};                     // the worker's socket: its fd 3
    // The plugin's prints (stdout and stderr) pass through the harness (print_output), not straight
    // to its console: they are a DUT's text (escape codes, any bytes); a failure quotes their end.
    spec.stdout_to = platform::Stream::join_stderr;
    spec.stderr_to = platform::Stream::capture;
    std::optional<platform::Child> child;
    try {
      child.emplace(platform::Child::start(std::move(spec)));
    } catch (const std::system_error& e) {
      close(fds[0]);
      close(fds[1]);
      throw std::runtime_error(plugin + ": " + e.what());
    }
    close(fds[1]);
    const std::string shown_name =
        hosting.label.empty() ? "plugin:" + std::filesystem::path(path).filename().string() : hosting.label;
    const std::string console_name = platform::clean_text(shown_name, 200);
    const bool spin = job_has_a_core_to_spare();
    auto w = std::make_unique<Worker>(std::move(*child), fds[0], console_name,
                                      spin ? kReplySpin : std::chrono::microseconds{0});
    Request hello;
    hello.spin_us = spin ? kWorkerSpinMicroseconds : 0;
    std::string failure;
    const std::optional<Reply> r = w->call(hello, limits, failure);
    if (!r) {
      if (failure.find("exited with status 127") != std::string::npos)
        failure = "cannot start " + exe + " (set SWA_DUT_WORKER to its path, or use --in-process)";
      throw std::runtime_error(plugin + ": " + failure + " while loading it");
    }
    if (!r->abi_version)
      throw std::runtime_error(plugin + " " + std::string(r->load_error, strnlen(r->load_error, sizeof r->load_error)));
    w->abi_version_ = r->abi_version;
    w->traits_ = r->traits;
    return w;
  }

  // One request and its reply. nullopt when the worker died or timed out (it is then gone), with
  // `failure` saying which: "was killed by signal 11 (Segmentation fault)", "timed out after 5 s".
  std::optional<Reply> call(Request req, const WorkerLimits& limits, std::string& failure) {
    std::optional<Reply> reply = exchange(req, limits, failure);
    print_output();
    return reply;
  }

  Arena& arena() { return arena_; }
  uint32_t abi_version() const { return abi_version_; }
  const swa_dut_v2_traits& traits() const { return traits_; }

  // Whether the process still runs (a pooled worker can die while idle: killed, or its parent thread gone).
  bool alive() {
    if (process_.running()) return true;
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
    return false;
  }

 private:
  std::optional<Reply> exchange(Request& req, const WorkerLimits& limits, std::string& failure) {
    int arena_fd = -1;
    req.sequence = ++sequence_;
    if (req.op != Op::load) {
      req.arena_id = arena_.id();
      req.arena_bytes = arena_.capacity();
      if (mapped_id_ != arena_.id()) arena_fd = arena_.fd();
    }
    if (!send_request(req, arena_fd)) {
      failure = reap("stopped answering");
      return std::nullopt;
    }
    if (const Overrun over = await_reply(limits); over != Overrun::none) {
      process_.kill();
      close(sock_);
      sock_ = -1;
      failure = with_output(over == Overrun::time
                                ? platform::Ending{platform::Ending::Kind::timed_out, 0, limits.call_seconds}.describe()
                                : memory_overrun_text(limits.memory_bytes));
      return std::nullopt;
    }
    Reply r;
    const ssize_t n = recv(sock_, &r, sizeof r, 0);
    if (n != static_cast<ssize_t>(sizeof r)) {
      failure = reap("closed its socket");
      return std::nullopt;
    }
    if (r.sequence != req.sequence) {
      reap("");
      failure = "answered out of turn (a reply to request " + std::to_string(r.sequence) + " came for request " +
                std::to_string(req.sequence) + "; does the plugin write to the worker's socket?)";
      return std::nullopt;
    }
    if (arena_fd >= 0) mapped_id_ = arena_.id();
    return r;
  }

  // What the worker printed since the last call ended, on the harness's stderr: cleaned (a DUT's
  // bytes: escape codes, any encoding), each line after the DUT's name, the last 8 KiB at most, in
  // one write so that another job's lines do not cut into it.
  void print_output() {
    process_.read_output_now();
    const std::string& out = process_.output();
    if (out.empty()) return;
    constexpr std::size_t kShown = 8 * 1024;
    const std::size_t from = out.size() > kShown ? out.size() - kShown : 0;
    const std::size_t not_shown = process_.output_dropped() + from;
    const std::string text = platform::clean_text(std::string_view(out).substr(from), 8 * kShown);
    const std::string prefix = "[" + console_name_ + "] ";
    // On a terminal the harness's progress line has no newline yet: clear it first (it is redrawn).
    std::string block = ::isatty(STDERR_FILENO) ? "\r\033[K" : "";
    if (not_shown) block += prefix + "[... " + std::to_string(not_shown) + " earlier bytes not shown]\n";
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      block += prefix;
      block.append(text, at, end - at);
      block += '\n';
      at = end + 1;
    }
    std::fwrite(block.data(), 1, block.size(), stderr);
    process_.clear_output();
  }

  bool send_request(const Request& req, int arena_fd) {
    iovec iov{const_cast<Request*>(&req), sizeof req};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char control[CMSG_SPACE(sizeof(int))] = {};
    if (arena_fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &arena_fd, sizeof arena_fd);
    }
    return sendmsg(sock_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req);
  }

  enum class Overrun { none, time, memory };

  // Waits until the socket can be read (a reply, or its end), reading the worker's output meanwhile:
  // a plugin that prints more than a pipe holds must not block on it. Says which limit was passed
  // first, if one was: the call's time, or the worker's memory, sampled every kMemorySample while
  // it waits (a call that ends sooner is never sampled: the reads cost nothing on the fast path).
  Overrun await_reply(const WorkerLimits& limits) {
    constexpr int kMemorySampleMs = 25;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.call_seconds);
    const auto spin_until = std::chrono::steady_clock::now() + reply_spin_;
    for (pollfd p{sock_, POLLIN, 0}; poll(&p, 1, 0) == 0 && std::chrono::steady_clock::now() < spin_until;) {
    }
    for (;;) {
      int ms = -1;
      if (limits.call_seconds > 0) {
        const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return Overrun::time;
        ms = static_cast<int>(std::ceil(left * 1000));
      }
      if (limits.memory_bytes > 0) ms = ms < 0 ? kMemorySampleMs : std::min(ms, kMemorySampleMs);
      pollfd p[2] = {{sock_, POLLIN, 0}, {process_.output_fd(), POLLIN, 0}};
      const int ready = poll(p, p[1].fd >= 0 ? 2 : 1, ms);
      if (ready < 0 && errno != EINTR) return Overrun::none;  // the recv that follows says what is wrong
      if (ready > 0 && p[0].revents) return Overrun::none;
      if (ready > 0 && p[1].revents) process_.read_output_now();
      if (limits.memory_bytes > 0) {
        const std::optional<std::int64_t> held = platform::resident_anonymous_bytes(process_.pid());
        if (held && *held > limits.memory_bytes) {
          peak_bytes_ = *held;
          return Overrun::memory;
        }
      }
    }
  }

  std::string memory_overrun_text(std::int64_t limit) const {
    return "held " + std::to_string(peak_bytes_ >> 20) + " MiB of memory, over its limit of " +
           std::to_string(limit >> 20) + " MiB (--dut-memory-mb), and was killed";
  }

  // What the worker printed since the last call ended (stdout and stderr, the last 600 bytes), after `what`:
  // an assertion's message before an abort says more than the signal. run_dut cleans the text.
  std::string with_output(const std::string& what) const {
    std::string tail = process_.output_tail(600);
    while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.pop_back();
    return tail.empty() ? what : what + "; stderr: " + tail;
  }

  // Ends the worker (and anything it started) and says how it ended: a crash stays a crash.
  std::string reap(const std::string& otherwise) {
    if (sock_ < 0) return otherwise;
    const platform::Ending ending = process_.kill();
    close(sock_);
    sock_ = -1;
    return with_output(ending.code < 0 ? otherwise : ending.describe());
  }

  // Closing the socket asks the worker to exit (it reads end-of-file); a second later it is killed.
  void stop() {
    if (sock_ < 0) return;
    close(sock_);
    sock_ = -1;
    process_.wait(1.0);
  }

  platform::Child process_;
  int sock_;
  std::string console_name_;  // before each line it prints
  std::chrono::microseconds reply_spin_;  // how long await_reply polls before it sleeps (kReplySpin)
  std::uint64_t sequence_ = 0;
  Arena arena_;
  std::uint64_t mapped_id_ = 0;
  uint32_t abi_version_ = 0;
  swa_dut_v2_traits traits_{};
  std::int64_t peak_bytes_ = 0;  // what the last memory overrun saw
};

// Idle workers per plugin, so that a plugin is loaded once per run and not once per scenario.
class WorkerPool {
 public:
  static WorkerPool& instance() {
    static WorkerPool pool;
    return pool;
  }
  std::unique_ptr<Worker> acquire(const std::string& path, const WorkerLimits& limits, const PluginHosting& hosting) {
    const std::string plugin = hosting.key(path);
    if (!limits.fresh) {
      std::lock_guard lock(mutex_);
      auto& idle = idle_[plugin];
      while (!idle.empty()) {
        auto w = std::move(idle.back());
        idle.pop_back();
        if (w->alive()) return w;
      }
    }
    return Worker::start(path, limits, hosting);
  }
  void release(const std::string& plugin, std::unique_ptr<Worker> w) {
    if (!w || !w->alive()) return;
    std::lock_guard lock(mutex_);
    idle_[plugin].push_back(std::move(w));
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::vector<std::unique_ptr<Worker>>> idle_;
};

// The bytes a strided [tokens, heads, head_size] tensor spans.
// Where the tensors of a schedule go in the worker's shared memory: regions packed at 64-byte
// alignment, copied in once per schedule, the writable ones copied back after each call.
class Layout {
 public:
  struct Region {
    void* host;
    std::size_t bytes, offset;
    bool copy_back;
  };

  template <class T>
  T* add(T* host, std::size_t bytes, bool copy_back) {
    if (!host) return nullptr;
    const std::size_t offset = (size_ + 63) / 64 * 64;
    regions_.push_back({const_cast<void*>(static_cast<const void*>(host)), bytes, offset, copy_back});
    size_ = offset + bytes;
    return worker::encode<T>(offset);
  }
  std::size_t size() const { return size_; }
  std::size_t last_offset() const { return regions_.back().offset; }
  void copy_in(unsigned char* arena) const {
    for (const Region& r : regions_) std::memcpy(arena + r.offset, r.host, r.bytes);
  }
  void copy_back(const unsigned char* arena) const {
    for (const Region& r : regions_)
      if (r.copy_back) std::memcpy(r.host, arena + r.offset, r.bytes);
  }

 private:
  std::vector<Region> regions_;
  std::size_t size_ = 0;
};

class IsolatedPluginDut final : public Dut {
 public:
  IsolatedPluginDut(std::string path, WorkerLimits limits, PluginHosting hosting)
      : path_(std::move(path)),
        hosting_(std::move(hosting)),
        subject_(hosting_.subject(path_)),
        limits_(limits),
        worker_(WorkerPool::instance().acquire(path_, limits_, hosting_)),
        abi_version_(worker_->abi_version()),
        described_(worker_->traits()) {}
  // A fresh worker is not pooled: the state it holds is what the runs that asked for it made.
  ~IsolatedPluginDut() override {
    if (!limits_.fresh) WorkerPool::instance().release(hosting_.key(path_), std::move(worker_));
  }

  std::string name() const override { return hosting_.name(path_); }

  Traits traits() const override { return abi::to_traits(described_); }
  std::optional<double> last_kernel_ms() const override { return last_kernel_ms_; }

  Support supports(const AttnParams& p) const override {
    if (const std::string outside = abi::outside_traits(described_, p); !outside.empty()) return Support::skip(outside);
    Reply r;
    if (Status s = call(Op::supports, p, nullptr, 0, r); !s.ok) {
      pending_ = s;  // a crash in supports() is an error of the scenario, reported by its first call
      return Support::yes();
    }
    return r.rc ? Support::yes() : Support::skip(std::string(r.status.message, strnlen(r.status.message, sizeof r.status.message)));
  }

  Status prefill(const AttnParams& p) override { return run(Op::prefill, p, nullptr, 0); }
  Status chunked_prefill(const AttnParams& p, KvCache& cache, int chunk_index) override {
    return run(Op::chunked_prefill, p, &cache, chunk_index);
  }
  Status decode_step(const AttnParams& p, KvCache& cache, int step) override {
    return run(Op::decode_step, p, &cache, step);
  }

 private:
  Status run(Op op, const AttnParams& p, KvCache* cache, int index) {
    if (pending_) {
      Status s = *pending_;
      pending_.reset();
      return s;
    }
    last_kernel_ms_.reset();
    Reply r;
    if (Status s = call(op, p, cache, index, r); !s.ok) return s;
    if (r.status.kernel_ms >= 0) last_kernel_ms_ = r.status.kernel_ms;
    if (r.rc == 0) return Status::success();
    return Status::failure((hosting_.label.empty() ? path_ : hosting_.label) + " returned " + std::to_string(r.rc) + " (code " + std::to_string(r.status.code) +
                           "): " + std::string(r.status.message, strnlen(r.status.message, sizeof r.status.message)));
  }

  // The tensors shared with the worker for one schedule: built (and copied in) by its first call,
  // reused by the rest. The harness does not touch the inputs, the output or the cache between the
  // calls of a schedule, so only the written regions travel back after each call.
  struct Shared {
    Layout layout;
    swa_dut_v2_params pointers{};  // the encoded pointer fields
    swa_dut_v2_cache cache{};
    std::optional<abi::CacheView> view;
    const void* q = nullptr;
    void* out = nullptr;
    const KvCache* host_cache = nullptr;
    std::size_t page_table_offset = 0;  // a paged cache's page table, which the harness changes between calls
  };

  static bool starts_schedule(Op op, int index) {
    return op == Op::supports || op == Op::prefill || (op == Op::chunked_prefill && index == 0);
  }

  std::unique_ptr<Shared> share(const AttnParams& p, KvCache* cache) const {
    auto sh = std::make_unique<Shared>();
    sh->q = p.q;
    sh->out = p.out;
    sh->host_cache = cache;
    swa_dut_v2_params& c = sh->pointers;
    c = abi::to_c(p);
    Layout& a = sh->layout;
#define SWA_SHARE_ARRAY(field, bytes, written) c.field = a.add(c.field, bytes, written);
    SWA_KERNEL_ARRAYS(SWA_SHARE_ARRAY)
#undef SWA_SHARE_ARRAY
    if (cache) {
      sh->view.emplace(*cache);
      sh->cache = sh->view->c;
      const std::size_t bytes = cache->k.size();
      sh->cache.k = a.add(sh->cache.k, bytes, true);
      sh->cache.v = a.add(sh->cache.v, bytes, true);
      sh->cache.base = a.add(sh->cache.base, sizeof(int64_t) * sh->view->base.size(), true);
      sh->cache.tokens_written = a.add(sh->cache.tokens_written, sizeof(int64_t) * sh->view->tokens_written.size(), true);
      if (sh->cache.page_table) {
        sh->cache.page_table = a.add(sh->cache.page_table, sizeof(int32_t) * sh->view->page_table.size(), true);
        sh->page_table_offset = a.last_offset();
      }
    }
    Arena& arena = worker_->arena();
    if (!arena.reserve(a.size())) return nullptr;
    a.copy_in(arena.data());
    return sh;
  }

  // Ships the call to the worker; a dead or hung worker is a failure naming the entry point, and the
  // next call starts a new one.
  Status call(Op op, const AttnParams& p, KvCache* cache, int index, Reply& reply) const {
    if (!worker_) try {
        worker_ = Worker::start(path_, limits_, hosting_);
        shared_.reset();  // a new worker has mapped nothing
      } catch (const std::exception& e) {
        return Status::failure(e.what());
      }
    const bool fresh = starts_schedule(op, index) || !shared_ || shared_->q != p.q || shared_->out != p.out ||
                       shared_->host_cache != cache;
    if (fresh) {
      shared_ = share(p, cache);
      if (!shared_) return Status::failure(subject_ + ": cannot share the tensors with its worker (memfd)");
    }
    if (cache && cache->paged() && shared_->view && !shared_->view->page_table.empty()) {
      shared_->view->refresh_pages(*cache);
      std::memcpy(worker_->arena().data() + shared_->page_table_offset, shared_->view->page_table.data(),
                  sizeof(int32_t) * shared_->view->page_table.size());
    }
    Request req;
    req.op = op;
    req.index = index;
    req.params = abi::to_c(p);
    const swa_dut_v2_params& e = shared_->pointers;  // the arrays' places in the worker's memory
#define SWA_POINT_AT_SHARED(field, bytes, written) req.params.field = e.field;
    SWA_KERNEL_ARRAYS(SWA_POINT_AT_SHARED)
#undef SWA_POINT_AT_SHARED
    if (cache) req.cache = shared_->cache;
    std::string failure;
    const std::optional<Reply> r = worker_->call(req, limits_, failure);
    if (!r) {
      worker_.reset();
      shared_.reset();
      return Status::failure(subject_ + ": " + BoundPlugin::entry_point_name(op, abi_version_) + " " + failure +
                             " (in its worker process; the sweep goes on)");
    }
    if (op != Op::supports) {
      shared_->layout.copy_back(worker_->arena().data());
      if (shared_->view) shared_->view->sync_back(*cache);
    }
    reply = *r;
    return Status::success();
  }

  std::string path_;
  PluginHosting hosting_;
  std::string subject_;
  WorkerLimits limits_;
  mutable std::unique_ptr<Worker> worker_;
  uint32_t abi_version_;
  swa_dut_v2_traits described_;
  std::optional<double> last_kernel_ms_;
  mutable std::unique_ptr<Shared> shared_;
  mutable std::optional<Status> pending_;
};

}  // namespace

std::unique_ptr<Dut> load_isolated_plugin(const std::string& path, const WorkerLimits& limits, const PluginHosting& hosting) {
  return std::make_unique<IsolatedPluginDut>(path, limits, hosting);
}

}  // namespace swa::dut
