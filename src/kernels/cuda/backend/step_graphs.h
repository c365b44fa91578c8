// StepGraphs: CUDA graphs of whole decode steps, captured lazily per step shape.
//
// A decode step's kernels depend on the batch only through device memory (token ids, slots,
// cos/sin, sequence lengths, block tables: one upload at begin_step) and through a few host
// values that the CUDA backend makes constant per shape: the number of sequences, and the
// longest sequence rounded up to a power of two (the "length bucket", which sizes the block
// tables and the attention splits). The step's scratch comes from an arena that is reset at
// every step, so the same shape hands out the same addresses. Hence one graph per
// (sequences, bucket) replays any later step of that shape.
//
// On replay the host code still runs (so the model code needs no second path) but every op
// returns at once; the step's output is then the captured step's output tensor, and the arena
// skips past the scratch the capture used before anything else is allocated.
//
// Life of a shape: the first step runs eagerly (it grows the arena and any lazily made plan or
// buffer, which must not happen inside a capture); the second is captured and then launched;
// every later one replays the graph. A shape whose capture failed stays eager. Graphs hold
// device addresses, so they are all dropped when memory they may point at is replaced.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "kernels/cuda/backend/scratch_arena.h"

namespace kite::cuda {

class StepGraphs {
 public:
  using Key = std::pair<int64_t, int64_t>;  // (sequences, length bucket)
  enum class Mode { kEager, kCapture, kReplay };

  StepGraphs() = default;
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Steps of up to `max_batch` sequences use graphs; 0 turns graphs off (and drops them).
  void set_max_batch(int64_t max_batch);
  int64_t max_batch() const { return max_batch_; }

  // Called after the step's inputs were uploaded on `stream`: replays the shape's graph
  // (kReplay), starts capturing it (kCapture) or leaves the step eager. `graphable` is false
  // for steps graphs do not cover (prefill, too many sequences).
  Mode begin(bool graphable, Key key, cudaStream_t stream);
  Mode mode() const { return mode_; }
  // What a captured step leaves behind: its output tensor's address and size, and the arena
  // position after its scratch.
  struct Result {
    const void* data = nullptr;
    size_t bytes = 0;
    ScratchArena::Mark arena_end;
  };
  // Ends a capture started by begin(): instantiates the graph, remembers `result` and launches
  // the graph. A no-op unless capturing.
  void end_capture(const Result& result, cudaStream_t stream);
  // On replay: the captured step's result. finish_replay() then returns to eager mode (the
  // step's output was read; later calls run until the next begin()).
  const Result& replayed() const { return replayed_; }
  void finish_replay() { if (mode_ == Mode::kReplay) mode_ = Mode::kEager; }
  // A step that threw while capturing: discards the capture, keeps the shape eager.
  void abandon(cudaStream_t stream);
  // Drops every graph (memory a graph may point at was freed or moved).
  void clear();
  size_t size() const { return graphs_.size(); }

 private:
  struct Captured {
    cudaGraphExec_t exec = nullptr;
    Result result;
  };
  int64_t max_batch_ = 0;
  Mode mode_ = Mode::kEager;
  Key key_{0, 0};
  Result replayed_;
  std::map<Key, Captured> graphs_;
  std::set<Key> warmed_;  // ran eagerly once
  std::set<Key> failed_;  // capture failed: stays eager
};

// The length bucket of a decode step whose longest sequence has `max_seq_len` tokens.
int64_t length_bucket(int64_t max_seq_len);

}  // namespace kite::cuda
