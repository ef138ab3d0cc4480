#include "ContextParallelBinding.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "PyRuntime.h"
#include "TensorArgs.h"
#include "dgps/dsl/ContextParallelPlan.h"
#include "dgps/runtime/ContextParallelForward.h"
#include "dgps/runtime/ContextParallelSupport.h"
#include "dgps/runtime/Error.h"

namespace py = pybind11;

namespace dgps::python {
namespace {

[[noreturn]] void invalid(const char* call, int rank, const std::string& what) {
  throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                     std::string(call) + " (rank " + std::to_string(rank) + "): " + what);
}

std::string dims(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

/// cp::makePlan with its std::invalid_argument as the module's InvalidArgument (also a ValueError).
cp::Plan makePlan(const std::vector<std::int64_t>& cuSeqlens, const std::vector<std::int64_t>& bounds) {
  try {
    return cp::makePlan(cuSeqlens, bounds);
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, std::string("CpPlan: ") + e.what());
  }
}

std::vector<std::int64_t> equalBounds(std::int64_t tokens, int ranks) {
  try {
    return cp::equalRankBounds(tokens, ranks);
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, std::string("cp_equal_bounds: ") + e.what());
  }
}

py::dict describeRank(const cp::Plan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "CpPlan.rank: rank " + std::to_string(rank) +
                                                              " outside [0, G = " + std::to_string(plan.ranks) + ")");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  py::list fragments;
  for (const segment::Segment& f : rp.fragments) fragments.append(py::make_tuple(f.seq, f.begin, f.end));
  py::dict d;
  d["begin"] = rp.begin;
  d["end"] = rp.end;
  d["local_cu_seqlens"] = rp.localCuSeqlens;
  d["continues_in"] = rp.continuesIn;
  d["continues_out"] = rp.continuesOut;
  d["fold_from"] = rp.foldFrom;
  d["fragments"] = fragments;
  return d;
}

/// The piece's (HV, K, V) as the slot layout needs them, from v [1, T, HV, V] and k [1, T, H, K]; the
/// runtime's checks (checkPiece) name a misshapen piece, this only avoids reading past a short shape.
cp::SummaryLayout pieceLayout(const cp::Plan& plan, const ForwardTensors& t) {
  const std::int64_t HV = t.v.shape.size() == 4 ? t.v.shape[2] : 0;
  const std::int64_t V = t.v.shape.size() == 4 ? t.v.shape[3] : 0;
  const std::int64_t K = t.k.shape.size() == 4 ? t.k.shape[3] : 0;
  return memorySummaryLayout(plan.numDocs, HV, K, V);
}

/// The preconditioner round's slot layout for the piece: Γ [H, K] then Σ [H, K] (ema_sq_squash), or M [H, K, K]
/// then e [H, K] (hypergrad_ogd), from k [1, T, H, K].
cp::SummaryLayout piecePrecondLayout(const Package& package, const cp::Plan& plan, const ForwardTensors& t) {
  const std::int64_t H = t.k.shape.size() == 4 ? t.k.shape[2] : 0;
  const std::int64_t K = t.k.shape.size() == 4 ? t.k.shape[3] : 0;
  return precondSummaryLayout(plan.numDocs, H, K, contextParallelSupport(package.manifest()).precond_full_map);
}

bool precondRound(const Package& package) { return contextParallelSupport(package.manifest()).precond_round; }

/// A gather buffer given by the caller: f32, contiguous, exactly `shape`, on `device`.
TensorView slotView(const char* call, int rank, const char* name, const py::handle& obj,
                    const std::vector<std::int64_t>& shape, int device) {
  const TensorView t = toView(obj, call, name);
  std::string why;
  if (!t.data)
    why = "is not given (or null)";
  else if (t.dtype != ScalarType::F32)
    why = std::string("has dtype ") + toString(t.dtype) + ", expected f32";
  else if (t.shape != shape)
    why = "has shape " + dims(t.shape) + ", expected " + dims(shape) + " (the slot layout of the piece)";
  else if (t.device != device)
    why = "is on device " + std::to_string(t.device) + ", expected the piece's device " + std::to_string(device);
  if (!why.empty()) invalid(call, rank, std::string("'") + name + "' " + why);
  return t;
}

/// The piece as phase 1 sees it: no start or end states.
ForwardTensors summaryTensors(ForwardTensors t) {
  t.initial_state = TensorView();
  t.final_state = TensorView();
  return t;
}

std::size_t workspaceBytes(PyRuntime& py_runtime, const Package& package, const cp::Plan& plan, int rank,
                           const py::sequence& views, const std::optional<std::string>& config) {
  if (rank < 0 || rank >= plan.ranks)
    invalid("cp_workspace_bytes", rank, "rank outside [0, G = " + std::to_string(plan.ranks) + ")");
  const cp::RankPlan& rp = plan.rank[std::size_t(rank)];
  if (rp.fragments.empty()) return 0;  // phase 2 only zeroes o's padding rows; phase 1 publishes nothing
  Runtime& runtime = py_runtime.runtime();
  const ForwardTensors t = toForwardTensors(views);
  auto configFor = [&](const ForwardProblem& p) {
    return config ? parseTileConfig(*config, package.manifest().default_config)
                  : runtime.resolveForwardConfig(package, p);
  };
  const ForwardProblem run = validateForward(package, t);
  std::size_t bytes = runtime.forwardWorkspaceBytes(package, run, configFor(run));
  if (rp.continuesOut) {
    const ForwardProblem summary = validateForward(package, summaryTensors(t));
    bytes = std::max(bytes, runtime.forwardSummaryWorkspaceBytes(package, summary, configFor(summary)));
    if (precondRound(package))
      bytes = std::max(bytes, runtime.forwardPrecondSummaryWorkspaceBytes(package, summary, configFor(summary)));
  }
  return bytes;
}

/// The PiecePrecond of phases 1 and 2 from the caller's tensors (None: not given).
PiecePrecond precondStates(const char* call, int rank, const Package& package, const cp::Plan& plan,
                           const ForwardTensors& t,
                           const py::handle& gathered, const py::handle& doc_initial, const py::handle& doc_final,
                           const py::handle& local_initial, const py::handle& local_final) {
  PiecePrecond p;
  if (!gathered.is_none()) {
    const cp::SummaryLayout layout = piecePrecondLayout(package, plan, t);
    p.gathered = slotView(call, rank, "precond_gathered", gathered,
                          {plan.ranks, std::int64_t(layout.slotElements())}, t.v.device)
                     .data;
  }
  p.doc_initial = toView(doc_initial, call, "precond_doc_initial");
  p.doc_final = toView(doc_final, call, "precond_doc_final");
  p.local_initial = toView(local_initial, call, "precond_local_initial");
  p.local_final = toView(local_final, call, "precond_local_final");
  return p;
}

void publishPrecond(PyRuntime& py_runtime, const Package& package, const cp::Plan& plan, int rank,
                    const py::sequence& views, const py::handle& send, std::uintptr_t stream,
                    const std::optional<std::string>& config) {
  const char* call = "cp_publish_precond";
  const ForwardTensors t = summaryTensors(toForwardTensors(views));
  const cp::SummaryLayout layout = piecePrecondLayout(package, plan, t);
  const TensorView slot = slotView(call, rank, "send", send, {std::int64_t(layout.slotElements())}, t.v.device);
  const LaunchOptions lo = PyRuntime::launchOptions(package, stream, config);
  py::gil_scoped_release unlocked;  // the launch may JIT-compile for seconds on first use
  publishPiecePrecondSummary(py_runtime.runtime(), package, plan, rank, t, slot.data, lo);
}

void publish(PyRuntime& py_runtime, const Package& package, const cp::Plan& plan, int rank, const py::sequence& views,
             const py::handle& send, std::uintptr_t stream, const std::optional<std::string>& config,
             const py::handle& precond_gathered, const py::handle& precond_doc_initial,
             const py::handle& precond_local_initial) {
  const char* call = "cp_publish";
  const ForwardTensors t = summaryTensors(toForwardTensors(views));
  const cp::SummaryLayout layout = pieceLayout(plan, t);
  const TensorView slot =
      slotView(call, rank, "send", send, {std::int64_t(layout.slotElements())}, t.v.device);
  const LaunchOptions lo = PyRuntime::launchOptions(package, stream, config);
  if (precondRound(package)) {
    const PiecePrecond p = precondStates(call, rank, package, plan, t, precond_gathered, precond_doc_initial,
                                         py::none(), precond_local_initial, py::none());
    py::gil_scoped_release unlocked;  // the launch may JIT-compile for seconds on first use
    publishPieceSummary(py_runtime.runtime(), package, plan, rank, t, p, slot.data, lo);
    return;
  }
  py::gil_scoped_release unlocked;  // the launch may JIT-compile for seconds on first use
  publishPieceSummary(py_runtime.runtime(), package, plan, rank, t, slot.data, lo);
}

void run(PyRuntime& py_runtime, const Package& package, const cp::Plan& plan, int rank, const py::sequence& views,
         const py::handle& gathered, const py::handle& doc_initial, const py::handle& doc_final,
         const py::handle& local_initial, const py::handle& local_final, std::uintptr_t stream,
         const std::optional<std::string>& config, const py::handle& precond_gathered,
         const py::handle& precond_doc_initial, const py::handle& precond_doc_final,
         const py::handle& precond_local_initial, const py::handle& precond_local_final) {
  const char* call = "cp_run";
  const ForwardTensors t = toForwardTensors(views);
  const cp::SummaryLayout layout = pieceLayout(plan, t);
  const void* slots = nullptr;
  if (!gathered.is_none())
    slots = slotView(call, rank, "gathered", gathered, {plan.ranks, std::int64_t(layout.slotElements())}, t.v.device)
                .data;
  PieceStates states;
  states.doc_initial = toView(doc_initial, call, "doc_initial");
  states.doc_final = toView(doc_final, call, "doc_final");
  states.local_initial = toView(local_initial, call, "local_initial");
  states.local_final = toView(local_final, call, "local_final");
  const LaunchOptions lo = PyRuntime::launchOptions(package, stream, config);
  if (precondRound(package)) {
    const PiecePrecond p = precondStates(call, rank, package, plan, t, precond_gathered, precond_doc_initial,
                                         precond_doc_final, precond_local_initial, precond_local_final);
    py::gil_scoped_release unlocked;
    runPieceForward(py_runtime.runtime(), package, plan, rank, t, slots, states, p, lo);
    return;
  }
  py::gil_scoped_release unlocked;
  runPieceForward(py_runtime.runtime(), package, plan, rank, t, slots, states, lo);
}

}  // namespace

void registerContextParallel(py::module_& m) {
  m.def("cp_equal_bounds", &equalBounds, py::arg("tokens"), py::arg("ranks"),
        "G+1 rank bounds of ⌈T/G⌉ tokens each (cp::equalRankBounds)");
  m.def(
      "cp_slot_elements",
      [](std::int64_t numDocs, std::int64_t headsV, std::int64_t keyDim, std::int64_t valueDim) {
        return memorySummaryLayout(numDocs, headsV, keyDim, valueDim).slotElements();
      },
      py::arg("num_docs"), py::arg("heads_v"), py::arg("key_dim"), py::arg("value_dim"),
      "f32 elements of one rank's all-gather slot: M [HV,K,K] then E [HV,K,V]");
  m.def(
      "cp_precond_slot_elements",
      [](std::int64_t headsQK, std::int64_t keyDim, bool fullMap) {
        return precondSummaryLayout(1, headsQK, keyDim, fullMap).slotElements();
      },
      py::arg("heads_qk"), py::arg("key_dim"), py::arg("full_map"),
      "f32 elements of one rank's preconditioner-round slot: Γ [H,K] then Σ [H,K] (ema_sq_squash), or with "
      "full_map (hypergrad_ogd, info['context_parallel_precond_full_map']) M [H,K,K] then e [H,K]");
  py::class_<cp::Plan>(m, "CpPlan")
      .def(py::init(&makePlan), py::arg("cu_seqlens"), py::arg("bounds"))
      .def_readonly("ranks", &cp::Plan::ranks)
      .def_readonly("num_docs", &cp::Plan::numDocs)
      .def_readonly("tokens", &cp::Plan::tokens)
      .def_readonly("cu_seqlens", &cp::Plan::cuSeqlens)
      .def_readonly("initial_state_rank", &cp::Plan::initialStateRank)
      .def_readonly("final_state_rank", &cp::Plan::finalStateRank)
      .def_readonly("crossing_doc", &cp::Plan::crossingDoc)
      .def("rank", &describeRank, py::arg("rank"), "what rank r holds and does (cp::RankPlan) as a dict");
}

void registerContextParallelMethods(py::class_<PyRuntime>& runtime) {
  runtime
      .def("cp_workspace_bytes", &workspaceBytes, py::arg("package"), py::arg("plan"), py::arg("rank"),
           py::arg("views"), py::arg("config") = py::none(),
           "scratch bytes of both phases for this piece (0 for a rank without fragments)")
      .def("cp_publish_precond", &publishPrecond, py::arg("package"), py::arg("plan"), py::arg("rank"),
           py::arg("views"), py::arg("send"), py::arg("stream"), py::arg("config") = py::none(),
           "phase 0, the preconditioner round (publishPiecePrecondSummary)")
      .def("cp_publish", &publish, py::arg("package"), py::arg("plan"), py::arg("rank"), py::arg("views"),
           py::arg("send"), py::arg("stream"), py::arg("config") = py::none(), py::arg("precond_gathered") = py::none(),
           py::arg("precond_doc_initial") = py::none(), py::arg("precond_local_initial") = py::none(),
           "phase 1 (publishPieceSummary; with the precond_ tensors for a package with the preconditioner round)")
      .def("cp_run", &run, py::arg("package"), py::arg("plan"), py::arg("rank"), py::arg("views"),
           py::arg("gathered"), py::arg("doc_initial"), py::arg("doc_final"), py::arg("local_initial"),
           py::arg("local_final"), py::arg("stream"), py::arg("config") = py::none(),
           py::arg("precond_gathered") = py::none(), py::arg("precond_doc_initial") = py::none(),
           py::arg("precond_doc_final") = py::none(), py::arg("precond_local_initial") = py::none(),
           py::arg("precond_local_final") = py::none(),
           "phase 2 (runPieceForward; with the precond_ tensors for a package with the preconditioner round)");
}

}  // namespace dgps::python
