#include "tokenizer/bpe_model.h"

#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/byte_level.h"

namespace kite {
namespace {

using nlohmann::json;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

Status check_unsupported_options(const json& model) {
  if (model.value("type", "BPE") != "BPE") {
    return unsupported("tokenizer model type '" + model.value("type", "") +
                       "' (kite implements byte-level BPE only)");
  }
  auto is_set = [&](const char* key) {
    return model.contains(key) && !model[key].is_null() && model[key] != false &&
           model[key] != "" && model[key] != 0;
  };
  for (const char* key :
       {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback"}) {
    if (is_set(key)) return unsupported(std::string("BPE option '") + key + "' is set");
  }
  return ok_status();
}

// Splits a merges entry into its two tokens.
Result<std::pair<std::string, std::string>> parse_merge(const json& m, size_t index) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return std::make_pair(m[0].get<std::string>(), m[1].get<std::string>());
  }
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos) {
      return std::make_pair(s.substr(0, space), s.substr(space + 1));
    }
  }
  return corrupt("tokenizer.json merges[" + std::to_string(index) +
                 "] is not \"a b\" or [\"a\", \"b\"]: " + m.dump());
}

}  // namespace

Result<BpeModel> BpeModel::from_json(const json& model) {
  KITE_RETURN_IF_ERROR(check_unsupported_options(model));
  const json& vocab = model.value("vocab", json());
  const json& merges = model.value("merges", json());
  if (!vocab.is_object() || !merges.is_array()) {
    return corrupt("tokenizer.json model needs a \"vocab\" object and a \"merges\" array");
  }
  BpeModel bpe;
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  bpe.token_to_id_ = FlatStringMap<int32_t>(vocab.size());
  bpe.bytes_to_id_ = FlatStringMap<int32_t>(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
      return corrupt("tokenizer.json vocab entry '" + it.key() + "' has no valid id");
    }
    auto id = it.value().get<int32_t>();
    bpe.token_to_id_.insert(it.key(), id);
    if (static_cast<size_t>(id) >= bpe.id_to_token_.size()) bpe.id_to_token_.resize(id + 1);
    bpe.id_to_token_[id] = it.key();
    // Tokens outside the byte alphabet cannot come out of byte-level BPE; they stay decodable.
    if (std::optional<std::string> bytes = byte_level::decode(it.key())) {
      bpe.bytes_to_id_.insert(*bytes, id);
    }
  }
  for (int b = 0; b < 256; ++b) {
    const int32_t* id = bpe.bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    if (id == nullptr) {
      return unsupported("BPE vocabulary has no token for byte " + std::to_string(b) +
                         " (not a byte-level BPE)");
    }
    bpe.byte_ids_[b] = *id;
  }
  bpe.merges_ = FlatU64Map<MergeTarget>(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    KITE_ASSIGN_OR_RETURN(auto pair, parse_merge(merges[i], i));
    const int32_t* a = bpe.token_to_id_.find(pair.first);
    const int32_t* b = bpe.token_to_id_.find(pair.second);
    const int32_t* merged = bpe.token_to_id_.find(pair.first + pair.second);
    if (a == nullptr || b == nullptr || merged == nullptr) {
      return corrupt("tokenizer.json merges[" + std::to_string(i) + "] '" + pair.first + " " +
                     pair.second + "' uses a token missing from the vocab");
    }
    // As in HF, a repeated pair keeps its last rank.
    bpe.merges_.insert(pair_key(*a, *b), {static_cast<int32_t>(i), *merged});
  }
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t* id = token_to_id_.find(token);
  if (id == nullptr) return std::nullopt;
  return *id;
}

const BpeModel::MergeTarget* BpeModel::find_merge(int32_t left, int32_t right) const {
  return merges_.find(pair_key(left, right));
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  uint64_t hash = hash_bytes(piece);
  if (ignore_merges_) {
    if (const int32_t* id = bytes_to_id_.find(piece, hash)) {
      ids->push_back(*id);
      return;
    }
  }
  if (piece.size() > Cache::kMaxPieceBytes) {
    merge(piece, ids);
    return;
  }
  Cache::Shard& shard = cache_->shards[hash >> 60];  // top bits: the map's probe uses the low ones
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    if (const Cache::IdSpan* span = shard.map.find(piece, hash)) {
      const int32_t* first = shard.ids.data() + span->offset;
      ids->insert(ids->end(), first, first + span->size);
      return;
    }
  }
  size_t first = ids->size();
  merge(piece, ids);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() < Cache::kMaxEntriesPerShard) {
    Cache::IdSpan span{static_cast<uint32_t>(shard.ids.size()),
                       static_cast<uint32_t>(ids->size() - first)};
    shard.ids.insert(shard.ids.end(), ids->begin() + first, ids->end());
    shard.map.insert(piece, hash, span);
  }
}

// HF tokenizers' Word::merge_all: symbols form a linked list over the piece's bytes; the queue
// orders candidate merges by (rank, position) and stale entries are skipped when popped.
void BpeModel::merge(std::string_view piece, std::vector<int32_t>* ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue(std::greater<>(),
                                                                               std::move(storage));
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1,
                  true};
  }
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const MergeTarget* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, i, m->new_id});
    }
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    const MergeTarget* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeTarget* pm = find_merge(symbols[cur.prev].id, cur.id)) {
        queue.push({pm->rank, cur.prev, pm->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const MergeTarget* nm = find_merge(cur.id, symbols[cur.next].id)) {
        queue.push({nm->rank, top.pos, nm->new_id});
      }
    }
  }
  for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace kite
