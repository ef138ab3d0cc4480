// CPU emulator (see emu_hooks.h). Cooperative fibers with a hand-written x86-64 context switch.
#include "emu_hooks.h"

#include <sys/mman.h>
#include <algorithm>
#include <random>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" void dgps_emu_switch(void** save_sp, void* new_sp);
asm(R"(
.text
.globl dgps_emu_switch
.type dgps_emu_switch,@function
dgps_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size dgps_emu_switch, .-dgps_emu_switch
)");

namespace dgps_emu {
namespace {

constexpr size_t kStack = 512 * 1024;
constexpr int kMaxThreads = 1024;

struct Copy {
  void* dst;
  const void* src;
  bool valid;
};

enum State { kReady, kBlocked, kDone };

struct Fiber {
  void* sp = nullptr;
  unsigned char* stack = nullptr;
  State state = kReady;
  unsigned tid = 0;
  std::vector<std::vector<Copy>> groups;  // committed cp.async groups, oldest first
  std::vector<Copy> open;                 // not yet committed
  // 16-byte shared-memory granules this thread filled by cp.async and has not yet published to the async proxy
  // (fence.proxy.async); see Block::async_unfenced
  std::vector<uint32_t> unfenced;
};

struct Slot {
  unsigned char in[272];
  unsigned char out[256];
};

struct Warp {
  int arrived = 0;
  int kind = -1;
  unsigned gen = 0;
  Slot slots[2][32];
  std::vector<int> waiters;
};

struct Barrier {
  int arrived = 0;
  int expected = 0;
  std::vector<int> waiters;
};

/// A tensor copy waiting for its barrier's phase to end: the box's bytes, read at issue.
struct TensorCopy {
  size_t dst;  // shared-memory offset
  std::vector<unsigned char> bytes;
};

struct MBarrier {
  int count = 0, pending = 0;     // arrivals per phase, arrivals still missing in this phase
  long long tx = 0;               // announced bytes (expect_tx) not yet copied in
  unsigned completed = 0;         // phases ended
  std::vector<TensorCopy> copies;  // issued in this phase
  std::vector<int> waiters;
};

struct Block {
  unsigned nthreads = 0;
  unsigned long long bid = 0, grid = 0;
  std::vector<unsigned char> smem;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier bars[16];
  // Per 16-byte granule of shared memory: 1 + the thread whose cp.async wrote it and which has not issued
  // fence.proxy.async since, 0 otherwise. Warpgroup MMA reads its B operand through the async proxy, so a granule
  // still marked when wgmma reads it is a missing proxy fence (PTX ISA: memory consistency across proxies).
  // Ordinary stores are not tracked: the model catches the cp.async -> wgmma hand-off only.
  std::vector<uint16_t> async_unfenced;
  std::map<uint32_t, struct MBarrier> mbars;  // by shared-memory offset (mbar_init)
  const std::function<void()>* fn = nullptr;
  std::string error;
};

Block* g_block = nullptr;
Fiber* g_cur = nullptr;
void* g_sched_sp = nullptr;
unsigned char* g_stacks = nullptr;

struct EmuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void fail(const std::string& m) {
  if (g_block->error.empty()) g_block->error = m;
  // Stop this fiber for good; the scheduler sees the error and abandons the block.
  g_cur->state = kDone;
  dgps_emu_switch(&g_cur->sp, g_sched_sp);
}

void yield_blocked() {
  g_cur->state = kBlocked;
  dgps_emu_switch(&g_cur->sp, g_sched_sp);
}

void wake(std::vector<int>& w) {
  for (int t : w) g_block->fibers[t].state = kReady;
  w.clear();
}

/// Performs a committed group's copies; `writer` (null when the thread has exited) is the issuing thread, whose
/// granules stay marked for the async proxy until it fences.
void run_copies(std::vector<Copy>& g, Fiber* writer) {
  unsigned char* const sm = g_block->smem.data();
  for (const Copy& c : g) {
    if (c.valid) std::memcpy(c.dst, c.src, 16);
    else std::memset(c.dst, 0, 16);
    unsigned char* const d = static_cast<unsigned char*>(c.dst);
    if (writer == nullptr || d < sm || d >= sm + g_block->smem.size()) continue;
    const uint32_t granule = (uint32_t)((d - sm) / 16);
    g_block->async_unfenced[granule] = (uint16_t)(writer->tid + 1);
    writer->unfenced.push_back(granule);
  }
}

void finish_copies(Fiber& f) {
  if (getenv("DGPS_EMU_DEBUG") && (!f.open.empty() || !f.groups.empty())) fprintf(stderr, "emu: thread %u exits with %zu open / %zu committed cp.async groups (block %llu)\n", f.tid, f.open.size(), f.groups.size(), g_block->bid);
  if (!f.open.empty()) {
    f.groups.push_back(f.open);
    f.open.clear();
  }
  for (auto& g : f.groups) run_copies(g, nullptr);
  f.groups.clear();
}

void fiber_main() {
  (*g_block->fn)();
  finish_copies(*g_cur);
  g_cur->state = kDone;
  dgps_emu_switch(&g_cur->sp, g_sched_sp);
  std::abort();  // never resumed
}

void init_fiber(Fiber& f, unsigned char* stack) {
  f.stack = stack;
  uintptr_t top = reinterpret_cast<uintptr_t>(stack + kStack) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                    // fake return address of fiber_main
  *--sp = reinterpret_cast<void*>(&fiber_main);       // popped by `ret`
  for (int i = 0; i < 6; ++i) *--sp = nullptr;        // rbp rbx r12 r13 r14 r15
  f.sp = sp;
}

int live_in_warp(int w) {
  int n = 0;
  for (int t = 32 * w; t < 32 * w + 32 && t < (int)g_block->nthreads; ++t)
    if (g_block->fibers[t].state != kDone) ++n;
  return n;
}

template <class F>
void collective(int kind, const void* in, size_t n, void* out, size_t on, F compute) {
  const int t = (int)g_cur->tid, w = t / 32, ln = t % 32;
  Warp& W = g_block->warps[w];
  if (W.arrived == 0) W.kind = kind;
  else if (W.kind != kind) fail("divergent warp collective in warp " + std::to_string(w));
  const int par = W.gen & 1;
  std::memcpy(W.slots[par][ln].in, in, n);
  const unsigned my_gen = W.gen;
  ++W.arrived;
  if (live_in_warp(w) != 32) fail("warp collective with exited lanes in warp " + std::to_string(w));
  if (W.arrived == 32) {
    compute(W.slots[par]);
    W.arrived = 0;
    ++W.gen;
    wake(W.waiters);
  } else {
    W.waiters.push_back(t);
    while (W.gen == my_gen) yield_blocked();
  }
  std::memcpy(out, W.slots[par][ln].out, on);
}

uint16_t lo16(uint32_t x) { return (uint16_t)(x & 0xffffu); }
uint16_t hi16(uint32_t x) { return (uint16_t)(x >> 16); }

}  // namespace

unsigned thread_x() { return g_cur->tid; }
unsigned block_dim_x() { return g_block->nthreads; }
unsigned long long block_x() { return g_block->bid; }
unsigned long long grid_x() { return g_block->grid; }
unsigned char* dyn_smem() { return g_block->smem.data(); }

void bar_sync(int id, int count) {
  Barrier& b = g_block->bars[id];
  if (b.arrived == 0) b.expected = count;
  else if (b.expected != count) fail("barrier " + std::to_string(id) + " used with different counts");
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    wake(b.waiters);
  } else {
    b.waiters.push_back((int)g_cur->tid);
    yield_blocked();
  }
}
void bar_arrive(int id, int count) {
  Barrier& b = g_block->bars[id];
  if (b.arrived == 0) b.expected = count;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    wake(b.waiters);
  }
}
void sync_threads() {
  int live = 0;
  for (auto& f : g_block->fibers)
    if (f.state != kDone) ++live;
  bar_sync(0, live);
}
void sync_warp() {
  char dummy = 0;
  collective(1, &dummy, 1, &dummy, 1, [](Slot*) {});
}
float shfl_xor_f(float v, int m) {
  float r;
  collective(2, &v, 4, &r, 4, [m](Slot* s) {
    for (int l = 0; l < 32; ++l) std::memcpy(s[l].out, s[l ^ m].in, 4);
  });
  return r;
}
float shfl_f(float v, int src) {
  float r;
  int pl[2];
  std::memcpy(pl, &v, 4);
  pl[1] = src;
  collective(3, pl, 8, &r, 4, [](Slot* s) {
    for (int l = 0; l < 32; ++l) {
      int src2;
      std::memcpy(&src2, s[l].in + 4, 4);
      std::memcpy(s[l].out, s[src2 & 31].in, 4);
    }
  });
  return r;
}
float shfl_up_f(float v, int d) {
  float r;
  collective(4, &v, 4, &r, 4, [d](Slot* s) {
    for (int l = 0; l < 32; ++l) std::memcpy(s[l].out, s[l >= d ? l - d : l].in, 4);
  });
  return r;
}

float ex2(float x) { return std::exp2(x); }
float lg2(float x) { return std::log2(x); }
float rsqrt(float x) { return 1.0f / std::sqrt(x); }
float rcp(float x) { return 1.0f / x; }

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
float bf16_to_f32(uint16_t h) { return bits_float((uint32_t)h << 16); }
uint16_t f32_to_bf16(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float f16_to_f32(uint16_t h) {
  const uint32_t s = (h >> 15) & 1u, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) v = std::ldexp((float)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp((float)(m | 0x400u), (int)e - 25);
  return s ? -v : v;
}
uint16_t f32_to_f16(float x) {
  if (std::isnan(x)) return 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  float a = std::fabs(x);
  if (a >= 65520.f) return sign | 0x7c00;  // rounds to inf
  if (a < std::ldexp(1.f, -25)) return sign;  // rounds to 0 (ties-to-even at 2^-25 -> 0)
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp16 = e - 1 + 15;
  if (exp16 <= 0) {  // subnormal: units of 2^-24
    const float q = std::nearbyint(a * std::ldexp(1.f, 24));
    return sign | (uint16_t)q;
  }
  const float mant = a * std::ldexp(1.f, -(e - 1)) - 1.f;  // [0,1)
  float q = std::nearbyint(mant * 1024.f);
  if (q >= 1024.f) {
    q = 0.f;
    ++exp16;
  }
  if (exp16 >= 31) return sign | 0x7c00;
  return sign | (uint16_t)(exp16 << 10) | (uint16_t)q;
}

void ldsm_x4(uint32_t r[4], const void* p, bool trans) {
  const uint16_t* ptr = static_cast<const uint16_t*>(p);
  uint32_t out[4];
  collective(trans ? 6 : 5, &ptr, sizeof(ptr), out, sizeof(out), [trans](Slot* s) {
    for (int L = 0; L < 32; ++L) {
      uint32_t res[4];
      for (int i = 0; i < 4; ++i) {
        uint16_t e0, e1;
        if (!trans) {
          const uint16_t* row;
          std::memcpy(&row, s[8 * i + L / 4].in, sizeof(row));
          e0 = row[2 * (L % 4)];
          e1 = row[2 * (L % 4) + 1];
        } else {
          const uint16_t *r0, *r1;
          std::memcpy(&r0, s[8 * i + 2 * (L % 4)].in, sizeof(r0));
          std::memcpy(&r1, s[8 * i + 2 * (L % 4) + 1].in, sizeof(r1));
          e0 = r0[L / 4];
          e1 = r1[L / 4];
        }
        res[i] = (uint32_t)e0 | ((uint32_t)e1 << 16);
      }
      std::memcpy(s[L].out, res, sizeof(res));
    }
  });
  std::memcpy(r, out, sizeof(out));
}

void stsm_x4_trans(void* p, const uint32_t r[4]) {
  unsigned char pl[sizeof(void*) + 16];
  std::memcpy(pl, &p, sizeof(p));
  std::memcpy(pl + sizeof(p), r, 16);
  unsigned char none = 0;
  collective(9, pl, sizeof(pl), &none, 1, [](Slot* s) {
    // lane L's register i holds (row L/4, cols 2(L%4), 2(L%4)+1) of matrix i; transposed, they land in the rows
    // addressed by lanes 8i + 2(L%4) and 8i + 2(L%4) + 1, at column L/4 (the inverse of ldmatrix .trans)
    for (int L = 0; L < 32; ++L) {
      uint32_t reg[4];
      std::memcpy(reg, s[L].in + sizeof(void*), 16);
      for (int i = 0; i < 4; ++i) {
        uint16_t *r0, *r1;
        std::memcpy(&r0, s[8 * i + 2 * (L % 4)].in, sizeof(r0));
        std::memcpy(&r1, s[8 * i + 2 * (L % 4) + 1].in, sizeof(r1));
        r0[L / 4] = lo16(reg[i]);
        r1[L / 4] = hi16(reg[i]);
      }
    }
  });
}

void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  uint32_t in[6] = {a[0], a[1], a[2], a[3], b0, b1};
  unsigned char pl[40];
  std::memcpy(pl, in, 24);
  std::memcpy(pl + 24, d, 16);
  float out[4];
  collective(7, pl, 40, out, 16, [](Slot* s) {
    float A[16][16], B[16][8], Cm[16][8];
    for (int L = 0; L < 32; ++L) {
      uint32_t r[6];
      float c[4];
      std::memcpy(r, s[L].in, 24);
      std::memcpy(c, s[L].in + 24, 16);
      const int g = L / 4, t = L % 4;
      A[g][2 * t] = bf16_to_f32(lo16(r[0]));
      A[g][2 * t + 1] = bf16_to_f32(hi16(r[0]));
      A[g + 8][2 * t] = bf16_to_f32(lo16(r[1]));
      A[g + 8][2 * t + 1] = bf16_to_f32(hi16(r[1]));
      A[g][2 * t + 8] = bf16_to_f32(lo16(r[2]));
      A[g][2 * t + 9] = bf16_to_f32(hi16(r[2]));
      A[g + 8][2 * t + 8] = bf16_to_f32(lo16(r[3]));
      A[g + 8][2 * t + 9] = bf16_to_f32(hi16(r[3]));
      B[2 * t][g] = bf16_to_f32(lo16(r[4]));
      B[2 * t + 1][g] = bf16_to_f32(hi16(r[4]));
      B[2 * t + 8][g] = bf16_to_f32(lo16(r[5]));
      B[2 * t + 9][g] = bf16_to_f32(hi16(r[5]));
      Cm[g][2 * t] = c[0];
      Cm[g][2 * t + 1] = c[1];
      Cm[g + 8][2 * t] = c[2];
      Cm[g + 8][2 * t + 1] = c[3];
    }
    for (int L = 0; L < 32; ++L) {
      const int g = L / 4, t = L % 4;
      float o[4];
      for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        double acc = Cm[row][col];
        for (int k = 0; k < 16; ++k) acc += (double)A[row][k] * (double)B[k][col];
        o[e] = (float)acc;
      }
      std::memcpy(s[L].out, o, 16);
    }
  });
  std::memcpy(d, out, 16);
}

uint32_t smem_u32(const void* p) {
  const unsigned char* b = g_block->smem.data();
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (q < b || q >= b + g_block->smem.size()) fail("smem_u32 of a pointer outside shared memory");
  return (uint32_t)(q - b);
}

void wgmma(float* d, int n, const uint32_t a[4], uint64_t desc, bool mn_major) {
  // B(k, n) of the K=16 slice: core matrix (k/8, n/8) at start + (k/8)·LBO + (n/8)·SBO. K-major: row n%8 at
  // +16·(n%8), element k%8 at +2·(k%8); MN-major (transposed B): row k%8 at +16·(k%8), element n%8 at
  // +2·(n%8) (no swizzle). Each warp's 16 rows depend only on its own A fragments.
  const uint32_t start = (uint32_t)(desc & 0x3FFFu) << 4;
  const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFFu) << 4;
  const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3FFFu) << 4;
  if ((desc >> 62) != 0) fail("emu wgmma: only the no-swizzle layout is emulated");
  if (n % 8 != 0 || n > 128) fail("emu wgmma: unsupported N");
  const size_t nb = (size_t)(n / 2) * 4;
  unsigned char pl[16 + 256];
  std::memcpy(pl, a, 16);
  std::memcpy(pl + 16, d, nb);
  float out[64];
  const unsigned char* sm = g_block->smem.data();
  const size_t smsz = g_block->smem.size();
  long unfenced_at = -1;  // a B byte offset whose granule cp.async wrote without a later proxy fence
  unsigned unfenced_by = 0;
  collective(8, pl, 16 + nb, out, nb, [&](Slot* s) {
    float A16[16][16];
    for (int L = 0; L < 32; ++L) {
      uint32_t r[4];
      std::memcpy(r, s[L].in, 16);
      const int g = L / 4, t = L % 4;
      A16[g][2 * t] = bf16_to_f32(lo16(r[0]));
      A16[g][2 * t + 1] = bf16_to_f32(hi16(r[0]));
      A16[g + 8][2 * t] = bf16_to_f32(lo16(r[1]));
      A16[g + 8][2 * t + 1] = bf16_to_f32(hi16(r[1]));
      A16[g][2 * t + 8] = bf16_to_f32(lo16(r[2]));
      A16[g][2 * t + 9] = bf16_to_f32(hi16(r[2]));
      A16[g + 8][2 * t + 8] = bf16_to_f32(lo16(r[3]));
      A16[g + 8][2 * t + 9] = bf16_to_f32(hi16(r[3]));
    }
    std::vector<float> B((size_t)16 * n);
    for (int k = 0; k < 16; ++k)
      for (int c = 0; c < n; ++c) {
        const uint32_t in_core = mn_major ? (uint32_t)(k % 8) * 16 + (uint32_t)(c % 8) * 2
                                          : (uint32_t)(c % 8) * 16 + (uint32_t)(k % 8) * 2;
        const uint32_t off = start + (uint32_t)(k / 8) * lbo + (uint32_t)(c / 8) * sbo + in_core;
        uint16_t bv = 0x7fc0;
        if (off + 2 <= smsz) std::memcpy(&bv, sm + off, 2);
        if (off + 2 <= smsz && unfenced_at < 0 && g_block->async_unfenced[off / 16] != 0) {
          unfenced_at = off;
          unfenced_by = g_block->async_unfenced[off / 16] - 1u;
        }
        B[(size_t)k * n + c] = bf16_to_f32(bv);
      }
    for (int L = 0; L < 32; ++L) {
      const int g = L / 4, t = L % 4;
      float dl[64];
      std::memcpy(dl, s[L].in + 16, nb);
      for (int i = 0; i < n / 8; ++i)
        for (int e = 0; e < 4; ++e) {
          const int row = g + 8 * (e >> 1), col = 8 * i + 2 * t + (e & 1);
          double acc = dl[4 * i + e];
          for (int k = 0; k < 16; ++k) acc += (double)A16[row][k] * (double)B[(size_t)k * n + col];
          dl[4 * i + e] = (float)acc;
        }
      std::memcpy(s[L].out, dl, nb);
    }
  });
  if (unfenced_at >= 0)
    fail("wgmma reads shared memory at byte " + std::to_string(unfenced_at) + " that thread " +
         std::to_string(unfenced_by) + " filled by cp.async without a fence.proxy.async before the hand-off");
  std::memcpy(d, out, nb);
}

void cp_async16(void* smem, const void* gmem, bool valid) {
  const uintptr_t sa = reinterpret_cast<uintptr_t>(smem), ga = reinterpret_cast<uintptr_t>(gmem);
  if ((sa & 15) || (valid && (ga & 15))) fail("cp.async with a misaligned 16-byte address");
  g_cur->open.push_back({smem, gmem, valid});
}
void fence_proxy_async() {
  for (uint32_t granule : g_cur->unfenced)
    if (g_block->async_unfenced[granule] == g_cur->tid + 1) g_block->async_unfenced[granule] = 0;
  g_cur->unfenced.clear();
}
void cp_async_commit() {
  g_cur->groups.push_back(g_cur->open);
  g_cur->open.clear();
}
void cp_async_wait(int n) {
  while ((int)g_cur->groups.size() > n) {
    run_copies(g_cur->groups.front(), g_cur);
    g_cur->groups.erase(g_cur->groups.begin());
  }
}

namespace {
MBarrier& mbar_at(void* bar, const char* what) {
  const uint32_t off = smem_u32(bar);
  if (off % 8 != 0) fail(std::string(what) + ": mbarrier address not 8-byte aligned");
  auto it = g_block->mbars.find(off);
  if (it == g_block->mbars.end()) fail(std::string(what) + " on an mbarrier that was never initialised");
  return it->second;
}

/// Lands the phase's copies once every arrival is in, and ends the phase when their bytes make up the announced
/// transactions (more bytes than announced is an error, as on the GPU). Called by waiters only: a copy's bytes
/// reach shared memory no earlier than a wait on its barrier, so a reader that skips the wait sees old contents.
void mbar_progress(MBarrier& m) {
  if (m.pending > 0) return;
  for (TensorCopy& c : m.copies) {
    std::memcpy(g_block->smem.data() + c.dst, c.bytes.data(), c.bytes.size());
    m.tx -= (long long)c.bytes.size();
  }
  m.copies.clear();
  if (m.tx < 0) fail("mbarrier: tensor copies completed more bytes than expect_tx announced");
  if (m.tx > 0) return;
  ++m.completed;
  m.pending = m.count;
  wake(m.waiters);
}
}  // namespace

void mbar_init(void* bar, int count) {
  const uint32_t off = smem_u32(bar);
  if (off % 8 != 0) fail("mbar_init: mbarrier address not 8-byte aligned");
  if (count <= 0) fail("mbar_init: count must be positive");
  MBarrier& m = g_block->mbars[off];
  m = MBarrier{};
  m.count = m.pending = count;
}
void mbar_expect_tx(void* bar, uint32_t bytes) { mbar_at(bar, "mbar_expect_tx").tx += bytes; }
void mbar_arrive(void* bar) {
  MBarrier& m = mbar_at(bar, "mbar_arrive");
  if (m.pending <= 0) fail("mbar_arrive: more arrivals than the barrier's count in one phase");
  if (--m.pending == 0) wake(m.waiters);  // they land the copies (mbar_progress)
}
void mbar_wait(void* bar, uint32_t parity) {
  MBarrier& m = mbar_at(bar, "mbar_wait");
  while ((m.completed & 1u) == (parity & 1u)) {
    mbar_progress(m);
    if ((m.completed & 1u) != (parity & 1u)) break;
    m.waiters.push_back((int)g_cur->tid);
    yield_blocked();
  }
}

// The emulator's tensor map: [0] magic, [1] base, [2] rank | elem_bytes << 8 | swizzle_bytes << 16, [3..7] dims,
// [8..11] strides, [12..14] box sides (two per word).
constexpr uint64_t kMapMagic = 0x64677073544d4150ull;  // "dgpsTMAP"

void encode_tensor_map(uint64_t map[16], const void* base, int rank, const unsigned long long* dims,
                       const unsigned long long* strides, const unsigned* box, int elem_bytes, int swizzle_bytes) {
  std::memset(map, 0, 16 * sizeof(uint64_t));
  if (rank < 1 || rank > 5) throw std::invalid_argument("encode_tensor_map: rank must be 1..5");
  if (swizzle_bytes != 0 && swizzle_bytes != 32)
    throw std::invalid_argument("encode_tensor_map: the emulator models no swizzle or the 32-byte one");
  // as cuTensorMapEncodeTiled: a swizzled box's inner side must fit in the swizzle span
  if (swizzle_bytes != 0 && box[0] * (unsigned)elem_bytes > (unsigned)swizzle_bytes)
    throw std::invalid_argument("encode_tensor_map: inner box side wider than the swizzle span");
  map[0] = kMapMagic;
  map[1] = reinterpret_cast<uint64_t>(base);
  map[2] = (uint64_t)rank | ((uint64_t)elem_bytes << 8) | ((uint64_t)swizzle_bytes << 16);
  for (int i = 0; i < rank; ++i) map[3 + i] = dims[i];
  for (int i = 0; i + 1 < rank; ++i) map[8 + i] = strides[i];
  for (int i = 0; i < rank; ++i) map[12 + i / 2] |= (uint64_t)box[i] << (32 * (i % 2));
}

unsigned long long g_tensor_copies = 0;
unsigned long long tensor_copies_issued() { return g_tensor_copies; }

void tensor_copy(void* dst, const uint64_t* map, const int* coords, int rank, void* bar) {
  ++g_tensor_copies;
  if (map[0] != kMapMagic) fail("tensor_copy: the tensor map was not encoded (encode_tensor_map)");
  if ((int)(map[2] & 0xff) != rank) fail("tensor_copy: coordinate count differs from the map's rank");
  const size_t off = smem_u32(dst);
  if (off % 128 != 0) fail("tensor_copy: shared-memory destination not 128-byte aligned");
  const int eb = (int)((map[2] >> 8) & 0xff), swizzle = (int)((map[2] >> 16) & 0xff);
  const unsigned char* base = reinterpret_cast<const unsigned char*>(map[1]);
  unsigned box[5] = {1, 1, 1, 1, 1};
  size_t n = 1;
  for (int i = 0; i < rank; ++i) {
    box[i] = (unsigned)(map[12 + i / 2] >> (32 * (i % 2)));
    n *= box[i];
  }
  if (off + n * eb > g_block->smem.size()) fail("tensor_copy: the box runs past shared memory");
  TensorCopy c;
  c.dst = off;
  c.bytes.assign(n * eb, 0);
  // The 32-byte swizzle acts on the shared-memory address (bit 4 ^= bit 7), so the box's bytes are placed by
  // their absolute offset, as the copy engine places them.
  auto place = [&](size_t e) {
    const size_t at = off + e * eb;
    return (swizzle == 32 ? at ^ (((at >> 7) & 1) << 4) : at) - off;
  };
  for (size_t e = 0; e < n; ++e) {
    size_t rest = e;
    long long src = 0;
    bool in = true;
    for (int i = 0; i < rank; ++i) {
      const long long x = coords[i] + (long long)(rest % box[i]);
      rest /= box[i];
      in = in && x >= 0 && x < (long long)map[3 + i];
      src += i == 0 ? x * eb : x * (long long)map[8 + i - 1];
    }
    if (in) std::memcpy(c.bytes.data() + place(e), base + src, eb);
  }
  MBarrier& m = mbar_at(bar, "tensor_copy");
  m.copies.push_back(std::move(c));
  wake(m.waiters);
}

namespace {

/// How the scheduler resumes a block's ready threads, from DGPS_EMU_ORDER:
///   forward (the default): round robin from thread 0;  reverse: round robin from the last thread;
///   shuffle: round robin in a permutation drawn per block from DGPS_EMU_SEED (default 1);
///   greedy / greedy-reverse: always the first (last) ready thread, so its warp runs on until every one of its
///   lanes waits at a CTA barrier before the next warp moves.
/// A kernel missing a barrier reads a value before or after its writer ran depending on this order: round robin
/// lets every thread finish its reads before any warp is one collective further, while greedy runs one warp far
/// ahead (a missing barrier between two uses of one shared scratch shows there). A check run under several orders
/// catches races that the default order alone lets pass.
struct Schedule {
  std::vector<unsigned> order;
  bool greedy = false;
};

Schedule schedule_order(unsigned block, unsigned long long bid) {
  Schedule s;
  s.order.resize(block);
  for (unsigned t = 0; t < block; ++t) s.order[t] = t;
  const char* env = getenv("DGPS_EMU_ORDER");
  const std::string mode = env == nullptr ? "forward" : env;
  if (mode == "forward") return s;
  if (mode == "reverse" || mode == "greedy-reverse") std::reverse(s.order.begin(), s.order.end());
  s.greedy = mode == "greedy" || mode == "greedy-reverse";
  if (mode == "shuffle") {
    const char* seed = getenv("DGPS_EMU_SEED");
    std::mt19937_64 rng((seed != nullptr ? std::strtoull(seed, nullptr, 10) : 1ull) * 0x9E3779B97F4A7C15ull + bid);
    std::shuffle(s.order.begin(), s.order.end(), rng);
  } else if (mode != "reverse" && !s.greedy) {
    fprintf(stderr, "emu: DGPS_EMU_ORDER is '%s'; expected forward, reverse, shuffle, greedy or greedy-reverse\n",
            mode.c_str());
    std::exit(2);
  }
  return s;
}

}  // namespace

bool launch(const std::function<void()>& kernel, unsigned long long grid, unsigned block, size_t smem, char* err,
            size_t errlen) {
  if (block == 0 || block > (unsigned)kMaxThreads || block % 32 != 0) {
    std::snprintf(err, errlen, "emu: block size %u not supported", block);
    return false;
  }
  if (g_stacks == nullptr) {
    g_stacks = static_cast<unsigned char*>(mmap(nullptr, kStack * kMaxThreads, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (g_stacks == MAP_FAILED) {
      std::snprintf(err, errlen, "emu: cannot map fiber stacks");
      return false;
    }
  }
  for (unsigned long long b = 0; b < grid; ++b) {
    Block blk;
    blk.nthreads = block;
    blk.bid = b;
    blk.grid = grid;
    blk.smem.assign(smem + 4096, 0xFF);
    blk.async_unfenced.assign((blk.smem.size() + 15) / 16, 0);
    std::memset(blk.smem.data() + smem, 0xAB, 4096);  // canary: kernels must stay inside their dynamic smem
    blk.fibers.resize(block);
    blk.warps.resize(block / 32);
    blk.fn = &kernel;
    for (unsigned t = 0; t < block; ++t) {
      blk.fibers[t].tid = t;
      init_fiber(blk.fibers[t], g_stacks + (size_t)t * kStack);
    }
    g_block = &blk;
    const Schedule sched = schedule_order(block, b);
    for (;;) {
      bool progress = false, all_done = true;
      for (unsigned t : sched.order) {
        Fiber& f = blk.fibers[t];
        if (f.state == kDone) continue;
        all_done = false;
        if (f.state != kReady) continue;
        progress = true;
        g_cur = &f;
        dgps_emu_switch(&g_sched_sp, f.sp);
        if (!blk.error.empty() || sched.greedy) break;  // greedy: scan again from the first thread
      }
      if (!blk.error.empty()) {
        std::snprintf(err, errlen, "emu: block %llu: %s", b, blk.error.c_str());
        g_block = nullptr;
        return false;
      }
      if (all_done) {
        for (size_t i = smem; i < smem + 4096; ++i)
          if (blk.smem[i] != 0xAB) {
            std::snprintf(err, errlen, "emu: block %llu wrote shared memory beyond its %zu dynamic bytes (offset %zu)", b,
                          smem, i);
            g_block = nullptr;
            return false;
          }
        break;
      }
      if (!progress) {
        int blocked = 0;
        for (auto& f : blk.fibers) blocked += f.state == kBlocked;
        std::snprintf(err, errlen, "emu: block %llu: deadlock (%d threads blocked at a barrier/collective)", b, blocked);
        g_block = nullptr;
        return false;
      }
    }
    g_block = nullptr;
  }
  return true;
}

}  // namespace dgps_emu
