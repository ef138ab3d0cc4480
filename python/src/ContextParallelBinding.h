// dgps._dgps's context parallelism: one rank's forward over its contiguous piece of a packed batch
// (runtime/include/dgps/runtime/ContextParallelForward.h, docs/context_parallel.md). The all-gather between
// the phases is the caller's (python/dgps/_context_parallel.py runs it on a torch.distributed group).
//
//   cp_equal_bounds(T, G) -> [G+1]            cp::equalRankBounds: ⌈T/G⌉ tokens per rank
//   CpPlan(cu_seqlens, bounds)                cp::makePlan (global cu_seqlens [N+1], rank bounds [G+1])
//     .ranks .num_docs .tokens .cu_seqlens .initial_state_rank .final_state_rank .crossing_doc
//     .rank(r) -> {"begin", "end", "local_cu_seqlens", "continues_in", "continues_out", "fold_from",
//                  "fragments": [(doc, begin, end), ...]}
//   cp_slot_elements(N, HV, K, V) -> int      floats in one rank's slot (memorySummaryLayout: M then E)
//   Runtime.cp_workspace_bytes(package, plan, rank, views, config)
//   Runtime.cp_publish(package, plan, rank, views, send, stream, config)               phase 1
//   Runtime.cp_run(package, plan, rank, views, gathered, doc_initial, doc_final,
//                  local_initial, local_final, stream, config)                         phase 2
//
// `views` are the piece's 15 forward slots (TensorArgs.h): its tokens as B = 1, T = end − begin, cu_seqlens
// the plan's local_cu_seqlens (i64, on the device), and in the initial_state / final_state slots the
// rank's scratch local_initial / local_final [n, HV, K, V] f32 (n = fragments; phase 1 ignores them, phase 2
// runs from and into them). `send` is this rank's slot, f32 [cp_slot_elements]; `gathered` the G slots in
// rank order, f32 [G, cp_slot_elements] (None when the rank continues no document); doc_initial / doc_final
// [N, HV, K, V] f32 or None. Every buffer is device memory of the piece's device.
// Errors: dgps.InvalidArgument (nothing launched) naming the call, the rank and the bad argument; a
// malformed cu_seqlens or bounds names the bad value (cp::makePlan); then the runtime's launch errors.
#pragma once

#include <pybind11/pybind11.h>

namespace dgps::python {

class PyRuntime;

/// Adds cp_equal_bounds, CpPlan and cp_slot_elements to the module.
void registerContextParallel(pybind11::module_& m);

/// Adds the cp_* methods to the module's Runtime class.
void registerContextParallelMethods(pybind11::class_<PyRuntime>& runtime);

}  // namespace dgps::python
