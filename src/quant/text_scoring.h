// Running a text through a model outside the engine: what `kite eval` and calibration share.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace kite {

// The text as the held-out evaluation of kite-tiny tokenizes it: documents separated by blank
// lines ("\n\n"), each as [BOS] + tokens + [EOS] (BOS/EOS only when the tokenizer has them).
std::vector<int32_t> tokenize_documents(const Tokenizer& tokenizer, const std::string& text);

// The bytes of a text to score or calibrate on: an error if the file cannot be read, is empty or
// is not valid UTF-8 (naming the first bad byte's offset and line).
Result<std::string> read_text_file(const std::string& path);

// Runs `tokens` as one sequence from position 0 through a fresh paged cache of `kv_dtype`
// (F32 or F8E4M3), `chunk` tokens per step, and returns the logits of every position
// [tokens.size(), vocab] (LogitsMode::kAll) or an empty tensor (kNone).
Tensor run_sequence(Model& model, std::span<const int32_t> tokens, DType kv_dtype, int64_t chunk,
                    LogitsMode logits, const std::vector<float>* k_scales = nullptr,
                    const std::vector<float>* v_scales = nullptr);
// Runs `tokens` through a fresh fp32 cache and returns the cache (for KV statistics).
KvCache run_sequence_cache(Model& model, std::span<const int32_t> tokens, int64_t chunk);

}  // namespace kite
