// reconstruct.cu — fused low-rank reconstruction + RoPE (gpu.ReconstructLaunch).
//
// Each job rebuilds rows x head_dim of one head of one span from its
// truncated SVD factors and writes it, rotated for its target positions and
// rounded to the layout dtype, into the server's KV layout. A CTA takes one
// job and a tile of rows_per_block rows:
//
//   1. coef[r][i] = (g[i]*S[i]) * U[t][i]     (g[i]*S[i] skipped to S[i] without gates)
//   2. acc[r][d]  = 0; for i = 0..rank-1 in order: acc += coef[r][i] * Vt[i][d]
//   3. rotate pairs of acc with row t's cos/sin (gpu.Job.CosSin), if any
//   4. round to the layout dtype, store at (head, token + t)
//
// every product and sum rounded to float32 on its own, in the order of the
// CPU reference (gpu.cpuReconstruct, reconstruct package), so f32 output is
// bit-identical and bf16/f16 output is the reference's float32 rounded to
// nearest even. Bad jobs (offsets out of their buffers, rows or rank out of
// range) are skipped without writing; the host validates them first.
#include "common.cuh"

struct ReconParams {
  Layout out;
  u64 factors, factors_len;  // base of the factor blocks, its length
  u64 aux, aux_len;          // base of cos/sin tables and gates
  u64 jobs;                  // njobs records of struct Job
  int njobs, rotary, style, max_rows;
  int max_rank, rows_per_block, pad0, pad1;
};

struct Job {
  i64 factors;  // byte offset in factors of the encoding (16-byte descriptor, U, S, Vt)
  i64 cossin;   // byte offset in aux of rows x rotary floats, or -1
  i64 gates;    // byte offset in aux of rank floats, or -1
  int rows, rank, head, token;
  int dtype, pad;  // element type of U, S and Vt
};

#define FACTOR_HEADER 16

__device__ __forceinline__ bool in_range(i64 off, i64 n, u64 size) {
  return off >= 0 && (off & 3) == 0 && n >= 0 && (u64)off <= size && (u64)n <= size - (u64)off;
}

__device__ __forceinline__ int dtype_size(int dt) { return dt == KVS_F32 ? 4 : 2; }

__device__ __forceinline__ bool job_ok(const ReconParams& p, const Job& j) {
  i64 rows = j.rows, rank = j.rank, hd = p.out.head_dim;
  if (j.dtype != KVS_F32 && j.dtype != KVS_F16 && j.dtype != KVS_BF16) return false;
  if (rows <= 0 || rows > p.max_rows || rank < 0 || rank > p.max_rank) return false;
  if (j.head < 0 || j.head >= p.out.heads || j.token < 0 || (i64)j.token + rows > p.out.tokens) return false;
  if (!in_range(j.factors, FACTOR_HEADER + dtype_size(j.dtype) * (rows * rank + rank + rank * hd), p.factors_len)) return false;
  if (j.cossin != -1 && (p.rotary == 0 || !in_range(j.cossin, 4 * rows * p.rotary, p.aux_len))) return false;
  if (j.gates != -1 && !in_range(j.gates, 4 * rank, p.aux_len)) return false;
  return true;
}

// lowrank is acc = sum over i of c[i]*Vt[i][d], i increasing, for one
// factor dtype (a template so the element decode leaves the inner loop).
template <int DT>
__device__ __forceinline__ float lowrank(const float* c, u64 Vt, int rank, int hd, int d) {
  float a = 0.0f;
  for (int i = 0; i < rank; i++) a = __fadd_rn(a, __fmul_rn(c[i], load_elem(Vt, DT, (i64)i * hd + d)));
  return a;
}

extern "C" __global__ void kvs_reconstruct(const ReconParams p) {
  extern __shared__ float smem[];
  const int R = p.rows_per_block;
  const int hd = p.out.head_dim;
  float* coef = smem;                  // [R][max_rank]
  float* acc = smem + R * p.max_rank;  // [R][hd]

  for (int jn = blockIdx.y; jn < p.njobs; jn += gridDim.y) {
    const Job j = ((const Job*)p.jobs)[jn];
    if (!job_ok(p, j)) continue;  // uniform across the CTA
    const int row0 = blockIdx.x * R;
    if (row0 >= j.rows) continue;
    const int nr = min(R, j.rows - row0);
    const int rank = j.rank;
    const int es = dtype_size(j.dtype);
    const u64 U = p.factors + j.factors + FACTOR_HEADER;  // element addresses, by dtype
    const u64 S = U + (u64)((i64)j.rows * rank * es);
    const u64 Vt = S + (u64)((i64)rank * es);
    const float* G = j.gates == -1 ? nullptr : (const float*)(p.aux + j.gates);

    // 1. per-row coefficients
    for (int k = threadIdx.x; k < nr * rank; k += blockDim.x) {
      int r = k / rank, i = k - r * rank;
      float si = load_elem(S, j.dtype, i);
      float gs = G ? __fmul_rn(G[i], si) : si;
      coef[r * p.max_rank + i] = __fmul_rn(gs, load_elem(U, j.dtype, (i64)(row0 + r) * rank + i));
    }
    __syncthreads();

    // 2. low-rank sum, rank in increasing order
    for (int k = threadIdx.x; k < nr * hd; k += blockDim.x) {
      int r = k / hd, d = k - r * hd;
      const float* c = coef + r * p.max_rank;
      float a;
      switch (j.dtype) {
        case KVS_F32: a = lowrank<KVS_F32>(c, Vt, rank, hd, d); break;
        case KVS_F16: a = lowrank<KVS_F16>(c, Vt, rank, hd, d); break;
        default: a = lowrank<KVS_BF16>(c, Vt, rank, hd, d); break;
      }
      acc[r * hd + d] = a;
    }
    __syncthreads();

    // 3 + 4. rotate and store
    for (int k = threadIdx.x; k < nr * hd; k += blockDim.x) {
      int r = k / hd, d = k - r * hd;
      int t = row0 + r;
      float v = acc[r * hd + d];
      if (j.cossin != -1 && d < p.rotary) {
        int pj, partner;
        bool first;
        pair_of(d, p.rotary, p.style, &pj, &partner, &first);
        const float* cs = (const float*)(p.aux + j.cossin) + (i64)t * p.rotary;
        v = rotate_elem(v, acc[r * hd + partner], cs[pj], cs[(p.rotary >> 1) + pj], first);
      }
      i64 idx;
      if (row_index(p.out, j.head, (i64)j.token + t, &idx)) store_elem(p.out, idx + d, v);
    }
    __syncthreads();  // coef and acc are reused by the next job
  }
}
