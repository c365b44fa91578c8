// The byte-level BPE model of a tokenizer.json: vocabulary and ranked merges, keyed by raw bytes
// (the vocabulary's GPT-2 byte characters are mapped back on load). encode_piece() reproduces HF
// tokenizers' BPE::merge_word: repeatedly merge the adjacent pair of lowest rank, leftmost
// first, with a priority queue. Results for short pieces are cached (thread-safe).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/flat_hash.h"

namespace kite {

class BpeModel {
 public:
  // Builds from tokenizer.json's "model" value (type BPE, merges as "a b" strings or [a, b]
  // pairs). Every single byte must be in the vocabulary, so any input can be encoded.
  static Result<BpeModel> from_json(const nlohmann::json& model);

  // Appends the ids for one pre-token `piece` (raw bytes) to `ids`.
  void encode_piece(std::string_view piece, std::vector<int32_t>* ids) const;

  // The model's vocabulary in tokenizer.json's spelling (byte characters), by id; ids without
  // an entry hold an empty string.
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  std::optional<int32_t> token_to_id(std::string_view token) const;

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  // A bounded, sharded memo of piece -> ids; like HF's, it stops growing once full.
  struct Cache {
    static constexpr size_t kShards = 16;
    static constexpr size_t kMaxEntriesPerShard = 8192;
    static constexpr size_t kMaxPieceBytes = 256;
    struct IdSpan {
      uint32_t offset = 0;  // into Shard::ids
      uint32_t size = 0;
    };
    struct Shard {
      std::mutex mu;
      FlatStringMap<IdSpan> map{1024};
      std::vector<int32_t> ids;
    };
    std::array<Shard, kShards> shards;
  };

  void merge(std::string_view piece, std::vector<int32_t>* ids) const;
  const MergeTarget* find_merge(int32_t left, int32_t right) const;

  FlatStringMap<int32_t> bytes_to_id_;  // raw bytes -> id
  FlatStringMap<int32_t> token_to_id_;  // tokenizer.json spelling -> id
  std::vector<std::string> id_to_token_;
  std::array<int32_t, 256> byte_ids_{};
  FlatU64Map<MergeTarget> merges_;  // (left id << 32 | right id) -> merge
  bool ignore_merges_ = false;
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace kite
