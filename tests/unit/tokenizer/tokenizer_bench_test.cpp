// Throughput benchmark, not a timed test: disabled by default. Run with
//   ./build/kite_tests --gtest_also_run_disabled_tests --gtest_filter='*TokenizerBench*'
// It prints MB/s of English-like text encoded on one thread (numbers go in docs, not asserts).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <random>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer_test_util.h"

namespace kite {
namespace {

// ~`bytes` of English-like prose: words drawn with a Zipf law from the vocabulary's
// space-prefixed lowercase words, with punctuation, capitals and paragraph breaks.
std::string english_corpus(const Tokenizer& tok, size_t bytes) {
  std::vector<std::string> words;
  for (int32_t id = 0; id < tok.vocab_size() && words.size() < 20000; ++id) {
    std::string_view b = tok.token_bytes(id);
    if (b.size() < 3 || b[0] != ' ') continue;
    bool lower = true;
    for (char c : b.substr(1)) lower = lower && c >= 'a' && c <= 'z';
    if (lower) words.emplace_back(b.substr(1));
  }
  std::mt19937 rng(42);
  std::vector<double> weights(words.size());
  for (size_t i = 0; i < words.size(); ++i) weights[i] = 1.0 / std::pow(i + 1.0, 1.1);
  std::discrete_distribution<size_t> zipf(weights.begin(), weights.end());
  std::string text;
  bool sentence_start = true;
  while (text.size() < bytes) {
    std::string w = words[zipf(rng)];
    if (sentence_start) w[0] = static_cast<char>(w[0] - 'a' + 'A');
    text += w;
    sentence_start = false;
    unsigned r = rng() % 100;
    if (r < 6) {
      text += ". ";
      sentence_start = true;
    } else if (r < 10) {
      text += ", ";
    } else if (r == 10) {
      text += ".\n\n";
      sentence_start = true;
    } else {
      text += " ";
    }
  }
  return text;
}

// CPU seconds of the calling thread: on a shared machine wall time also counts other processes.
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(DISABLED_TokenizerBench, EnglishEncodeThroughput) {
  for (const std::string& name : testing::golden_tokenizer_names()) {
    auto t0 = std::chrono::steady_clock::now();
    const Tokenizer* tok = testing::reference_tokenizer(name);
    if (tok == nullptr) GTEST_SKIP() << "npm fixtures not installed";
    double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string text = english_corpus(*tok, 8 << 20);
    tok->encode(text.substr(0, 1 << 20), false);  // warm the BPE cache, like a running server
    auto t1 = std::chrono::steady_clock::now();
    double cpu1 = thread_cpu_seconds();
    std::vector<int32_t> ids = tok->encode(text, false);
    double enc_cpu_s = thread_cpu_seconds() - cpu1;
    double enc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    auto t2 = std::chrono::steady_clock::now();
    IncrementalDetokenizer detok(*tok, false);
    size_t out_bytes = 0;
    for (int32_t id : ids) out_bytes += detok.add(id).size();
    double dec_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
    EXPECT_EQ(out_bytes, text.size());
    double mb = text.size() / 1e6;
    std::printf(
        "%-12s load %.2f s | encode %.1f MB/s CPU, %.1f MB/s wall (%.2f bytes/token) | "
        "stream decode %.1f MB/s wall\n",
        name.c_str(), load_s, mb / enc_cpu_s, mb / enc_s, double(text.size()) / ids.size(),
        mb / dec_s);
  }
}

}  // namespace
}  // namespace kite
