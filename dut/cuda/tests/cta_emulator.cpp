#include "cta_emulator.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mma_fragment.hpp"

constinit thread_local uint3 threadIdx{};
constinit thread_local uint3 blockIdx{};
constinit thread_local dim3 gridDim{1, 1, 1};

namespace swa::dut::cuda::emulator {
namespace {

// One warp's exchange area: what each lane contributes to a shuffle or an mma.
struct Warp {
  std::barrier<> sync{32};
  float value[32];
  unsigned a[32][4];
  unsigned b[32][2];
  const unsigned char* row[32];
  // The 16-byte copies each lane issued, by the lane's commit number: the n-th commit of every lane
  // closes the same warp-wide copy instructions (the kernels issue and commit uniformly).
  std::mutex copies_mutex;
  struct Group {
    int lanes = 0;
    std::vector<std::uintptr_t> issued[32];
  };
  std::map<long, Group> groups;
};

struct Cta {
  std::vector<unsigned char> shared;
  std::unique_ptr<std::barrier<>> sync;
  std::vector<std::unique_ptr<Warp>> warps;
};

Cta* current = nullptr;  // CTAs run one at a time

// This thread's copies in flight: committed groups, oldest first, then the open one. Every CTA
// thread is a new host thread, so nothing carries over between CTAs.
struct PendingCopy {
  void* shared;
  unsigned char bytes[16];
};
thread_local std::deque<std::vector<PendingCopy>> committed_copies;
thread_local std::vector<PendingCopy> open_copies;
thread_local long commits = 0;

std::atomic<long> ldmatrix_wavefronts{0}, ldmatrix_minimum{0}, copy_wavefronts{0}, copy_minimum{0};

// Wavefronts for up to 8 16-byte rows read or written together (offsets into shared memory): the
// most distinct rows that fall in one of the 8 groups of 4 banks.
long wavefronts(const std::uintptr_t* rows, int n) {
  int in_group[8] = {};
  for (int i = 0; i < n; ++i) {
    bool repeated = false;  // the same row twice is read once (a broadcast)
    for (int j = 0; j < i; ++j) repeated = repeated || rows[j] / 16 == rows[i] / 16;
    if (!repeated) ++in_group[(rows[i] / 16) % 8];
  }
  return *std::max_element(in_group, in_group + 8);
}

// One warp-wide 16-byte copy instruction: a quarter-warp's rows per wavefront group.
void count_copies(const Warp::Group& g, std::size_t instruction) {
  for (int quarter = 0; quarter < 4; ++quarter) {
    std::uintptr_t rows[8];
    int n = 0;
    for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane)
      if (instruction < g.issued[lane].size()) rows[n++] = g.issued[lane][instruction];
    if (n == 0) continue;
    copy_wavefronts += wavefronts(rows, n);
    copy_minimum += 1;
  }
}

// The offset of `bytes` bytes at `at` in the CTA's shared memory; aborts where they are not all in it.
std::uintptr_t shared_offset(const void* at, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(at);
  if (p < current->shared.data() || p + bytes > current->shared.data() + current->shared.size()) std::abort();
  return static_cast<std::uintptr_t>(p - current->shared.data());
}

void count_group(const Warp::Group& g) {
  std::size_t most = 0;
  for (const auto& lane : g.issued) most = std::max(most, lane.size());
  for (std::size_t i = 0; i < most; ++i) count_copies(g, i);
}

Warp& my_warp() { return *current->warps[threadIdx.x / 32]; }

template <class T>
float half_of(unsigned word, int which) {
  T pair[2];
  std::memcpy(static_cast<void*>(pair), &word, sizeof word);
  if constexpr (std::is_same_v<T, __half>) return __half2float(pair[which]);
  else return __bfloat162float(pair[which]);
}

}  // namespace

void* cta_shared_memory() { return current->shared.data(); }

void copy_16_async(void* shared, const void* global, bool fill) {
  PendingCopy copy{shared, {}};
  shared_offset(shared, 16);  // a copy outside the CTA's shared memory aborts
  if (fill) std::memcpy(copy.bytes, global, 16);
  open_copies.push_back(copy);
}

void commit_async_copies() {
  {
    Warp& w = my_warp();
    std::lock_guard lock(w.copies_mutex);
    Warp::Group& g = w.groups[commits++];
    for (const PendingCopy& c : open_copies)
      g.issued[threadIdx.x % 32].push_back(shared_offset(c.shared, 16));
    if (++g.lanes == 32) {
      count_group(g);
      w.groups.erase(commits - 1);
    }
  }
  committed_copies.push_back(std::move(open_copies));
  open_copies.clear();
}

void wait_async_copies(int pending) {
  while (static_cast<int>(committed_copies.size()) > pending) {
    for (const PendingCopy& copy : committed_copies.front()) std::memcpy(copy.shared, copy.bytes, 16);
    committed_copies.pop_front();
  }
}

template <class T>
void warp_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  Warp& w = my_warp();
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < 4; ++r) w.a[lane][r] = a[r];
  for (int r = 0; r < 2; ++r) w.b[lane][r] = b[r];
  w.sync.arrive_and_wait();
  // Gather A (16 x 16) and B (16 x 8) from every lane's registers, as the instruction does.
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 8; ++e) A[mma_a_coord(l, e).row][mma_a_coord(l, e).col] = half_of<T>(w.a[l][e / 2], e % 2);
    for (int e = 0; e < 4; ++e) B[mma_b_coord(l, e).row][mma_b_coord(l, e).col] = half_of<T>(w.b[l][e / 2], e % 2);
  }
  w.sync.arrive_and_wait();
  for (int e = 0; e < 4; ++e) {
    const FragCoord c = mma_c_coord(lane, e);
    float acc = 0.f;
    for (int k = 0; k < 16; ++k) acc += A[c.row][k] * B[k][c.col];
    d[e] += acc;
  }
}

void warp_ldmatrix(unsigned* registers, int matrices, bool transpose, const void* row) {
  Warp& w = my_warp();
  const int lane = threadIdx.x % 32;
  const auto* at = static_cast<const unsigned char*>(row);
  if (lane < 8 * matrices && shared_offset(at, 16) % 16 != 0) std::abort();  // rows are 16 aligned bytes of shared memory
  w.row[lane] = at;
  w.sync.arrive_and_wait();
  for (int m = 0; m < matrices; ++m) {
    std::uint16_t lo, hi;
    if (!transpose) {  // row lane / 4, columns 2 (lane % 4) and the next
      std::memcpy(&lo, w.row[8 * m + lane / 4] + 4 * (lane % 4), 2);
      std::memcpy(&hi, w.row[8 * m + lane / 4] + 4 * (lane % 4) + 2, 2);
    } else {  // column lane / 4 of rows 2 (lane % 4) and the next
      std::memcpy(&lo, w.row[8 * m + 2 * (lane % 4)] + 2 * (lane / 4), 2);
      std::memcpy(&hi, w.row[8 * m + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
    }
    registers[m] = lo | static_cast<unsigned>(hi) << 16;
  }
  if (lane == 0)
    for (int m = 0; m < matrices; ++m) {
      std::uintptr_t rows[8];
      for (int r = 0; r < 8; ++r) rows[r] = shared_offset(w.row[8 * m + r], 16);
      ldmatrix_wavefronts += wavefronts(rows, 8);
      ldmatrix_minimum += 1;
    }
  w.sync.arrive_and_wait();
}

SharedTraffic shared_traffic() {
  return {ldmatrix_wavefronts.load(), ldmatrix_minimum.load(), copy_wavefronts.load(), copy_minimum.load()};
}

void reset_shared_traffic() { ldmatrix_wavefronts = ldmatrix_minimum = copy_wavefronts = copy_minimum = 0; }

template void warp_mma<__half>(float (&)[4], const unsigned (&)[4], const unsigned (&)[2]);
template void warp_mma<__nv_bfloat16>(float (&)[4], const unsigned (&)[4], const unsigned (&)[2]);

void launch(dim3 grid, int threads, std::size_t shared_bytes, const std::function<void()>& body) {
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Cta cta;
        cta.shared.assign(shared_bytes + 16, 0xFF);
        cta.sync = std::make_unique<std::barrier<>>(threads);
        for (int w = 0; w < threads / 32; ++w) cta.warps.push_back(std::make_unique<Warp>());
        current = &cta;
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            threadIdx = {static_cast<unsigned>(t), 0, 0};
            blockIdx = {x, y, z};
            gridDim = grid;
            body();
          });
        for (auto& th : pool) th.join();
        for (auto& w : cta.warps)  // copies of warps whose lanes did not all commit them
          for (const auto& [number, group] : w->groups) count_group(group);
        current = nullptr;
      }
}

}  // namespace swa::dut::cuda::emulator

void __syncthreads() { swa::dut::cuda::emulator::current->sync->arrive_and_wait(); }

void __syncwarp(unsigned) { swa::dut::cuda::emulator::my_warp().sync.arrive_and_wait(); }

float __shfl_xor_sync(unsigned, float value, int lane_mask) {
  auto& w = swa::dut::cuda::emulator::my_warp();
  const int lane = threadIdx.x % 32;
  w.value[lane] = value;
  w.sync.arrive_and_wait();
  const float other = w.value[lane ^ lane_mask];
  w.sync.arrive_and_wait();
  return other;
}

float __shfl_sync(unsigned, float value, int source_lane) {
  auto& w = swa::dut::cuda::emulator::my_warp();
  const int lane = threadIdx.x % 32;
  w.value[lane] = value;
  w.sync.arrive_and_wait();
  const float other = w.value[source_lane % 32];
  w.sync.arrive_and_wait();
  return other;
}

unsigned __ballot_sync(unsigned, bool predicate) {
  auto& w = swa::dut::cuda::emulator::my_warp();
  const int lane = threadIdx.x % 32;
  w.value[lane] = predicate ? 1.f : 0.f;
  w.sync.arrive_and_wait();
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if (w.value[l] != 0.f) bits |= 1u << l;
  w.sync.arrive_and_wait();
  return bits;
}

void __trap() { std::abort(); }

void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

unsigned atomicAdd(unsigned* address, unsigned value) {
  return std::atomic_ref<unsigned>(*address).fetch_add(value);
}

float __ldcg(const float* address) { return *address; }
