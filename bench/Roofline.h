// The roofline of one timed row: the time a kernel moving the package plan's bytes and doing its FLOPs
// could not beat on this GPU, max(bytes / peak bandwidth, FLOPs / peak FLOP rate), and which of the two
// bounds it ("mem" or "compute"). dgps-bench prints it on every row with "% roofline" = roofline / measured.
//
// Bytes: the compiler's plan (manifest plan.bytes_per_token_head x B*T*HV: the traffic the emitted kernels
// are designed to make, states and intermediates included) when the plan was costed at the shape's K and V
// (the compiler costs at the largest supported K and V; Floors.h says the same of the FLOPs); otherwise,
// and for decode (the plan costs the chunked forward), the bytes floor of Floors.h.
// FLOPs: the row's FLOP count (Floors.h: the manifest plan's when it applies).
#pragma once

#include <string>

#include "Shapes.h"

namespace dgps {
namespace bench {

/// Peak rates of a GPU, from its datasheet (not measured: the measured copy bandwidth has its own column).
struct DevicePeaks {
  double bytes_per_s = 0;  ///< DRAM bandwidth, bytes per second
  double flops_per_s = 0;  ///< dense BF16 tensor-core rate, FLOP per second
  const char* source = "";
};

/// NVIDIA H200 SXM (141 GB HBM3e), NVIDIA's H200 datasheet: memory bandwidth 4.8 TB/s; BF16/FP16 tensor
/// core 1,979 TFLOP/s with 2:4 structured sparsity, so 989.5 TFLOP/s dense (the kernels are dense). Our
/// measured rates are lower (docs/performance.md: copy 4.25 TB/s, bf16 GEMM about 790 TFLOP/s).
inline constexpr DevicePeaks kH200Peaks{4.8e12, 989.5e12, "H200 SXM datasheet: 4.8 TB/s HBM3e, 989.5 TFLOP/s dense BF16"};

struct Roofline {
  double memory_ms = 0;   ///< bytes / peak bandwidth
  double compute_ms = 0;  ///< FLOPs / peak FLOP rate
  double ms() const { return memory_ms > compute_ms ? memory_ms : compute_ms; }
  const char* bound() const { return memory_ms >= compute_ms ? "mem" : "compute"; }
};

Roofline roofline(double bytes, double flops, const DevicePeaks& peaks);

/// Bytes the roofline counts for `package` at `shape` (see above); *source says which ("manifest plan" or
/// "bytes floor").
double rooflineBytes(const Package& package, const BenchShape& shape, std::string* source);

}  // namespace bench
}  // namespace dgps
