// `dgps-spec inputs` and `dgps-spec compare`: making input files and checking output files from the command
// line, so a user can run the float64 reference (`dgps-spec reference`) and the GPU (`dgps-run`) on the same
// inputs and compare the two. Both return the process exit status: 0 success, 1 bad spec, bad file, bad
// argument value, or (compare) a tolerance exceeded / a tensor missing or misshapen; messages go to `err`,
// one per problem. Neither throws.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "dgps/dsl/TensorCompare.h"

namespace dgps {

struct InputsCommandOptions {
  std::string spec_path;
  std::string shape;       ///< --shape, e.g. "B=8,T=4096,H=16,K=128,V=128" (ShapeArg.h); T may be left out
                           ///< with cu_seqlens (then T = cu[N])
  std::string cu_seqlens;  ///< --cu-seqlens, e.g. "0,1500,3000"; "" = none (a dense batch)
  std::string dtype;       ///< q, k, v dtype: bf16, f16, f32 or f64; "" = the spec's first input dtype
  std::uint64_t seed = 20260425;  ///< the seed `dgps-spec demo` uses
  bool initial_states = true;     ///< include initial_state / initial_precond_state where the spec takes them
  std::string out_path;
};

/// Writes the inputs generateInputs (InputGen.h) makes for the spec at that shape to a safetensors file,
/// with metadata dgps_spec, dgps_seed, dgps_shape. Refuses shapes whose inputs would exceed 2^31 elements.
int runInputsCommand(const InputsCommandOptions& options, std::ostream& out, std::ostream& err);

struct CompareCommandOptions {
  std::string ref_path;  ///< the trusted file (e.g. the float64 reference's outputs)
  std::string got_path;  ///< the file under test (e.g. dgps-run's outputs)
  CompareTolerances tolerances;
};

/// For every tensor of either file prints max_abs, max_rel, rel_l2 and the non-finite counts
/// (TensorCompare.h), and whether it passes. A tensor present in only one file, or with another shape,
/// fails the comparison; dtypes may differ (values are compared as doubles).
int runCompareCommand(const CompareCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace dgps
