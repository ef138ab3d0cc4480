// The all-gather of a context-parallel plan's summary slots (ContextParallel.h).
#include "dgps/runtime/ContextParallel.h"

#include <string>

#include "dgps/runtime/Error.h"

namespace dgps {

void gatherSummaries(Collective& collective, const cp::Plan& plan, const cp::SummaryLayout& layout,
                     std::size_t elementBytes, const void* send, void* recv, std::size_t recvBytes, CUstream stream) {
  requireGroup(collective, plan.ranks, -1, "context parallel summaries (plan for its ranks)");
  if (elementBytes == 0)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument, "context parallel summaries: elementBytes is 0");
  const std::size_t slotBytes = layout.slotElements() * elementBytes;
  if (recvBytes != slotBytes * static_cast<std::size_t>(plan.ranks))
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "context parallel summaries: recv holds " + std::to_string(recvBytes) + " bytes, expected " +
                           std::to_string(plan.ranks) + " slots of " + std::to_string(slotBytes) + " bytes");
  collective.allGather(send, slotBytes, recv, recvBytes, stream);
}

}  // namespace dgps
