// Benchmark datasets: the prompts `kite bench serve` sends (and, as token ids, what the
// in-process benchmarks submit).
//
//   random         input_len random tokens per prompt.
//   shared-prefix  num_prefixes common prefixes of prefix_len tokens (prompt i uses prefix
//                  i % num_prefixes), each followed by a random suffix of input_len tokens:
//                  the prefix-caching workload (a long system prompt shared by all users).
//   jsonl          one JSON object per line: {"prompt": "text" | [ids]} or
//                  {"messages": [...]} (chat), optionally "max_tokens" overriding output_len.
//                  Lines are used in order and reused from the top when there are fewer
//                  than num_prompts.
//
// Token-id prompts make the input length exact (the server skips tokenization): random ids
// come from [kMinRandomTokenId, vocab_size), above the special tokens every supported family
// puts at the bottom (bos/eos/pad) and below those placed at the top of the vocabulary.
// Text prompts (needed by /v1/chat/completions) are random common English words, one per
// "token"; their true token count is whatever the server's tokenizer makes of them, and
// the benchmark reports the server's usage.prompt_tokens, not input_len.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kite::bench {

enum class DatasetKind { kRandom, kSharedPrefix, kJsonl };
enum class PromptFormat { kTokenIds, kText };

inline constexpr int32_t kMinRandomTokenId = 100;

struct DatasetConfig {
  DatasetKind kind = DatasetKind::kRandom;
  std::string path;  // jsonl
  PromptFormat format = PromptFormat::kTokenIds;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  int32_t prefix_len = 0;  // shared-prefix
  int32_t num_prefixes = 1;
  int64_t num_prompts = 1000;
  int32_t vocab_size = 10000;  // token ids are drawn below this
  uint64_t seed = 0;
};

// One prompt. Exactly one of prompt_token_ids / prompt_text / messages is set.
struct BenchRequest {
  std::vector<int32_t> prompt_token_ids;
  std::string prompt_text;
  nlohmann::json messages;  // null unless a chat prompt
  int32_t input_len = 0;    // tokens (ids: exact) or words (text: approximate); 0 if unknown
  int32_t output_len = 0;   // max_tokens sent
};

Result<DatasetKind> parse_dataset_kind(const std::string& name);
Result<std::vector<BenchRequest>> build_dataset(const DatasetConfig& config);

// `num_tokens` random ids in [kMinRandomTokenId, vocab_size) (or [0, vocab_size) for a
// vocabulary too small to skip the bottom ids).
std::vector<int32_t> random_token_ids(int32_t num_tokens, int32_t vocab_size, uint64_t seed);
// `num_words` random common words separated by spaces.
std::string random_words(int32_t num_words, uint64_t seed);

}  // namespace kite::bench
