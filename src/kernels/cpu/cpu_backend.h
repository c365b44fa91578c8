// The CPU backend: fp32 throughout, each op one call into kernels/ops.h. Step scratch is plain
// heap tensors (freed when the last view goes), so nothing is reset per step.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace kite {

std::shared_ptr<Backend> make_cpu_backend();

}  // namespace kite
