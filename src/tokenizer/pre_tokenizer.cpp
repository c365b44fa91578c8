#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kite {
namespace {

using nlohmann::json;

// The pattern HF's ByteLevel pre-tokenizer uses when use_regex is true (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<SplitBehavior> parse_behavior(const json& j) {
  std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return unsupported("pre_tokenizer Split behavior '" + j.dump() + "'");
}

struct Segment {
  size_t start, end;
  bool is_match;
};

// Applies an HF SplitDelimiterBehavior to the segments (ported from tokenizers'
// NormalizedString::split); returns the [start, end) pieces to keep.
std::vector<std::pair<size_t, size_t>> apply_behavior(const std::vector<Segment>& segs,
                                                      SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  out.reserve(segs.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segs) out.emplace_back(s.start, s.end);
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segs) {
        if (!s.is_match) out.emplace_back(s.start, s.end);
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.start, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().first = it->start;
        } else {
          out.emplace_back(it->start, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < segs.size(); ++i) {
        if (i > 0 && segs[i].is_match == previous_match) {
          out.back().second = segs[i].end;
        } else {
          out.emplace_back(segs[i].start, segs[i].end);
        }
        previous_match = segs[i].is_match;
      }
      break;
  }
  return out;
}

Status add_steps(const json& config, std::vector<json>* flat) {
  if (!config.is_object() || !config.contains("type")) {
    return corrupt("pre_tokenizer entry without a \"type\": " + config.dump().substr(0, 200));
  }
  if (config["type"] == "Sequence") {
    for (const json& child : config.value("pretokenizers", json::array())) {
      KITE_RETURN_IF_ERROR(add_steps(child, flat));
    }
    return ok_status();
  }
  flat->push_back(config);
  return ok_status();
}

}  // namespace

Result<PreTokenizer> PreTokenizer::from_json(const json& config) {
  std::vector<json> flat;
  if (!config.is_null()) KITE_RETURN_IF_ERROR(add_steps(config, &flat));
  if (flat.empty() || flat.back().value("type", "") != "ByteLevel") {
    return unsupported(
        "tokenizer.json pre_tokenizer must end with ByteLevel (kite implements "
        "byte-level BPE only)");
  }
  PreTokenizer pt;
  for (size_t i = 0; i < flat.size(); ++i) {
    const json& c = flat[i];
    std::string type = c.value("type", "");
    Step step;
    if (type == "Split") {
      const json& pattern = c.value("pattern", json::object());
      if (pattern.contains("Regex")) {
        KITE_ASSIGN_OR_RETURN(step.regex, Regex::compile(pattern["Regex"].get<std::string>()));
      } else if (pattern.contains("String")) {
        KITE_ASSIGN_OR_RETURN(step.regex, Regex::literal(pattern["String"].get<std::string>()));
      } else {
        return corrupt("pre_tokenizer Split without a Regex or String pattern");
      }
      KITE_ASSIGN_OR_RETURN(step.behavior, parse_behavior(c.value("behavior", json())));
      step.invert = c.value("invert", false);
    } else if (type == "Digits") {
      // HF splits on char::is_numeric, i.e. the N categories.
      KITE_ASSIGN_OR_RETURN(step.regex, Regex::compile(R"(\p{N})"));
      step.behavior = c.value("individual_digits", false) ? SplitBehavior::kIsolated
                                                          : SplitBehavior::kContiguous;
    } else if (type == "ByteLevel") {
      if (i + 1 != flat.size()) {
        return unsupported("pre_tokenizer ByteLevel must be the last step");
      }
      if (c.value("add_prefix_space", false)) {
        // HF prepends the space to each piece reaching ByteLevel; kite supports the common
        // layout where ByteLevel is the only step, so the piece is the whole text segment.
        if (i != 0) return unsupported("ByteLevel add_prefix_space after another pre-tokenizer");
        pt.add_prefix_space_ = true;
      }
      if (!c.value("use_regex", true)) continue;
      KITE_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern));
    } else {
      return unsupported("pre_tokenizer type '" + type + "'");
    }
    pt.steps_.push_back(std::move(step));
  }
  return pt;
}

namespace {

// Splits `piece` by one step, calling emit(sub_piece) for each non-empty result. `matches` is
// scratch space reused across calls.
template <typename Emit>
void split_piece(const Regex& regex, SplitBehavior behavior, bool invert, std::string_view piece,
                 std::vector<std::pair<size_t, size_t>>* matches, Emit&& emit) {
  matches->clear();
  regex.find_all(piece, matches);
  if (behavior == SplitBehavior::kIsolated) {  // the common case: every segment is a piece
    size_t prev = 0;
    for (auto [s, e] : *matches) {
      if (s > prev) emit(piece.substr(prev, s - prev));
      emit(piece.substr(s, e - s));
      prev = e;
    }
    if (prev < piece.size()) emit(piece.substr(prev));
    return;
  }
  std::vector<Segment> segs;
  segs.reserve(matches->size() * 2 + 1);
  size_t prev = 0;
  for (auto [s, e] : *matches) {
    if (s != prev) segs.push_back({prev, s, invert});
    segs.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != piece.size() || piece.empty()) segs.push_back({prev, piece.size(), invert});
  for (auto [s, e] : apply_behavior(segs, behavior)) {
    if (e > s) emit(piece.substr(s, e - s));
  }
}

}  // namespace

void PreTokenizer::for_each_piece_impl(std::string_view text, PieceFn fn, void* ctx) const {
  std::string prefixed;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  if (text.empty()) return;
  if (steps_.empty()) {
    fn(ctx, text);
    return;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  // Every step but the last materializes its pieces; the last streams them to `fn`.
  std::vector<std::string_view> current{text}, next;
  for (size_t i = 0; i + 1 < steps_.size(); ++i) {
    const Step& step = steps_[i];
    next.clear();
    for (std::string_view piece : current) {
      split_piece(step.regex, step.behavior, step.invert, piece, &matches,
                  [&next](std::string_view p) { next.push_back(p); });
    }
    current.swap(next);
  }
  const Step& last = steps_.back();
  for (std::string_view piece : current) {
    split_piece(last.regex, last.behavior, last.invert, piece, &matches,
                [fn, ctx](std::string_view p) { fn(ctx, p); });
  }
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces;
  for_each_piece(text, [&pieces](std::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

}  // namespace kite
