// The typed tile library (README.md in this folder): everything the tile emitter's kernels call.
#pragma once

#include "dgps/tile/elementwise.cuh"
#include "dgps/tile/frag.cuh"
#include "dgps/tile/reduce.cuh"
#include "dgps/tile/split_vec.cuh"
#include "dgps/tile/update.cuh"
