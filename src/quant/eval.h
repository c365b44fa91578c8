// Perplexity and agreement of a (quantized) model against the same model unquantized: the
// logic behind `kite eval`.
//
// The text is tokenized as tokenize_documents() does, cut into consecutive windows of `window`
// tokens (each predicting the next token of every position, as kite-tiny's held-out loss was
// measured), and every window is run through both models in `chunk`-token steps of a paged
// cache. Over all scored positions: perplexity = exp(mean NLL) of each model, kl_divergence =
// mean KL(reference || quantized) of the next-token distributions (nats), top1_agreement = the
// fraction of positions whose argmax agrees.
#pragma once

#include <string>

#include "model/load_options.h"

namespace kite {

struct EvalOptions {
  std::string model_dir;
  LoadOptions load;  // quantization, kv cache dtype, calibration of the evaluated model
  std::string text_path;
  int64_t max_tokens = 0;  // 0: the whole text; else at most this many scored positions
  int64_t window = 512;    // at most the model's max_position_embeddings
  int64_t chunk = 256;     // tokens per forward step
};

struct EvalResult {
  double perplexity = 0;
  double reference_perplexity = 0;
  double kl_divergence = 0;
  double top1_agreement = 0;
  int64_t tokens = 0;  // scored positions
  int64_t windows = 0;
  double seconds = 0;
};

Result<EvalResult> evaluate(const EvalOptions& options);

}  // namespace kite
