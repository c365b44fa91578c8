// RMSNorm and the fused residual-add + RMSNorm, one block per row.
//
// Pass 1 reads the row in 16-byte vectors (8 bf16 or 4 fp32 per thread-access), accumulates
// the sum of squares in fp32 and, for the fused form, stores residual + x rounded to the
// dtype. Pass 2 re-reads the same elements (each thread its own, so from L1/L2 and with no
// cross-thread dependency) and writes weight * (x * inv_rms), rounding x * inv_rms to the
// dtype first as Hugging Face's LlamaRMSNorm does for bf16 (exact for fp32). The form with
// activation codes (add_rms_norm_codes) then encodes the row it wrote, as the activation
// quantization kernel would from it (pass 3, each thread again its own elements).
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/launch_pdl.cuh"
#include "kernels/cuda/quant/quant_kernel.cuh"
#include "quant/activation_scale.h"

namespace kite::cuda {
namespace {

using quant_detail::encode8;
using quant_detail::input_scaled;

enum class Codes { kNone, kFp8, kInt8 };

template <typename T, int VEC, bool kAddResidual, Codes kCodes = Codes::kNone>
__global__ void rms_norm_kernel(const T* x, T* residual,  // out may alias x: no __restrict__
                                const T* __restrict__ weight, T* out, int hidden, float eps,
                                int64_t row_stride, NormActivationCodes codes) {
  __shared__ float scratch[32];
  const int num_vecs = hidden / VEC;
  // The weight is never written by an earlier kernel: each thread's first vector of it is
  // loaded before the wait (after a decode MoE's 138 MB stream it is no longer in L2).
  Vec<T, VEC> w_first;
  if (threadIdx.x < num_vecs) w_first = load_vec<T, VEC>(weight + threadIdx.x * VEC);
  // Launched early (PDL): x and residual come from the kernel before. Only then may the decode
  // GEMV that follows launch and start loading its weights (launch_pdl.cuh says why not sooner).
  pdl_wait();
  pdl_trigger();
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * row_stride;
  const T* x_row = x + row_offset;
  T* res_row = kAddResidual ? residual + row_offset : nullptr;
  T* out_row = out + row_offset;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    Vec<T, VEC> a = load_vec<T, VEC>(x_row + i * VEC);
    if constexpr (kAddResidual) {
      const Vec<T, VEC> r = load_vec<T, VEC>(res_row + i * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) a.v[j] = from_float<T>(to_float(a.v[j]) + to_float(r.v[j]));
      store_vec<T, VEC>(res_row + i * VEC, a);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float f = to_float(a.v[j]);
      sum_sq += f * f;
    }
  }
  // The barrier inside block_sum also orders pass 1's reads of x before pass 2's writes of an
  // aliased out.
  const float variance = block_sum(sum_sq, scratch) / static_cast<float>(hidden);
  const float inv_rms = rsqrtf(variance + eps);

  const T* src = kAddResidual ? res_row : x_row;
  float amax = 0.0f;  // of the row written, input-scaled (codes only)
  for (int i = threadIdx.x; i < num_vecs; i += blockDim.x) {
    const Vec<T, VEC> a = load_vec<T, VEC>(src + i * VEC);
    const Vec<T, VEC> w =
        i == static_cast<int>(threadIdx.x) ? w_first : load_vec<T, VEC>(weight + i * VEC);
    Vec<T, VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float normed = to_float(from_float<T>(to_float(a.v[j]) * inv_rms));
      o.v[j] = from_float<T>(normed * to_float(w.v[j]));
      if constexpr (kCodes != Codes::kNone)
        amax = fmaxf(amax, fabsf(input_scaled(to_float(o.v[j]), codes.input_scale, i * VEC + j)));
    }
    store_vec<T, VEC>(out_row + i * VEC, o);
  }
  if constexpr (kCodes != Codes::kNone) {
    // As act_quant_token_kernel from the row just written: the same scale, reciprocal and
    // encoding, so the codes are that kernel's bit for bit; zeros from `hidden` to ldq.
    constexpr bool kInt8 = kCodes == Codes::kInt8;
    static_assert(VEC == 8, "codes are stored 8 to a thread-access");
    amax = block_max(amax, scratch);
    const float s = activation_scale(amax, kInt8 ? 127.0f : 448.0f), inv = __frcp_rn(s);
    uint8_t* q_row = codes.q + static_cast<int64_t>(blockIdx.x) * codes.ldq;
    for (int i = threadIdx.x; i < codes.ldq / VEC; i += blockDim.x) {
      uint8_t c[VEC] = {};
      if (i < num_vecs) {  // this thread's own store of pass 2
        const Vec<T, VEC> o = load_vec<T, VEC>(out_row + i * VEC);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          c[j] =
              encode8<kInt8>(input_scaled(to_float(o.v[j]), codes.input_scale, i * VEC + j) * inv);
      }
      uint2 packed;
      memcpy(&packed, c, 8);
      *reinterpret_cast<uint2*>(q_row + i * VEC) = packed;
    }
    if (threadIdx.x == 0) codes.scale[blockIdx.x] = s;
  }
}

// Rows of x (and residual, out) are `row_stride` elements apart, of which the first `hidden`
// are normalised (row_stride = hidden: the whole last dim).
template <typename T, bool kAddResidual>
void launch_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor& out,
                 cudaStream_t stream, int64_t hidden, int64_t row_stride,
                 const NormActivationCodes* codes = nullptr) {
  const int64_t rows = x.numel() / row_stride;
  if (rows == 0) return;
  constexpr int kVec = 16 / sizeof(T);
  const T* xp = static_cast<const T*>(x.raw());
  T* rp = residual ? static_cast<T*>(residual->raw()) : nullptr;
  const T* wp = static_cast<const T*>(weight.raw());
  T* op = static_cast<T*>(out.raw());
  const bool vectorised = hidden % kVec == 0 && row_stride % kVec == 0 &&
                          all_aligned(16, xp, wp, static_cast<const T*>(op)) &&
                          (rp == nullptr || all_aligned(16, static_cast<const T*>(rp)));
  const int64_t vecs = vectorised ? hidden / kVec : hidden;
  const int threads =
      static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (vecs + 31) / 32 * 32)));
  const auto h = static_cast<int>(hidden);
  const bool early = pdl_for_small_kernels();
  if (codes) {
    if constexpr (kAddResidual && std::is_same_v<T, bf16>) {
      KITE_CUDA_OP_CHECK(vectorised && codes->ldq % kVec == 0 && codes->ldq >= hidden,
                         "add_rms_norm_codes", "needs 16-byte aligned rows and ldq >= hidden");
      auto* kernel = codes->int8 ? rms_norm_kernel<T, kVec, true, Codes::kInt8>
                                 : rms_norm_kernel<T, kVec, true, Codes::kFp8>;
      launch_pdl_if(early, kernel, dim3(rows), threads, 0, stream, xp, rp, wp, op, h, eps,
                    row_stride, *codes);
    } else {
      KITE_CUDA_OP_CHECK(false, "add_rms_norm_codes", "codes come from BF16 add_rms_norm only");
    }
  } else if (vectorised) {
    launch_pdl_if(early, rms_norm_kernel<T, kVec, kAddResidual>, dim3(rows), threads, 0, stream, xp,
                  rp, wp, op, h, eps, row_stride, NormActivationCodes{});
  } else {
    launch_pdl_if(early, rms_norm_kernel<T, 1, kAddResidual>, dim3(rows), threads, 0, stream, xp,
                  rp, wp, op, h, eps, row_stride, NormActivationCodes{});
  }
  KITE_CUDA_CHECK_LAUNCH();
}

void check_norm_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& out) {
  check_device_float(x, op, "x");
  check_device(weight, x.dtype(), op, "weight");
  check_device(out, x.dtype(), op, "out");
  KITE_CUDA_OP_CHECK(x.dim() >= 1 && x.size(-1) > 0 && x.size(-1) <= (1 << 24), op,
                     "x " + shape_to_string(x.shape()) + " needs 1 to 2^24 features");
  KITE_CUDA_OP_CHECK(weight.numel() == x.size(-1), op,
                     "weight " + shape_to_string(weight.shape()) + " must have " +
                         std::to_string(x.size(-1)) + " values");
  KITE_CUDA_OP_CHECK(
      out.numel() == x.numel() && out.size(-1) == x.size(-1), op,
      "out " + shape_to_string(out.shape()) + " must match x " + shape_to_string(x.shape()));
  KITE_CUDA_OP_CHECK(x.numel() / x.size(-1) <= INT32_MAX, op, "too many rows for one launch");
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream) {
  check_norm_args("rms_norm", x, weight, out);
  if (x.dtype() == DType::kF32) {
    launch_norm<float, false>(x, nullptr, weight, eps, out, stream, x.size(-1), x.size(-1));
  } else {
    launch_norm<bf16, false>(x, nullptr, weight, eps, out, stream, x.size(-1), x.size(-1));
  }
}

void rms_norm_prefix(Tensor& x, int64_t width, const Tensor& weight, float eps,
                     cudaStream_t stream) {
  constexpr const char* kOp = "rms_norm_prefix";
  check_device_float(x, kOp, "x");
  check_device(weight, x.dtype(), kOp, "weight");
  KITE_CUDA_OP_CHECK(x.dim() >= 1 && width > 0 && width <= x.size(-1) && width <= (1 << 24), kOp,
                     "width " + std::to_string(width) + " must be in [1, " +
                         std::to_string(x.size(-1)) + "]");
  KITE_CUDA_OP_CHECK(weight.numel() == width, kOp,
                     "weight has " + std::to_string(weight.numel()) + " values, width is " +
                         std::to_string(width));
  if (x.dtype() == DType::kF32)
    launch_norm<float, false>(x, nullptr, weight, eps, x, stream, width, x.size(-1));
  else
    launch_norm<bf16, false>(x, nullptr, weight, eps, x, stream, width, x.size(-1));
}

void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                  cudaStream_t stream, const NormActivationCodes* codes) {
  const char* kOp = codes ? "add_rms_norm_codes" : "add_rms_norm";
  check_norm_args(kOp, x, weight, out);
  check_device(residual, x.dtype(), kOp, "residual");
  KITE_CUDA_OP_CHECK(residual.numel() == x.numel() && residual.size(-1) == x.size(-1), kOp,
                     "residual " + shape_to_string(residual.shape()) + " must match x " +
                         shape_to_string(x.shape()));
  KITE_CUDA_OP_CHECK(!bytes_overlap(out, residual), kOp, "out must not alias residual");
  KITE_CUDA_OP_CHECK(!codes || (x.dtype() == DType::kBF16 && codes->q && codes->scale), kOp,
                     "activation codes need BF16 rows and somewhere to go");
  if (x.dtype() == DType::kF32) {
    launch_norm<float, true>(x, &residual, weight, eps, out, stream, x.size(-1), x.size(-1));
  } else {
    launch_norm<bf16, true>(x, &residual, weight, eps, out, stream, x.size(-1), x.size(-1), codes);
  }
}

}  // namespace kite::cuda
