#pragma once
// The end of a split-decode CTA: the last CTA of a (sequence, kv head, head chunk) to finish merges
// every split's partial state of the chunk's heads into the output, in the same launch (the
// threadFenceReduction pattern of the CUDA samples), so a decode step is two launches, not three.
// Every split writes its partial state, makes it visible device-wide (__threadfence), then counts
// itself in `arrivals`; the CTA that counts last resets the counter for the next launch. The
// merge adds the splits in split order, so the result does not depend on which CTA is last.
#include <cmath>
#include <cstdint>

#include "decode_tiles.cuh"
#include "kernel_args.hpp"
#include "storage.cuh"

namespace swa::dut::cuda {

// Bytes of shared memory merge_if_last takes (it reuses the tiles' stages).
constexpr int kDecodeMergeScratchBytes = (kHeadsPerCta * kMaxDecodeSplits + 1) * static_cast<int>(sizeof(float));

// Called by every thread of the CTA once its warps have written their heads' partial states;
// `scratch` is shared memory no warp reads any more.
template <class T>
__device__ inline void merge_if_last(const AttnParams& p, const std::int64_t* q_pos, int splits, float* partials,
                                     unsigned* arrivals, const DecodeHeads& served, int b, unsigned char* scratch) {
  float* weights = reinterpret_cast<float*>(scratch);  // [kHeadsPerCta][kMaxDecodeSplits]
  unsigned* last = reinterpret_cast<unsigned*>(weights + kHeadsPerCta * kMaxDecodeSplits);
  __threadfence();  // this CTA's partial states reach every multiprocessor before it counts itself
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = arrivals + static_cast<std::int64_t>(b) * p.heads_kv * decode_head_chunks(p) + blockIdx.y;
    const bool is_last = atomicAdd(counter, 1u) == static_cast<unsigned>(splits - 1);
    if (is_last) *counter = 0;  // every split has counted: ready for the next launch
    *last = is_last ? 1u : 0u;
  }
  __syncthreads();
  if (*last == 0u) return;
  __threadfence();  // the other splits' states, read below, after their counts

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= served.count) return;
  const int head = served.first + warp, stride = p.head_size + 2;
  const float* split0 = partial_at(partials, p, splits, b, head, 0);
  float most = -INFINITY;
  for (int s = 0; s < splits; ++s) most = fmaxf(most, __ldcg(split0 + static_cast<std::int64_t>(s) * stride));
  float* weight = weights + warp * kMaxDecodeSplits;
  for (int s = lane; s < splits; s += 32) {
    const float split_max = __ldcg(split0 + static_cast<std::int64_t>(s) * stride);
    weight[s] = merge_weight(split_max, most);
  }
  __syncwarp();
  float sum = 0.f;
  for (int s = 0; s < splits; ++s) sum += __ldcg(split0 + static_cast<std::int64_t>(s) * stride + 1) * weight[s];
  const float inv = row_normaliser(most, sum, p.sinks, head);  // a query that saw no key outputs 0
  T* out = static_cast<T*>(p.out) + (p.seq_offsets[b] + q_pos[b]) * p.out_row_stride + head * p.out_head_stride;
  for (int column = lane; column < p.head_size; column += 32) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += __ldcg(split0 + static_cast<std::int64_t>(s) * stride + 2 + column) * weight[s];
    out[column] = from_float<T>(acc * inv);
  }
}

}  // namespace swa::dut::cuda
