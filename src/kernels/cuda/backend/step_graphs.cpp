#include "kernels/cuda/backend/step_graphs.h"

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"

namespace kite::cuda {

int64_t length_bucket(int64_t max_seq_len) {
  int64_t b = 256;  // short contexts share one bucket: their attention is cheap anyway
  while (b < max_seq_len) b *= 2;
  return b;
}

StepGraphs::~StepGraphs() { clear(); }

void StepGraphs::set_max_batch(int64_t max_batch) {
  if (max_batch <= 0) clear();
  max_batch_ = max_batch < 0 ? 0 : max_batch;
}

StepGraphs::Mode StepGraphs::begin(bool graphable, Key key, cudaStream_t stream) {
  mode_ = Mode::kEager;
  replayed_ = {};
  if (!graphable || max_batch_ == 0 || key.first > max_batch_ || failed_.count(key))
    return mode_;
  key_ = key;
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    KITE_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream));
    replayed_ = it->second.result;
    return mode_ = Mode::kReplay;
  }
  if (!warmed_.count(key)) {
    warmed_.insert(key);
    return mode_;
  }
  // Thread-local mode: other threads' CUDA calls (none expected) are not disturbed.
  KITE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  return mode_ = Mode::kCapture;
}

void StepGraphs::end_capture(const Result& result, cudaStream_t stream) {
  if (mode_ != Mode::kCapture) return;
  mode_ = Mode::kEager;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (end != cudaSuccess || graph == nullptr) {
    failed_.insert(key_);
    if (graph) cudaGraphDestroy(graph);
    throw CudaError(std::string("capturing a decode step: ") + cudaGetErrorString(end));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    failed_.insert(key_);
    throw CudaError(std::string("instantiating a decode-step graph: ") + cudaGetErrorString(inst));
  }
  graphs_[key_] = {exec, result};
  KITE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
}

void StepGraphs::abandon(cudaStream_t stream) {
  if (mode_ != Mode::kCapture) return;
  mode_ = Mode::kEager;
  failed_.insert(key_);
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // the invalidated capture's error, if any, is this step's, not the next
}

void StepGraphs::clear() {
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  warmed_.clear();
}

}  // namespace kite::cuda
