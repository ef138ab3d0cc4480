// --chunk-derive-backward refuses what it does not derive, with one error each: a fused preconditioner
// (derive before --chunk-fuse-preconditioner), a partitioned forward, an unknown keep name, and a module
// with no forward. The OSDN preconditioner's refusal is tested through dgpsc (osdn.test).
// RUN: not %dgps-opt %S/../Inputs/pgdn.mlir --dgps-lower-to-chunk --canonicalize --chunk-fuse-preconditioner --chunk-derive-backward 2>&1 | %FileCheck %s --check-prefix=FUSED
// RUN: not %dgps-opt %S/../Inputs/gdn.mlir --dgps-lower-to-chunk --canonicalize --chunk-partition-kernels --chunk-derive-backward -mlir-print-op-on-diagnostic=false 2>&1 | %FileCheck %s --check-prefix=PARTITIONED
// RUN: not %dgps-opt %S/../Inputs/gdn.mlir --dgps-lower-to-chunk --chunk-derive-backward=keep=l2norm.k 2>&1 | %FileCheck %s --check-prefix=KEEP
// RUN: not %dgps-opt %S/../Inputs/gdn.mlir --chunk-derive-backward 2>&1 | %FileCheck %s --check-prefix=NOFWD
// RUN: not %dgps-opt %S/../Inputs/gdn.mlir --dgps-lower-to-chunk --chunk-partition-backward 2>&1 | %FileCheck %s --check-prefix=NOBWD

// FUSED: error: backward is derived from the unfused preconditioner scan; run --chunk-derive-backward before --chunk-fuse-preconditioner
// FUSED-NOT: error:
// PARTITIONED: error: forward is already partitioned; run --chunk-derive-backward before --chunk-partition-kernels
// KEEP: error: --chunk-derive-backward keep: 'l2norm.k' is not a forward intermediate the forward can store; expected one of solve_tril,
// NOFWD: error: no forward function (func.func with chunk.chunk_size) to differentiate; run --dgps-lower-to-chunk first
// NOBWD: error: no backward function (func.func with chunk.backward_of); run --chunk-derive-backward first
