// Shared-memory addresses and the per-thread asynchronous copies (cp.async, 16 bytes global ->
// shared, completing in commit groups) that the attention, MoE and W4 GEMM kernels stage their
// tiles with; Hopper's bulk copies (bulk_copy.cuh) take their addresses from here too. See the
// PTX ISA, "cp.async".
#pragma once

#include <cstdint>

namespace kite::cuda {

// The 32-bit shared-memory address PTX's shared-state-space instructions take.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; valid false writes zeros (nothing is read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace kite::cuda
