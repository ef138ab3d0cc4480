// CPU emulator of the CUDA execution model for the DGPS kernels (tests only). Every CUDA thread runs as a
// fiber on one OS thread; barriers and warp-collective operations (shuffles, ldmatrix, mma.sync) switch
// fibers. Semantics follow the PTX ISA: fragment layouts of ldmatrix/stmatrix/mma.m16n8k16, cp.async completing at
// cp.async.wait_group (zero-fill when the source size is 0), and the proxy fence that hands cp.async tiles to
// warpgroup MMA. Used to debug the kernels on a machine without a
// GPU; divergent collectives, deadlocks and exited lanes in collectives are reported as errors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace dgps_emu {

unsigned thread_x();
unsigned block_dim_x();
unsigned long long block_x();
unsigned long long grid_x();
unsigned char* dyn_smem();
void sync_threads();
void sync_warp();
void bar_sync(int id, int count);
void bar_arrive(int id, int count);
float shfl_xor_f(float v, int m);
float shfl_f(float v, int src);
float shfl_up_f(float v, int d);
float ex2(float x);
float lg2(float x);
float rsqrt(float x);
float rcp(float x);
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
uint16_t f32_to_f16(float x);
uint32_t float_bits(float x);
float bits_float(uint32_t x);
void ldsm_x4(uint32_t r[4], const void* p, bool trans);
/// stmatrix .x4 .trans: the inverse of ldmatrix .x4 .trans (lane l supplies the row address of matrix l/8, row l%8).
void stsm_x4_trans(void* p, const uint32_t r[4]);
void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
void cp_async16(void* smem, const void* gmem, bool valid);
uint32_t smem_u32(const void* p);
/// wgmma m64nNk16 (bf16 -> f32) for this warp's 16 rows: d[N/2] += A(fragments) x B(descriptor); B K-major,
/// or MN-major (the transposed form, imm-trans-b = 1) when mn_major.
void wgmma(float* d, int n, const uint32_t a[4], uint64_t desc, bool mn_major = false);
/// fence.proxy.async.shared::cta: this thread's cp.async writes become visible to warpgroup MMA (the async proxy).
/// wgmma fails the launch when it reads a granule another thread's cp.async wrote without this fence after it.
void fence_proxy_async();
void cp_async_commit();
void cp_async_wait(int n);

/// mbarrier of shared memory (PTX ISA, mbarrier): a phase ends when `count` arrivals have been made and every
/// transaction byte announced by expect_tx has been copied in; mbar_wait(parity) returns once the phase of that
/// parity has ended. The emulator keeps the barrier's state beside the block, not in the 8 bytes at `bar`.
void mbar_init(void* bar, int count);
void mbar_expect_tx(void* bar, uint32_t bytes);
void mbar_arrive(void* bar);
void mbar_wait(void* bar, uint32_t parity);
/// A tensor copy (cp.async.bulk.tensor, tile mode) of the box at `coords` of a map written by encode_tensor_map;
/// out-of-bounds elements read as 0. The bytes land in shared memory only when the barrier's phase ends (the
/// copy completes its box bytes then), so a reader that skips mbar_wait sees the old contents.
void tensor_copy(void* dst, const uint64_t* map, const int* coords, int rank, void* bar);
/// The emulator's own encoding of a tensor map (the driver's format is opaque): base address, dims (innermost
/// first), byte strides of dims 1.., box sides, element size, swizzle span (0 none, or 32: the copy flips
/// shared-memory address bit 4 with bit 7, as CU_TENSOR_MAP_SWIZZLE_32B). rank <= 5.
void encode_tensor_map(uint64_t map[16], const void* base, int rank, const unsigned long long* dims,
                       const unsigned long long* strides, const unsigned* box, int elem_bytes,
                       int swizzle_bytes = 0);
/// Tensor copies issued since the process started (a test's evidence that the copy path ran).
unsigned long long tensor_copies_issued();

/// Runs `kernel` (called once per thread) over grid x block threads (resumed in the order DGPS_EMU_ORDER names:
/// forward, reverse, shuffle, greedy or greedy-reverse; emu.cpp schedule_order) with `smem` bytes of dynamic shared
/// memory (filled with 0xFF so reads of unwritten smem give NaN). Returns false and fills `err` on a detected
/// error (deadlock, divergent collective).
bool launch(const std::function<void()>& kernel, unsigned long long grid, unsigned block, size_t smem, char* err,
            size_t errlen);

}  // namespace dgps_emu
