// The typed tile library (README.md in this folder): everything the tile emitter's kernels call.
#pragma once

#include "dgps/device/base.cuh"  // the ABI, configuration, launch contract and device primitives
#include "dgps/tile/elementwise.cuh"
#include "dgps/tile/frag.cuh"
#include "dgps/tile/reduce.cuh"
#include "dgps/tile/split_vec.cuh"
#include "dgps/tile/update.cuh"
// chunk roles (tiles over the rows of one chunk)
#include "dgps/tile/channel_scan.cuh"
#include "dgps/tile/chunk_rows.cuh"
#include "dgps/tile/gated_rows.cuh"
#include "dgps/tile/lower_product.cuh"
#include "dgps/tile/lower_product_gated.cuh"
#include "dgps/tile/row_map.cuh"
#include "dgps/tile/row_norm.cuh"
#include "dgps/tile/scan.cuh"
#include "dgps/tile/token_record.cuh"
#include "dgps/tile/tri_solve.cuh"
// chunk summaries of a per-channel scan and the scan over chunks (precond roles)
#include "dgps/tile/channel_scan_total.cuh"
#include "dgps/tile/chunk_affine_scan.cuh"
// the feedback scan (a diagonal recurrence whose step coefficient reads the state): chunked (a chunk's summary,
// the pass over chunks) or token by token
#include "dgps/tile/feedback_scan_pass.cuh"
#include "dgps/tile/feedback_scan_summary.cuh"
#include "dgps/tile/feedback_token_scan.cuh"
// state roles (a register state walked over the chunks)
#include "dgps/tile/lower_readout.cuh"
#include "dgps/tile/lower_tile.cuh"
#include "dgps/tile/state_frag.cuh"
#include "dgps/tile/state_rank_update.cuh"
#include "dgps/tile/state_rows_product.cuh"
#include "dgps/tile/value_residual.cuh"
#include "dgps/tile/state_fold.cuh"
#include "dgps/tile/segment_slots.cuh"
#include "dgps/tile/stage_copy.cuh"
// warp specialisation: producer warps beside the consumer warps, with their register budgets
#include "dgps/tile/warp_split.cuh"
