#include "quant/quant_method.h"

#include <atomic>

#include "quant/activation_recorder.h"

namespace kite {

Result<QuantMethod> parse_quant_method(std::string_view name) {
  if (name == "none") return QuantMethod::kNone;
  if (name == "fp8") return QuantMethod::kFp8;
  if (name == "int8") return QuantMethod::kInt8;
  if (name == "int4") return QuantMethod::kInt4;
  if (name == "awq") return QuantMethod::kAwq;
  return invalid_argument("unknown quantization '" + std::string(name) +
                          "' (expected none, fp8, int8, int4 or awq)");
}

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kFp8:
      return "fp8";
    case QuantMethod::kInt8:
      return "int8";
    case QuantMethod::kInt4:
      return "int4";
    case QuantMethod::kAwq:
      return "awq";
  }
  return "none";
}

Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto") return KvCacheDtype::kAuto;
  if (name == "fp8" || name == "fp8_e4m3") return KvCacheDtype::kFp8;
  return invalid_argument("unknown kv cache dtype '" + std::string(name) +
                          "' (expected auto or fp8)");
}

std::string_view kv_cache_dtype_name(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kFp8 ? "fp8" : "auto";
}

namespace {
std::atomic<ActivationRecorder*> g_recorder{nullptr};
}  // namespace

ActivationRecorder* active_recorder() { return g_recorder.load(std::memory_order_relaxed); }
void set_active_recorder(ActivationRecorder* recorder) { g_recorder.store(recorder); }

}  // namespace kite
