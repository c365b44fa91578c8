#include "cache/block_hash.h"

#include <xxhash.h>

#include <array>
#include <cstring>

namespace kite::cache {

namespace {
BlockHash from_xxh128(XXH128_hash_t h) { return BlockHash{h.low64, h.high64}; }
}  // namespace

BlockHash root_block_hash(std::string_view salt) {
  // A fixed domain tag keeps the empty salt from hashing to XXH3's empty-input constant.
  static constexpr std::string_view kDomain = "kite.prefix-cache.v1:";
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, kDomain.data(), kDomain.size());
  XXH3_128bits_update(state, salt.data(), salt.size());
  BlockHash h = from_xxh128(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return h;
}

BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids) {
  // Blocks are small (16 tokens = 64 bytes by default), so one contiguous buffer on the stack
  // beats the streaming API; larger blocks fall back to streaming.
  constexpr size_t kStackTokens = 64;
  const size_t token_bytes = token_ids.size() * sizeof(int32_t);
  if (token_ids.size() <= kStackTokens) {
    std::array<unsigned char, sizeof(BlockHash) + kStackTokens * sizeof(int32_t)> buf;
    std::memcpy(buf.data(), &parent.low, sizeof(uint64_t));
    std::memcpy(buf.data() + sizeof(uint64_t), &parent.high, sizeof(uint64_t));
    std::memcpy(buf.data() + sizeof(BlockHash), token_ids.data(), token_bytes);
    return from_xxh128(XXH3_128bits(buf.data(), sizeof(BlockHash) + token_bytes));
  }
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, &parent.low, sizeof(uint64_t));
  XXH3_128bits_update(state, &parent.high, sizeof(uint64_t));
  XXH3_128bits_update(state, token_ids.data(), token_bytes);
  BlockHash h = from_xxh128(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return h;
}

void extend_block_hashes(const BlockHash& root, std::span<const int32_t> token_ids,
                         int32_t block_size, std::vector<BlockHash>& hashes) {
  const size_t num_full_blocks = token_ids.size() / static_cast<size_t>(block_size);
  while (hashes.size() < num_full_blocks) {
    const BlockHash& parent = hashes.empty() ? root : hashes.back();
    const size_t start = hashes.size() * static_cast<size_t>(block_size);
    hashes.push_back(hash_block_tokens(parent, token_ids.subspan(start, block_size)));
  }
}

}  // namespace kite::cache
