// Where a context-parallel plan (dgps/dsl/ContextParallelPlan.h) meets the collective that runs it
// (Collective.h): the all-gather of the ranks' summary slots. docs/context_parallel.md.
#pragma once

#include <cstddef>

#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/Collective.h"

namespace dgps {

/// All-gathers one summary slot per rank on `stream`: `send` is this rank's slot (layout.slotElements()
/// elements of `elementBytes` each: 4 for the device's fp32, 8 for the float64 tests; sent even when the
/// rank publishes nothing, since the gather is fixed-size), `recv` receives plan.ranks slots in rank order
/// and holds `recvBytes`. Throws RuntimeError{InvalidArgument} when the collective's size is not
/// plan.ranks ("rank mismatch"), when recvBytes is not plan.ranks slots, or when elementBytes is 0; then
/// as Collective::allGather.
void gatherSummaries(Collective& collective, const cp::Plan& plan, const cp::SummaryLayout& layout,
                     std::size_t elementBytes, const void* send, void* recv, std::size_t recvBytes, CUstream stream);

}  // namespace dgps
