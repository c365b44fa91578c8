#include "quant/text_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tokenizer/utf8.h"

namespace kite {

std::vector<int32_t> tokenize_documents(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view doc(text.data() + pos, end - pos);
    if (doc.find_first_not_of(" \t\r\n\f\v") != std::string_view::npos) {
      if (auto bos = tokenizer.bos_id()) ids.push_back(*bos);
      std::vector<int32_t> t = tokenizer.encode(doc, false);
      ids.insert(ids.end(), t.begin(), t.end());
      if (auto eos = tokenizer.eos_id()) ids.push_back(*eos);
    }
    pos = end + 2;
  }
  return ids;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read text file '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = std::move(s).str();
  if (text.empty()) return invalid_argument("text file '" + path + "' is empty");
  // The tokenizer would replace bad bytes by U+FFFD and score the result: a Latin-1 or UTF-16
  // file would give a perplexity of something that is not the text.
  if (const size_t i = utf8::first_invalid(text); i != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(i), '\n');
    return invalid_argument(fmt::format(
        "text file '{}' is not UTF-8: byte 0x{:02X} at offset {} (line {}) does not start a valid "
        "sequence",
        path, static_cast<unsigned char>(text[i]), i, line));
  }
  return text;
}

namespace {

constexpr int64_t kBlock = 16;

Tensor run_into(Model& model, std::span<const int32_t> tokens, KvCache& cache, int64_t chunk,
                LogitsMode logits) {
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> table((n + kBlock - 1) / kBlock);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  ModelRunner runner(model, cache);
  const int64_t vocab = model.config().vocab_size;
  Tensor out = logits == LogitsMode::kAll ? Tensor::empty({n, vocab}) : Tensor();
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    SequenceChunk c;
    c.token_ids = tokens.subspan(start, len);
    c.num_computed_tokens = static_cast<int32_t>(start);
    c.block_table = table;
    c.logits = logits == LogitsMode::kAll ? LogitsMode::kAll : LogitsMode::kLast;
    Tensor l = runner.execute(std::span<const SequenceChunk>(&c, 1));
    if (logits == LogitsMode::kAll)
      std::memcpy(out.data<float>() + start * vocab, l.data<float>(), l.size_bytes());
  }
  return out;
}

}  // namespace

Tensor run_sequence(Model& model, std::span<const int32_t> tokens, DType kv_dtype, int64_t chunk,
                    LogitsMode logits, const std::vector<float>* k_scales,
                    const std::vector<float>* v_scales) {
  KvCacheSpec spec = model.kv_cache_spec();
  spec.dtype = kv_dtype;
  if (k_scales) spec.k_scales = *k_scales;
  if (v_scales) spec.v_scales = *v_scales;
  KvCache cache(spec, (static_cast<int64_t>(tokens.size()) + kBlock - 1) / kBlock, kBlock);
  return run_into(model, tokens, cache, chunk, logits);
}

KvCache run_sequence_cache(Model& model, std::span<const int32_t> tokens, int64_t chunk) {
  KvCache cache(model.kv_cache_spec(), (static_cast<int64_t>(tokens.size()) + kBlock - 1) / kBlock,
                kBlock);
  run_into(model, tokens, cache, chunk, LogitsMode::kNone);
  return cache;
}

}  // namespace kite
