// swa-dut-worker PLUGIN.so FD: hosts one plugin for the harness (isolated_plugin.cpp). It loads the
// library, then answers requests on the socket FD until the harness closes it. A crash or a hang in
// the plugin ends this process only; the harness names the signal or the timeout and starts another.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>

#include "plugin_abi.hpp"
#include "swa/kernel_fields.hpp"
#include "worker_protocol.hpp"

namespace {

using namespace swa::dut::worker;

using Plugin = swa::dut::BoundPlugin;

Reply load(const char* path, Plugin& p) {
  Reply r;
  if (const std::string error = p.open(path); !error.empty()) {
    std::snprintf(r.load_error, sizeof r.load_error, "%s", error.c_str());
    return r;
  }
  r.abi_version = p.abi_version();
  r.traits = p.traits();
  return r;
}

// Receives one request and the memfd that comes with it (-1 for hello), polling for up to `spin`
// first (Request::spin_us). False when the harness is gone.
bool receive(int sock, Request& req, int& fd, std::chrono::microseconds spin = {}) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&req, sizeof req};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = -1;
  if (spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + spin;
    while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EAGAIN &&
           std::chrono::steady_clock::now() < until) {
    }
  }
  if (n < 0) n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (n != static_cast<ssize_t>(sizeof req)) return false;
  fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return true;
}

void rebase(swa_dut_v2_params& p, swa_dut_v2_cache& c, unsigned char* base) {
#define SWA_REBASE_ARRAY(field, bytes, written) p.field = decode(p.field, base);
  SWA_KERNEL_ARRAYS(SWA_REBASE_ARRAY)
#undef SWA_REBASE_ARRAY
  c.base = decode(c.base, base);
  c.tokens_written = decode(c.tokens_written, base);
  c.page_table = decode(c.page_table, base);
  c.k = decode(c.k, base);
  c.v = decode(c.v, base);
}

// The memfd of the current schedule, mapped once.
struct Mapping {
  std::uint64_t id = 0;
  void* base = MAP_FAILED;
  std::size_t bytes = 0;
  ~Mapping() { drop(); }
  void drop() {
    if (base != MAP_FAILED) munmap(base, bytes);
    base = MAP_FAILED;
    id = 0;
  }
};

Reply serve(const Plugin& plugin, Request& req, int fd, Mapping& m) {
  Reply r;
  if (fd >= 0) {
    m.drop();
    m.bytes = req.arena_bytes;
    m.base = mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m.id = m.base == MAP_FAILED ? 0 : req.arena_id;
    close(fd);
  }
  if (m.base == MAP_FAILED || m.id != req.arena_id) {
    r.rc = -1;
    std::snprintf(r.status.message, sizeof r.status.message, "swa-dut-worker: cannot map the tensors");
    return r;
  }
  rebase(req.params, req.cache, static_cast<unsigned char*>(m.base));
  switch (req.op) {
    case Op::supports: r.rc = plugin.supports(req.params, r.status); break;
    case Op::prefill: r.rc = plugin.prefill(req.params, r.status); break;
    case Op::chunked_prefill: r.rc = plugin.chunked_prefill(req.params, req.cache, req.index, r.status); break;
    case Op::decode_step: r.rc = plugin.decode_step(req.params, req.cache, req.index, r.status); break;
    case Op::load: break;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: swa-dut-worker PLUGIN.so SOCKET_FD (started by swa-harness)\n");
    return 2;
  }
  // The harness killed (even with -9) takes its workers with it: a watchdog notices the re-parenting.
  // Not PR_SET_PDEATHSIG: it fires when the harness *thread* that started the worker ends, and a
  // pooled worker outlives that thread.
  const pid_t parent = getppid();
  std::thread([parent] {
    for (;;) {
      if (getppid() != parent) _exit(0);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }).detach();
  const int sock = std::atoi(argv[2]);
  Plugin plugin;
  Request req;
  int fd = -1;
  if (!receive(sock, req, fd) || req.op != Op::load) return 3;
  Reply hello = load(argv[1], plugin);
  hello.sequence = req.sequence;
  if (send(sock, &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello) || !hello.abi_version) return 0;
  Mapping mapping;
  const pid_t worker = getpid();
  const std::chrono::microseconds spin(std::min<std::uint32_t>(req.spin_us, 100'000));
  while (receive(sock, req, fd, spin)) {
    Reply r = serve(plugin, req, fd, mapping);
    // A plugin that forked without exec returns twice: the copy must not answer (nor take requests).
    if (getpid() != worker) _exit(0);
    r.sequence = req.sequence;
    if (send(sock, &r, sizeof r, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r)) return 0;
  }
  return 0;
}
