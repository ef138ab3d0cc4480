//===- ChunkStepOps.td - several Householder steps per token ----*- tablegen -*-===//
//
// Gated DeltaProduct (docs/math.md §3.7) takes n_h delta-rule steps per token. The chunkwise
// algorithm runs unchanged over the sequence of T·n_h steps (dim T, token-major: step row t·n_h + j
// is step j of token t); the per-token tensors (dim TQ) enter and leave it through these two ops:
// the decay gate sits on a token's first step (the others get a zero log-decay), the query on its
// last (the others read nothing), and the output is that last step's row.
// Included by ChunkOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef DGPS_DIALECT_CHUNK_IR_STEP_OPS_TD
#define DGPS_DIALECT_CHUNK_IR_STEP_OPS_TD

def Chunk_SpreadStepsOp : Chunk_PureOp<"spread_steps"> {
  let summary = "a per-token tensor placed on one Householder step of each token, zero on the others";
  let description = [{
    input [B,TQ,...] → result [B,T,...] (T = TQ·steps rows, same trailing dims):
      result[b, t·steps + j, ...] = input[b, t, ...] if j == step, else 0.
    `steps` (n_h >= 2) is the function's chunk.householder_steps; `step` in [0, steps).
    A zero gate row is a decay of exp(0) = 1 and a zero query row reads nothing, so the gate is
    spread to step 0 and the query to step n_h − 1.
  }];
  let arguments = (ins Chunk_AnyTensor:$input, I64Attr:$steps, I64Attr:$step);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Chunk_GatherStepsOp : Chunk_PureOp<"gather_steps"> {
  let summary = "the rows of one Householder step of each token: a per-step tensor back to per-token";
  let description = [{
    input [B,T,...] → result [B,TQ,...] (T = TQ·steps): result[b, t, ...] = input[b, t·steps + step, ...].
    The output o of a multi-step recurrence is the output op's row at each token's last step.
  }];
  let arguments = (ins Chunk_AnyTensor:$input, I64Attr:$steps, I64Attr:$step);
  let results = (outs Chunk_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

#endif
