#include "dgps/dsl/Spec.h"

namespace dgps {

const char* toString(DecayKind k) {
  switch (k) {
    case DecayKind::None: return "none";
    case DecayKind::Scalar: return "scalar";
    case DecayKind::Diagonal: return "diagonal";
  }
  return "?";
}
const char* toString(GainKind k) {
  switch (k) {
    case GainKind::None: return "none";
    case GainKind::Scalar: return "scalar";
  }
  return "?";
}
const char* toString(PrecondKind k) {
  switch (k) {
    case PrecondKind::None: return "none";
    case PrecondKind::Diagonal: return "diagonal";
  }
  return "?";
}
const char* toString(PrecondSide s) {
  switch (s) {
    case PrecondSide::Key: return "key";
    case PrecondSide::Query: return "query";
  }
  return "?";
}
const char* toString(PrecondSource s) {
  switch (s) {
    case PrecondSource::EmaSqSquash: return "ema_sq_squash";
    case PrecondSource::HypergradOgd: return "hypergrad_ogd";
  }
  return "?";
}
const char* toString(SolveKind k) {
  switch (k) {
    case SolveKind::Linear: return "linear";
    case SolveKind::Delta: return "delta";
  }
  return "?";
}
const char* toString(WriteTiming t) {
  switch (t) {
    case WriteTiming::Pre: return "pre";
    case WriteTiming::Post: return "post";
  }
  return "?";
}
const char* toString(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}
const char* toString(KernelKind k) {
  switch (k) {
    case KernelKind::ChunkForward: return "chunk_forward";
    case KernelKind::Decode: return "decode";
  }
  return "?";
}

}  // namespace dgps
