// DecoderStack: the pre-norm decoder every supported architecture shares —
// embed → N × [norm → attention → +residual → norm → FFN → +residual] → norm → lm_head —
// with the attention and FFN kinds chosen per layer by the architecture file that builds it.
#pragma once

#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "model/layers/attention.h"
#include "model/layers/linear.h"
#include "model/layers/mla.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/layers/rope_table.h"
#include "model/model.h"

namespace kite {

struct DecoderLayer {
  Tensor input_norm;      // [hidden]
  Tensor post_attn_norm;  // [hidden]
  std::variant<GqaAttention, MlaAttention> attention;
  std::variant<GatedMlp, Moe> ffn;
};

class DecoderStack final : public Model {
 public:
  DecoderStack(ModelConfig config, KvCacheSpec kv_spec, RopeTable rope,
               std::shared_ptr<Backend> backend)
      : config_(std::move(config)),
        kv_spec_(kv_spec),
        rope_(std::move(rope)),
        backend_(std::move(backend)) {}

  const ModelConfig& config() const override { return config_; }
  KvCacheSpec kv_cache_spec() const override { return kv_spec_; }
  Tensor forward(const ForwardBatch& batch, KvCache& cache) override;
  Tensor forward_logits(const ForwardBatch& batch, KvCache& cache) override;
  Backend& backend() const override { return *backend_; }

  // Loads embed_tokens, model.norm and lm_head (tied to the embedding when configured; quantized
  // where the checkpoint stores it so or the plan quantizes it: --quantize-lm-head).
  Status load_embeddings(const WeightStore& weights);
  std::vector<DecoderLayer>& layers() { return layers_; }

 private:
  ModelConfig config_;
  KvCacheSpec kv_spec_;
  RopeTable rope_;
  std::shared_ptr<Backend> backend_;
  Tensor embed_;    // [vocab, hidden]
  Linear lm_head_;  // [vocab, hidden] (weight: the same bytes as embed_ when tied, unquantized)
  Tensor final_norm_;
  std::vector<DecoderLayer> layers_;
};

// Fills one layer's attention and FFN from the weights under `prefix` ("model.layers.i.").
using LayerBuilder =
    std::function<Status(const std::string& prefix, int64_t layer, DecoderLayer& out)>;

// The loop every architecture shares: embeddings, final norm and lm_head, and per layer the two
// norms plus whatever `build_layer` loads.
Result<std::unique_ptr<Model>> build_decoder_stack(const ModelConfig& config, KvCacheSpec kv_spec,
                                                   RopeTable rope, const WeightStore& weights,
                                                   std::shared_ptr<Backend> backend,
                                                   const LayerBuilder& build_layer);

}  // namespace kite
