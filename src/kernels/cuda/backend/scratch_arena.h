// ScratchArena: bump allocation of device memory for one forward step.
//
// Memory comes from large chunks that are kept across steps; reset() makes all of it free again
// (safe because every user runs on the one stream the arena serves). Allocations are 256-byte
// aligned (cuBLASLt and vector loads like it). peak_bytes() is the most handed out between two
// resets since the arena was created: the activation peak the KV-cache sizing subtracts.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"

namespace kite::cuda {

class ScratchArena {
 public:
  explicit ScratchArena(size_t chunk_bytes = size_t{64} << 20) : chunk_bytes_(chunk_bytes) {}
  void* allocate(size_t bytes);
  void reset();
  // Where the next allocation would start. advance_to() moves there unless already past it: a
  // replayed graph's scratch was handed out at capture, not by this step's host code, and
  // what the step allocates after the graph must not land on it.
  using Mark = Backend::ScratchMark;
  Mark mark() const { return {chunk_, offset_, in_use_}; }
  void advance_to(const Mark& m);
  // Gives back everything allocated since `m` (LIFO): scratch an op used only inside itself
  // (a quantized linear's activation codes, attention's split partials) is reused by the next
  // op instead of piling up over the step's layers. Safe because every user of the arena runs
  // on one stream: the next op's kernels start after this op's.
  void rewind(const Mark& m) {
    chunk_ = m.chunk;
    offset_ = m.offset;
    in_use_ = m.in_use;
  }
  size_t peak_bytes() const { return peak_; }
  size_t reserved_bytes() const;
  // The owner handed to Tensor::wrap for arena tensors. It does not own the chunks (the arena
  // does, and lives as long as its backend): arena tensors are step scratch by contract.
  std::shared_ptr<void> owner() const { return keepalive_; }

 private:
  size_t chunk_bytes_;
  std::vector<std::unique_ptr<DeviceBuffer>> chunks_;
  size_t chunk_ = 0;   // chunk being filled
  size_t offset_ = 0;  // bytes used in it
  size_t in_use_ = 0;  // bytes handed out since reset (incl. chunk tails skipped)
  size_t peak_ = 0;
  std::shared_ptr<void> keepalive_ = std::make_shared<int>(0);
};

}  // namespace kite::cuda
