// cuda-shim.h — the CUDA built-ins the kernels of gpu/kernels use, mapped to
// host C++ so that g++ compiles the .cu sources for the host. Included by
// kernel-emu.cc (a process per launch) and cuda-fake.cc (the fake driver
// library); both are built by the gpu package's tests.
//
// One thread per CTA: blockDim is 1, so every grid-stride and block-stride
// loop of the kernels runs whole in that thread and __syncthreads is a
// no-op. The _rn intrinsics are IEEE float operations rounded on their own
// (volatile results, -ffp-contract=off, SSE2). The built-in indices and the
// shared memory are globals: one kernel runs at a time per process. What
// this cannot check is the GPU itself: warps, shared-memory races, the PTX
// JIT.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
using std::min;

struct dim3v { unsigned x, y, z; };
static dim3v threadIdx, blockIdx, blockDim, gridDim;
float smem[1 << 16];  // the kernels' extern __shared__ array (256 KiB)

static inline void __syncthreads() {}
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
