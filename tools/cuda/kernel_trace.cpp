// A kernel timeline for any CUDA program, CUDA graphs and programmatic dependent launch
// included: loaded through CUDA_INJECTION64_PATH (the CUDA driver calls InitializeInjection
// when it initialises), it records every kernel's start and end with CUPTI's activity API and
// writes one CSV line per kernel to $KITE_TRACE_OUT. Why: the model-level figures are graph
// replays in which the kernels overlap (PDL); ncu serialises them and the op timer runs them
// eagerly, so neither shows where a decode step's time goes. nsys is not on the GPU machine.
//
//   CUDA_INJECTION64_PATH=build-cuda/lib/libkite_trace.so KITE_TRACE_OUT=trace.csv kite bench ...
//   python3 tools/cuda/kernel_trace_report.py trace.csv
//
// Columns: start_ns,end_ns,graph_id,graph_node_id,grid_x,grid_y,block_x,dyn_smem,stream,name
// (the mangled name; the report demangles).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = 8 << 20;
std::FILE* g_out = nullptr;
std::mutex g_mutex;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  const std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(g_out, "%llu,%llu,%u,%llu,%d,%d,%d,%d,%u,%s\n",
                 static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end), k->graphId,
                 static_cast<unsigned long long>(k->graphNodeId), k->gridX, k->gridY, k->blockX,
                 k->dynamicSharedMemory, k->streamId, k->name ? k->name : "?");
  }
  std::fflush(g_out);
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityFlushAll(1);
  if (g_out) std::fflush(g_out);
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("KITE_TRACE_OUT");
  g_out = std::fopen(path ? path : "kernel_trace.csv", "w");
  if (!g_out) return 0;
  std::fprintf(g_out, "start_ns,end_ns,graph_id,graph_node_id,grid_x,grid_y,block_x,dyn_smem,"
                      "stream,name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI refused kernel activity records\n");
    return 0;
  }
  cuptiActivityFlushPeriod(100);  // ms: records reach the file while the program runs
  std::atexit(flush_at_exit);
  return 1;
}
