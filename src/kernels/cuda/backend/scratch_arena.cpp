#include "kernels/cuda/backend/scratch_arena.h"

#include <algorithm>

namespace kite::cuda {

void* ScratchArena::allocate(size_t bytes) {
  bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  while (true) {
    if (chunk_ < chunks_.size()) {
      DeviceBuffer& c = *chunks_[chunk_];
      if (offset_ + bytes <= c.size_bytes()) {
        void* p = static_cast<char*>(c.data()) + offset_;
        offset_ += bytes;
        in_use_ += bytes;
        peak_ = std::max(peak_, in_use_);
        return p;
      }
      in_use_ += c.size_bytes() - offset_;  // the tail left unused counts as held
      ++chunk_;
      offset_ = 0;
      continue;
    }
    chunks_.push_back(std::make_unique<DeviceBuffer>(std::max(bytes, chunk_bytes_)));
  }
}

void ScratchArena::reset() {
  chunk_ = 0;
  offset_ = 0;
  in_use_ = 0;
}

void ScratchArena::advance_to(const Mark& m) {
  if (m.chunk > chunk_ || (m.chunk == chunk_ && m.offset > offset_)) {
    chunk_ = m.chunk;
    offset_ = m.offset;
    in_use_ = std::max(in_use_, m.in_use);
    peak_ = std::max(peak_, in_use_);
  }
}

size_t ScratchArena::reserved_bytes() const {
  size_t total = 0;
  for (const auto& c : chunks_) total += c->size_bytes();
  return total;
}

}  // namespace kite::cuda
