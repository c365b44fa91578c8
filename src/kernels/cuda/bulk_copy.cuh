// Hopper's bulk copy engine (cp.async.bulk, global -> shared) completing on shared-memory
// mbarriers: what the streaming kernels use to keep far more bytes in flight per SM than a
// thread's registers can hold, with one thread issuing the copies. See HOPPER.md (device docs)
// and the PTX ISA, "cp.async.bulk" and "mbarrier".
#pragma once

#include <cstdint>

#include "kernels/cuda/cp_async.cuh"

namespace kite::cuda {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// Makes barrier initialisation visible to the copy engine (the async proxy); call once after
// the inits, before the block-wide barrier that publishes them.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// A producer/consumer ring's barriers, by one thread before the block-wide barrier that
// publishes them: full[s] completes on the producer's one arrival plus its copies' bytes,
// empty[s] on `consumer_threads` arrivals — every consumer thread arrives (not one lane per warp
// after __syncwarp: the same order, and the form compute-sanitizer's racecheck follows).
__device__ __forceinline__ void mbar_init_ring(uint64_t* full, uint64_t* empty, int stages,
                                               uint32_t consumer_threads) {
  for (int s = 0; s < stages; ++s) {
    mbar_init(&full[s], 1);
    mbar_init(&empty[s], consumer_threads);
  }
  mbar_init_fence();
}

// A barrier among the first `threads` threads of the block only (named barrier 1): the
// consumers, once the producer warp may have exited.
__device__ __forceinline__ void consumers_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// One arrival that also announces `bytes` still to land through copies completing on `bar`.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Blocks until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Work items go round the ring's STAGES slots in order; these give item's slot once it can be
// used. The producer's: after the consumers released what the slot held STAGES items before.
template <int STAGES, typename Item>
__device__ __forceinline__ int ring_slot_to_fill(uint64_t* empty, Item item) {
  const int s = static_cast<int>(item % STAGES);
  if (item >= STAGES) mbar_wait(&empty[s], static_cast<uint32_t>((item / STAGES - 1) & 1));
  return s;
}
// A consumer's: after the slot's copies for `item` have landed.
template <int STAGES, typename Item>
__device__ __forceinline__ int ring_slot_filled(uint64_t* full, Item item) {
  const int s = static_cast<int>(item % STAGES);
  mbar_wait(&full[s], static_cast<uint32_t>((item / STAGES) & 1));
  return s;
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared
// memory; completion is counted on `bar` (announced before with mbar_arrive_expect_tx).
// The evict-first hint: each weight byte is read once per step, so it should not push the
// activations out of L2.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes,
                                              uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

}  // namespace kite::cuda
