#pragma once
// Functions marked SWA_HOST_DEVICE are shared verbatim by the golden, the CPU DUT and CUDA kernels.
#if defined(__CUDACC__)
#define SWA_HOST_DEVICE __host__ __device__
#else
#define SWA_HOST_DEVICE
#endif
