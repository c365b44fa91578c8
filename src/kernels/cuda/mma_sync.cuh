// Warp-level tensor-core MMAs (mma.sync, fp32 or int32 accumulate) for the attention, MoE and
// quantized-linear kernels. Fragment layouts (PTX ISA, m16n8k16; with g = lane / 4, t = lane % 4):
//   A (16x16): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..)
//   B (16x8):  b[0] = (k 2t..2t+1, n g), b[1] = (k 2t+8.., n g)
//   C (16x8):  c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1)
// The 8-bit m16n8k32 forms hold four codes a register where these hold two values.
// Not volatile: an MMA has no effect beyond its outputs, so the compiler may schedule it among
// the loads around it.
#pragma once

#include <cstdint>

namespace kite::cuda {

// c += a * b, a and b of TYPE ("bf16" or "f16").
#define KITE_MMA_M16N8K16(TYPE)                                                \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                   \
      ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  KITE_MMA_M16N8K16("bf16");
}

// fp16 inputs: every E4M3 code is an fp16 value, so FP8 caches and weights multiply exactly.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  KITE_MMA_M16N8K16("f16");
}
#undef KITE_MMA_M16N8K16

// The one a kernel's tiles take: fp16 (F16) or bf16.
template <bool F16>
__device__ __forceinline__ void mma_16bit(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (F16)
    mma_f16(c, a, b0, b1);
  else
    mma_bf16(c, a, b0, b1);
}

// c += a * b over 32 channels of 8-bit codes: E4M3 into fp32, or INT8 into int32.
__device__ __forceinline__ void mma_8bit(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_8bit(int (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kite::cuda
