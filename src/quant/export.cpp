#include "quant/export.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config.h"
#include "model/weight_store.h"
#include "quant/output_folder.h"
#include "quant/safetensors_writer.h"

namespace kite {
namespace {

constexpr int kAwqNibbleColumn[8] = {0, 2, 4, 6, 1, 3, 5, 7};

int code_at(const QuantizedWeight& q, int64_t n, int64_t k) {
  const uint8_t byte = q.codes.data<uint8_t>()[n * ((q.in_features + 1) / 2) + k / 2];
  return (k & 1) ? byte >> 4 : byte & 0xF;
}

Status add_awq(SafetensorsWriter& w, const std::string& key, const QuantizedWeight& q) {
  const int64_t n = q.out_features, k = q.in_features, groups = q.num_groups();
  if (n % 8 != 0 || q.g_idx.defined())
    return unsupported("'" + key + "' has " + std::to_string(n) +
                       " outputs; the AWQ layout needs a multiple of 8");
  std::vector<uint32_t> qweight(k * (n / 8), 0), qzeros(groups * (n / 8), 0);
  std::vector<uint16_t> scales(groups * n);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t c = 0; c < n / 8; ++c)
      for (int i = 0; i < 8; ++i)
        qweight[kk * (n / 8) + c] |=
            static_cast<uint32_t>(code_at(q, 8 * c + kAwqNibbleColumn[i], kk)) << (4 * i);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < n / 8; ++c)
      for (int i = 0; i < 8; ++i) {
        const int64_t col = 8 * c + kAwqNibbleColumn[i];
        qzeros[g * (n / 8) + c] |= static_cast<uint32_t>(q.zeros.data<uint8_t>()[col * groups + g])
                                   << (4 * i);
      }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t col = 0; col < n; ++col)
      scales[g * n + col] = f32_to_f16(q.scales.f32()[col * groups + g]);
  w.add(key + ".qweight", "I32", {k, n / 8}, qweight.data(), qweight.size() * 4);
  w.add(key + ".qzeros", "I32", {groups, n / 8}, qzeros.data(), qzeros.size() * 4);
  w.add(key + ".scales", "F16", {groups, n}, scales.data(), scales.size() * 2);
  return ok_status();
}

Status add_quantized(SafetensorsWriter& w, const std::string& key, const QuantizedWeight& q) {
  switch (q.format) {
    case QuantFormat::kInt4Group:
      KITE_RETURN_IF_ERROR(add_awq(w, key, q));
      break;
    case QuantFormat::kFp8PerChannel:
    case QuantFormat::kInt8PerChannel:
      w.add(key + ".weight", q.codes);
      w.add(key + ".weight_scale", q.scales.view({q.out_features, 1}));
      break;
    case QuantFormat::kFp8Block:
      return unsupported("exporting FP8 block weights ('" + key + "') is not supported");
  }
  if (q.input_scale.defined()) w.add(key + ".input_smooth_inv", q.input_scale);
  return ok_status();
}

nlohmann::ordered_json quantization_config(const QuantPlan& plan) {
  nlohmann::ordered_json not_converted = {"mlp.gate", "kv_b_proj"};
  if (!plan.quantize_lm_head()) not_converted.push_back("lm_head");
  if (plan.method == QuantMethod::kInt4 || plan.method == QuantMethod::kAwq)
    return {{"quant_method", "awq"},
            {"bits", 4},
            {"group_size", plan.group_size},
            {"zero_point", true},
            {"version", "gemm"},
            {"modules_to_not_convert", not_converted},
            {"kite_method", std::string(quant_method_name(plan.method))}};
  const bool fp8 = plan.method == QuantMethod::kFp8;
  const std::string type = fp8 ? "float" : "int";
  nlohmann::ordered_json ignore = {"re:.*mlp.gate$", "re:.*kv_b_proj$"};
  if (!plan.quantize_lm_head()) ignore.insert(ignore.begin(), "lm_head");
  nlohmann::ordered_json group = {{"targets", {"Linear"}},
                                  {"weights",
                                   {{"num_bits", 8},
                                    {"type", type},
                                    {"strategy", "channel"},
                                    {"symmetric", true},
                                    {"dynamic", false}}},
                                  {"input_activations",
                                   {{"num_bits", 8},
                                    {"type", type},
                                    {"strategy", "token"},
                                    {"symmetric", true},
                                    {"dynamic", true}}}};
  return {{"quant_method", "compressed-tensors"},
          {"format", fp8 ? "float-quantized" : "int-quantized"},
          {"config_groups", {{"group_0", group}}},
          {"ignore", ignore},
          {"kite_method", std::string(quant_method_name(plan.method))}};
}

Status write_config(const std::string& model_dir, const QuantPlan& plan,
                    const std::string& out_dir) {
  std::ifstream in(model_dir + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (cfg.is_discarded()) return corrupt(model_dir + "/config.json is not valid JSON");
  cfg["quantization_config"] = quantization_config(plan);
  std::ofstream out(out_dir + "/config.json");
  out << cfg.dump(2) << "\n";
  if (!out) return internal_error("cannot write " + out_dir + "/config.json");
  return ok_status();
}

}  // namespace

Status export_quantized_checkpoint(const std::string& model_dir, const QuantPlan& plan,
                                   const std::string& out_dir) {
  namespace fs = std::filesystem;
  if (plan.method == QuantMethod::kNone) return invalid_argument("kite quantize needs --method");
  KITE_RETURN_IF_ERROR(check_output_folder(out_dir, model_dir));
  KITE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(model_dir));
  if (config.fp8_block_quantized)
    return unsupported(model_dir + " is an FP8 block checkpoint; serve it with --quantization fp8");
  KITE_ASSIGN_OR_RETURN(WeightStore store, WeightStore::open(model_dir));
  // AWQ's and compressed-tensors' configs describe one format for every quantized linear.
  const QuantMethod body = plan.method == QuantMethod::kAwq ? QuantMethod::kInt4 : plan.method;
  if (plan.quantize_lm_head() && plan.lm_head_method != body)
    return unsupported("an exported checkpoint holds one format: lm_head in " +
                       std::string(quant_method_name(plan.lm_head_method)) + " beside " +
                       std::string(quant_method_name(plan.method)) +
                       " linears cannot be written (use --lm-head-quantization when serving)");
  if (plan.quantize_lm_head() && !store.contains("lm_head.weight"))
    return unsupported(model_dir +
                       " ties lm_head to the embedding; a quantized checkpoint cannot store it "
                       "apart (use --quantize-lm-head when serving instead)");
  KITE_ASSIGN_OR_RETURN(StagedFolder staged, StagedFolder::create(out_dir));
  const std::string& dir = staged.path();
  SafetensorsWriter writer;
  int64_t quantized = 0;
  for (const std::string& name : store.names()) {
    KITE_ASSIGN_OR_RETURN(TensorInfo info, store.info(name));
    const bool is_weight = name.size() > 7 && name.ends_with(".weight") && info.shape.size() == 2;
    const std::string key = is_weight ? name.substr(0, name.size() - 7) : name;
    if (is_weight && plan.changes(key)) {
      KITE_ASSIGN_OR_RETURN(Tensor w, store.get_f32(name, info.shape));
      KITE_ASSIGN_OR_RETURN(std::optional<QuantizedWeight> q, plan_linear(plan, key, w));
      if (q) {
        KITE_RETURN_IF_ERROR(add_quantized(writer, key, *q));
        ++quantized;
      } else {
        writer.add(name, w);
      }
    } else if (auto it = plan.norm_divisors.find(name); it != plan.norm_divisors.end()) {
      KITE_ASSIGN_OR_RETURN(Tensor v, store.get_f32(name, info.shape));
      for (size_t i = 0; i < it->second.size(); ++i) v.f32()[i] /= it->second[i];
      writer.add(name, v);
    } else {
      KITE_ASSIGN_OR_RETURN(Tensor raw, store.get_raw(name));
      writer.add(name, raw);
    }
  }
  KITE_RETURN_IF_ERROR(writer.write(dir + "/model.safetensors"));
  KITE_RETURN_IF_ERROR(write_config(model_dir, plan, dir));
  std::error_code ec;
  for (const char* f : kExportCopiedFiles) {
    if (!fs::exists(fs::path(model_dir) / f)) continue;
    fs::copy_file(fs::path(model_dir) / f, fs::path(dir) / f, ec);
    if (ec) return internal_error(std::string("copying ") + f + ": " + ec.message());
  }
  KITE_RETURN_IF_ERROR(staged.commit());
  spdlog::info("wrote {} ({} linears quantized, {:.1f} MiB)", out_dir, quantized,
               writer.data_bytes() / 1048576.0);
  return ok_status();
}

}  // namespace kite
