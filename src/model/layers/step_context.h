// StepContext: what every layer of one forward step shares: the backend the step runs on
// (which holds the step's token ids, rotary cos/sin, KV slots and attention geometry after
// begin_step) and the batch itself.
#pragma once

#include "kernels/backend.h"
#include "model/forward_batch.h"

namespace kite {

struct StepContext {
  Backend* be = nullptr;
  const ForwardBatch* batch = nullptr;
};

}  // namespace kite
