// Function qualifiers for code that both the host C++ compiler and NVRTC compile.
// Element headers include this (through element.h) and mark every function FT_FUNCTION.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FT_DEVICE_COMPILE 1
#define FT_FUNCTION __device__ __forceinline__
// Loops of a fixed trip count unrolled on the GPU, so that small arrays indexed by the loop stay in registers
// (not in local memory, which costs device-memory traffic per particle).
#define FT_UNROLL _Pragma("unroll")
#else
#define FT_UNROLL
#define FT_FUNCTION inline
#include <math.h>  // sqrt, fabs on the host; NVRTC provides them as builtins
#endif
