#include "cta_emulator.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "mma_fragment.hpp"

constinit thread_local uint3 threadIdx{};
constinit thread_local uint3 blockIdx{};

namespace swa::dut::cuda::emulator {
namespace {

// One warp's exchange area: what each lane contributes to a shuffle or an mma.
struct Warp {
  std::barrier<> sync{32};
  float value[32];
  unsigned a[32][4];
  unsigned b[32][2];
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
  if (fill) std::memcpy(copy.bytes, global, 16);
  open_copies.push_back(copy);
}

void commit_async_copies() {
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
            body();
          });
        for (auto& th : pool) th.join();
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
