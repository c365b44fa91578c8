#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace kite {
namespace {

// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and the Z categories (Zs, Zl, Zp). PCRE2's
// \s under UCP leaves out U+0085, and JavaScript's adds U+FEFF, so the set is spelled out.
constexpr std::string_view kSpaceClassBody = "\\t-\\r\\x{85}\\p{Z}";

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match data and JIT stack, shared by every Regex the thread runs.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // The default 32 KiB JIT stack can overflow on long whitespace runs with look-ahead.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<std::string> onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kSpaceClassBody) : "[" + std::string(kSpaceClassBody) + "]";
      } else if (e == 'S') {
        if (in_class) {
          return unsupported("regex '" + std::string(p) + "': \\S inside a character class");
        }
        out += "[^" + std::string(kSpaceClassBody) + "]";
      } else if (e == 'h' || e == 'H') {
        // Oniguruma's \h is a hex digit, PCRE2's is horizontal space.
        return unsupported("regex '" + std::string(p) + "': \\h/\\H are not supported");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[') {
      return unsupported("regex '" + std::string(p) + "': nested character classes");
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Result<Regex> Regex::compile(std::string_view onig_pattern) {
  KITE_ASSIGN_OR_RETURN(std::string pattern, onig_to_pcre2(onig_pattern));
  return compile_pcre2(std::move(pattern), 0);
}

Result<Regex> Regex::literal(std::string_view text) {
  return compile_pcre2(std::string(text), PCRE2_LITERAL);
}

Result<Regex> Regex::compile_pcre2(std::string pattern, uint32_t extra_options) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2_LITERAL refuses PCRE2_UCP (which only affects classes, absent from a literal).
  uint32_t options = PCRE2_UTF | extra_options;
  if (!(extra_options & PCRE2_LITERAL)) options |= PCRE2_UCP;
  pcre2_code* raw = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  options, &error, &error_offset, nullptr);
  if (raw == nullptr) {
    return invalid_argument("cannot compile tokenizer regex '" + pattern + "' at offset " +
                            std::to_string(error_offset) + ": " + pcre2_error_text(error));
  }
  auto code = std::make_shared<Code>();
  code->code = raw;
  code->jit = pcre2_jit_compile(raw, PCRE2_JIT_COMPLETE) == 0;
  Regex r;
  r.code_ = std::move(code);
  r.pattern_ = std::move(pattern);
  return r;
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const {
  ThreadMatchState& state = thread_match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), pos, 0, state.data,
                                          state.context)
                        : pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                      state.data, state.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Fall back to the interpreter, which keeps its backtracking state on the heap.
      rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       state.data, state.context);
    }
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a resource limit: the rest stays unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    size_t start = ov[0], end = ov[1];
    if (end > start) {
      matches->emplace_back(start, end);
      pos = end;
    } else {
      // An empty match: step over one character, as Oniguruma's find_iter does.
      size_t n = utf8::valid_sequence_length(text, start);
      pos = start + (n == 0 ? 1 : n);
    }
  }
}

}  // namespace kite
