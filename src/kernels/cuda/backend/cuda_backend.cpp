#include "kernels/cuda/backend/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/cuda/backend/op_timer.h"
#include "kernels/cuda/backend/pinned_memory.h"
#include "kernels/cuda/backend/row_ops.h"
#include "kernels/cuda/backend/scratch_arena.h"
#include "kernels/cuda/backend/step_graphs.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/gemm/gemv.h"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/cuda/moe/moe_decode.h"
#include "kernels/cuda/moe/moe_dispatch.h"
#include "kernels/cuda/moe/moe_routing.h"
#include "kernels/cuda/quant/quant_linear.h"
#include "kernels/cuda/sampling/sampling.h"
#include "kernels/cuda/sampling/sampling_params_gpu.h"
#include "kernels/cuda/stream.h"
#include "model/weight_store.h"

namespace kite::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    KITE_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaEventDestroy(upload_done_);
  }

  using Backend::empty;  // the compute-dtype overloads, hidden by the overrides below
  using Backend::zeros;
  Device device() const override { return Device::kCuda; }
  std::string name() const override {
    return std::string("cuda (") + device_properties().name + ")";
  }
  DType compute_dtype() const override { return DType::kBF16; }

  // ---- memory
  Result<Tensor> weight(const WeightStore& store, const std::string& name,
                        const Shape& shape) override {
    if (store.is_dummy() && shape.size() == 2) return dummy_matrix(name, shape, stream_);
    return Backend::weight(store, name, shape);
  }
  Result<Tensor> stacked_weight(const WeightStore& store, const std::vector<std::string>& names,
                                const std::vector<int64_t>& outs, int64_t in) override {
    if (store.is_dummy()) {
      int64_t total = 0;
      for (int64_t o : outs) total += o;
      return dummy_matrix(names.front(), {total, in}, stream_);
    }
    return Backend::stacked_weight(store, names, outs, in);
  }
  Tensor upload(const Tensor& host_f32) override {
    return to_device(host_f32, DType::kBF16, stream_);
  }
  using Backend::persistent_zeros;
  Tensor persistent_zeros(const Shape& shape, DType dtype) override {
    Tensor t = device_empty(shape, dtype);
    KITE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.size_bytes(), stream_));
    return t;
  }
  Tensor empty(const Shape& shape, DType dtype) override {
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    return Tensor::wrap(arena_.allocate(bytes), shape, dtype, arena_.owner(), Device::kCuda);
  }
  Tensor zeros(const Shape& shape, DType dtype) override {
    Tensor t = empty(shape, dtype);
    if (!replaying()) KITE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.size_bytes(), stream_));
    return t;
  }
  Tensor index(std::span<const int32_t> values) override {
    not_in_graph("index");
    Tensor t = empty({static_cast<int64_t>(values.size())}, DType::kI32);
    if (!values.empty())
      KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), values.data(), values.size_bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    return t;
  }
  Tensor floats(std::span<const float> values) override {
    not_in_graph("floats");
    Tensor t = empty({static_cast<int64_t>(values.size())}, DType::kF32);
    if (!values.empty())
      KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), values.data(), values.size_bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    return t;
  }
  Tensor to_host_f32(const Tensor& step_t) override {
    const Tensor t = step_result(step_t);
    if (t.dtype() != DType::kF32) return cuda::to_host_f32(t, stream_);
    // F32 (the logits every step): into reused pinned memory. Pageable copies of a fresh
    // host tensor cost page faults on every step (~100 MB at batch 256 and a 128k vocab).
    // A block still viewed by an earlier result is left to it and a new one is made.
    if (!host_out_ || host_out_.use_count() > 1 || host_out_->size < t.size_bytes())
      host_out_ = std::make_shared<PinnedBlock>(t.size_bytes());
    KITE_CUDA_CHECK(
        cudaMemcpyAsync(host_out_->data, t.raw(), t.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    stream_.synchronize();
    return Tensor::wrap(host_out_->data, t.shape(), DType::kF32,
                        std::shared_ptr<void>(host_out_, host_out_->data), Device::kCpu);
  }
  std::vector<int32_t> to_host_i32(const Tensor& step_t) override {
    const Tensor t = step_result(step_t);
    Tensor h = to_host(t, stream_);
    const int32_t* p = h.data<int32_t>();
    return {p, p + h.numel()};
  }
  void synchronize() override {
    not_in_graph("synchronize");
    stream_.synchronize();
  }
  void set_kv_scales(float k_scale, float v_scale) override {
    k_scale_ = k_scale;
    v_scale_ = v_scale;
  }
  void set_step_graphs(int64_t max_batch) override {
    graphs_.set_max_batch(timer_.enabled() ? 0 : max_batch);  // op timing needs eager steps
  }
  std::pair<int64_t, int64_t> memory_info() override {
    size_t free_bytes = 0, total_bytes = 0;
    KITE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
  }
  int64_t scratch_peak_bytes() const override { return static_cast<int64_t>(arena_.peak_bytes()); }
  ScratchMark scratch_mark() const override { return arena_.mark(); }
  void scratch_rewind(const ScratchMark& mark) override { arena_.rewind(mark); }

  // ---- sampling (declared in backend.h)
  bool samples_on_device() const override { return true; }
  std::optional<std::vector<int32_t>> sample(const Tensor& logits,
                                             std::span<const DeviceSamplingRow> rows) override;

  // ---- step
  void begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                  int64_t block_size) override;

  // ---- ops
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    if (replaying()) return;
    TimedOp timed = time_op(
        [&] {
          return "linear " + dims({x.numel() / w.size(1), w.size(0), w.size(1)});
        },
        static_cast<int64_t>(w.size_bytes()));
    cuda::linear(blas_, x, w, bias, y, stream_);
  }
  std::shared_ptr<const void> prepare_quantized(const QuantizedWeight& w) override {
    return std::make_shared<const DeviceQuantizedWeight>(upload_quantized(w, stream_));
  }
  std::shared_ptr<const void> dummy_quantized(QuantFormat format, int64_t out, int64_t in,
                                              uint64_t seed) override {
    return std::make_shared<const DeviceQuantizedWeight>(
        cuda::dummy_quantized(format, out, in, seed, stream_));
  }
  void quantized_linear(const Tensor& x, const QuantizedWeight* host, const void* prepared,
                        const Tensor* bias, Tensor& y, const Tensor* codes,
                        const FoldedNorm* fold) override {
    Tensor* ys[] = {&y};
    quantized_linear_split(x, host, prepared, bias, ys, codes, fold);
  }
  // One output, or q / k / v written directly by the quantized kernels (one launch).
  void quantized_linear_split(const Tensor& x, const QuantizedWeight* host, const void* prepared,
                              const Tensor* bias, std::span<Tensor* const> outs,
                              const Tensor* codes, const FoldedNorm* fold) override {
    if (replaying()) return;
    if (!prepared) throw std::invalid_argument("cuda quantized_linear: weight not prepared");
    const auto& w = *static_cast<const DeviceQuantizedWeight*>(prepared);
    const int64_t m = x.numel() / std::max<int64_t>(1, w.in_features);
    if (!quantized_split_applies(w, m, outs.size()))
      return Backend::quantized_linear_split(x, host, prepared, bias, outs, codes, fold);
    TimedOp timed = time_op(
        [&] {
          return "qlinear " + std::string(quant_format_name(w.format)) + " " +
                 dims({m, w.out_features, w.in_features}) + (outs.size() > 1 ? " split" : "") +
                 (fold ? " +norm" : "");
        },
        w.storage_bytes());
    with_quant_workspace(w, m, [&](void* ws, size_t bytes) {
      cuda::quantized_linear_split(blas_, x, w, bias, outs, ws, bytes, stream_,
                                   ready_codes(codes, w, m), fold);
    });
  }
  void quantized_linear_silu_mul(const Tensor& x, const QuantizedWeight* host, const void* prepared,
                                 Tensor& out, const Tensor* codes,
                                 const FoldedNorm* fold) override {
    if (replaying()) return;
    if (!prepared) throw std::invalid_argument("cuda quantized_linear: weight not prepared");
    const auto& w = *static_cast<const DeviceQuantizedWeight*>(prepared);
    const int64_t m = x.numel() / std::max<int64_t>(1, w.in_features);
    if (!quantized_silu_mul_applies(w, m) || out.dtype() != DType::kBF16)
      return Backend::quantized_linear_silu_mul(x, host, prepared, out, codes, fold);
    TimedOp timed = time_op(
        [&] {
          return "qlinear " + std::string(quant_format_name(w.format)) + " " +
                 dims({m, w.out_features, w.in_features}) + " silu_mul" + (fold ? " +norm" : "");
        },
        w.storage_bytes());
    with_quant_workspace(w, m, [&](void* ws, size_t bytes) {
      cuda::quantized_linear_silu_mul(x, w, out, ws, bytes, stream_, ready_codes(codes, w, m),
                                      fold);
    });
  }
  bool folds_norm(const void* prepared, int64_t rows) override {
    const auto* w = static_cast<const DeviceQuantizedWeight*>(prepared);
    return w && quantized_linear_folds_norm(*w, rows);
  }
  int64_t norm_activation_codes_bytes(const void* prepared, int64_t rows) override {
    const auto* w = static_cast<const DeviceQuantizedWeight*>(prepared);
    return w ? static_cast<int64_t>(norm_codes_bytes(*w, rows)) : 0;
  }
  void add_rms_norm_codes(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                          Tensor& out, const void* prepared, Tensor& codes) override {
    if (replaying()) return;
    const auto& qw = *static_cast<const DeviceQuantizedWeight*>(prepared);
    const int64_t m = x.numel() / std::max<int64_t>(1, x.size(-1));
    constexpr const char* kOp = "add_rms_norm_codes";
    KITE_CUDA_OP_CHECK(qw.in_features == x.size(-1), kOp, "the linear must read the norm's rows");
    TimedOp timed = time_op([] { return std::string("add_rms_norm codes"); });
    const NormActivationCodes c = norm_activation_codes(qw, m, ready_codes(&codes, qw, m, kOp));
    cuda::add_rms_norm(residual, x, w, eps, out, stream_, &c);
  }
  // Runs a quantized kernel call with its workspace in step scratch (graph-safe), given back
  // when it returns: the workspace lives only inside the op.
  template <typename Call>
  void with_quant_workspace(const DeviceQuantizedWeight& w, int64_t m, Call&& call) {
    const size_t bytes = quantized_linear_workspace_bytes(w, m);
    const ScratchArena::Mark before = arena_.mark();
    call(bytes ? arena_.allocate(bytes) : nullptr, bytes);
    arena_.rewind(before);
  }
  void linear_split(const Tensor& x, const Tensor& w, const Tensor* bias,
                    std::span<Tensor* const> outs) override {
    if (replaying()) return;
    int64_t width = 0;
    for (const Tensor* o : outs) width += o->size(-1);
    const int64_t k = w.size(1), m = x.numel() / k;
    bool direct = !outs.empty() && outs.size() <= static_cast<size_t>(kGemvMaxSegments) &&
                  width == w.size(0) && gemv_applies(x, w, *outs[0]);
    for (const Tensor* o : outs)
      direct = direct && o->dtype() == outs[0]->dtype() && o->numel() == m * o->size(-1) &&
               (!bias || bias->dtype() == o->dtype());
    if (!direct) return Backend::linear_split(x, w, bias, outs);
    TimedOp timed = time_op(
        [&] {
          return "linear " + dims({m, w.size(0), k}) + " split";
        },
        static_cast<int64_t>(w.size_bytes()));
    gemv_split(x, w, bias, outs, m, stream_);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("rms_norm"); });
    cuda::rms_norm(x, w, eps, out, stream_);
  }
  void rms_norm_prefix(Tensor& x, int64_t width, const Tensor& w, float eps) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("rms_norm_prefix"); });
    cuda::rms_norm_prefix(x, width, w, eps, stream_);
  }
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("add_rms_norm"); });
    cuda::add_rms_norm(residual, x, w, eps, out, stream_);
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("silu_mul"); });
    cuda::silu_mul(gate_up, out, stream_);
  }
  void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) override {
    if (replaying()) return;
    if (!gemv_silu_mul_applies(x, w, out)) return Backend::linear_silu_mul(x, w, out);
    const int64_t m = x.numel() / w.size(1);
    TimedOp timed = time_op(
        [&] {
          return "linear " + dims({m, w.size(0), w.size(1)}) + " silu_mul";
        },
        static_cast<int64_t>(w.size_bytes()));
    gemv_silu_mul(x, w, out, m, stream_);
  }
  void embedding(const Tensor& table, Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("embedding"); });
    cuda::embedding(table, step_.token_ids, out, stream_);
  }
  void rope_and_cache(Tensor* q, int64_t q_rot_offset, Tensor& k, int64_t k_rot_offset,
                      const Tensor* v, Tensor& k_cache, Tensor* v_cache, int64_t rot_dim,
                      ops::RopeStyle style, Tensor* q_out, int64_t q_out_offset,
                      const PrefixNorm* k_norm, const HeadProduct* head_product) override {
    // The head product in the rope launch where the per-head GEMV takes it (one launch fewer
    // per MLA layer at decode); KITE_CUDA_ROPE_HEAD_PRODUCT=0 launches it apart (A/B runs).
    static const bool apart = env_switched_off("KITE_CUDA_ROPE_HEAD_PRODUCT");
    const bool fused = head_product && !apart && k.dtype() == DType::kBF16 &&
                       head_gemv_applies(*head_product->x, head_product->x_off, *head_product->w);
    if (head_product && !fused)
      head_linear(*head_product->x, head_product->x_off, *head_product->w, *head_product->y,
                  head_product->y_off);
    if (replaying()) return;
    TimedOp timed = time_op(
        [fused] { return std::string(fused ? "rope_and_cache+head_gemv" : "rope_and_cache"); });
    RopeCacheParams p;
    p.q = q;
    p.q_rot_offset = q_rot_offset;
    p.q_out = q_out;
    p.q_out_offset = q_out_offset;
    p.k = &k;
    p.k_rot_offset = k_rot_offset;
    p.v = v;
    p.k_cache = &k_cache;
    p.v_cache = v ? v_cache : nullptr;
    p.rot_dim = rot_dim;
    p.style = style;
    p.cos = &step_.cos;
    p.sin = &step_.sin;
    p.slot_mapping = &step_.slots;
    p.k_scale = k_scale_;
    p.v_scale = v_scale_;
    p.k_bf16_tail = fp8_cache_bf16_tail(k, v, k_cache);  // MLA's rope key, as the CPU writes it
    if (k_norm) {
      p.k_norm_weight = k_norm->weight;
      p.k_norm_width = k_norm->width;
      p.k_norm_eps = k_norm->eps;
    }
    if (fused) {
      p.head_x = head_product->x;
      p.head_x_off = head_product->x_off;
      p.head_w = head_product->w;
      p.head_y = head_product->y;
      p.head_y_off = head_product->y_off;
    }
    cuda::rope_and_cache(p, stream_);
  }
  bool reads_fp8_kv(int64_t k_head_dim, int64_t v_head_dim, bool shared_kv) const override {
    return fp8_cache_covered(k_head_dim, v_head_dim, shared_kv);
  }
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                 Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([&] {
      return std::string(step_.decode ? "attention decode " : "attention prefill ") +
             dims({q.size(1), q.size(2), out.size(2)});
    });
    PagedAttentionArgs args = step_.attention;
    args.scale = scale;
    args.k_scale = k_scale_;
    // One cache for K and V (MLA's latent): one scale, as the CPU reads it.
    args.v_scale = v_cache.raw() == k_cache.raw() ? k_scale_ : v_scale_;
    const ScratchArena::Mark before = arena_.mark();
    if (step_.decode)
      paged_decode_attention(q, k_cache, v_cache, args, attention_ws_, out, stream_);
    else
      paged_prefill_attention(q, k_cache, v_cache, args, out, stream_, &attention_ws_);
    arena_.rewind(before);  // split partials (and MLA prefill's per-token rows) die in the op
  }
  void rope_cache_attention(Tensor& q, Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache,
                            int64_t rot_dim, ops::RopeStyle style, float scale,
                            Tensor& out) override {
    // At decode steps of at least this many sequences the attention kernel does the rope and
    // the cache write itself (one launch fewer a layer). At one sequence it does not pay on the
    // H100: W4A16 h8 0.7 % slower, BF16 and FP8 even; from two it is 1-2.5 % faster, except BF16
    // at 2-4 (0.3 % slower); BENCHMARKS.md run 32. KITE_CUDA_ROPE_IN_ATTENTION=N moves the
    // threshold (0: never; A/B runs).
    static const int64_t min_seqs = env_number("KITE_CUDA_ROPE_IN_ATTENTION", 2);
    const int64_t seqs = step_.attention.seq_lens.numel();
    if (min_seqs <= 0 || seqs < min_seqs || !step_.decode || style != ops::RopeStyle::kNeox ||
        rot_dim != q.size(-1) || !decode_rope_covered(q, k_cache, v_cache))
      return Backend::rope_cache_attention(q, k, v, k_cache, v_cache, rot_dim, style, scale, out);
    if (replaying()) return;
    TimedOp timed = time_op([&] {
      return "attention decode+rope " + dims({q.size(1), q.size(2), out.size(2)});
    });
    PagedAttentionArgs args = step_.attention;
    args.scale = scale;
    const DecodeRope rope{&k, &v, &step_.cos, &step_.sin, &step_.slots};
    const ScratchArena::Mark before = arena_.mark();
    paged_decode_attention(q, k_cache, v_cache, args, attention_ws_, out, stream_, &rope);
    arena_.rewind(before);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("gather_rows"); });
    cuda::gather_rows(x, rows, out, stream_);
  }
  void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows,
                        const Tensor& weights) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("scatter_add_rows"); });
    cuda::scatter_add_rows(out, y, rows, weights, stream_);
  }
  void moe_experts(const Tensor& x, const Tensor& logits, const ops::MoeRoutingParams& params,
                   const Tensor& gate_up, const Tensor& down, Tensor& out) override {
    if (replaying()) return;
    const int64_t t = x.size(0), d = x.size(1), k = params.top_k;
    const int64_t experts = gate_up.size(0), inter = down.size(2);
    if (d % 8 != 0 || inter % 8 != 0)  // the grouped GEMM's tiles need both
      throw std::invalid_argument("moe: hidden " + std::to_string(d) + " and moe_intermediate " +
                                  std::to_string(inter) + " must be multiples of 8 on CUDA");
    // Routing, permutation, both expert GEMMs and the combine stay on the device: no sync.
    Tensor ids, weights;
    std::optional<TimedOp> timed;
    timed.emplace(time_op([] { return std::string("moe route+permute+gather"); }));
    route_on_device(logits, params, t, ids, weights);
    // The permutation lives in step scratch: a graph captured at one batch size must not point
    // at buffers a later batch size reallocates.
    MoePermutation perm;
    perm.counts = empty({experts}, DType::kI32);
    perm.offsets = empty({experts + 1}, DType::kI32);
    perm.tile_offsets = empty({experts + 1}, DType::kI32);
    perm.sorted_pairs = empty({std::max<int64_t>(t * k, 1)}, DType::kI32);
    perm.pair_to_row = empty({std::max<int64_t>(t * k, 1)}, DType::kI32);
    moe_permute(ids, experts, perm, stream_);
    Tensor xp = empty({t * k, d});
    moe_gather(x, perm, xp, stream_);
    // Few rows per expert (decode): stream the chosen experts' weights; else tensor cores.
    // KITE_CUDA_MOE_GEMV=0: the grouped GEMM at every size (A/B runs).
    static const bool no_gemv = env_switched_off("KITE_CUDA_MOE_GEMV");
    const bool gemv = !no_gemv && moe_use_gemv(t * k, experts);
    auto experts_linear = [&](const Tensor& in, const Tensor& w, Tensor& y) {
      if (gemv)
        moe_grouped_gemv(in, w, perm, y, stream_);
      else
        moe_grouped_linear(in, w, perm, y, stream_);
    };
    // Bytes of the experts actually read: at most min(E, pairs) experts' weights.
    const int64_t read = std::min(experts, t * k);
    Tensor gu = empty({t * k, 2 * inter});
    timed.reset();
    timed.emplace(
        time_op([&] { return std::string("moe experts gate_up ") + (gemv ? "gemv" : "gemm"); },
                static_cast<int64_t>(gate_up.size_bytes() / experts * read)));
    experts_linear(xp, gate_up, gu);
    timed.reset();
    Tensor act = empty({t * k, inter});
    timed.emplace(time_op([] { return std::string("moe silu_mul"); }));
    cuda::silu_mul(gu, act, stream_);
    timed.reset();
    Tensor yp = empty({t * k, d});
    timed.emplace(
        time_op([&] { return std::string("moe experts down ") + (gemv ? "gemv" : "gemm"); },
                static_cast<int64_t>(down.size_bytes() / experts * read)));
    experts_linear(act, down, yp);
    timed.reset();
    timed.emplace(time_op([] { return std::string("moe combine"); }));
    moe_combine(yp, weights, perm, out, stream_);
  }
  Tensor moe_experts_with_shared(const Tensor& x, const Tensor& logits,
                                 const ops::MoeRoutingParams& params, const Tensor& gate_up,
                                 const Tensor& down, const Tensor& shared_gate_up,
                                 const Tensor& shared_down) override {
    // KITE_CUDA_MOE_FUSED=0: the permutation path and separate shared experts (A/B runs).
    static const bool off = env_switched_off("KITE_CUDA_MOE_FUSED");
    const cuda::MoeDecodeWeights w{gate_up, down, shared_gate_up, shared_down};
    if (off || !cuda::moe_decode_applies(x, w)) return Tensor();
    // Allocated on replay too, so the arena walks the captured step's scratch in step.
    Tensor out = empty({x.size(0), x.size(1)}, x.dtype());
    if (replaying()) return out;
    const int64_t t = x.size(0), k = params.top_k, experts = gate_up.size(0);
    // The MoE starts on the shared experts while the routing still runs (x, the router's
    // input, is complete; act is fresh scratch: MoeDecodeStart::kEarly's terms).
    // KITE_CUDA_MOE_EARLY=0: it waits for the routing first (A/B runs).
    static const bool early = !env_switched_off("KITE_CUDA_MOE_EARLY");
    Tensor ids, weights;
    std::optional<TimedOp> timed;
    timed.emplace(time_op([] { return std::string("moe route"); }));
    route_on_device(logits, params, t, ids, weights, early);
    timed.reset();
    const bool shared = shared_gate_up.defined();
    const int64_t inter = down.size(2), shared_inter = shared ? shared_down.size(1) : 0;
    Tensor act = empty({cuda::moe_decode_act_elems(t, k, inter, shared_inter)}, DType::kBF16);
    // Bytes of the weights read (op timer): every pair's expert, the shared experts per token.
    timed.emplace(
        time_op([] { return std::string("moe decode gate_up+down"); },
                t * (k * (gate_up.size_bytes() + down.size_bytes()) / experts +
                     (shared ? shared_gate_up.size_bytes() + shared_down.size_bytes() : 0))));
    cuda::moe_decode(x, ids, weights, w, act, out, stream_, cuda::MoeDecodeLaunches::kAuto,
                     early ? cuda::MoeDecodeStart::kEarly : cuda::MoeDecodeStart::kAfterPrevious);
    return out;
  }
  void moe_route(const Tensor& logits, const ops::MoeRoutingParams& params,
                 std::vector<int32_t>& ids, std::vector<float>& weights) override {
    // The expert grouping is planned on the host, so the ids must come back anyway; routing
    // the [T, E] logits there costs one small copy (the GPU router is for graph capture).
    not_in_graph("moe_route");
    Tensor host = to_host_f32(logits);
    ops::moe_route(host, params, ids, weights);
  }
  void head_linear(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                   int64_t y_off) override {
    if (replaying()) return;
    TimedOp timed = time_op(
        [&] {
          return "head_linear " + dims({x.size(0), w.size(0), w.size(1), w.size(2)});
        },
        static_cast<int64_t>(w.size_bytes()));
    head_linear_.run(blas_, x, x_off, w, y, y_off, stream_);
  }
  void copy_columns(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t cols) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("copy_columns"); });
    const ColumnCopy copy{&dst, dst_off, src_off, cols};
    cuda::copy_columns(src, {&copy, 1}, stream_);
  }
  void split_columns(const Tensor& y, std::span<Tensor* const> outs) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("split_columns"); });
    cuda::split_columns(y, outs, stream_);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("add"); });
    add_convert(a, &b, out, stream_);
  }
  void convert(const Tensor& src, Tensor& dst) override {
    if (replaying()) return;
    TimedOp timed = time_op([] { return std::string("convert"); });
    add_convert(src, nullptr, dst, stream_);
  }

 private:
  Tensor upload_i64(const std::vector<int64_t>& values) {
    Tensor t = empty({static_cast<int64_t>(values.size())}, DType::kI64);
    if (!values.empty())
      KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), values.data(), values.size() * 8,
                                      cudaMemcpyHostToDevice, stream_));
    return t;
  }

  // A host F32 vector (MoE correction bias) copied to the device once, kept by its address.
  const Tensor& device_vector(const Tensor& host) {
    auto it = vectors_.find(host.raw());
    if (it == vectors_.end())
      it = vectors_.emplace(host.raw(), to_device(host, DType::kF32, stream_)).first;
    return it->second;
  }

  // The router on the device: expert ids I32 and weights F32 [t, top_k] in step scratch.
  void route_on_device(const Tensor& logits, const ops::MoeRoutingParams& params, int64_t t,
                       Tensor& ids, Tensor& weights, bool trigger_first = false) {
    ops::MoeRoutingParams p = params;
    if (params.correction_bias) p.correction_bias = &device_vector(*params.correction_bias);
    ids = empty({t, params.top_k}, DType::kI32);
    weights = empty({t, params.top_k}, DType::kF32);
    cuda::moe_route(logits, p, ids, weights, stream_, trigger_first);
  }

  bool replaying() const { return graphs_.mode() == StepGraphs::Mode::kReplay; }
  template <typename Label>
  TimedOp time_op(Label&& label, int64_t bytes = 0) {
    if (!timer_.enabled()) return TimedOp(nullptr, stream_);
    timer_.start(label(), bytes, stream_);
    return TimedOp(&timer_, stream_);
  }
  // Host memory read by a captured copy would be read again, stale, on every replay.
  void not_in_graph(const char* what) const {
    if (graphs_.mode() != StepGraphs::Mode::kEager)
      throw std::logic_error(std::string("cuda backend: ") + what +
                             " cannot run inside a captured decode step");
  }
  // The tensor the step's first read-back (or sample) reads: a capture ends here and its graph
  // runs; on replay it is the captured step's output (the host code's tensor of that name is
  // unwritten scratch), and the arena moves past the graph's scratch.
  Tensor step_result(const Tensor& t) {
    if (graphs_.mode() == StepGraphs::Mode::kCapture) {
      graphs_.end_capture({t.raw(), t.size_bytes(), arena_.mark()}, stream_);
      return t;
    }
    if (!replaying()) return t;
    const StepGraphs::Result& r = graphs_.replayed();
    graphs_.finish_replay();
    if (r.bytes != t.size_bytes())
      throw std::logic_error("cuda backend: a replayed decode step read back " +
                             std::to_string(t.size_bytes()) + " bytes, the captured one " +
                             std::to_string(r.bytes));
    arena_.advance_to(r.arena_end);
    return Tensor::wrap(const_cast<void*>(r.data), t.shape(), t.dtype(), arena_.owner(),
                        Device::kCuda);
  }

  struct StepData {
    Tensor token_ids, slots, cos, sin;
    PagedAttentionArgs attention;
    bool decode = false;
  };

  Stream stream_;
  BlasLtContext blas_;
  HeadLinear head_linear_;
  ScratchArena arena_;
  AttentionWorkspace attention_ws_{[this](size_t bytes) { return arena_.allocate(bytes); }};
  StepGraphs graphs_;
  OpTimer timer_;
  PinnedBuffer staging_;
  cudaEvent_t upload_done_ = nullptr;
  StepData step_;
  std::shared_ptr<PinnedBlock> host_out_;
  PinnedBuffer host_ids_;  // sample()'s read-back of ids and row checks
  std::map<const void*, Tensor> vectors_;
  SamplingWorkspace sampling_ws_;
  float k_scale_ = 1.0f, v_scale_ = 1.0f;  // FP8 KV scales of the layer about to run
};

std::optional<std::vector<int32_t>> CudaBackend::sample(const Tensor& step_logits,
                                                        std::span<const DeviceSamplingRow> rows) {
  const Tensor logits = step_result(step_logits);  // a captured step ends with its logits
  const int64_t r = static_cast<int64_t>(rows.size());
  if (logits.dim() != 2 || logits.size(0) != r)
    throw std::invalid_argument("sample: " + std::to_string(r) + " rows for logits " +
                                shape_to_string(logits.shape()));
  if (r == 0) return std::vector<int32_t>{};
  // The argmax pass runs for every row: it is the answer for greedy rows without penalties
  // and, for all rows, the check the host sampler makes (no NaN / +inf, not all -inf).
  // The ids and the row checks side by side, so one copy brings both back.
  Tensor flags = empty({2, r}, DType::kI32);
  Tensor ids = flags.slice_rows(0, 1).view({r}), ok = flags.slice_rows(1, 2).view({r});
  greedy_sample(logits, ids, stream_, &ok);
  bool general = false, penalties = false;
  for (const DeviceSamplingRow& row : rows) {
    const SamplingParams& p = *row.params;
    penalties |=
        p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    general |= !p.is_greedy();
  }
  if (general || penalties) {
    std::vector<float> temperature(r), top_p(r), min_p(r), rep(r), freq(r), pres(r);
    std::vector<int32_t> top_k(r);
    std::vector<int64_t> seed(r), offset(r);
    for (int64_t i = 0; i < r; ++i) {
      const SamplingParams& p = *rows[i].params;
      temperature[i] = p.temperature;
      top_k[i] = p.top_k;
      top_p[i] = p.top_p;
      min_p[i] = p.min_p;
      rep[i] = p.repetition_penalty;
      freq[i] = p.frequency_penalty;
      pres[i] = p.presence_penalty;
      seed[i] = static_cast<int64_t>(rows[i].seed);
      offset[i] = static_cast<int64_t>(rows[i].offset);
    }
    GpuSamplingParams gp;
    gp.temperature = floats(temperature);
    gp.top_k = index(top_k);
    gp.top_p = floats(top_p);
    gp.min_p = floats(min_p);
    gp.repetition_penalty = floats(rep);
    gp.frequency_penalty = floats(freq);
    gp.presence_penalty = floats(pres);
    gp.seed = upload_i64(seed);
    gp.offset = upload_i64(offset);
    GpuTokenHistory history;
    if (penalties) {  // CSR of every row's prompt and output ids
      std::vector<int32_t> prompt_ids, prompt_off{0}, output_ids, output_off{0};
      for (const DeviceSamplingRow& row : rows) {
        prompt_ids.insert(prompt_ids.end(), row.history.prompt_token_ids.begin(),
                          row.history.prompt_token_ids.end());
        output_ids.insert(output_ids.end(), row.history.output_token_ids.begin(),
                          row.history.output_token_ids.end());
        prompt_off.push_back(static_cast<int32_t>(prompt_ids.size()));
        output_off.push_back(static_cast<int32_t>(output_ids.size()));
      }
      history = {index(prompt_ids), index(prompt_off), index(output_ids), index(output_off)};
    }
    Tensor filtered = empty({r, logits.size(1)}, DType::kF32);
    sampling_filter(logits, gp, penalties ? &history : nullptr, sampling_ws_, filtered, stream_);
    sampling_draw(filtered, gp, ids, stream_);
  }
  // One copy into pinned memory and one wait (two pageable copies, each with its own wait,
  // were what followed every decode step's argmax before).
  char* staged = host_ids_.reserve(flags.size_bytes());
  KITE_CUDA_CHECK(
      cudaMemcpyAsync(staged, flags.raw(), flags.size_bytes(), cudaMemcpyDeviceToHost, stream_));
  stream_.synchronize();
  const auto* host = reinterpret_cast<const int32_t*>(staged);
  std::vector<int32_t> out(host, host + r);
  for (int64_t i = 0; i < r; ++i)
    if (!host[r + i]) out[i] = -1;
  return out;
}

void CudaBackend::begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                             int64_t block_size) {
  graphs_.abandon(stream_);  // a previous step that threw mid-capture
  timer_.collect();
  arena_.reset();
  const int64_t t = batch.num_tokens(), s = batch.num_seqs();
  int64_t max_blocks = 1, max_query = 1, max_seq = 1;
  bool decode = t == s;
  for (int64_t i = 0; i < s; ++i) {
    max_blocks = std::max<int64_t>(max_blocks, batch.block_tables[i].size());
    const int64_t q = batch.query_start[i + 1] - batch.query_start[i];
    max_query = std::max(max_query, q);
    max_seq = std::max<int64_t>(max_seq, batch.seq_lens[i]);
    if (q != 1) decode = false;
  }
  // Decode steps round the longest sequence up to its length bucket: the block tables' width
  // and the attention's split count then depend on the bucket only, so every step of one
  // (sequences, bucket) shape launches the same kernels (step_graphs.h) — eager or replayed.
  bool identity_logits = static_cast<int64_t>(batch.logits_indices.size()) == s;
  for (int64_t i = 0; identity_logits && i < s; ++i) identity_logits = batch.logits_indices[i] == i;
  const int64_t bucket = decode ? length_bucket(max_seq) : 0;
  if (decode) {
    max_seq = bucket;
    max_blocks = (bucket + block_size - 1) / block_size;  // covers every seq_len <= bucket
  }
  const int64_t half = cos.numel() / std::max<int64_t>(1, t);
  // One pinned buffer, one copy: [ids | slots | cos | sin | query_start | seq_lens | tables].
  struct Part {
    const void* src;
    size_t bytes;
    size_t offset;
  };
  std::vector<int32_t> tables(static_cast<size_t>(s * max_blocks), 0);
  for (int64_t i = 0; i < s; ++i) {
    const auto& row = batch.block_tables[i];  // entries past max_blocks are never read
    std::copy(row.begin(), row.begin() + std::min<int64_t>(row.size(), max_blocks),
              tables.begin() + i * max_blocks);
  }
  Part parts[] = {{batch.token_ids.data(), batch.token_ids.size() * 4, 0},
                  {batch.slot_mapping.data(), batch.slot_mapping.size() * 8, 0},
                  {cos.raw(), cos.size_bytes(), 0},
                  {sin.raw(), sin.size_bytes(), 0},
                  {batch.query_start.data(), batch.query_start.size() * 4, 0},
                  {batch.seq_lens.data(), batch.seq_lens.size() * 4, 0},
                  {tables.data(), tables.size() * 4, 0}};
  size_t total = 0;
  for (Part& p : parts) {
    p.offset = total;
    total += (p.bytes + 255) / 256 * 256;
  }
  // The previous step's upload must have left the staging buffer before it is refilled.
  KITE_CUDA_CHECK(cudaEventSynchronize(upload_done_));
  char* host = staging_.reserve(total);
  for (const Part& p : parts)
    if (p.bytes) std::memcpy(host + p.offset, p.src, p.bytes);
  char* dev = static_cast<char*>(arena_.allocate(total));
  KITE_CUDA_CHECK(cudaMemcpyAsync(dev, host, total, cudaMemcpyHostToDevice, stream_));
  KITE_CUDA_CHECK(cudaEventRecord(upload_done_, stream_));
  auto view = [&](int i, Shape shape, DType dtype) {
    return Tensor::wrap(dev + parts[i].offset, std::move(shape), dtype, arena_.owner(),
                        Device::kCuda);
  };
  step_.token_ids = view(0, {t}, DType::kI32);
  step_.slots = view(1, {t}, DType::kI64);
  step_.cos = view(2, {t, half}, DType::kF32);
  step_.sin = view(3, {t, half}, DType::kF32);
  step_.attention = {};
  step_.attention.query_start = view(4, {s + 1}, DType::kI32);
  step_.attention.seq_lens = view(5, {s}, DType::kI32);
  step_.attention.block_tables = view(6, {s, max_blocks}, DType::kI32);
  step_.attention.block_size = block_size;
  step_.attention.max_query_len = max_query;
  step_.attention.max_seq_len = max_seq;
  step_.decode = decode;
  graphs_.begin(decode && identity_logits, {s, bucket}, stream_);
}

}  // namespace

bool cuda_device_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::shared_ptr<Backend> make_cuda_backend() { return std::make_shared<CudaBackend>(); }

void register_cuda_backend() {
  register_backend(Device::kCuda, []() -> Result<std::shared_ptr<Backend>> {
    if (!cuda_device_available()) return unsupported("no CUDA device is visible");
    try {
      return make_cuda_backend();
    } catch (const std::exception& e) {
      return internal_error(std::string("starting the CUDA backend: ") + e.what());
    }
  });
}

}  // namespace kite::cuda
