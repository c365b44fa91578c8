#include "kernels/cpu/cpu_backend.h"

#include <cstring>
#include <stdexcept>

namespace kite {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::kF32; }

  Tensor upload(const Tensor& host_f32) override { return host_f32; }
  using Backend::persistent_zeros;
  Tensor persistent_zeros(const Shape& shape, DType dtype) override {
    return Tensor::zeros(shape, dtype);
  }
  Tensor empty(const Shape& shape, DType dtype) override { return Tensor::empty(shape, dtype); }
  Tensor zeros(const Shape& shape, DType dtype) override { return Tensor::zeros(shape, dtype); }
  Tensor index(std::span<const int32_t> values) override {
    Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kI32);
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size_bytes());
    return t;
  }
  Tensor floats(std::span<const float> values) override {
    Tensor t = Tensor::empty({static_cast<int64_t>(values.size())});
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size_bytes());
    return t;
  }
  Tensor to_host_f32(const Tensor& t) override { return t.to_f32(); }
  std::vector<int32_t> to_host_i32(const Tensor& t) override {
    const int32_t* p = t.data<int32_t>();
    return {p, p + t.numel()};
  }

  void begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                  int64_t block_size) override {
    batch_ = &batch;
    cos_ = cos;
    sin_ = sin;
    params_ = {};
    params_.query_start = batch.query_start;
    params_.seq_lens = batch.seq_lens;
    params_.block_tables = &batch.block_tables;
    params_.block_size = block_size;
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    ops::linear(x, w, bias, y);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    ops::rms_norm(x, w, eps, out);
  }
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override {
    ops::add_rms_norm(residual, x, w, eps, out);
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override { ops::silu_mul(gate_up, out); }
  void embedding(const Tensor& table, Tensor& out) override {
    ops::embedding(table, step().token_ids, out);
  }
  void set_kv_scales(float k_scale, float v_scale) override {
    k_scale_ = k_scale;
    v_scale_ = v_scale;
  }
  void rope_and_cache(Tensor* q, int64_t q_rot_offset, Tensor& k, int64_t k_rot_offset,
                      const Tensor* v, Tensor& k_cache, Tensor* v_cache, int64_t rot_dim,
                      ops::RopeStyle style, Tensor* q_out, int64_t q_out_offset,
                      const PrefixNorm* k_norm, const HeadProduct* head_product) override {
    if (k_norm) rms_norm_prefix(k, k_norm->width, *k_norm->weight, k_norm->eps);
    if (q && q_out) {  // the same rotation, on a copy of q's dims in q_out
      copy_columns(*q, q_rot_offset, *q_out, q_out_offset, rot_dim);
      ops::rope(*q_out, q_out_offset, rot_dim, cos_, sin_, style);
    } else if (q) {
      ops::rope(*q, q_rot_offset, rot_dim, cos_, sin_, style);
    }
    ops::rope(k, k_rot_offset, rot_dim, cos_, sin_, style);
    ops::write_cache(k, step().slot_mapping, k_cache, k_scale_, fp8_cache_bf16_tail(k, v, k_cache));
    if (v) ops::write_cache(*v, step().slot_mapping, *v_cache, v_scale_);
    if (head_product)
      head_linear(*head_product->x, head_product->x_off, *head_product->w, *head_product->y,
                  head_product->y_off);
  }
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                 Tensor& out) override {
    step();
    ops::PagedAttentionParams p = params_;
    p.scale = scale;
    p.k_scale = k_scale_;
    // MLA's latent rows are the values too: one cache, one scale.
    p.v_scale = v_cache.raw() == k_cache.raw() ? k_scale_ : v_scale_;
    // MLA reads values from the latent cache (v_cache is k_cache) and wants only the first
    // out-width dims of each; the CPU op writes full rows (q's width: an FP8 latent row is
    // wider in bytes, its rope key stored as BF16), so go through a wider temporary.
    const int64_t v_width = v_cache.raw() == k_cache.raw() ? q.size(-1) : v_cache.size(-1);
    if (v_width != out.size(-1)) {
      Tensor wide = Tensor::empty({q.size(0), q.size(1), v_width});
      ops::paged_attention(q, k_cache, v_cache, p, wide);
      copy_columns(wide, 0, out, 0, out.size(-1));
      return;
    }
    ops::paged_attention(q, k_cache, v_cache, p, out);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    const int64_t width = x.numel() / x.size(0), n = rows.numel();
    const int32_t* r = rows.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (r[i] < 0 || r[i] >= x.size(0)) throw std::invalid_argument("gather_rows: bad row");
      std::memcpy(out.data<float>() + i * width, x.data<float>() + r[i] * width, width * 4);
    }
  }
  void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows,
                        const Tensor& weights) override {
    const int64_t width = y.numel() / y.size(0), n = rows.numel();
    const int32_t* r = rows.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (r[i] < 0 || r[i] >= out.size(0)) throw std::invalid_argument("scatter_add_rows: bad row");
      const float* src = y.data<float>() + i * width;
      float* dst = out.data<float>() + r[i] * width;
      const float w = weights.data<float>()[i];
      for (int64_t c = 0; c < width; ++c) dst[c] += src[c] * w;
    }
  }
  void moe_route(const Tensor& logits, const ops::MoeRoutingParams& params,
                 std::vector<int32_t>& ids, std::vector<float>& weights) override {
    ops::moe_route(logits, params, ids, weights);
  }
  void head_linear(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                   int64_t y_off) override {
    const int64_t t = x.size(0), heads = w.size(0), out = w.size(1), in = w.size(2);
    const int64_t xw = x.size(-1), yw = y.size(-1);
    Tensor xh = Tensor::empty({t, in}), yh = Tensor::empty({t, out});
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < t; ++i)
        std::memcpy(xh.data<float>() + i * in, x.data<float>() + (i * heads + h) * xw + x_off,
                    in * 4);
      Tensor wh = w.slice_rows(h, h + 1).view({out, in});
      ops::linear(xh, wh, nullptr, yh);
      for (int64_t i = 0; i < t; ++i)
        std::memcpy(y.data<float>() + (i * heads + h) * yw + y_off, yh.data<float>() + i * out,
                    out * 4);
    }
  }
  void copy_columns(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t cols) override {
    const int64_t sw = src.size(-1), dw = dst.size(-1), rows = src.numel() / sw;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst.data<float>() + r * dw + dst_off, src.data<float>() + r * sw + src_off,
                  cols * 4);
  }
  void convert(const Tensor& src, Tensor& dst) override {
    if (&src != &dst) std::memcpy(dst.raw(), src.raw(), dst.size_bytes());
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* po = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = pa[i] + pb[i];
  }

 private:
  const ForwardBatch& step() const {
    if (!batch_) throw std::logic_error("cpu backend: op needs begin_step() first");
    return *batch_;
  }
  const ForwardBatch* batch_ = nullptr;
  Tensor cos_, sin_;
  ops::PagedAttentionParams params_;
  float k_scale_ = 1.0f, v_scale_ = 1.0f;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

}  // namespace kite
