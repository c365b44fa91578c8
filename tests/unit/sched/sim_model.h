// Test support: a deterministic fake model and a step driver for Scheduler tests.
//
// FakeModel keeps a simulated KV cache: one token id per slot of every block, poisoned with -1.
// Running a step writes each fed token into the slot its block table gives it, and a sampled
// token is hash(tokens read back through the block table) % vocab. So a request's greedy output
// depends only on its token sequence — and comes out wrong if the scheduler hands it a wrong,
// stale or shared-but-different block. reference_generate() is the same "model" run alone.
#pragma once

#include <gtest/gtest.h>
#include <xxhash.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace kite::sched::testing {

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t n) {
  std::uniform_int_distribution<int32_t> tok(1, 30000);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = tok(rng);
  return p;
}

// Config with `num_blocks` blocks; `tweak` sets the fields a test is about.
inline SchedulerConfig config(int32_t num_blocks,
                              const std::function<void(SchedulerConfig&)>& tweak = {}) {
  SchedulerConfig c;
  c.num_blocks = num_blocks;
  if (tweak) tweak(c);
  return c;
}

inline Scheduler make(const SchedulerConfig& c) {
  auto s = Scheduler::create(c);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

inline RequestParams params(std::string id, std::vector<int32_t> prompt, int32_t max_tokens,
                            int32_t priority = 0) {
  RequestParams p;
  p.request_id = std::move(id);
  p.prompt_token_ids = std::move(prompt);
  p.max_tokens = max_tokens;
  p.priority = priority;
  p.ignore_eos = true;
  return p;
}

inline int32_t fake_next_token(std::span<const int32_t> tokens, int32_t vocab_size) {
  return static_cast<int32_t>(XXH3_64bits(tokens.data(), tokens.size_bytes()) %
                              static_cast<uint64_t>(vocab_size));
}

// What the request would generate with nothing else running: the ground truth.
inline std::vector<int32_t> reference_generate(const RequestParams& p, int32_t vocab_size) {
  std::vector<int32_t> tokens = p.prompt_token_ids;
  std::vector<int32_t> out;
  auto has = [](const std::vector<int32_t>& v, int32_t t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  while (static_cast<int32_t>(out.size()) < p.max_tokens) {
    const int32_t t = fake_next_token(tokens, vocab_size);
    tokens.push_back(t);
    out.push_back(t);
    if (has(p.stop_token_ids, t) || (!p.ignore_eos && has(p.eos_token_ids, t))) break;
  }
  return out;
}

class FakeModel {
 public:
  FakeModel(int32_t num_blocks, int32_t block_size, int32_t vocab_size)
      : block_size_(block_size),
        vocab_size_(vocab_size),
        slots_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  // Computes a step; returns one token per scheduled request (0 where none is sampled).
  // `expected` holds each request's full known token sequence (prompt + outputs so far).
  std::vector<int32_t> run(const SchedulerOutput& out,
                           const std::map<std::string, std::vector<int32_t>>& expected) {
    std::vector<int32_t> sampled(out.scheduled.size(), 0);
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const ScheduledRequest& s = out.scheduled[i];
      const std::vector<int32_t>& want = expected.at(s.request_id);
      const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
      // Shape errors would make the simulation index out of bounds: stop at the first.
      const bool shapes_ok = static_cast<int32_t>(s.token_ids.size()) == s.num_scheduled_tokens &&
                             end <= static_cast<int32_t>(want.size()) &&
                             static_cast<int64_t>(s.block_table.size()) * block_size_ >= end;
      if (!shapes_ok) {
        ADD_FAILURE() << s.request_id << ": " << s.token_ids.size() << " fed tokens for "
                      << s.num_scheduled_tokens << " scheduled, end " << end << " of "
                      << want.size() << " known tokens, " << s.block_table.size() << " blocks";
        return sampled;
      }
      for (int32_t k = 0; k < s.num_scheduled_tokens; ++k) {
        EXPECT_EQ(s.token_ids[k], want[s.num_computed_tokens + k]) << s.request_id;
        slot(s.block_table, s.num_computed_tokens + k) = s.token_ids[k];
      }
      EXPECT_EQ(s.samples_token, end == static_cast<int32_t>(want.size())) << s.request_id;
      if (!s.samples_token) continue;
      std::vector<int32_t> seen(static_cast<size_t>(end));
      for (int32_t pos = 0; pos < end; ++pos) seen[pos] = slot(s.block_table, pos);
      // Reading a prefix-cache hit back must give exactly the request's own tokens.
      EXPECT_TRUE(std::equal(seen.begin(), seen.end(), want.begin()))
          << s.request_id << ": KV read back through the block table differs from its tokens";
      sampled[i] = fake_next_token(seen, vocab_size_);
    }
    return sampled;
  }

 private:
  int32_t& slot(const std::vector<int32_t>& table, int32_t pos) {
    const int32_t block = table[static_cast<size_t>(pos / block_size_)];
    return slots_[static_cast<size_t>(block) * block_size_ + pos % block_size_];
  }

  int32_t block_size_;
  int32_t vocab_size_;
  std::vector<int32_t> slots_;
};

// Runs steps, feeding the fake model and collecting each request's outputs and final status.
struct SimDriver {
  Scheduler& scheduler;
  FakeModel model;
  std::map<std::string, std::vector<int32_t>> tokens;   // prompt + outputs, per live request
  std::map<std::string, std::vector<int32_t>> outputs;  // outputs, per request ever added
  std::map<std::string, RequestStatus> final_status;
  std::map<std::string, std::string> errors;

  SimDriver(Scheduler& s, int32_t vocab_size)
      : scheduler(s), model(s.config().num_blocks, s.config().block_size, vocab_size) {}

  Status add(const RequestParams& p) {
    Status st = scheduler.add_request(p);
    if (st.ok()) {
      tokens[p.request_id] = p.prompt_token_ids;
      outputs[p.request_id];
    }
    return st;
  }

  // Applies a step's events; returns the sampled tokens handed to update().
  void step_with(const SchedulerOutput& out) {
    const std::vector<int32_t> sampled = model.run(out, tokens);
    auto events = scheduler.update(out, sampled);
    ASSERT_TRUE(events.ok()) << events.status().message();
    for (const RequestStepOutput& e : *events) {
      if (e.new_token_id) {
        tokens[e.request_id].push_back(*e.new_token_id);
        outputs[e.request_id].push_back(*e.new_token_id);
      }
      if (is_finished(e.status)) {
        final_status[e.request_id] = e.status;
        if (!e.error_message.empty()) errors[e.request_id] = e.error_message;
        tokens.erase(e.request_id);
      }
    }
    const Status st = scheduler.check_integrity();
    ASSERT_TRUE(st.ok()) << st.message();
  }

  void step() { step_with(scheduler.schedule()); }
};

}  // namespace kite::sched::testing
