// cuda-fake.cc — a fake CUDA driver (libcuda) over host memory, so that the
// gpu package's CUDA binding (cuda*.go through purego) runs in CI without a
// GPU. gpu/cuda_fake_test.go builds it with g++ -shared -fPIC into a temp
// directory and opens it with CUDAOptions.Library.
//
// It exports every cu* symbol gpu/internal/cuda binds, with the driver API's
// C signatures, and behaves as the driver does where the binding depends on
// it:
//   - cuInit first; one device (fake_set_device changes count, compute
//     capability, SMs and memory); its primary context is reference
//     counted, private contexts (cuCtxCreate_v2) are made current on
//     creation; the current context is per thread, and calls that need one
//     fail with CUDA_ERROR_INVALID_CONTEXT without it;
//   - device memory is host memory (a CUdeviceptr is the host address),
//     256-byte aligned, within the device's total; pinned host memory is
//     4096-byte aligned; frees of unknown pointers fail and are counted;
//   - every stream is a worker thread draining a queue in order: copies,
//     memsets, launches and event records run there, after the call has
//     returned; events complete when the stream reaches their record,
//     cuStreamWaitEvent waits for the record most recent at the call,
//     elapsed times come from the completion times;
//   - cuModuleLoadDataEx reads the PTX: its .target (not newer than the
//     device) and its .entry functions with their parameter sizes, which
//     must equal the C structs'; failures write the JIT error log;
//   - cuLaunchKernel checks the launch configuration and dynamic shared
//     memory limit, copies the parameter block (kernelParams[0], as the
//     CUDA ABI passes a by-value struct) at the call, and the stream then
//     runs the kernel itself: gpu/kernels/*.cu compiled for the host under
//     cuda-shim.h, after checking that every address in the parameters
//     lies in a live allocation (else CUDA_ERROR_ILLEGAL_ADDRESS, sticky
//     for the context, as a fault is on a GPU).
// Releasing the primary context to zero or destroying a private one frees
// what is left in it (counted as reclaimed:*).
//
// Test controls (extern "C", called from Go through purego): fake_reset,
// fake_fail_next (the next call of a named entry point returns a code and
// does nothing), fake_drop_current_after (after each successful call of a
// named entry point no thread has a current context, as when other CUDA
// code in the process switches contexts), fake_set_device, fake_set_delay_us
// (each stream operation sleeps first, so ordering bugs show), and
// fake_stat (counters since the last reset: calls:<name>, injected:<name>,
// unload:ok|no_ctx|wrong_ctx, free:ok|bad, hostfree:ok|bad, release:ok|bad,
// destroy:ok|bad, reclaimed:<kind>, fault:address|shared, launch:<entry>,
// module:target (of the last load), module:bytes (PTX text loaded); and
// the state now: live:mem|host|stream|event|module|ctx, primary:refs).
//
// What it cannot check is the GPU: the PTX JIT itself, warps, shared
// memory races, DMA, real timings.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda-shim.h"

#include "reconstruct.cu"
#include "shift.cu"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  INVALID_DEVICE = 101,
  INVALID_PTX = 218,
  INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  NOT_READY = 600,
  ILLEGAL_ADDRESS = 700,
  NOT_SUPPORTED = 801,
};

namespace {

using Clock = std::chrono::steady_clock;

struct Ctx {
  bool primary = false;
  int refs = 0;     // primary: retain count; alive while > 0
  int sticky = 0;   // first fault of a kernel; every sync reports it
};

struct Stream {
  Ctx* ctx = nullptr;
  std::deque<std::function<CUresult()>> q;
  bool busy = false, stop = false;
  std::condition_variable wake;
  std::thread th;
};

struct Event {
  Ctx* ctx = nullptr;
  unsigned flags = 0;
  unsigned long long recorded = 0, completed = 0;  // record sequence numbers
  Clock::time_point at;
};

enum Kernel { kNone, kReconstruct, kShift };

struct Module;
struct Func {
  Module* mod;
  std::string name;
  Kernel kind;
};

struct Module {
  Ctx* ctx;
  int target;
  std::vector<std::unique_ptr<Func>> funcs;
};

struct Alloc {
  size_t size;
  Ctx* ctx;
};

struct Config {
  int count = 1, cc = 90, sms = 4;
  unsigned long long mem = 256ull << 20;
};

std::mutex mu;                 // guards everything below
std::condition_variable moved; // a stream went idle or an event completed
std::mutex kernel_mu;          // the shim's globals: one kernel at a time

Config cfg;
bool inited = false;
Ctx primary_ctx{true, 0, 0};
std::set<Ctx*> private_ctxs;
std::set<Stream*> streams;
std::map<Event*, std::shared_ptr<Event>> events;
std::set<Module*> modules;
std::set<Func*> funcs;
std::map<CUdeviceptr, Alloc> dmem;
std::map<void*, Alloc> hmem;
unsigned long long dmem_used = 0;
std::map<std::string, long long> stats;
std::map<std::string, int> fail_next;
std::string drop_after;
unsigned long long drop_gen = 0;
int delay_us = 0;

thread_local Ctx* cur = nullptr;
thread_local unsigned long long cur_gen = 0;

bool alive(Ctx* c) { return c == &primary_ctx ? primary_ctx.refs > 0 : private_ctxs.count(c) > 0; }

// current is the calling thread's current context, if it is still alive
// and no drop happened since it was set.
Ctx* current() {
  if (cur == nullptr || cur_gen != drop_gen || !alive(cur)) return nullptr;
  return cur;
}

// api runs body under mu, counting the call and applying an injected
// failure first (unless the body takes it itself) and a drop hook after.
CUresult api(const char* name, const std::function<CUresult(std::unique_lock<std::mutex>&)>& body,
             bool self_inject = false) {
  std::unique_lock<std::mutex> lk(mu);
  stats[std::string("calls:") + name]++;
  if (!self_inject) {
    auto it = fail_next.find(name);
    if (it != fail_next.end()) {
      CUresult r = it->second;
      fail_next.erase(it);
      stats[std::string("injected:") + name]++;
      return r;
    }
  }
  CUresult r = body(lk);
  if (r == OK && drop_after == name) drop_gen++;
  return r;
}

bool take_injection(const char* name, CUresult* r) {
  auto it = fail_next.find(name);
  if (it == fail_next.end()) return false;
  *r = it->second;
  fail_next.erase(it);
  stats[std::string("injected:") + name]++;
  return true;
}

// in_device reports whether [p, p+n) lies in one live device allocation.
bool in_device(CUdeviceptr p, unsigned long long n) {
  auto it = dmem.upper_bound(p);
  if (it == dmem.begin()) return false;
  --it;
  return p >= it->first && n <= it->second.size && p - it->first <= it->second.size - n;
}

bool idle(Stream* s) { return s->q.empty() && !s->busy; }

void worker(Stream* s) {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    s->wake.wait(lk, [&] { return s->stop || !s->q.empty(); });
    if (s->q.empty()) return;  // stopped and drained
    auto op = std::move(s->q.front());
    s->q.pop_front();
    s->busy = true;
    int delay = delay_us;
    lk.unlock();
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    CUresult r = op();
    lk.lock();
    s->busy = false;
    if (r != OK && s->ctx->sticky == OK) s->ctx->sticky = r;
    moved.notify_all();
  }
}

// enqueue puts op on s (the NULL stream runs it at once) and returns the
// context's sticky error, if any, as the driver does after a fault.
CUresult enqueue(std::unique_lock<std::mutex>& lk, Ctx* c, Stream* s, std::function<CUresult()> op) {
  if (c->sticky != OK) return c->sticky;
  if (s == nullptr) {
    lk.unlock();
    CUresult r = op();
    lk.lock();
    if (r != OK && c->sticky == OK) c->sticky = r;
    return r;
  }
  s->q.push_back(std::move(op));
  s->wake.notify_one();
  return OK;
}

// stream_of resolves a CUstream of context c; 0 is the NULL stream.
CUresult stream_of(void* h, Ctx* c, Stream** s) {
  *s = nullptr;
  if (h == nullptr) return OK;
  Stream* st = static_cast<Stream*>(h);
  if (!streams.count(st)) return INVALID_HANDLE;
  if (st->ctx != c) return INVALID_CONTEXT;
  *s = st;
  return OK;
}

std::shared_ptr<Event> event_of(void* h) {
  auto it = events.find(static_cast<Event*>(h));
  return it == events.end() ? nullptr : it->second;
}

void destroy_stream(std::unique_lock<std::mutex>& lk, Stream* s) {
  streams.erase(s);
  s->stop = true;
  s->wake.notify_one();
  lk.unlock();
  s->th.join();
  lk.lock();
  delete s;
  moved.notify_all();
}

// reclaim frees what is left in a context that is going away.
void reclaim(std::unique_lock<std::mutex>& lk, Ctx* c) {
  std::vector<Stream*> ss;
  for (Stream* s : streams)
    if (s->ctx == c) ss.push_back(s);
  for (Stream* s : ss) {
    destroy_stream(lk, s);
    stats["reclaimed:stream"]++;
  }
  for (auto it = events.begin(); it != events.end();) {
    if (it->second->ctx == c) {
      it = events.erase(it);
      stats["reclaimed:event"]++;
    } else {
      ++it;
    }
  }
  for (auto it = modules.begin(); it != modules.end();) {
    Module* m = *it;
    if (m->ctx != c) { ++it; continue; }
    for (auto& f : m->funcs) funcs.erase(f.get());
    delete m;
    it = modules.erase(it);
    stats["reclaimed:module"]++;
  }
  for (auto it = dmem.begin(); it != dmem.end();) {
    if (it->second.ctx != c) { ++it; continue; }
    dmem_used -= it->second.size;
    free(reinterpret_cast<void*>(it->first));
    it = dmem.erase(it);
    stats["reclaimed:mem"]++;
  }
  for (auto it = hmem.begin(); it != hmem.end();) {
    if (it->second.ctx != c) { ++it; continue; }
    free(it->first);
    it = hmem.erase(it);
    stats["reclaimed:host"]++;
  }
  c->sticky = OK;
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// ---- kernels ----

unsigned long long dtype_bytes(int dt) { return dt == KVS_F32 ? 4 : 2; }

unsigned long long layout_bytes(const Layout& L) {
  unsigned long long rows = L.kind == KVS_PAGED_NHD ? (unsigned long long)L.blocks * L.block_size : L.tokens;
  return rows * L.heads * L.head_dim * dtype_bytes(L.dtype);
}

bool layout_ok(const Layout& L) {
  if (!in_device(L.dst, layout_bytes(L))) return false;
  if (L.kind == KVS_PAGED_NHD) return L.block_size > 0 && in_device(L.table, 4ull * (L.tokens / L.block_size));
  return true;
}

// opt_ok: an optional range, 0 when empty.
bool opt_ok(CUdeviceptr p, unsigned long long n) { return n == 0 ? true : in_device(p, n); }

template <class P, class K>
CUresult run_kernel(const P& p, unsigned gx, unsigned gy, unsigned gz, K kernel) {
  std::lock_guard<std::mutex> g(kernel_mu);
  blockDim = {1, 1, 1};
  gridDim = {gx, gy, gz};
  threadIdx = {0, 0, 0};
  for (unsigned z = 0; z < gz; z++)
    for (unsigned y = 0; y < gy; y++)
      for (unsigned x = 0; x < gx; x++) {
        blockIdx = {x, y, z};
        kernel(p);
      }
  return OK;
}

struct Launch {
  Kernel kind;
  unsigned gx, gy, gz, shmem;
  ReconParams rp;
  ShiftParams sp;
};

CUresult execute(const Launch& l) {
  {
    std::lock_guard<std::mutex> g(mu);
    bool ok;
    if (l.kind == kReconstruct) {
      const ReconParams& p = l.rp;
      unsigned long long need = 4ull * p.rows_per_block * (p.max_rank + p.out.head_dim);
      if (need > l.shmem || need > sizeof(smem)) {
        stats["fault:shared"]++;
        return ILLEGAL_ADDRESS;
      }
      ok = layout_ok(p.out) && opt_ok(p.factors, p.factors_len) && opt_ok(p.aux, p.aux_len) &&
           opt_ok(p.jobs, (unsigned long long)p.njobs * sizeof(Job));
    } else {
      const ShiftParams& p = l.sp;
      ok = layout_ok(p.out) &&
           opt_ok(p.src, (unsigned long long)p.out.heads * p.tokens * p.out.head_dim * dtype_bytes(p.src_dtype)) &&
           (p.cossin == 0 || in_device(p.cossin, 4ull * p.rotary));
    }
    if (!ok) {
      stats["fault:address"]++;
      return ILLEGAL_ADDRESS;
    }
    stats[l.kind == kReconstruct ? "launch:kvs_reconstruct" : "launch:kvs_shift"]++;
  }
  if (l.kind == kReconstruct) return run_kernel(l.rp, l.gx, l.gy, l.gz, kvs_reconstruct);
  return run_kernel(l.sp, l.gx, l.gy, l.gz, kvs_shift);
}

// ---- PTX ----

struct Entry {
  std::string name;
  long param_bytes;
};

void jit_log(char* buf, size_t n, const std::string& msg) {
  if (buf == nullptr || n == 0) return;
  snprintf(buf, n, "%s", msg.c_str());
}

// parse_ptx reads the .target and the .entry functions with the size of
// their one by-value parameter.
CUresult parse_ptx(const char* ptx, int* target, std::vector<Entry>* entries, std::string* err) {
  std::string s(ptx);
  size_t t = s.find(".target sm_");
  if (s.find(".version") == std::string::npos || t == std::string::npos) {
    *err = "fake JIT: not PTX (no .version or .target sm_NN)";
    return INVALID_PTX;
  }
  *target = atoi(s.c_str() + t + strlen(".target sm_"));
  for (size_t at = s.find(".entry "); at != std::string::npos; at = s.find(".entry ", at + 1)) {
    size_t b = at + strlen(".entry "), e = s.find('(', b);
    if (e == std::string::npos) break;
    Entry en{s.substr(b, e - b), -1};
    size_t pp = s.find(en.name + "_param_0[", e);
    if (pp != std::string::npos) en.param_bytes = atol(s.c_str() + pp + en.name.size() + strlen("_param_0["));
    entries->push_back(en);
  }
  if (entries->empty()) {
    *err = "fake JIT: no .entry in the module";
    return INVALID_PTX;
  }
  return OK;
}

CUresult check_entry(const Entry& e, Kernel* kind, std::string* err) {
  long want = -1;
  *kind = kNone;
  if (e.name == "kvs_reconstruct") *kind = kReconstruct, want = sizeof(ReconParams);
  if (e.name == "kvs_shift") *kind = kShift, want = sizeof(ShiftParams);
  if (*kind != kNone && e.param_bytes != want) {
    *err = "fake JIT: " + e.name + " takes a " + std::to_string(e.param_bytes) + "-byte parameter, the C struct has " +
           std::to_string(want);
    return INVALID_PTX;
  }
  return OK;
}

struct ErrText {
  int code;
  const char* name;
  const char* text;
};

const ErrText err_texts[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrText* err_text(int code) {
  for (const ErrText& e : err_texts)
    if (e.code == code) return &e;
  return nullptr;
}

}  // namespace

extern "C" {

// ---- initialisation and devices ----

CUresult cuInit(unsigned flags) {
  return api("cuInit", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (flags != 0) return INVALID_VALUE;
    inited = true;
    return OK;
  });
}

CUresult cuDriverGetVersion(int* v) {
  return api("cuDriverGetVersion", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (v == nullptr) return INVALID_VALUE;
    *v = 12040;
    return OK;
  });
}

CUresult cuDeviceGetCount(int* n) {
  return api("cuDeviceGetCount", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (!inited) return NOT_INITIALIZED;
    if (n == nullptr) return INVALID_VALUE;
    *n = cfg.count;
    return OK;
  });
}

static CUresult check_dev(int dev) {
  if (!inited) return NOT_INITIALIZED;
  return dev >= 0 && dev < cfg.count ? OK : INVALID_DEVICE;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  return api("cuDeviceGet", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(ordinal)) return r;
    if (dev == nullptr) return INVALID_VALUE;
    *dev = ordinal;
    return OK;
  });
}

CUresult cuDeviceGetName(char* name, int n, int dev) {
  return api("cuDeviceGetName", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (name == nullptr || n <= 0) return INVALID_VALUE;
    snprintf(name, n, "kvstore fake CUDA device %d (host memory)", dev);
    return OK;
  });
}

CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
  return api("cuDeviceGetAttribute", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (v == nullptr) return INVALID_VALUE;
    switch (attr) {
      case 16: *v = cfg.sms; return OK;      // MULTIPROCESSOR_COUNT
      case 75: *v = cfg.cc / 10; return OK;  // COMPUTE_CAPABILITY_MAJOR
      case 76: *v = cfg.cc % 10; return OK;  // COMPUTE_CAPABILITY_MINOR
    }
    return INVALID_VALUE;
  });
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  return api("cuDeviceTotalMem_v2", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (bytes == nullptr) return INVALID_VALUE;
    *bytes = cfg.mem;
    return OK;
  });
}

// ---- contexts ----

CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  return api("cuDevicePrimaryCtxRetain", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (ctx == nullptr) return INVALID_VALUE;
    primary_ctx.refs++;
    *ctx = &primary_ctx;
    return OK;
  });
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  return api("cuDevicePrimaryCtxRelease_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (primary_ctx.refs <= 0) {
      stats["release:bad"]++;
      return INVALID_CONTEXT;
    }
    stats["release:ok"]++;
    if (--primary_ctx.refs == 0) reclaim(lk, &primary_ctx);
    return OK;
  });
}

CUresult cuCtxCreate_v2(void** ctx, unsigned flags, int dev) {
  return api("cuCtxCreate_v2", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (CUresult r = check_dev(dev)) return r;
    if (ctx == nullptr || flags != 0) return INVALID_VALUE;
    Ctx* c = new Ctx;
    private_ctxs.insert(c);
    cur = c, cur_gen = drop_gen;  // a new context is current on the calling thread
    *ctx = c;
    return OK;
  });
}

CUresult cuCtxDestroy_v2(void* ctx) {
  return api("cuCtxDestroy_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = static_cast<Ctx*>(ctx);
    if (!private_ctxs.count(c)) {
      stats["destroy:bad"]++;
      return INVALID_CONTEXT;
    }
    stats["destroy:ok"]++;
    reclaim(lk, c);
    private_ctxs.erase(c);
    delete c;
    if (cur == c) cur = nullptr;
    return OK;
  });
}

CUresult cuCtxSetCurrent(void* ctx) {
  return api("cuCtxSetCurrent", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = static_cast<Ctx*>(ctx);
    if (c != nullptr && !alive(c)) return INVALID_CONTEXT;
    cur = c, cur_gen = drop_gen;
    return OK;
  });
}

CUresult cuCtxSynchronize() {
  return api("cuCtxSynchronize", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    moved.wait(lk, [&] {
      for (Stream* s : streams)
        if (s->ctx == c && !idle(s)) return false;
      return true;
    });
    return c->sticky;
  });
}

// ---- memory ----

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t n) {
  return api("cuMemAlloc_v2", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    if (dptr == nullptr || n == 0) return INVALID_VALUE;
    if (n > cfg.mem || dmem_used + round_up(n, 256) > cfg.mem) return OUT_OF_MEMORY;
    void* p = aligned_alloc(256, round_up(n, 256));
    if (p == nullptr) return OUT_OF_MEMORY;
    dmem[reinterpret_cast<CUdeviceptr>(p)] = Alloc{n, c};
    dmem_used += round_up(n, 256);
    *dptr = reinterpret_cast<CUdeviceptr>(p);
    return OK;
  });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return api("cuMemFree_v2", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (current() == nullptr) return INVALID_CONTEXT;
    auto it = dmem.find(dptr);
    if (it == dmem.end()) {
      stats["free:bad"]++;
      return INVALID_VALUE;
    }
    stats["free:ok"]++;
    dmem_used -= round_up(it->second.size, 256);
    free(reinterpret_cast<void*>(dptr));
    dmem.erase(it);
    return OK;
  });
}

CUresult cuMemHostAlloc(void** p, size_t n, unsigned flags) {
  return api("cuMemHostAlloc", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    if (p == nullptr || n == 0 || (flags & ~7u) != 0) return INVALID_VALUE;
    void* h = aligned_alloc(4096, round_up(n, 4096));
    if (h == nullptr) return OUT_OF_MEMORY;
    hmem[h] = Alloc{n, c};
    *p = h;
    return OK;
  });
}

CUresult cuMemFreeHost(void* p) {
  return api("cuMemFreeHost", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (current() == nullptr) return INVALID_CONTEXT;
    auto it = hmem.find(p);
    if (it == hmem.end()) {
      stats["hostfree:bad"]++;
      return INVALID_VALUE;
    }
    stats["hostfree:ok"]++;
    free(p);
    hmem.erase(it);
    return OK;
  });
}

// copy enqueues a memcpy of n bytes on stream h after the checks.
static CUresult copy(std::unique_lock<std::mutex>& lk, void* dst, const void* src, size_t n, void* h, bool ok) {
  Ctx* c = current();
  if (c == nullptr) return INVALID_CONTEXT;
  Stream* s;
  if (CUresult r = stream_of(h, c, &s)) return r;
  if (!ok || dst == nullptr || src == nullptr) return INVALID_VALUE;
  return enqueue(lk, c, s, [=] {
    memcpy(dst, src, n);
    return OK;
  });
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* h) {
  return api("cuMemcpyHtoDAsync_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    return copy(lk, reinterpret_cast<void*>(dst), src, n, h, in_device(dst, n));
  });
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* h) {
  return api("cuMemcpyDtoHAsync_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    return copy(lk, dst, reinterpret_cast<const void*>(src), n, h, in_device(src, n));
  });
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* h) {
  return api("cuMemcpyDtoDAsync_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    return copy(lk, reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, h,
                in_device(dst, n) && in_device(src, n));
  });
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void* h) {
  return api("cuMemsetD8Async", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    if (!in_device(dst, n)) return INVALID_VALUE;
    return enqueue(lk, c, s, [=] {
      memset(reinterpret_cast<void*>(dst), v, n);
      return OK;
    });
  });
}

// ---- streams and events ----

CUresult cuStreamCreate(void** h, unsigned flags) {
  return api("cuStreamCreate", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    if (h == nullptr || (flags & ~1u) != 0) return INVALID_VALUE;
    Stream* s = new Stream;
    s->ctx = c;
    s->th = std::thread(worker, s);
    streams.insert(s);
    *h = s;
    return OK;
  });
}

CUresult cuStreamDestroy_v2(void* h) {
  return api("cuStreamDestroy_v2", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    if (s == nullptr) return INVALID_HANDLE;
    destroy_stream(lk, s);  // pending work completes first
    return OK;
  });
}

CUresult cuStreamSynchronize(void* h) {
  return api("cuStreamSynchronize", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    if (s != nullptr) moved.wait(lk, [&] { return !streams.count(s) || idle(s); });
    return c->sticky;
  });
}

CUresult cuStreamWaitEvent(void* h, void* e, unsigned flags) {
  return api("cuStreamWaitEvent", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    std::shared_ptr<Event> ev = event_of(e);
    if (ev == nullptr) return INVALID_HANDLE;
    if (flags != 0) return INVALID_VALUE;
    unsigned long long target = ev->recorded;
    if (target == 0) return OK;  // never recorded: nothing to wait for
    return enqueue(lk, c, s, [ev, target] {
      std::unique_lock<std::mutex> l(mu);
      moved.wait(l, [&] { return ev->completed >= target; });
      return OK;
    });
  });
}

CUresult cuEventCreate(void** h, unsigned flags) {
  return api("cuEventCreate", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    if (h == nullptr || (flags & ~7u) != 0) return INVALID_VALUE;
    auto ev = std::make_shared<Event>();
    ev->ctx = c;
    ev->flags = flags;
    events[ev.get()] = ev;
    *h = ev.get();
    return OK;
  });
}

CUresult cuEventDestroy_v2(void* e) {
  return api("cuEventDestroy_v2", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (current() == nullptr) return INVALID_CONTEXT;
    // Queued records and waits hold their own reference.
    return events.erase(static_cast<Event*>(e)) ? OK : INVALID_HANDLE;
  });
}

CUresult cuEventRecord(void* e, void* h) {
  return api("cuEventRecord", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    std::shared_ptr<Event> ev = event_of(e);
    if (ev == nullptr) return INVALID_HANDLE;
    if (ev->ctx != c) return INVALID_CONTEXT;
    unsigned long long seq = ++ev->recorded;
    return enqueue(lk, c, s, [ev, seq] {
      std::lock_guard<std::mutex> l(mu);
      if (seq > ev->completed) ev->completed = seq, ev->at = Clock::now();
      moved.notify_all();
      return OK;
    });
  });
}

CUresult cuEventSynchronize(void* e) {
  return api("cuEventSynchronize", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    if (current() == nullptr) return INVALID_CONTEXT;
    std::shared_ptr<Event> ev = event_of(e);
    if (ev == nullptr) return INVALID_HANDLE;
    unsigned long long target = ev->recorded;
    moved.wait(lk, [&] { return ev->completed >= target; });
    return ev->ctx->sticky;
  });
}

CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
  return api("cuEventElapsedTime", [&](std::unique_lock<std::mutex>&) -> CUresult {
    if (current() == nullptr) return INVALID_CONTEXT;
    std::shared_ptr<Event> a = event_of(start), b = event_of(end);
    if (ms == nullptr) return INVALID_VALUE;
    if (a == nullptr || b == nullptr || ((a->flags | b->flags) & 2) != 0) return INVALID_HANDLE;
    if (a->recorded == 0 || b->recorded == 0) return INVALID_HANDLE;
    if (a->completed < a->recorded || b->completed < b->recorded) return NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
    return OK;
  });
}

// ---- modules and launches ----

CUresult cuModuleLoadDataEx(void** mod, const void* image, unsigned nopts, int* opts, void** vals) {
  static const char name[] = "cuModuleLoadDataEx";
  return api(name, [&](std::unique_lock<std::mutex>&) -> CUresult {
    char* log = nullptr;
    size_t logn = 0;
    for (unsigned i = 0; i < nopts; i++) {
      if (opts[i] == 5) log = static_cast<char*>(vals[i]);                        // CU_JIT_ERROR_LOG_BUFFER
      if (opts[i] == 6) logn = static_cast<size_t>(reinterpret_cast<uintptr_t>(vals[i]));  // ..._SIZE_BYTES
    }
    CUresult r;
    if (take_injection(name, &r)) {
      jit_log(log, logn, "fake JIT: injected failure " + std::to_string(r));
      return r;
    }
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    if (mod == nullptr || image == nullptr) return INVALID_VALUE;
    int target = 0;
    std::vector<Entry> entries;
    std::string err;
    if ((r = parse_ptx(static_cast<const char*>(image), &target, &entries, &err)) != OK) {
      jit_log(log, logn, err);
      return r;
    }
    if (target > cfg.cc) {
      jit_log(log, logn, "fake JIT: .target sm_" + std::to_string(target) + " is newer than the device's sm_" +
                             std::to_string(cfg.cc));
      return INVALID_PTX;
    }
    Module* m = new Module{c, target, {}};
    for (const Entry& e : entries) {
      Kernel kind;
      if ((r = check_entry(e, &kind, &err)) != OK) {
        delete m;
        jit_log(log, logn, err);
        return r;
      }
      m->funcs.emplace_back(new Func{m, e.name, kind});
    }
    for (auto& f : m->funcs) funcs.insert(f.get());
    modules.insert(m);
    stats["module:target"] = target;
    stats["module:bytes"] += strlen(static_cast<const char*>(image));
    *mod = m;
    return OK;
  }, true);
}

CUresult cuModuleUnload(void* mod) {
  return api("cuModuleUnload", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Module* m = static_cast<Module*>(mod);
    if (!modules.count(m)) return INVALID_HANDLE;
    Ctx* c = current();
    if (c == nullptr) {
      stats["unload:no_ctx"]++;
      return INVALID_CONTEXT;
    }
    if (c != m->ctx) {
      stats["unload:wrong_ctx"]++;
      return INVALID_CONTEXT;
    }
    stats["unload:ok"]++;
    for (auto& f : m->funcs) funcs.erase(f.get());
    modules.erase(m);
    delete m;
    return OK;
  });
}

CUresult cuModuleGetFunction(void** fn, void* mod, const char* name) {
  return api("cuModuleGetFunction", [&](std::unique_lock<std::mutex>&) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Module* m = static_cast<Module*>(mod);
    if (!modules.count(m)) return INVALID_HANDLE;
    if (m->ctx != c) return INVALID_CONTEXT;
    if (fn == nullptr || name == nullptr) return INVALID_VALUE;
    for (auto& f : m->funcs)
      if (f->name == name) {
        *fn = f.get();
        return OK;
      }
    return NOT_FOUND;
  });
}

CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void* h, void** params, void** extra) {
  return api("cuLaunchKernel", [&](std::unique_lock<std::mutex>& lk) -> CUresult {
    Ctx* c = current();
    if (c == nullptr) return INVALID_CONTEXT;
    Func* f = static_cast<Func*>(fn);
    if (!funcs.count(f)) return INVALID_HANDLE;
    if (f->mod->ctx != c) return INVALID_CONTEXT;
    Stream* s;
    if (CUresult r = stream_of(h, c, &s)) return r;
    if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535) return INVALID_VALUE;
    if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 || bx * by * bz > 1024) return INVALID_VALUE;
    if (shmem > 48u << 10) return INVALID_VALUE;  // more needs cuFuncSetAttribute, which the binding never calls
    if (extra != nullptr || params == nullptr || params[0] == nullptr) return INVALID_VALUE;
    if (f->kind == kNone) return NOT_SUPPORTED;
    // The parameter block is copied now, as the driver does: the caller
    // may reuse it as soon as the launch returns.
    Launch l{f->kind, gx, gy, gz, shmem, {}, {}};
    if (f->kind == kReconstruct) memcpy(&l.rp, params[0], sizeof l.rp);
    else memcpy(&l.sp, params[0], sizeof l.sp);
    return enqueue(lk, c, s, [l] { return execute(l); });
  });
}

// ---- errors ----

CUresult cuGetErrorName(CUresult r, const char** s) {
  return api("cuGetErrorName", [&](std::unique_lock<std::mutex>&) -> CUresult {
    const ErrText* e = err_text(r);
    if (s == nullptr) return INVALID_VALUE;
    *s = e ? e->name : nullptr;
    return e ? OK : INVALID_VALUE;
  });
}

CUresult cuGetErrorString(CUresult r, const char** s) {
  return api("cuGetErrorString", [&](std::unique_lock<std::mutex>&) -> CUresult {
    const ErrText* e = err_text(r);
    if (s == nullptr) return INVALID_VALUE;
    *s = e ? e->text : nullptr;
    return e ? OK : INVALID_VALUE;
  });
}

// ---- test controls ----

void fake_reset() {
  std::lock_guard<std::mutex> l(mu);
  stats.clear();
  fail_next.clear();
  drop_after.clear();
  delay_us = 0;
  cfg = Config{};
}

void fake_fail_next(const char* name, int code) {
  std::lock_guard<std::mutex> l(mu);
  fail_next[name] = code;
}

void fake_drop_current_after(const char* name) {
  std::lock_guard<std::mutex> l(mu);
  drop_after = name;
}

void fake_set_device(int count, int cc, int sms, unsigned long long mem) {
  std::lock_guard<std::mutex> l(mu);
  cfg = Config{count, cc, sms, mem};
}

void fake_set_delay_us(int us) {
  std::lock_guard<std::mutex> l(mu);
  delay_us = us;
}

long long fake_stat(const char* key) {
  std::lock_guard<std::mutex> l(mu);
  std::string k(key);
  if (k == "live:mem") return dmem.size();
  if (k == "live:host") return hmem.size();
  if (k == "live:stream") return streams.size();
  if (k == "live:event") return events.size();
  if (k == "live:module") return modules.size();
  if (k == "live:ctx") return private_ctxs.size() + (primary_ctx.refs > 0);
  if (k == "primary:refs") return primary_ctx.refs;
  auto it = stats.find(k);
  return it == stats.end() ? 0 : it->second;
}

}  // extern "C"
