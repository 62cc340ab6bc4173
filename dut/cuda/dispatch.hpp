#pragma once
// Compile-time dispatch of the CUDA kernels: the one place a runtime dtype and head size become
// template arguments. Each kernel's .cu file instantiates its launcher per storage type and calls
// with_head_size inside it, so one dtype's kernels compile in one translation unit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "swa/dtype.hpp"

namespace swa::dut::cuda {

inline constexpr int kHeadSizes[] = {64, 80, 96, 128, 160, 192, 256};
inline constexpr int kMaxHeadSize = 256;

constexpr bool max_head_size_bounds_every_head_size() {
  for (int h : kHeadSizes)
    if (h > kMaxHeadSize) return false;
  return true;
}
static_assert(max_head_size_bounds_every_head_size(), "kMaxHeadSize must bound kHeadSizes");

constexpr bool supported_head_size(int d) {
  for (int h : kHeadSizes)
    if (h == d) return true;
  return false;
}

template <class T>
struct TypeTag {
  using type = T;
};

// f(TypeTag<float | __half | __nv_bfloat16>{}).
template <class F>
decltype(auto) with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::fp16: return f(TypeTag<__half>{});
    case DType::bf16: return f(TypeTag<__nv_bfloat16>{});
    case DType::fp32: break;
  }
  return f(TypeTag<float>{});
}

// f(std::integral_constant<int, D>{}) for D in kHeadSizes; false for any other head size.
template <class F>
bool with_head_size(int d, F&& f) {
  switch (d) {
    case 64: f(std::integral_constant<int, 64>{}); return true;
    case 80: f(std::integral_constant<int, 80>{}); return true;
    case 96: f(std::integral_constant<int, 96>{}); return true;
    case 128: f(std::integral_constant<int, 128>{}); return true;
    case 160: f(std::integral_constant<int, 160>{}); return true;
    case 192: f(std::integral_constant<int, 192>{}); return true;
    case 256: f(std::integral_constant<int, 256>{}); return true;
    default: return false;
  }
}

}  // namespace swa::dut::cuda
