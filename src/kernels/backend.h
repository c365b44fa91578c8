// Backend: the device a model runs on, seen by the model code as one interface.
//
// The layers (model/layers) and the decoder stack are written once against this interface; the
// CPU backend (kernels/cpu/cpu_backend.*) runs them in fp32 with the ops of kernels/ops.h, the
// CUDA backend (kernels/cuda/backend/) in BF16 on the GPU. Each op has the semantics and layout
// of its ops.h namesake; tensors passed in are the backend's own (device() matches).
//
// Memory has three lifetimes:
//   - weights (weight, upload): live as long as the model;
//   - persistent (persistent_zeros): the KV cache, allocated once;
//   - step scratch (empty, index): valid until the next begin_step(). The CUDA backend hands it
//     out of an arena reset at each step, so the model never frees activations one by one;
//     a ScratchScope gives back, when it ends, what was handed out during its life (a decoder
//     layer's activations, once its output is in the residual stream).
// A step starts with begin_step(): the backend then holds the batch's token ids, rotary cos/sin,
// KV slots and attention geometry in its own memory, and the ops that need them read them from
// there (one upload per step, not one per layer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/folded_norm.h"
#include "kernels/ops.h"
#include "model/forward_batch.h"
#include "quant/quantized_weight.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

namespace kite {

class WeightStore;

// One logits row's sampling on the device (Backend::sample): the request's parameters and
// token history, and the random stream's key and position (the draw for (seed, offset) is
// deterministic; the engine advances offset by one per generated token).
struct DeviceSamplingRow {
  const SamplingParams* params = nullptr;
  TokenHistory history;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The dtype of weights, activations and the KV cache (F32 on the CPU, BF16 on CUDA).
  virtual DType compute_dtype() const = 0;

  // ---- memory
  // A 2-D weight `name` [out, in] (or any shape) from the store, in compute_dtype.
  virtual Result<Tensor> weight(const WeightStore& store, const std::string& name,
                                const Shape& shape);
  // Several weights' rows stacked into one [sum(outs), in] (gate+up, q+k+v).
  virtual Result<Tensor> stacked_weight(const WeightStore& store,
                                        const std::vector<std::string>& names,
                                        const std::vector<int64_t>& outs, int64_t in);
  // A host F32 tensor copied into the backend's memory, in compute_dtype.
  virtual Tensor upload(const Tensor& host_f32) = 0;
  // Persistent zero-filled memory (KV cache), compute_dtype.
  virtual Tensor persistent_zeros(const Shape& shape, DType dtype) = 0;
  Tensor persistent_zeros(const Shape& shape) { return persistent_zeros(shape, compute_dtype()); }
  // Step scratch of `dtype`, uninitialised.
  virtual Tensor empty(const Shape& shape, DType dtype) = 0;
  Tensor empty(const Shape& shape) { return empty(shape, compute_dtype()); }
  // An I32 / F32 step-scratch tensor holding `values`.
  virtual Tensor index(std::span<const int32_t> values) = 0;
  virtual Tensor floats(std::span<const float> values) = 0;
  // Any backend tensor copied to a new host F32 tensor (waits for the device).
  virtual Tensor to_host_f32(const Tensor& t) = 0;
  // Host copy of an I32 tensor.
  virtual std::vector<int32_t> to_host_i32(const Tensor& t) = 0;

  // ---- step
  // cos/sin are host F32 [num_tokens, rot_dim/2] (model/layers/rope_table.h).
  virtual void begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                          int64_t block_size) = 0;
  // Decode steps of up to `max_batch` sequences may be captured and replayed as one device
  // graph (CUDA graphs; kernels/cuda/backend/step_graphs.h); 0 runs every step eagerly. The
  // model code is the same either way. Ignored by backends without graphs.
  virtual void set_step_graphs(int64_t max_batch) {}
  // Samples one token per row of `logits` (the backend tensor [R, vocab] Model::forward_logits
  // returns) where the logits are, with the pipeline of kite::Sampler (penalties, greedy or
  // temperature -> top-k -> top-p -> min-p -> draw; the random stream differs from the CPU
  // sampler's, the distribution does not). A row whose logits hold NaN or +inf, or are all
  // -inf, gets -1 (the caller fails that request). Backends that cannot return nullopt, and
  // the caller samples on the host instead. Logprobs are not computed here.
  virtual std::optional<std::vector<int32_t>> sample(const Tensor& logits,
                                                     std::span<const DeviceSamplingRow> rows) {
    return std::nullopt;
  }
  virtual bool samples_on_device() const { return false; }
  // Waits until the step's work is done (a no-op on the CPU).
  virtual void synchronize() {}
  // Device memory (free, total) in bytes; {0, 0} on the CPU.
  virtual std::pair<int64_t, int64_t> memory_info() { return {0, 0}; }
  // Most step-scratch bytes held at once since the backend was made (0 on the CPU).
  virtual int64_t scratch_peak_bytes() const { return 0; }
  // Where step scratch stands, and a return there: every tensor from empty() / zeros() /
  // index() / floats() since the mark becomes free for the next ones (LIFO). Used through
  // ScratchScope. On the CPU tensors own their memory and both are no-ops.
  struct ScratchMark {
    size_t chunk = 0, offset = 0, in_use = 0;
  };
  virtual ScratchMark scratch_mark() const { return {}; }
  virtual void scratch_rewind(const ScratchMark& mark) {}
  // Step scratch allocated while a ScratchScope lives is given back when it ends; no tensor
  // from that time may be read afterwards. Device work already queued is unaffected: the
  // backend runs everything in order on one stream, so later ops reuse the memory only after.
  class ScratchScope {
   public:
    explicit ScratchScope(Backend& be) : be_(be), mark_(be.scratch_mark()) {}
    ~ScratchScope() { be_.scratch_rewind(mark_); }
    ScratchScope(const ScratchScope&) = delete;
    ScratchScope& operator=(const ScratchScope&) = delete;

   private:
    Backend& be_;
    ScratchMark mark_;
  };

  // ---- ops (kernels/ops.h semantics)
  virtual void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y) = 0;
  // ---- quantized linears (quant/quantized_weight.h, kernels/quant_ops.h)
  // The backend's own form of a quantized weight, made once at load, or nullptr when the
  // backend runs the host form itself (the CPU). Throws std::invalid_argument for a geometry
  // its kernels do not take.
  virtual std::shared_ptr<const void> prepare_quantized(const QuantizedWeight& w) {
    return nullptr;
  }
  // A random quantized weight of `format` [out, in] made by the backend from the shape alone
  // (--load-format dummy with --quantization), or nullptr when it cannot.
  virtual std::shared_ptr<const void> dummy_quantized(QuantFormat format, int64_t out, int64_t in,
                                                      uint64_t seed) {
    return nullptr;
  }
  // Whether the prepared linear's kernel folds the norm before it at `rows` rows (the CUDA
  // backend's FP8 / INT8 decode GEMV at one row; the default: none).
  virtual bool folds_norm(const void* prepared, int64_t rows) { return false; }
  // x normed as `fold` says (kernels/folded_norm.h) for a linear that does not fold it:
  // add_rms_norm into step scratch, on residual_out (residual copied there first if apart).
  Tensor unfold_norm(const Tensor& x, const FoldedNorm& fold);
  // y = the quantized linear of kernels/quant_ops.h, from the host form (`host`, CPU) or the
  // prepared form (`prepared`, from prepare_quantized / dummy_quantized). `codes`: x's
  // activation codes made by the norm that wrote x (add_rms_norm_codes), or null. `fold` (here
  // and below): the norm x is the input of, folded into the linear's kernel
  // (kernels/folded_norm.h), passed only where folds_norm is true (Linear runs unfold_norm
  // first elsewhere; the default throws on one), or null.
  virtual void quantized_linear(const Tensor& x, const QuantizedWeight* host, const void* prepared,
                                const Tensor* bias, Tensor& y, const Tensor* codes = nullptr,
                                const FoldedNorm* fold = nullptr);
  // Bytes of the activation codes the prepared linear reads at `rows` rows of input where the
  // norm that writes that input can make them (add_rms_norm_codes), sparing the linear its own
  // quantization launch; 0 where it reads none (the default; the CUDA backend's FP8 / INT8 per
  // channel linears where a kernel before the GEMV / GEMM would make them).
  virtual int64_t norm_activation_codes_bytes(const void* prepared, int64_t rows) { return 0; }
  // add_rms_norm, and out's activation codes for the prepared linear that reads out into
  // `codes` (U8, norm_activation_codes_bytes > 0 of them), to be passed to that linear. Called
  // only where norm_activation_codes_bytes is not 0 (the default throws).
  virtual void add_rms_norm_codes(Tensor& residual, const Tensor& x, const Tensor& weight,
                                  float eps, Tensor& out, const void* prepared, Tensor& codes);
  // linear() of a stacked weight whose output features split into consecutive parts, each
  // written to its own [M, width] tensor (q, k and v of one attention input). The default runs
  // linear() and copies the columns out; the CUDA backend's decode GEMV writes them directly.
  virtual void linear_split(const Tensor& x, const Tensor& weight, const Tensor* bias,
                            std::span<Tensor* const> outs);
  // The same for a quantized stacked weight (quantized_linear, then the columns copied out;
  // the CUDA backend's quantized kernels write the parts directly).
  virtual void quantized_linear_split(const Tensor& x, const QuantizedWeight* host,
                                      const void* prepared, const Tensor* bias,
                                      std::span<Tensor* const> outs, const Tensor* codes = nullptr,
                                      const FoldedNorm* fold = nullptr);
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // rms_norm in place over the first `width` columns of each row of x [rows, C] (weight
  // [width]), the rest untouched: MLA's latent row [c_kv | k_rope]. The default copies the
  // columns out, normalises and copies them back; the CUDA backend does it in one kernel.
  virtual void rms_norm_prefix(Tensor& x, int64_t width, const Tensor& weight, float eps);
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                            Tensor& out) = 0;
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;
  // out [T, I] = silu(x · Wg^T) * (x · Wu^T) for gate_up = [Wg; Wu] [2I, in] (a gated MLP's
  // input, no bias). The default runs linear() then silu_mul(); the CUDA backend's decode GEMV
  // does both in one pass.
  virtual void linear_silu_mul(const Tensor& x, const Tensor& gate_up, Tensor& out);
  // The same for a quantized stacked [gate; up] weight (host / prepared as for
  // quantized_linear). The default runs quantized_linear() then silu_mul(); the CUDA backend's
  // FP8 / INT8 decode GEMV does both in one pass.
  virtual void quantized_linear_silu_mul(const Tensor& x, const QuantizedWeight* host,
                                         const void* prepared, Tensor& out,
                                         const Tensor* codes = nullptr,
                                         const FoldedNorm* fold = nullptr);
  // out[t] = table[step token t].
  virtual void embedding(const Tensor& table, Tensor& out) = 0;
  // The attention input step, with the step's cos/sin and slots: rotates q's dims
  // [q_rot_offset, +rot_dim) (q may be null) and k's [k_rot_offset, +rot_dim) in place, writes
  // k into k_cache and v (may be null) into v_cache. With q_out [T, Hq, D], q's rotated dims go
  // to q_out's [q_out_offset, +rot_dim) instead, and q is left as it was (MLA: straight into
  // the absorbed query). With k_norm, k's rows are first rms_norm_prefix'ed in place (MLA's
  // latent row: the CUDA backend does it in the same launch).
  struct PrefixNorm {
    const Tensor* weight;  // [width]
    int64_t width;         // columns normalised, before k_rot_offset
    float eps;
  };
  // With head_product, also y[.., y_off:] = head_linear(x[.., x_off:], w) (MLA's absorbed query
  // W_UK^T q_nope): it reads nothing this step writes and writes nothing it touches, so a
  // backend may run it in the same launch (CUDA at decode sizes) or apart.
  struct HeadProduct {
    const Tensor* x;
    int64_t x_off;
    const Tensor* w;
    Tensor* y;
    int64_t y_off;
  };
  virtual void rope_and_cache(Tensor* q, int64_t q_rot_offset, Tensor& k, int64_t k_rot_offset,
                              const Tensor* v, Tensor& k_cache, Tensor* v_cache, int64_t rot_dim,
                              ops::RopeStyle style, Tensor* q_out = nullptr,
                              int64_t q_out_offset = 0, const PrefixNorm* k_norm = nullptr,
                              const HeadProduct* head_product = nullptr) = 0;
  // Paged causal attention over the step's sequences (v_cache may be k_cache: MLA).
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                         Tensor& out) = 0;
  // The GQA attention step: rope_and_cache(&q, 0, k, 0, &v, k_cache, &v_cache, rot_dim, style),
  // then attention(q, k_cache, v_cache, scale, out). The default runs the two; a backend may do
  // both in one pass (CUDA at decode steps: the attention kernel rotates q and k itself), so
  // afterwards q's and k's contents are unspecified.
  virtual void rope_cache_attention(Tensor& q, Tensor& k, const Tensor& v, Tensor& k_cache,
                                    Tensor& v_cache, int64_t rot_dim, ops::RopeStyle style,
                                    float scale, Tensor& out);
  // out[i] = x[rows[i]] (rows: I32 from index()).
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // out[rows[i]] += weights[i] * y[i], in order of i (rows I32, weights F32, from index() and
  // floats()). Rows must be distinct within one call. out may be F32 while y is in
  // compute_dtype (an fp32 accumulator for several calls).
  virtual void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows,
                                const Tensor& weights) = 0;
  // The routed experts of one MoE layer: routes router_logits (F32 [T, E]) with `params`
  // (params.correction_bias: a host F32 [E] tensor or null), runs each token's top_k experts —
  // gate_up [E, 2I, H] and down [E, H, I], the experts' weights stacked — and writes
  // out[t] = sum_k w[t, k] * down_e(silu(gate_e x) * up_e x) in compute dtype, summed in fp32.
  // The CUDA backend does it all on the device; the CPU runs experts one by one instead
  // (layers/moe), so its default throws.
  virtual void moe_experts(const Tensor& x, const Tensor& router_logits,
                           const ops::MoeRoutingParams& params, const Tensor& gate_up,
                           const Tensor& down, Tensor& out);
  // moe_experts with the shared experts folded in: its output [T, in] (step scratch)
  // additionally gets down_s(silu(gate_s x) * up_s x) for shared_gate_up [2Is, in] and
  // shared_down [in, Is] (both undefined: no shared experts), in the same fp32 sum. Returns an
  // undefined tensor, having done nothing, where the backend has no such form for this step
  // (the default): the caller then runs moe_experts and the shared experts itself. CUDA takes
  // decode-size steps of BF16 weights.
  virtual Tensor moe_experts_with_shared(const Tensor& x, const Tensor& router_logits,
                                         const ops::MoeRoutingParams& params,
                                         const Tensor& gate_up, const Tensor& down,
                                         const Tensor& shared_gate_up, const Tensor& shared_down) {
    return Tensor();
  }
  // Whether attention() reads FP8 KV caches of this layout (a KvCacheSpec's k / v head dims;
  // shared_kv: MLA's one latent cache). The CPU reads every layout; the CUDA backend the
  // shapes its tensor-core kernels cover.
  virtual bool reads_fp8_kv(int64_t k_head_dim, int64_t v_head_dim, bool shared_kv) const {
    return true;
  }
  // FP8 KV-cache scales of the layer about to run (read by rope_and_cache / attention on
  // backends with FP8 caches: the CPU; others ignore them).
  virtual void set_kv_scales(float k_scale, float v_scale) {}
  // Router: expert ids/weights [T, top_k] back on the host.
  virtual void moe_route(const Tensor& router_logits, const ops::MoeRoutingParams& params,
                         std::vector<int32_t>& expert_ids, std::vector<float>& expert_weights) = 0;
  // Per-head linear: for every head h and row t,
  //   y[t, h, y_off : y_off+out] = x[t, h, x_off : x_off+in] · w[h]^T
  // with x [T, H, x_width], w [H, out, in], y [T, H, y_width] (MLA's absorbed projections).
  virtual void head_linear(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                           int64_t y_off) = 0;
  // dst[r, dst_off : dst_off+cols] = src[r, src_off : src_off+cols] for 2-D views of src/dst
  // as [rows, width] (rows = numel / last dim).
  virtual void copy_columns(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                            int64_t cols) = 0;
  // The consecutive column blocks of y [rows, sum of the outs' widths] into outs [rows, width]
  // in order (a stacked linear's output split into its parts). The default runs copy_columns
  // for each; the CUDA backend copies them in one launch.
  virtual void split_columns(const Tensor& y, std::span<Tensor* const> outs);
  // out = a + b, elementwise, in fp32 (a, b, out may differ in float dtype).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // dst = src converted to dst's float dtype.
  virtual void convert(const Tensor& src, Tensor& dst) = 0;
  // Zero-filled step scratch.
  virtual Tensor zeros(const Shape& shape, DType dtype) = 0;
  Tensor zeros(const Shape& shape) { return zeros(shape, compute_dtype()); }
};

// rope_and_cache's MLA form (no v: the latent cache holds both): an FP8 k_cache row wider
// than k's keeps k's last values, the rope key, as BF16 (KvCacheSpec::fp8_bf16_tail). How
// many, for the backends' cache writes; 0 for every other cache.
inline int64_t fp8_cache_bf16_tail(const Tensor& k, const Tensor* v, const Tensor& k_cache) {
  return !v && k_cache.dtype() == DType::kF8E4M3 && k_cache.size(-1) > k.size(-1)
             ? k_cache.size(-1) - k.size(-1)
             : 0;
}

// Backends by device. The CPU backend is always present; the CUDA one registers itself when
// the binary links it (register_cuda_backend() in kernels/cuda/backend/cuda_backend.h).
using BackendFactory = std::function<Result<std::shared_ptr<Backend>>()>;
void register_backend(Device device, BackendFactory factory);
bool has_backend(Device device);
Result<std::shared_ptr<Backend>> create_backend(Device device);

// "cpu" | "cuda" | "auto" (CUDA when registered and a GPU is present, else CPU).
Result<Device> parse_device(std::string_view name, bool cuda_usable);
std::string_view device_name(Device device);

}  // namespace kite
