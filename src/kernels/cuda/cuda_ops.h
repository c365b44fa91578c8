// The CUDA backend's op entry points: the ops of kernels/ops.h for device tensors, plus the
// fused forms the GPU wants (rope + KV-cache write). Each is tested against its CPU op.
//
// Conventions (read with kernels/ops.h, whose layouts and formulas these follow):
//   - Tensors are device tensors (device_buffer.h): contiguous, row-major, F32 or BF16 for
//     activations and weights (one dtype per call unless stated), fp32 arithmetic inside.
//   - Work is queued on `stream` and the call returns at once; nothing synchronises.
//   - Launchers check shapes/dtypes and throw std::invalid_argument on a programming error;
//     CUDA failures throw CudaError (cuda_check.h).
//   - Data that lives on the device and cannot be checked without a sync (token ids, slots,
//     block ids) is made safe instead: kernels never read or write out of bounds, and an
//     invalid entry yields NaN output (or is skipped, for slots) rather than garbage.
// Attention, linear, MoE routing and sampling are declared in their own headers
// (attention/paged_attention.h, gemm/blaslt.h, moe/moe_routing.h, sampling/sampling.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/ops.h"

namespace kite::cuda {

// out = rms_norm(x) * weight over the last dim; x, weight [H], out share one dtype.
// out may alias x. One block per row.
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream);

// In place over the first `width` columns of each row of x [.., C] (weight [width]); the other
// columns are left as they are. MLA's latent row [c_kv | k_rope]: c_kv normalised in the
// projection's output, no copies out and back.
void rms_norm_prefix(Tensor& x, int64_t width, const Tensor& weight, float eps,
                     cudaStream_t stream);

// Per-token activation codes of a norm's output for the FP8 / INT8 per-channel linear that
// reads it (quant/quant_activation.h's launch_act_quant_token made from `out`): q [rows, ldq]
// (codes of out * input_scale / scale, zeros past the hidden size), scale [rows].
struct NormActivationCodes {
  uint8_t* q = nullptr;
  float* scale = nullptr;
  const float* input_scale = nullptr;  // or null
  int ldq = 0;
  bool int8 = false;
};

// residual += x (stored rounded to the dtype); out = rms_norm(residual) * weight, normalising
// the stored residual. out may alias x, never residual. With `codes` (BF16, the hidden size a
// multiple of 8), also out's activation codes, bit for bit launch_act_quant_token's from out:
// the quantized linear after the norm then needs no quantization launch of its own.
void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                  cudaStream_t stream, const NormActivationCodes* codes = nullptr);

// out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]. Unlike the CPU op, out must not overlap
// gate_up: rows run in parallel, so an in-place write would race with other rows' reads.
void silu_mul(const Tensor& gate_up, Tensor& out, cudaStream_t stream);

// out[t] = table[ids[t]] with table [vocab, hidden], ids I32 [T], out [T, hidden] (table's
// dtype). An id outside [0, vocab) writes a NaN row (the CPU op throws; here ids are on the
// device, and checking them would need a sync).
void embedding(const Tensor& table, const Tensor& ids, Tensor& out, cudaStream_t stream);

// Rotary embedding in place on x [T, num_heads, head_dim] over dims [rot_offset, +rot_dim),
// with cos/sin F32 [T, rot_dim/2]; formulas as ops::rope (both styles).
void rope(Tensor& x, int64_t rot_offset, int64_t rot_dim, const Tensor& cos, const Tensor& sin,
          ops::RopeStyle style, cudaStream_t stream);

// Writes the rows of src [T, ...] into cache [num_blocks, block_size, ...] viewed as
// [num_slots, width], at slot_mapping (I64 [T]); src and cache share a dtype. A slot outside
// [0, num_slots) is skipped: negative slots mark padding tokens (e.g. in a captured graph).
void write_cache(const Tensor& src, const Tensor& slot_mapping, Tensor& cache, cudaStream_t stream);

// One launch for the attention input step: rotates q (optional) and k in place, writes the
// rotated k rows into k_cache and v's rows (optional) into v_cache at slot_mapping (slots as in
// write_cache). q and k may rotate different dims (MLA: q's rope dims follow its nope dims;
// the latent's follow kv_lora_rank) but share rot_dim, cos/sin and style.
struct RopeCacheParams {
  Tensor* q = nullptr;  // [T, Hq, Dq] or null
  int64_t q_rot_offset = 0;
  Tensor* q_out = nullptr;  // [T, Hq, Dout] or null: q's rotated dims go here, q is not written
  int64_t q_out_offset = 0;
  Tensor* k = nullptr;  // [T, Hk, Dk], required
  int64_t k_rot_offset = 0;
  const Tensor* v = nullptr;  // [T, Hk, Dv] or null
  Tensor* k_cache = nullptr;  // [num_blocks, block_size, Hk, Dk], required
  Tensor* v_cache = nullptr;  // [num_blocks, block_size, Hk, Dv], required iff v is set
  int64_t rot_dim = 0;
  ops::RopeStyle style = ops::RopeStyle::kNeox;
  const Tensor* cos = nullptr;           // F32 [T, rot_dim/2]
  const Tensor* sin = nullptr;           // F32 [T, rot_dim/2]
  const Tensor* slot_mapping = nullptr;  // I64 [T]
  // FP8 E4M3 caches (with a BF16 k / v) store fp8(x / scale), saturated at +-448.
  float k_scale = 1.0f, v_scale = 1.0f;
  // FP8 k_cache only: k's last k_bf16_tail dims are stored as BF16 (unscaled, two bytes each)
  // after the FP8 codes of the others, so a k_cache row is Dk + k_bf16_tail bytes (MLA's rope
  // key; ops::write_cache's bf16_tail).
  int64_t k_bf16_tail = 0;
  // When set: k's first k_norm_width columns of each head row are RMS-normalised in place
  // (weight [k_norm_width], eps) before anything else: MLA's kv_a norm of the latent row.
  const Tensor* k_norm_weight = nullptr;
  int64_t k_norm_width = 0;
  float k_norm_eps = 0.0f;
  // When head_w is set: head_y[.., head_y_off:] = head_linear(head_x[.., head_x_off:], head_w)
  // (gemm/head_linear.h) in the same launch, on blocks of its own — MLA's absorbed query
  // W_UK^T q_nope beside the rope of q's rope dims. Only where head_gemv_applies; head_x must
  // not be written by the rope step, and head_y must not overlap anything it reads or writes.
  const Tensor* head_x = nullptr;
  int64_t head_x_off = 0;
  const Tensor* head_w = nullptr;
  Tensor* head_y = nullptr;
  int64_t head_y_off = 0;
};
void rope_and_cache(const RopeCacheParams& params, cudaStream_t stream);

// Fills an F32 or BF16 device tensor with uniform values in [lo, hi), a function of (seed,
// element index) only. For benchmarks and dummy weights, never zeros.
void fill_uniform(Tensor& t, float lo, float hi, uint64_t seed, cudaStream_t stream);
// A dummy BF16 weight [out, in] in its own allocation: uniform with model/dummy_weights.h's std
// (1 / sqrt(in)), seeded by the tensor's name. Its values differ from the CPU's dummy, which is
// fine: dummy outputs are meaningless, their timing is not.
Tensor dummy_matrix(const std::string& name, const Shape& shape, cudaStream_t stream);

}  // namespace kite::cuda
