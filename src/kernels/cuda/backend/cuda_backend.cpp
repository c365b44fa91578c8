#include "kernels/cuda/backend/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "kernels/cuda/attention/paged_attention.h"
#include "kernels/cuda/backend/row_ops.h"
#include "kernels/cuda/backend/scratch_arena.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm/blaslt.h"
#include "kernels/cuda/gemm/head_linear.h"
#include "kernels/cuda/moe/moe_dispatch.h"
#include "kernels/cuda/moe/moe_routing.h"
#include "kernels/cuda/stream.h"
#include "model/weight_store.h"

namespace kite::cuda {
namespace {

uint64_t name_hash(const std::string& s) {  // FNV-1a: dummy weights' per-tensor seed
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One pinned host allocation, freed with its last owner.
struct PinnedBlock {
  explicit PinnedBlock(size_t bytes) : size(bytes) { KITE_CUDA_CHECK(cudaMallocHost(&data, bytes)); }
  ~PinnedBlock() { cudaFreeHost(data); }
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  void* data = nullptr;
  size_t size = 0;
};

// Pinned host memory for the per-step metadata upload, grown on demand.
class PinnedBuffer {
 public:
  ~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
  }
  char* reserve(size_t bytes) {
    if (bytes > size_) {
      if (data_) KITE_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      KITE_CUDA_CHECK(cudaMallocHost(&data_, bytes));
      size_ = bytes;
    }
    return static_cast<char*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() { KITE_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming)); }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaEventDestroy(upload_done_);
  }

  using Backend::empty;  // the compute-dtype overloads, hidden by the overrides below
  using Backend::zeros;
  Device device() const override { return Device::kCuda; }
  std::string name() const override { return std::string("cuda (") + device_properties().name + ")"; }
  DType compute_dtype() const override { return DType::kBF16; }

  // ---- memory
  Result<Tensor> weight(const WeightStore& store, const std::string& name,
                        const Shape& shape) override {
    if (store.is_dummy() && shape.size() == 2) return dummy_matrix(name, shape);
    return Backend::weight(store, name, shape);
  }
  Result<Tensor> stacked_weight(const WeightStore& store, const std::vector<std::string>& names,
                                const std::vector<int64_t>& outs, int64_t in) override {
    if (store.is_dummy()) {
      int64_t total = 0;
      for (int64_t o : outs) total += o;
      return dummy_matrix(names.front(), {total, in});
    }
    return Backend::stacked_weight(store, names, outs, in);
  }
  Tensor upload(const Tensor& host_f32) override {
    return to_device(host_f32, DType::kBF16, stream_);
  }
  Tensor persistent_zeros(const Shape& shape) override {
    Tensor t = device_empty(shape, DType::kBF16);
    KITE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.size_bytes(), stream_));
    return t;
  }
  Tensor empty(const Shape& shape, DType dtype) override {
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    return Tensor::wrap(arena_.allocate(bytes), shape, dtype, arena_.owner(), Device::kCuda);
  }
  Tensor zeros(const Shape& shape, DType dtype) override {
    Tensor t = empty(shape, dtype);
    KITE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.size_bytes(), stream_));
    return t;
  }
  Tensor index(std::span<const int32_t> values) override {
    Tensor t = empty({static_cast<int64_t>(values.size())}, DType::kI32);
    if (!values.empty())
      KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), values.data(), values.size_bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    return t;
  }
  Tensor floats(std::span<const float> values) override {
    Tensor t = empty({static_cast<int64_t>(values.size())}, DType::kF32);
    if (!values.empty())
      KITE_CUDA_CHECK(cudaMemcpyAsync(t.raw(), values.data(), values.size_bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    return t;
  }
  Tensor to_host_f32(const Tensor& t) override {
    if (t.dtype() != DType::kF32) return cuda::to_host_f32(t, stream_);
    // F32 (the logits every step): into reused pinned memory. Pageable copies of a fresh
    // host tensor cost page faults on every step (~100 MB at batch 256 and a 128k vocab).
    // A block still viewed by an earlier result is left to it and a new one is made.
    if (!host_out_ || host_out_.use_count() > 1 || host_out_->size < t.size_bytes())
      host_out_ = std::make_shared<PinnedBlock>(t.size_bytes());
    KITE_CUDA_CHECK(cudaMemcpyAsync(host_out_->data, t.raw(), t.size_bytes(),
                                    cudaMemcpyDeviceToHost, stream_));
    stream_.synchronize();
    return Tensor::wrap(host_out_->data, t.shape(), DType::kF32,
                        std::shared_ptr<void>(host_out_, host_out_->data), Device::kCpu);
  }
  std::vector<int32_t> to_host_i32(const Tensor& t) override {
    Tensor h = to_host(t, stream_);
    const int32_t* p = h.data<int32_t>();
    return {p, p + h.numel()};
  }
  void synchronize() override { stream_.synchronize(); }
  std::pair<int64_t, int64_t> memory_info() override {
    size_t free_bytes = 0, total_bytes = 0;
    KITE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
  }
  int64_t scratch_peak_bytes() const override { return static_cast<int64_t>(arena_.peak_bytes()); }

  // ---- step
  void begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                  int64_t block_size) override;

  // ---- ops
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    cuda::linear(blas_, x, w, bias, y, stream_);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    cuda::rms_norm(x, w, eps, out, stream_);
  }
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override {
    cuda::add_rms_norm(residual, x, w, eps, out, stream_);
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    cuda::silu_mul(gate_up, out, stream_);
  }
  void embedding(const Tensor& table, Tensor& out) override {
    cuda::embedding(table, step_.token_ids, out, stream_);
  }
  void rope_and_cache(Tensor* q, int64_t q_rot_offset, Tensor& k, int64_t k_rot_offset,
                      const Tensor* v, Tensor& k_cache, Tensor* v_cache, int64_t rot_dim,
                      ops::RopeStyle style) override {
    RopeCacheParams p;
    p.q = q;
    p.q_rot_offset = q_rot_offset;
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
    cuda::rope_and_cache(p, stream_);
  }
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, float scale,
                 Tensor& out) override {
    PagedAttentionArgs args = step_.attention;
    args.scale = scale;
    if (step_.decode)
      paged_decode_attention(q, k_cache, v_cache, args, attention_ws_, out, stream_);
    else
      paged_prefill_attention(q, k_cache, v_cache, args, out, stream_);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    cuda::gather_rows(x, rows, out, stream_);
  }
  void scatter_add_rows(Tensor& out, const Tensor& y, const Tensor& rows,
                        const Tensor& weights) override {
    cuda::scatter_add_rows(out, y, rows, weights, stream_);
  }
  void moe_experts(const Tensor& x, const Tensor& logits, const ops::MoeRoutingParams& params,
                   const Tensor& gate_up, const Tensor& down, Tensor& out) override {
    const int64_t t = x.size(0), d = x.size(1), k = params.top_k;
    const int64_t experts = gate_up.size(0), inter = down.size(2);
    if (d % 8 != 0 || inter % 8 != 0)  // the grouped GEMM's tiles need both
      throw std::invalid_argument("moe: hidden " + std::to_string(d) + " and moe_intermediate " +
                                  std::to_string(inter) + " must be multiples of 8 on CUDA");
    // Routing, permutation, both expert GEMMs and the combine stay on the device: no sync.
    ops::MoeRoutingParams p = params;
    if (params.correction_bias) p.correction_bias = &device_vector(*params.correction_bias);
    Tensor ids = empty({t, k}, DType::kI32), weights = empty({t, k}, DType::kF32);
    cuda::moe_route(logits, p, ids, weights, stream_);
    moe_permute(ids, experts, perm_, stream_);
    Tensor xp = empty({t * k, d});
    moe_gather(x, perm_, xp, stream_);
    Tensor gu = empty({t * k, 2 * inter});
    moe_grouped_linear(xp, gate_up, perm_, gu, stream_);
    Tensor act = empty({t * k, inter});
    cuda::silu_mul(gu, act, stream_);
    Tensor yp = empty({t * k, d});
    moe_grouped_linear(act, down, perm_, yp, stream_);
    moe_combine(yp, weights, perm_, out, stream_);
  }
  void moe_route(const Tensor& logits, const ops::MoeRoutingParams& params,
                 std::vector<int32_t>& ids, std::vector<float>& weights) override {
    // The expert grouping is planned on the host, so the ids must come back anyway; routing
    // the [T, E] logits there costs one small copy (the GPU router is for graph capture).
    Tensor host = to_host_f32(logits);
    ops::moe_route(host, params, ids, weights);
  }
  void head_linear(const Tensor& x, int64_t x_off, const Tensor& w, Tensor& y,
                   int64_t y_off) override {
    head_linear_.run(blas_, x, x_off, w, y, y_off, stream_);
  }
  void copy_columns(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                    int64_t cols) override {
    KITE_CUDA_OP_CHECK(src.dtype() == dst.dtype(), "copy_columns", "dtypes differ");
    const size_t es = dtype_size(src.dtype());
    const int64_t sw = src.size(-1), dw = dst.size(-1), rows = src.numel() / sw;
    KITE_CUDA_OP_CHECK(dst.numel() / dw == rows && src_off + cols <= sw && dst_off + cols <= dw,
                       "copy_columns", "shapes disagree");
    KITE_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst.raw()) + dst_off * es, dw * es,
                                      static_cast<const char*>(src.raw()) + src_off * es, sw * es,
                                      cols * es, rows, cudaMemcpyDeviceToDevice, stream_));
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    add_convert(a, &b, out, stream_);
  }
  void convert(const Tensor& src, Tensor& dst) override { add_convert(src, nullptr, dst, stream_); }

 private:
  Result<Tensor> dummy_matrix(const std::string& name, const Shape& shape) {
    // Same scale as model/dummy_weights.h (std 1/sqrt(fan_in)); values differ from the CPU
    // dummy, which is fine: dummy outputs are meaningless, their timing is not.
    Tensor t = device_empty(shape, DType::kBF16);
    const float a = std::sqrt(3.0f / static_cast<float>(shape[1]));
    fill_uniform(t, -a, a, name_hash(name), stream_);
    return t;
  }

  // A host F32 vector (MoE correction bias) copied to the device once, kept by its address.
  const Tensor& device_vector(const Tensor& host) {
    auto it = vectors_.find(host.raw());
    if (it == vectors_.end())
      it = vectors_.emplace(host.raw(), to_device(host, DType::kF32, stream_)).first;
    return it->second;
  }

  struct StepData {
    Tensor token_ids, slots, cos, sin;
    PagedAttentionArgs attention;
    bool decode = false;
  };

  Stream stream_;
  BlasLtContext blas_;
  HeadLinear head_linear_;
  AttentionWorkspace attention_ws_;
  ScratchArena arena_;
  PinnedBuffer staging_;
  cudaEvent_t upload_done_ = nullptr;
  StepData step_;
  std::shared_ptr<PinnedBlock> host_out_;
  MoePermutation perm_;
  std::map<const void*, Tensor> vectors_;
};

void CudaBackend::begin_step(const ForwardBatch& batch, const Tensor& cos, const Tensor& sin,
                             int64_t block_size) {
  arena_.reset();
  const int64_t t = batch.num_tokens(), s = batch.num_seqs();
  int64_t max_blocks = 1, max_query = 1, max_seq = 1;
  bool decode = true;
  for (int64_t i = 0; i < s; ++i) {
    max_blocks = std::max<int64_t>(max_blocks, batch.block_tables[i].size());
    const int64_t q = batch.query_start[i + 1] - batch.query_start[i];
    max_query = std::max(max_query, q);
    max_seq = std::max<int64_t>(max_seq, batch.seq_lens[i]);
    if (q != 1) decode = false;
  }
  const int64_t half = cos.numel() / std::max<int64_t>(1, t);
  // One pinned buffer, one copy: [ids | slots | cos | sin | query_start | seq_lens | tables].
  struct Part {
    const void* src;
    size_t bytes;
    size_t offset;
  };
  std::vector<int32_t> tables(static_cast<size_t>(s * max_blocks), 0);
  for (int64_t i = 0; i < s; ++i)
    std::copy(batch.block_tables[i].begin(), batch.block_tables[i].end(),
              tables.begin() + i * max_blocks);
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
  step_.decode = decode && t == s;
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
