#include "bench/dataset.h"

#include <array>
#include <fstream>
#include <random>

namespace kite::bench {
namespace {

// Short, frequent words: nearly every BPE vocabulary has " word" as one token.
constexpr std::array<const char*, 64> kWords = {
    "the",  "of",    "and",   "to",   "in",   "is",    "you",   "that",  "it",   "he",    "was",
    "for",  "on",    "are",   "as",   "with", "his",   "they",  "at",    "be",   "this",  "have",
    "from", "or",    "one",   "had",  "by",   "word",  "but",   "not",   "what", "all",   "were",
    "we",   "when",  "your",  "can",  "said", "there", "use",   "an",    "each", "which", "she",
    "do",   "how",   "their", "if",   "will", "up",    "other", "about", "out",  "many",  "then",
    "them", "these", "so",    "some", "her",  "would", "make",  "like",  "time"};

uint64_t mix_seed(uint64_t seed, uint64_t stream) { return seed * 0x9E3779B97F4A7C15ull + stream; }

// Prompt `n` tokens/words long from `rng_seed`, in the requested format.
void append_random(BenchRequest& r, PromptFormat format, int32_t n, int32_t vocab,
                   uint64_t rng_seed) {
  if (format == PromptFormat::kTokenIds) {
    auto ids = random_token_ids(n, vocab, rng_seed);
    r.prompt_token_ids.insert(r.prompt_token_ids.end(), ids.begin(), ids.end());
  } else if (n > 0) {
    if (!r.prompt_text.empty()) r.prompt_text += ' ';
    r.prompt_text += random_words(n, rng_seed);
  }
  r.input_len += n;
}

Result<BenchRequest> parse_jsonl_line(const nlohmann::json& j, const std::string& where,
                                      int32_t output_len) {
  BenchRequest r;
  r.output_len = output_len;
  if (!j.is_object()) return invalid_argument(where + ": expected a JSON object");
  if (auto it = j.find("max_tokens"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1)
      return invalid_argument(where + ": \"max_tokens\" must be a positive integer");
    r.output_len = it->get<int32_t>();
  }
  if (auto it = j.find("messages"); it != j.end()) {
    if (!it->is_array() || it->empty())
      return invalid_argument(where + ": \"messages\" must be a non-empty array");
    r.messages = *it;
    return r;
  }
  auto it = j.find("prompt");
  if (it == j.end()) return invalid_argument(where + ": needs \"prompt\" or \"messages\"");
  if (it->is_string()) {
    r.prompt_text = it->get<std::string>();
  } else if (it->is_array() && !it->empty()) {
    for (const auto& t : *it) {
      if (!t.is_number_integer())
        return invalid_argument(where + ": \"prompt\" array must hold token ids");
      r.prompt_token_ids.push_back(t.get<int32_t>());
    }
    r.input_len = static_cast<int32_t>(r.prompt_token_ids.size());
  } else {
    return invalid_argument(where +
                            ": \"prompt\" must be a string or a non-empty array of token ids");
  }
  return r;
}

Result<std::vector<BenchRequest>> load_jsonl(const DatasetConfig& c) {
  std::ifstream in(c.path);
  if (!in) return not_found("cannot open dataset file '" + c.path + "'");
  std::vector<BenchRequest> lines;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = c.path + ":" + std::to_string(number);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return invalid_argument(where + ": not valid JSON");
    KITE_ASSIGN_OR_RETURN(BenchRequest r, parse_jsonl_line(j, where, c.output_len));
    lines.push_back(std::move(r));
  }
  if (lines.empty()) return invalid_argument("dataset file '" + c.path + "' has no prompts");
  std::vector<BenchRequest> out;
  out.reserve(static_cast<size_t>(c.num_prompts));
  for (int64_t i = 0; i < c.num_prompts; ++i)
    out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

}  // namespace

Result<DatasetKind> parse_dataset_kind(const std::string& name) {
  if (name == "random") return DatasetKind::kRandom;
  if (name == "shared-prefix") return DatasetKind::kSharedPrefix;
  if (name == "jsonl") return DatasetKind::kJsonl;
  return invalid_argument("unknown dataset '" + name +
                          "' (expected random, shared-prefix or jsonl)");
}

std::vector<int32_t> random_token_ids(int32_t num_tokens, int32_t vocab_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int32_t lo = vocab_size > 2 * kMinRandomTokenId ? kMinRandomTokenId : 0;
  std::uniform_int_distribution<int32_t> id(lo, std::max(lo, vocab_size - 1));
  std::vector<int32_t> ids(static_cast<size_t>(std::max(num_tokens, 0)));
  for (auto& t : ids) t = id(rng);
  return ids;
}

std::string random_words(int32_t num_words, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  std::string text;
  for (int32_t i = 0; i < num_words; ++i) {
    if (i) text += ' ';
    text += kWords[pick(rng)];
  }
  return text;
}

Result<std::vector<BenchRequest>> build_dataset(const DatasetConfig& c) {
  if (c.num_prompts < 1) return invalid_argument("--num-prompts must be at least 1");
  if (c.output_len < 1) return invalid_argument("--output-len must be at least 1");
  if (c.kind == DatasetKind::kJsonl) {
    if (c.path.empty()) return invalid_argument("--dataset jsonl needs --dataset-path FILE");
    return load_jsonl(c);
  }
  if (c.input_len < 0 || c.prefix_len < 0) return invalid_argument("lengths must not be negative");
  if (c.vocab_size < 1) return invalid_argument("--vocab-size must be positive");
  const bool shared = c.kind == DatasetKind::kSharedPrefix;
  if (shared && (c.prefix_len < 1 || c.num_prefixes < 1))
    return invalid_argument(
        "--dataset shared-prefix needs --prefix-len >= 1 and --num-prefixes >= 1");
  if (c.input_len + (shared ? c.prefix_len : 0) < 1)
    return invalid_argument("prompts would be empty: set --input-len (or --prefix-len) >= 1");
  std::vector<BenchRequest> prefixes;
  if (shared)
    for (int32_t p = 0; p < c.num_prefixes; ++p) {
      BenchRequest pre;
      append_random(pre, c.format, c.prefix_len, c.vocab_size,
                    mix_seed(c.seed, 1'000'000'007ull + p));
      prefixes.push_back(std::move(pre));
    }
  std::vector<BenchRequest> out;
  out.reserve(static_cast<size_t>(c.num_prompts));
  for (int64_t i = 0; i < c.num_prompts; ++i) {
    BenchRequest r = shared ? prefixes[static_cast<size_t>(i % c.num_prefixes)] : BenchRequest{};
    append_random(r, c.format, c.input_len, c.vocab_size,
                  mix_seed(c.seed, static_cast<uint64_t>(i)));
    r.output_len = c.output_len;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kite::bench
