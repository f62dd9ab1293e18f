// kernel-emu.cc — runs the CUDA C kernels of gpu/kernels on the host, to
// test their indexing, layouts, conversions and float order without a GPU
// (gpu/emu_test.go builds it with g++ when one is installed).
//
// The CUDA built-ins come from cuda-shim.h (one thread per CTA, _rn
// intrinsics as IEEE operations rounded on their own). What it cannot check
// is the GPU itself: warps, shared-memory races, the PTX JIT.
//
// Protocol, little endian, stdin -> stdout:
//   in:  u32 kernel (1 reconstruct, 2 shift), u32 n, n bytes of the
//        parameter struct exactly as Go passes it to cuLaunchKernel,
//        u32 grid_x, u32 grid_y, u32 nbuf, then per buffer
//        u64 fake device address, u64 length, bytes
//   out: the first buffer's bytes (the destination's allocation) after the
//        kernel ran; the kernels write nothing else
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda-shim.h"

#include "reconstruct.cu"
#include "shift.cu"

struct Buf { uint64_t fake; std::vector<unsigned char> data; };
static std::vector<Buf> bufs;

static void readn(void* p, size_t n) {
  if (n && fread(p, 1, n, stdin) != n) { fprintf(stderr, "kernel-emu: short input\n"); exit(2); }
}
static uint32_t u32() { uint32_t v; readn(&v, 4); return v; }
static uint64_t u64v() { uint64_t v; readn(&v, 8); return v; }

// reloc maps a fake device address into the buffer that holds it.
static u64 reloc(u64 v) {
  if (v == 0) return 0;
  for (auto& b : bufs)
    if (v >= b.fake && v < b.fake + b.data.size() + 1) return (u64)(uintptr_t)b.data.data() + (v - b.fake);
  fprintf(stderr, "kernel-emu: address %llx in no buffer\n", (unsigned long long)v);
  exit(2);
}

int main() {
  uint32_t kernel = u32(), n = u32();
  std::vector<unsigned char> params(n);
  readn(params.data(), n);
  uint32_t gx = u32(), gy = u32(), nb = u32();
  for (uint32_t i = 0; i < nb; i++) {
    Buf b;
    b.fake = u64v();
    b.data.resize(u64v());
    readn(b.data.data(), b.data.size());
    bufs.push_back(std::move(b));
  }
  blockDim = {1, 1, 1};
  gridDim = {gx, gy, 1};
  threadIdx = {0, 0, 0};
  if (kernel == 1) {
    if (n != sizeof(ReconParams)) { fprintf(stderr, "kernel-emu: %u-byte params, struct is %zu\n", n, sizeof(ReconParams)); return 2; }
    ReconParams p;
    memcpy(&p, params.data(), n);
    p.out.dst = reloc(p.out.dst); p.out.table = reloc(p.out.table);
    p.factors = reloc(p.factors); p.aux = reloc(p.aux); p.jobs = reloc(p.jobs);
    if ((size_t)p.rows_per_block * (p.max_rank + p.out.head_dim) > sizeof(smem) / 4) { fprintf(stderr, "kernel-emu: shared memory\n"); return 2; }
    for (unsigned y = 0; y < gy; y++)
      for (unsigned x = 0; x < gx; x++) { blockIdx = {x, y, 0}; kvs_reconstruct(p); }
  } else if (kernel == 2) {
    if (n != sizeof(ShiftParams)) { fprintf(stderr, "kernel-emu: %u-byte params, struct is %zu\n", n, sizeof(ShiftParams)); return 2; }
    ShiftParams p;
    memcpy(&p, params.data(), n);
    p.out.dst = reloc(p.out.dst); p.out.table = reloc(p.out.table);
    p.src = reloc(p.src); p.cossin = reloc(p.cossin);
    for (unsigned x = 0; x < gx; x++) { blockIdx = {x, 0, 0}; kvs_shift(p); }
  } else {
    return 2;
  }
  if (!bufs.empty()) fwrite(bufs[0].data.data(), 1, bufs[0].data.size(), stdout);
  return 0;
}
