// SwiGLU activation: out = silu(gate) * up for gate_up = [gate | up] rows, and the embedding
// lookup (both are row copies with an elementwise step, bound by memory bandwidth).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {
namespace {

constexpr int kThreads = 256;

// grid (rows, column chunks); each thread one vector of VEC outputs.
template <typename T, int VEC>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t inter) {
  pdl_trigger();  // the decode GEMV that follows may start loading its weights
  const int64_t vec = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (vec * VEC >= inter) return;
  const int64_t row = blockIdx.x;
  const T* gate = gate_up + row * 2 * inter + vec * VEC;
  const Vec<T, VEC> g = load_vec<T, VEC>(gate);
  const Vec<T, VEC> u = load_vec<T, VEC>(gate + inter);
  Vec<T, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float gf = to_float(g.v[j]);
    // silu(g) = g / (1 + exp(-g)), the form the CPU op and torch evaluate.
    o.v[j] = from_float<T>(gf / (1.0f + expf(-gf)) * to_float(u.v[j]));
  }
  store_vec<T, VEC>(out + row * inter + vec * VEC, o);
}

// grid (tokens, column chunks). An id outside the table writes NaN (bit pattern all ones).
template <typename T, int VEC>
__global__ void embedding_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids,
                                 T* __restrict__ out, int64_t vocab, int64_t hidden) {
  const int64_t vec = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (vec * VEC >= hidden) return;
  const int64_t token = blockIdx.x;
  const int32_t id = ids[token];
  Vec<T, VEC> v;
  if (id >= 0 && id < vocab) {
    v = load_vec<T, VEC>(table + static_cast<int64_t>(id) * hidden + vec * VEC);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = from_float<T>(__int_as_float(0x7fffffff));
  }
  store_vec<T, VEC>(out + token * hidden + vec * VEC, v);
}

template <typename T>
void launch_silu_mul(const Tensor& gate_up, Tensor& out, int64_t rows, int64_t inter,
                     cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const T* in = static_cast<const T*>(gate_up.raw());
  T* o = static_cast<T*>(out.raw());
  const bool vectorised = inter % kVec == 0 && all_aligned(16, in, static_cast<const T*>(o));
  const int64_t vecs = vectorised ? inter / kVec : inter;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((vecs + kThreads - 1) / kThreads));
  if (vectorised) {
    silu_mul_kernel<T, kVec><<<grid, kThreads, 0, stream>>>(in, o, inter);
  } else {
    silu_mul_kernel<T, 1><<<grid, kThreads, 0, stream>>>(in, o, inter);
  }
  KITE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_embedding(const Tensor& table, const Tensor& ids, Tensor& out, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t vocab = table.size(0), hidden = table.size(1), tokens = ids.numel();
  const T* tp = static_cast<const T*>(table.raw());
  T* o = static_cast<T*>(out.raw());
  const bool vectorised = hidden % kVec == 0 && all_aligned(16, tp, static_cast<const T*>(o));
  const int64_t vecs = vectorised ? hidden / kVec : hidden;
  const dim3 grid(static_cast<unsigned>(tokens),
                  static_cast<unsigned>((vecs + kThreads - 1) / kThreads));
  const auto* id = static_cast<const int32_t*>(ids.raw());
  if (vectorised) {
    embedding_kernel<T, kVec><<<grid, kThreads, 0, stream>>>(tp, id, o, vocab, hidden);
  } else {
    embedding_kernel<T, 1><<<grid, kThreads, 0, stream>>>(tp, id, o, vocab, hidden);
  }
  KITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void silu_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  constexpr const char* kOp = "silu_mul";
  check_device_float(gate_up, kOp, "gate_up");
  check_device(out, gate_up.dtype(), kOp, "out");
  KITE_CUDA_OP_CHECK(
      gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0, kOp,
      "gate_up " + shape_to_string(gate_up.shape()) + " must have an even last dim [.., 2I]");
  const int64_t inter = gate_up.size(-1) / 2;
  const int64_t rows = inter == 0 ? 0 : gate_up.numel() / (2 * inter);
  KITE_CUDA_OP_CHECK(out.numel() == rows * inter && (out.numel() == 0 || out.size(-1) == inter),
                     kOp,
                     "out " + shape_to_string(out.shape()) + " must be [" + std::to_string(rows) +
                         ", " + std::to_string(inter) + "]");
  KITE_CUDA_OP_CHECK(!bytes_overlap(gate_up, out), kOp, "out must not overlap gate_up on the GPU");
  KITE_CUDA_OP_CHECK(rows <= INT32_MAX, kOp, "too many rows for one launch");
  if (rows == 0) return;
  if (gate_up.dtype() == DType::kF32) {
    launch_silu_mul<float>(gate_up, out, rows, inter, stream);
  } else {
    launch_silu_mul<bf16>(gate_up, out, rows, inter, stream);
  }
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, cudaStream_t stream) {
  constexpr const char* kOp = "embedding";
  check_device_float(table, kOp, "table");
  check_device(ids, DType::kI32, kOp, "ids");
  check_device(out, table.dtype(), kOp, "out");
  KITE_CUDA_OP_CHECK(table.dim() == 2, kOp,
                     "table must be [vocab, hidden], got " + shape_to_string(table.shape()));
  const int64_t hidden = table.size(1), tokens = ids.numel();
  KITE_CUDA_OP_CHECK(out.numel() == tokens * hidden && (hidden == 0 || out.size(-1) == hidden), kOp,
                     "out " + shape_to_string(out.shape()) + " must be [" + std::to_string(tokens) +
                         ", " + std::to_string(hidden) + "]");
  KITE_CUDA_OP_CHECK(tokens <= INT32_MAX, kOp, "too many tokens for one launch");
  if (tokens == 0 || hidden == 0) return;
  if (table.dtype() == DType::kF32) {
    launch_embedding<float>(table, ids, out, stream);
  } else {
    launch_embedding<bf16>(table, ids, out, stream);
  }
}

}  // namespace kite::cuda
