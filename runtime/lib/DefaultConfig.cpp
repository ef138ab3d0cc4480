#include "dgps/runtime/DefaultConfig.h"

#include <algorithm>

#include "dgps/device/launch_rules.h"
#include "dgps/dsl/DeviceFeatures.h"
#include "dgps/dsl/SegmentScan.h"
#include "dgps/runtime/Runtime.h"

namespace dgps {

TileConfig shapeDefaultConfig(const Manifest& manifest, std::int64_t sequences, std::int64_t heads_v,
                              std::int64_t value_dim, int sm_count) {
  TileConfig c = manifest.default_config;
  if (sm_count <= 0 || sequences <= 0 || heads_v <= 0 || value_dim <= 0) return c;
  const std::vector<int>& allowed = manifest.tunables.block_v;
  auto ctas = [&](int bv) { return sequences * heads_v * ((value_dim + bv - 1) / bv); };
  while (2 * ctas(c.block_v) < sm_count) {
    const int half = c.block_v / 2;
    if (half < 64 || std::find(allowed.begin(), allowed.end(), half) == allowed.end()) break;
    c.block_v = half;
  }
  // With (nearly) every SM holding a state_output CTA, the sequential walk is no longer the limit and the
  // per-chunk work is: chunk 32 halves chunk_local's quadratic part. Measured on the H200 at B=8, H=16 (128
  // CTAs on 132 SMs): gdn 0.533 vs 0.577 ms, deltanet 0.524 vs 0.562, pgdn 0.776 vs 0.803, pdn 0.769 vs
  // 0.794; at B=1 (32 CTAs) chunk 32 is 10% slower (gdn 2.41 vs 2.18 ms; docs/performance.md, run 5).
  const std::vector<int>& chunks = manifest.tunables.chunk;
  if (c.chunk > 32 && std::find(chunks.begin(), chunks.end(), 32) != chunks.end() &&
      8 * ctas(c.block_v) >= 7 * std::int64_t(sm_count))
    c.chunk = 32;
  return c;
}

namespace {

/// Whether the package's preconditioner runs a pass over each sequence's chunks, one CTA per (sequence, head), that
/// the segmented state pass does not split: hypergrad_ogd's (chunked or per token). Its cost is per chunk, so it
/// doubles at chunk 32 on a long sequence: OSDN at B=1, T=32768 took 2.605 ms at chunk 32 against 2.176 at 64
/// (docs/performance.md, run 21).
bool sequentialPrecondPass(const Manifest& manifest) {
  return manifest.features.precond == PrecondKind::Diagonal &&
         manifest.features.precond_source == PrecondSource::HypergradOgd;
}

/// The manifest default with the full-GPU chunk rule: chunk 32 where the package's tunables allow it, unless a
/// sequential preconditioner pass would walk twice the chunks.
TileConfig fullWidthConfig(const Manifest& manifest) {
  TileConfig c = manifest.default_config;
  const std::vector<int>& chunks = manifest.tunables.chunk;
  if (c.chunk > 32 && std::find(chunks.begin(), chunks.end(), 32) != chunks.end() && !sequentialPrecondPass(manifest))
    c.chunk = 32;
  return c;
}

/// Whether the call runs the segmented state pass at `wide`: the caller's forced length, else the runtime's rule.
bool splitsAt(const ForwardDefaultInputs& in, const TileConfig& wide) {
  if (!in.segmented || in.sequences <= 0 || in.heads_v <= 0 || in.value_dim <= 0) return false;
  if (in.forced_segment_chunks < 0) return autoSegmentChunks(in, wide) > 0;
  const std::int64_t C = wide.chunk > 0 ? wide.chunk : 64;
  return in.forced_segment_chunks > 0 && in.forced_segment_chunks < (in.rows + C - 1) / C;
}

}  // namespace

bool summaryHasProducers(const Package& package) {
  // the launch contract's own question (LaunchContract.h segmentRoleLaunch), asked of the manifest's features (the
  // same axis codes as the compiler's, axisFeatures), so the forward's default reads no spec.yaml
  const PackageFeatures& m = package.manifest().features;
  launch::FeatureSet f = axisFeatures(m.decay, m.gain, m.precond, m.precond_side, m.precond_source, m.solve);
  f.write_key = m.write_key;
  return launch::walkRebuildsKw(f, true);
}

ForwardDefaultInputs forwardDefaultInputs(const Package& package, const ForwardProblem& problem, int sm_count) {
  ForwardDefaultInputs in;
  in.sequences = problem.num_seqs;
  in.heads_v = problem.heads_v;
  in.key_dim = problem.key_dim;
  in.value_dim = problem.value_dim;
  in.rows = problem.rows();
  in.segmented = !package.manifest().launch.forward_segmented.empty();
  in.sm_count = sm_count;
  in.f16 = problem.input_dtype == ScalarType::F16;
  in.summary_pairs = in.segmented && summaryPairsEnabled();
  if (in.summary_pairs) in.summary_producers = summaryHasProducers(package);
  return in;
}

std::int64_t autoSegmentChunks(const ForwardDefaultInputs& in, const TileConfig& config) {
  if (!in.segmented || in.sm_count < 1 || in.rows <= 0) return 0;
  const std::int64_t C = config.chunk > 0 ? config.chunk : 64;
  const std::int64_t BV = std::max<std::int64_t>(std::min<std::int64_t>(config.block_v, (in.value_dim + 15) / 16 * 16), 1);
  const auto tiles = [&](std::int64_t d) { return (d + BV - 1) / BV; };
  segment::SegmentRuleInputs rule;
  rule.chunksPerSeq = (in.rows + C - 1) / C;
  rule.parallelWork = in.sequences * in.heads_v * tiles(in.value_dim);
  // segment_summary's grid: the E walk's value tiles and the M walk's K-column tiles (launch.forward_segmented)
  rule.summaryWork = in.sequences * in.heads_v * (tiles(in.value_dim) + tiles(in.key_dim));
  rule.smCount = in.sm_count;
  rule.K = in.key_dim;
  rule.C = C;
  rule.summaryCtasPerSm = launch::segmentSummaryCtasPerSm(in.summary_pairs, in.summary_producers,
                                                          launch::pad16(int(in.key_dim)), int(C), config.stages, in.f16,
                                                          int(BV));
  const std::int64_t L = segment::chooseSegmentChunks(rule);
  return L < rule.chunksPerSeq ? L : 0;
}

TileConfig forwardDefaultConfig(const Manifest& manifest, const ForwardDefaultInputs& in) {
  const TileConfig wide = fullWidthConfig(manifest);
  if (splitsAt(in, wide)) return wide;
  return shapeDefaultConfig(manifest, in.sequences, in.heads_v, in.value_dim, in.sm_count);
}

}  // namespace dgps
