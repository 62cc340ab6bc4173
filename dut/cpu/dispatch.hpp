#pragma once
// Compile-time dispatch of the CPU kernels on the storage dtype: the one place a runtime DType
// becomes a C++ type. Head sizes stay runtime values on the CPU (Eigen handles any D).
#include <Eigen/Core>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "convert.hpp"

#include "swa/dtype.hpp"

namespace swa::dut::cpu {

template <class F>
decltype(auto) with_storage_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::fp16: return std::forward<F>(f)(Eigen::half{});
    case DType::bf16: return std::forward<F>(f)(Eigen::bfloat16{});
    case DType::fp32: break;
  }
  return std::forward<F>(f)(float{});
}

// `rows` rows of `d` elements of storage type T (row stride in elements) to contiguous fp32, times `scale`.
template <class T>
void rows_to_fp32(const T* src, std::int64_t row_stride, std::int64_t rows, int d, float scale, float* dst) {
  if constexpr (std::is_same_v<T, float>) {
    for (std::int64_t r = 0; r < rows; ++r)
      Eigen::Map<Eigen::VectorXf>(dst + r * d, d) = Eigen::Map<const Eigen::VectorXf>(src + r * row_stride, d) * scale;
  } else {
    // fp16/bf16 through convert.hpp's run-time chosen instructions.
    static_assert(sizeof(T) == sizeof(std::uint16_t));
    const auto* bits = reinterpret_cast<const std::uint16_t*>(src);
    for (std::int64_t r = 0; r < rows; ++r)
      if constexpr (std::is_same_v<T, Eigen::half>)
        fp16_to_fp32(bits + r * row_stride, dst + r * d, d, scale);
      else
        bf16_to_fp32(bits + r * row_stride, dst + r * d, d, scale);
  }
}

// Contiguous fp32 rows back to storage type T (round to nearest even).
template <class T>
void rows_from_fp32(const float* src, std::int64_t rows, int d, T* dst, std::int64_t row_stride) {
  for (std::int64_t r = 0; r < rows; ++r)
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(dst + r * row_stride, d) =
        Eigen::Map<const Eigen::VectorXf>(src + r * d, d).template cast<T>();
}

}  // namespace swa::dut::cpu
