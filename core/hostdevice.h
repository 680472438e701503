// OCTET_HD marks small inline functions that both the host compiler and nvcc compile, so the CPU
// and CUDA kernels share one formula (random numbers, optimizer updates, quantization).
//   OCTET_HD inline float lerp(float a, float b, float t) { return a + t * (b - a); }
#pragma once

#ifdef __CUDACC__
#define OCTET_HD __host__ __device__
#else
#define OCTET_HD
#endif
