// shift.cu — RoPE shift + scatter of a packet layer (gpu.ShiftLaunch).
//
// The source is one layer's K or V as stored in a packet,
// [heads][tokens][head_dim] of bf16, f16 or f32. Every element is decoded
// to float32 exactly; when a cos/sin table is given (keys shifted by delta)
// the rotated pairs become (a*c - b*s, b*c + a*s) with each product rounded
// (reconstruct.Shift's shiftPair); the result is rounded to the layout
// dtype to nearest even and stored at (head, token + t). Without a table
// (values, delta 0) elements are converted only, so equal dtypes copy
// exactly (but for signalling NaNs, which come out quiet). Threads own one element each in a grid-stride loop.
#include "common.cuh"

struct ShiftParams {
  Layout out;
  u64 src;     // device address of the source layer
  u64 cossin;  // rotary/2 cos then rotary/2 sin floats, or 0: no rotation
  int src_dtype, tokens, token, rotary;
  int style, pad0, pad1, pad2;
};

extern "C" __global__ void kvs_shift(const ShiftParams p) {
  const int hd = p.out.head_dim;
  const i64 n = (i64)p.out.heads * p.tokens * hd;
  const float* cs = (const float*)p.cossin;
  for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (i64)gridDim.x * blockDim.x) {
    i64 row = k / hd;
    int d = (int)(k - row * hd);
    int head = (int)(row / p.tokens);
    int t = (int)(row - (i64)head * p.tokens);
    float v = load_elem(p.src, p.src_dtype, k);
    if (cs != nullptr && d < p.rotary) {
      int pj, partner;
      bool first;
      pair_of(d, p.rotary, p.style, &pj, &partner, &first);
      float y = load_elem(p.src, p.src_dtype, row * hd + partner);
      v = rotate_elem(v, y, cs[pj], cs[(p.rotary >> 1) + pj], first);
    }
    i64 idx;
    if (row_index(p.out, head, (i64)p.token + t, &idx)) store_elem(p.out, idx + d, v);
  }
}
