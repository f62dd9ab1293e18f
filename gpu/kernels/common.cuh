// common.cuh — shared by the kvstore kernels: parameter structs that mirror
// the Go structs in gpu/cuda_launch.go byte for byte, the destination
// layouts, and dtype conversions that mirror kvstore/format exactly
// (round to nearest even, same NaN and subnormal handling), so that the
// GPU writes the same bits as the CPU reference.
//
// Every float32 multiply and add in these kernels is an explicit
// __fmul_rn / __fadd_rn / __fsub_rn: never contracted into an FMA, never
// flushed to zero (the PTX is built with -fmad=false -ftz=false as well).
#pragma once

typedef unsigned long long u64;
typedef long long i64;

// DType values of kvstore/format.
#define KVS_F32 1
#define KVS_F16 2
#define KVS_BF16 3

// LayoutKind values of gpu.Layout.
#define KVS_HND 1
#define KVS_PAGED_NHD 2

// RoPEStyle values of kvstore/format.
#define KVS_ROTATE_HALF 1
#define KVS_INTERLEAVED 2

// Layout: the destination, gpu.Layout plus its buffers (48 bytes).
struct Layout {
  u64 dst;    // device address of the data
  u64 table;  // device address of int32 block ids (paged), else 0
  int kind, dtype, heads, head_dim;
  int tokens, block_size, blocks, pad;
};

// row_index finds element (head, token, 0) of the layout; false when the
// token or its block id is out of range (nothing is written there).
__device__ __forceinline__ bool row_index(const Layout& L, int head, i64 token, i64* idx) {
  if (head < 0 || head >= L.heads || token < 0 || token >= L.tokens) return false;
  if (L.kind == KVS_HND) {
    *idx = ((i64)head * L.tokens + token) * L.head_dim;
    return true;
  }
  int blk = ((const int*)L.table)[token / L.block_size];
  if (blk < 0 || blk >= L.blocks) return false;
  i64 slot = (i64)blk * L.block_size + token % L.block_size;
  *idx = (slot * L.heads + head) * L.head_dim;
  return true;
}

// format.F32ToBF16: round to nearest even; NaN stays a quiet NaN.
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  unsigned int b = __float_as_uint(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(b >> 16) | 0x0040;
  b += 0x7fffu + ((b >> 16) & 1u);
  return (unsigned short)(b >> 16);
}

// format.F32ToF16: round to nearest even, overflow to infinity, below half
// the smallest subnormal to signed zero.
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
  unsigned int b = __float_as_uint(f);
  unsigned short sign = (unsigned short)(b >> 16) & 0x8000;
  unsigned int a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00 | ((unsigned short)(a >> 13) & 0x3ff);
  if (a >= 0x477ff000u) return sign | 0x7c00;
  if (a >= 0x38800000u) {
    unsigned int v = a - ((127u - 15u) << 23);
    v += 0xfffu + ((v >> 13) & 1u);
    return sign | (unsigned short)(v >> 13);
  }
  if (a < 0x33000000u) return sign;
  unsigned int exp = a >> 23;
  unsigned int man = (a & 0x7fffffu) | 0x800000u;
  unsigned int shift = 126u - exp;  // 14..24
  unsigned int halfway = 1u << (shift - 1);
  unsigned int rest = man & ((1u << shift) - 1);
  unsigned int v = man >> shift;
  if (rest > halfway || (rest == halfway && (v & 1u))) v++;
  return sign | (unsigned short)v;
}

// format.BF16ToF32 (exact).
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }

// format.F16ToF32 (exact, subnormals included).
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  unsigned int sign = (unsigned int)(h >> 15) << 31;
  unsigned int exp = (h >> 10) & 0x1fu;
  unsigned int man = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0 && man == 0) return __uint_as_float(sign);
  if (exp == 0) {
    unsigned int e = 127u - 15u + 1u;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      e--;
    }
    man &= 0x3ffu;
    return __uint_as_float(sign | (e << 23) | (man << 13));
  }
  return __uint_as_float(sign | ((exp + 127u - 15u) << 23) | (man << 13));
}

__device__ __forceinline__ float load_elem(u64 base, int dtype, i64 i) {
  switch (dtype) {
    case KVS_F32: return ((const float*)base)[i];
    case KVS_F16: return f16_to_f32(((const unsigned short*)base)[i]);
    default: return bf16_to_f32(((const unsigned short*)base)[i]);
  }
}

__device__ __forceinline__ void store_elem(const Layout& L, i64 i, float v) {
  switch (L.dtype) {
    case KVS_F32: ((float*)L.dst)[i] = v; break;
    case KVS_F16: ((unsigned short*)L.dst)[i] = f32_to_f16(v); break;
    default: ((unsigned short*)L.dst)[i] = f32_to_bf16(v); break;
  }
}

// pair_of says where dimension d < rot sits in its rotated pair: its pair
// index j and its partner dimension; first is true for the pair's first
// element. Rotate-half pairs (j, j+rot/2), interleaved pairs (2j, 2j+1).
__device__ __forceinline__ void pair_of(int d, int rot, int style, int* j, int* partner, bool* first) {
  if (style == KVS_INTERLEAVED) {
    *j = d >> 1;
    *first = (d & 1) == 0;
    *partner = *first ? d + 1 : d - 1;
  } else {
    int h = rot >> 1;
    *first = d < h;
    *j = *first ? d : d - h;
    *partner = *first ? d + h : d - h;
  }
}

// rotate_elem is one element of reconstruct's shiftPair:
// (a*c - b*s, b*c + a*s), each product rounded, where x is this element
// and y its partner.
__device__ __forceinline__ float rotate_elem(float x, float y, float c, float s, bool first) {
  if (first) return __fsub_rn(__fmul_rn(x, c), __fmul_rn(y, s));
  return __fadd_rn(__fmul_rn(x, c), __fmul_rn(y, s));
}
