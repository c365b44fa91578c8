#include "kernels/cuda/backend/op_timer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

OpTimer::OpTimer() {
  const char* env = std::getenv("KITE_CUDA_OP_TIMES");
  enabled_ = env && *env && std::strcmp(env, "0") != 0;
}

OpTimer::~OpTimer() {
  if (!enabled_) return;
  collect();
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& [label, t] : rows) all += t.ms;
  std::fprintf(stderr, "== GPU time per op over %lld steps (KITE_CUDA_OP_TIMES)\n",
               static_cast<long long>(steps_));
  std::fprintf(stderr, "%-44s %9s %11s %9s %7s %9s\n", "op", "calls", "total ms", "mean us",
               "share", "GB/s");
  for (const auto& [label, t] : rows) {
    const double gbps = t.bytes > 0 ? t.bytes / (t.ms * 1e6) : 0.0;
    std::fprintf(stderr, "%-44s %9lld %11.3f %9.2f %6.1f%% %9.0f\n", label.c_str(),
                 static_cast<long long>(t.calls), t.ms, 1e3 * t.ms / t.calls, 100 * t.ms / all,
                 gbps);
  }
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

void OpTimer::start(std::string label, int64_t bytes, cudaStream_t stream) {
  auto take = [&] {
    if (free_.empty()) {
      cudaEvent_t e;
      KITE_CUDA_CHECK(cudaEventCreate(&e));
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  };
  Pending p{std::move(label), bytes, take(), take()};
  KITE_CUDA_CHECK(cudaEventRecord(p.begin, stream));
  pending_.push_back(std::move(p));
}

void OpTimer::stop(cudaStream_t stream) {
  KITE_CUDA_CHECK(cudaEventRecord(pending_.back().end, stream));
}

void OpTimer::collect() {
  if (pending_.empty()) return;
  ++steps_;
  for (Pending& p : pending_) {
    KITE_CUDA_CHECK(cudaEventSynchronize(p.end));
    float ms = 0;
    KITE_CUDA_CHECK(cudaEventElapsedTime(&ms, p.begin, p.end));
    Total& t = totals_[p.label];
    ++t.calls;
    t.ms += ms;
    t.bytes += static_cast<double>(p.bytes);
    free_.push_back(p.begin);
    free_.push_back(p.end);
  }
  pending_.clear();
}

}  // namespace kite::cuda
