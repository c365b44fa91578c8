// Calibration for --quantization int8 (SmoothQuant) and awq, and the loader that runs it.
//
// Calibration loads the model unquantized (AWQ: with what it has searched so far quantized,
// below) with an ActivationRecorder installed, runs the
// calibration text through it (up to kCalibrationTokens tokens, 512-token windows), and keeps
// per linear: max |x| and mean |x| per input channel and up to kSampleRows (512) sampled input rows.
// From those it builds the QuantPlan's smoothing factors:
//   SmoothQuant: s_j = max|X_j|^alpha / max|W_j|^(1-alpha) per smoothing group (all linears
//     reading one norm's output share s; see quant_plan.h for folding).
//   AWQ: s = mean|X|^a, or mean|X|^a / mean|W~|^(1-a) (W~ = |w| / group max; AutoAWQ's duo
//     scaling), normalised by sqrt(max * min), for the a in {0, 0.05, ..., 1} minimising the
//     group's summed output error ||X W^T - (X/s) Q(W diag(s))^T||^2 on the sampled rows (for
//     MLA's q_a and kv_a measured after the RMSNorm that follows each: quant/awq_loss.h), then
//     per output row and group a clipping bound (1 - i/20 of max|w|, i < 10) minimising the
//     group's partial-output error. Unlike AutoAWQ, the q/k projections are clipped too: with a
//     per-linear output loss it measured better on kite-tiny (docs/BENCHMARKS.md).
//     The search runs in the model's order on the quantized model's own activations (AutoAWQ's
//     order): each layer's attention linears, then its MLP / MoE linears, are searched on what
//     the model with everything searched before them already quantized feeds them, so the
//     calibration text runs 2 x num_layers times.
// Simplification against AutoAWQ: the scale search measures each linear's own output (normed
// where a norm follows), not the whole block's (an MLP-output loss for gate/up measured worse
// on kite-tiny).
#pragma once

#include <memory>
#include <string>

#include "model/load_options.h"
#include "model/model.h"
#include "quant/quant_plan.h"
#include "quant/smoothing_search.h"

namespace kite {

inline constexpr int64_t kCalibrationTokens = 4096;

// The plan for options.quantization, calibrated on options.calibration_text when the method
// needs it.
Result<std::shared_ptr<const QuantPlan>> build_quant_plan(const std::string& model_dir,
                                                          const LoadOptions& options);

// FP8 KV cache scales per layer: max |K| (|V|) over the calibration text's first 2,048 tokens
// run through the unquantized model, / 448, so the cache uses E4M3's whole exponent range
// (small latent values stay out of the subnormals). Larger values later saturate at 448 * scale.
struct KvScales {
  std::vector<float> k, v;
};
Result<KvScales> calibrate_kv_scales(const std::string& model_dir, const LoadOptions& options);

// The errors loading `model_dir` with `options` would give that show before anything is
// loaded: a --calibration-text that read_text_file refuses, none where int8 / awq need one (real
// weights, no plan given), or a quantization the checkpoint's config.json rules out. kite eval
// loads its unquantized reference first and the engine calibrates FP8 KV scales after loading,
// and a large model takes minutes to load.
Status check_load_options(const std::string& model_dir, const LoadOptions& options);

// load_model with options.plan filled by build_quant_plan (the entry point for --quantization).
Result<std::unique_ptr<Model>> load_quantized_model(const std::string& model_dir,
                                                    const LoadOptions& options);

}  // namespace kite
