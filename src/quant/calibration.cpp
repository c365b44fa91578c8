#include "quant/calibration.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "model/weight_store.h"
#include "quant/activation_recorder.h"
#include "quant/smoothing_search.h"
#include "quant/text_scoring.h"
#include "tokenizer/tokenizer.h"

namespace kite {
namespace {

class CalibrationRecorder final : public ActivationRecorder {
 public:
  explicit CalibrationRecorder(uint64_t seed) : rng_(seed) {}
  void on_load(const std::string& key, const Tensor& weight, const void* id) override {
    LinearActivations& a = by_id_[id];
    a.parts.push_back({key, weight});
    a.in = weight.size(1);
  }
  void on_input(const void* id, const Tensor& x) override {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    LinearActivations& a = it->second;
    const int64_t k = a.in, rows = x.numel() / k;
    if (a.amax.empty()) {
      a.amax.assign(k, 0.0f);
      a.asum.assign(k, 0.0);
    }
    const float* xd = x.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xd + r * k;
      for (int64_t i = 0; i < k; ++i) {
        a.amax[i] = std::max(a.amax[i], std::fabs(row[i]));
        a.asum[i] += std::fabs(row[i]);
      }
      // Reservoir sampling keeps a uniform sample of all rows seen.
      const int64_t seen = a.rows++;
      int64_t slot = seen;
      if (seen >= kSampleRows) slot = std::uniform_int_distribution<int64_t>(0, seen)(rng_);
      if (slot < kSampleRows) {
        if (seen < kSampleRows) a.samples.resize((seen + 1) * k);
        std::copy(row, row + k, a.samples.begin() + slot * k);
      }
    }
  }
  std::map<const void*, LinearActivations>& linears() { return by_id_; }

 private:
  std::map<const void*, LinearActivations> by_id_;
  std::mt19937_64 rng_;
};

// Installs a recorder for one scope (calibration runs on the calling thread only).
struct RecorderScope {
  explicit RecorderScope(ActivationRecorder* r) { set_active_recorder(r); }
  ~RecorderScope() { set_active_recorder(nullptr); }
};

// Gives each recorded linear that an RMSNorm follows (QuantPlan::output_norm_of) that norm's
// weight, so AWQ can measure its error after the norm.
Status attach_output_norms(const std::string& model_dir, std::vector<LinearActivations>& acts) {
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  KITE_ASSIGN_OR_RETURN(WeightStore store, WeightStore::open(model_dir));
  for (LinearActivations& a : acts)
    for (LinearPart& p : a.parts) {
      const auto norm = QuantPlan::output_norm_of(p.key);
      if (!norm || !store.contains(*norm)) continue;
      KITE_ASSIGN_OR_RETURN(TensorInfo info, store.info(*norm));
      KITE_ASSIGN_OR_RETURN(p.output_norm, store.get_f32(*norm, info.shape));
      p.output_norm_eps = static_cast<float>(config.rms_norm_eps);
    }
  return ok_status();
}

// Said the same whichever command asked (kite quantize names the method --method, the others
// --quantization).
Status missing_calibration_text(const LoadOptions& options) {
  return invalid_argument(std::string(quant_method_name(options.quant.method)) +
                          " quantization needs --calibration-text FILE, a text to calibrate on "
                          "(for kite eval, not the text it scores)");
}

// Runs the calibration text through the model loaded with `partial` (null: unquantized) and
// returns what every fp32 linear saw.
Result<std::vector<LinearActivations>> record_activations(
    const std::string& model_dir, const LoadOptions& options,
    std::shared_ptr<const QuantPlan> partial = nullptr) {
  if (options.quant.calibration_text.empty()) return missing_calibration_text(options);
  KITE_ASSIGN_OR_RETURN(std::string text, read_text_file(options.quant.calibration_text));
  KITE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_dir(model_dir));
  std::vector<int32_t> ids = tokenize_documents(tokenizer, text);
  if (static_cast<int64_t>(ids.size()) > kCalibrationTokens) ids.resize(kCalibrationTokens);
  if (ids.size() < 16)
    return invalid_argument("calibration text '" + options.quant.calibration_text +
                            "' is too short");
  CalibrationRecorder recorder(options.quant.calibration_seed);
  {
    RecorderScope scope(&recorder);
    LoadOptions plain;
    plain.load_format = options.load_format;
    plain.dummy_seed = options.dummy_seed;
    plain.plan = std::move(partial);
    KITE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_model(model_dir, plain));
    constexpr int64_t kWindow = 512;
    for (size_t s = 0; s < ids.size(); s += kWindow) {
      const size_t n = std::min<size_t>(kWindow, ids.size() - s);
      run_sequence(*model, std::span<const int32_t>(ids).subspan(s, n), DType::kF32, kWindow,
                   LogitsMode::kNone);
    }
  }
  spdlog::info("calibration: {} tokens of {}", ids.size(), options.quant.calibration_text);
  std::vector<LinearActivations> out;
  for (auto& [id, a] : recorder.linears()) out.push_back(std::move(a));
  if (options.load_format != LoadFormat::kDummy) {
    KITE_RETURN_IF_ERROR(attach_output_norms(model_dir, out));
  }
  return out;
}

// AWQ in the model's order, on the quantized model's own activations (AutoAWQ's order, at half
// a layer's granularity): for each layer l, the attention linears are searched on what a model
// whose layers < l are already smoothed, clipped and quantized by the plan so far feeds them,
// then the MLP / MoE linears on what that model with layer l's attention quantized too feeds
// them. Each step reruns the calibration text (2 per layer); everything not yet searched runs
// in fp32. Measured on kite-tiny against searching all layers on the fp32 model and against
// one step per layer: docs/BENCHMARKS.md.
Status awq_plan_sequential(const std::string& model_dir, const LoadOptions& options,
                           int64_t num_layers, QuantPlan& plan) {
  for (int64_t l = 0; l < num_layers; ++l) {
    for (const bool attention_step : {true, false}) {
      auto partial = std::make_shared<QuantPlan>(plan);
      partial->quantize_layers_below = l;
      KITE_ASSIGN_OR_RETURN(std::vector<LinearActivations> acts,
                            record_activations(model_dir, options, partial));
      std::vector<LinearActivations> step;
      for (LinearActivations& a : acts) {
        if (a.parts.empty() || QuantPlan::layer_of(a.parts[0].key) != l) continue;
        const bool attention = a.parts[0].key.find(".self_attn.") != std::string::npos;
        if (attention == attention_step) step.push_back(std::move(a));
      }
      awq_plan(step, plan);
    }
  }
  return ok_status();
}

}  // namespace

Result<std::shared_ptr<const QuantPlan>> build_quant_plan(const std::string& model_dir,
                                                          const LoadOptions& options) {
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  KITE_ASSIGN_OR_RETURN(std::shared_ptr<QuantPlan> plan,
                        make_base_plan(model_dir, config, options.quant));
  if (!needs_calibration(options.quant.method)) return std::shared_ptr<const QuantPlan>(plan);
  if (options.quant.method == QuantMethod::kAwq && options.load_format != LoadFormat::kDummy) {
    KITE_RETURN_IF_ERROR(awq_plan_sequential(model_dir, options, config.num_hidden_layers, *plan));
    return std::shared_ptr<const QuantPlan>(plan);
  }
  KITE_ASSIGN_OR_RETURN(std::vector<LinearActivations> acts,
                        record_activations(model_dir, options));
  if (options.quant.method == QuantMethod::kInt8)
    smoothquant_plan(acts, options.quant.smoothquant_alpha, *plan);
  else
    awq_plan(acts, *plan);
  return std::shared_ptr<const QuantPlan>(plan);
}

Result<KvScales> calibrate_kv_scales(const std::string& model_dir, const LoadOptions& options) {
  if (options.quant.calibration_text.empty())
    return invalid_argument("FP8 KV scale calibration needs --calibration-text FILE");
  KITE_ASSIGN_OR_RETURN(std::string text, read_text_file(options.quant.calibration_text));
  KITE_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_dir(model_dir));
  std::vector<int32_t> ids = tokenize_documents(tokenizer, text);
  if (ids.size() > 2048) ids.resize(2048);
  LoadOptions plain;
  plain.load_format = options.load_format;
  plain.dummy_seed = options.dummy_seed;
  KITE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_model(model_dir, plain));
  const int64_t layers = model->kv_cache_spec().num_layers;
  std::vector<float> k_max(layers, 0.0f), v_max(layers, 0.0f);
  constexpr int64_t kWindow = 512;
  for (size_t s = 0; s < ids.size(); s += kWindow) {
    const size_t n = std::min<size_t>(kWindow, ids.size() - s);
    KvCache cache =
        run_sequence_cache(*model, std::span<const int32_t>(ids).subspan(s, n), kWindow);
    for (int64_t l = 0; l < layers; ++l) {
      for (float x : cache.k(l).f32()) k_max[l] = std::max(k_max[l], std::fabs(x));
      for (float x : cache.v(l).f32()) v_max[l] = std::max(v_max[l], std::fabs(x));
    }
  }
  KvScales scales;
  for (int64_t l = 0; l < layers; ++l) {
    scales.k.push_back(std::max(k_max[l], 1e-6f) / 448.0f);
    scales.v.push_back(std::max(v_max[l], 1e-6f) / 448.0f);
    spdlog::info("kv fp8 scales layer {}: k {:.3g} v {:.3g}", l, scales.k[l], scales.v[l]);
  }
  return scales;
}

Status check_load_options(const std::string& model_dir, const LoadOptions& options) {
  // A named calibration text is read whether the method or the FP8 KV scales use it: a file the
  // user named and kite cannot read is worth saying either way.
  if (!options.quant.calibration_text.empty())
    KITE_RETURN_IF_ERROR(read_text_file(options.quant.calibration_text).status());
  if (options.plan || !options.uses_quant_plan()) return ok_status();  // no plan to make
  if (options.load_format != LoadFormat::kDummy && needs_calibration(options.quant.method) &&
      options.quant.calibration_text.empty())
    return missing_calibration_text(options);
  // The base plan, as load_model makes it, reads only config.json: an unsupported checkpoint
  // format, or --quantization on a quantized checkpoint.
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  return make_base_plan(model_dir, config, options.quant).status();
}

Result<std::unique_ptr<Model>> load_quantized_model(const std::string& model_dir,
                                                    const LoadOptions& options) {
  LoadOptions o = options;
  if (!o.plan && o.load_format != LoadFormat::kDummy) {
    KITE_ASSIGN_OR_RETURN(o.plan, build_quant_plan(model_dir, options));
  }
  return load_model(model_dir, o);
}

}  // namespace kite
