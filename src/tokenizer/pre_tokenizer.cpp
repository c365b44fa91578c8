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

// The segments covering `text`: gaps between matches and the matches (HF's find_matches).
std::vector<Segment> find_segments(const Regex& regex, std::string_view text, bool invert) {
  std::vector<std::pair<size_t, size_t>> matches;
  regex.find_all(text, &matches);
  std::vector<Segment> segs;
  segs.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [s, e] : matches) {
    if (s != prev) segs.push_back({prev, s, invert});
    segs.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != text.size() || text.empty()) segs.push_back({prev, text.size(), invert});
  return segs;
}

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
    return unsupported("tokenizer.json pre_tokenizer must end with ByteLevel (kite implements "
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

void PreTokenizer::apply_step(const Step& step, const std::vector<std::string_view>& in,
                              std::vector<std::string_view>* out) {
  for (std::string_view piece : in) {
    std::vector<Segment> segs = find_segments(step.regex, piece, step.invert);
    for (auto [s, e] : apply_behavior(segs, step.behavior)) {
      if (e > s) out->push_back(piece.substr(s, e - s));
    }
  }
}

void PreTokenizer::split(std::string_view text, std::string* scratch,
                         std::vector<std::string_view>* pieces) const {
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    scratch->assign(" ");
    scratch->append(text);
    text = *scratch;
  }
  if (steps_.empty()) {
    if (!text.empty()) pieces->push_back(text);
    return;
  }
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t i = 0; i < steps_.size(); ++i) {
    std::vector<std::string_view>* dst = (i + 1 == steps_.size()) ? pieces : &next;
    if (dst == &next) next.clear();
    apply_step(steps_[i], current, dst);
    if (dst == &next) current.swap(next);
  }
}

}  // namespace kite
