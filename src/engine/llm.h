// LLM: the in-process API over an Engine — submit prompts, block until they finish.
// Used by `kite generate`, `kite bench` and tests; the server talks to the Engine directly.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace kite {

struct GenerateInput {
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  int32_t priority = 0;
};

struct GenerateResult {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
  std::string error_message;
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
};

class LLM {
 public:
  static Result<LLM> create(const EngineConfig& config);

  // Runs every input concurrently through the engine (continuous batching) and returns the
  // results in input order. A request the engine refuses fails the call with its error.
  Result<std::vector<GenerateResult>> generate(const std::vector<GenerateInput>& inputs);

  // One request; `on_output` runs on the calling thread for every event, in order.
  Result<GenerateResult> generate_stream(
      const GenerateInput& input, const std::function<void(const RequestOutput&)>& on_output);

  Engine& engine() { return *engine_; }
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }

 private:
  explicit LLM(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
  std::unique_ptr<Engine> engine_;
  uint64_t next_id_ = 0;
};

}  // namespace kite
