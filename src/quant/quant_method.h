// The --quantization and --kv-cache-dtype choices (kept apart from quant_plan.h so the engine
// and CLI configs can name them without the quantization machinery).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kite {

// none: the checkpoint as stored (fp32 compute); fp8: FP8 E4M3 per-channel weights with
// per-token dynamic FP8 activations (a DeepSeek FP8 block checkpoint instead stays in its
// 128x128 blocks); int8: SmoothQuant W8A8 (needs calibration text); int4: group-128
// round-to-nearest W4A16; awq: int4 with activation-aware scales and clipping (calibration).
enum class QuantMethod : uint8_t { kNone, kFp8, kInt8, kInt4, kAwq };
Result<QuantMethod> parse_quant_method(std::string_view name);
std::string_view quant_method_name(QuantMethod method);
inline bool needs_calibration(QuantMethod m) {
  return m == QuantMethod::kInt8 || m == QuantMethod::kAwq;
}

// auto: the compute dtype (fp32 on the CPU); fp8: FP8 E4M3 with a scale per layer for K and V.
enum class KvCacheDtype : uint8_t { kAuto, kFp8 };
Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(KvCacheDtype dtype);

// The calibration recorder's default sampling seed (which input rows per linear AWQ searches
// on); --calibration-seed changes it, to measure how much a result depends on the sample.
inline constexpr uint64_t kDefaultCalibrationSeed = 20261129;

// Every quantization choice a command line makes, as one value the CLI, the engine config and
// the loader pass along.
struct QuantOptions {
  QuantMethod method = QuantMethod::kNone;              // --quantization
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;    // --kv-cache-dtype (read by the engine)
  std::string calibration_text;                         // --calibration-text (int8, awq, fp8 KV)
  double smoothquant_alpha = 0.5;                       // --smoothquant-alpha
  uint64_t calibration_seed = kDefaultCalibrationSeed;  // --calibration-seed
  // --quantize-lm-head: lm_head too, with the method's plain form (FP8 / INT8 per channel,
  // INT4 group round-to-nearest; no smoothing). Off by default, as in vLLM: the output
  // projection's errors land on every logit.
  bool quantize_lm_head = false;
  // --lm-head-quantization fp8|int8|int4: lm_head quantized in that plain form whatever the
  // method, e.g. an 8-bit lm_head under INT4 linears (as llama.cpp's Q4_K_M keeps its output
  // layer in 6 bits): most of the lm_head's bytes saved for a fraction of INT4's error there.
  QuantMethod lm_head_method = QuantMethod::kNone;

  // The plain form lm_head is quantized with: --lm-head-quantization, else with
  // --quantize-lm-head the method's (AWQ's is INT4 round-to-nearest), else kNone.
  QuantMethod lm_head_quant() const {
    if (lm_head_method != QuantMethod::kNone) return lm_head_method;
    if (!quantize_lm_head) return QuantMethod::kNone;
    return method == QuantMethod::kAwq ? QuantMethod::kInt4 : method;
  }
};

}  // namespace kite
