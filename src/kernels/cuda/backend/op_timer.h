// OpTimer: GPU time per backend op, for "where does a decode step's time go" (issue 6).
//
// Enabled by KITE_CUDA_OP_TIMES=1 (the CUDA backend then also runs every step eagerly: events
// cannot be read inside a captured graph). Each op is bracketed by two CUDA events on the
// backend's stream; at each step start the previous step's pairs are read and summed per op
// label (e.g. "linear 1x6144x4096"), and the table is printed to stderr when the backend is
// destroyed: calls, total and mean time, and for linears the weight bytes per second. The
// events serialise nothing the stream does not already serialise, but they add a little time
// between ops: use it to compare ops with each other, and the benchmark for step times.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace kite::cuda {

class OpTimer {
 public:
  OpTimer();
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

  bool enabled() const { return enabled_; }
  // Starts timing an op labelled `label` (moving `bytes` of weights, 0 if not a linear).
  void start(std::string label, int64_t bytes, cudaStream_t stream);
  void stop(cudaStream_t stream);
  // Reads the events recorded since the last collect (waits for them) into the totals.
  void collect();

 private:
  struct Pending {
    std::string label;
    int64_t bytes;
    cudaEvent_t begin, end;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0;
    double bytes = 0;
  };
  bool enabled_ = false;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Total> totals_;
  int64_t steps_ = 0;
};

// Brackets one op with OpTimer events when KITE_CUDA_OP_TIMES is set; otherwise free.
class TimedOp {
 public:
  TimedOp(OpTimer* timer, cudaStream_t stream) : timer_(timer), stream_(stream) {}
  ~TimedOp() {
    if (timer_) timer_->stop(stream_);
  }
  TimedOp(TimedOp&& other) noexcept : timer_(other.timer_), stream_(other.stream_) {
    other.timer_ = nullptr;
  }
  TimedOp(const TimedOp&) = delete;
  TimedOp& operator=(const TimedOp&) = delete;

 private:
  OpTimer* timer_;
  cudaStream_t stream_;
};

// An op label's dimensions, "AxBxC".
inline std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

}  // namespace kite::cuda
