// libFuzzer target: the safetensors header parser (model/safetensors.h) on corrupted files.
// The parser promises that every tensor it returns lies inside the file and has exactly the
// bytes dtype x shape need, so a WeightStore can read it without further checks: this target
// reads the first and last byte of every tensor (ASan reports any out-of-range offset) and
// checks the sizes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so that reading one past the end is a heap overflow.
  std::vector<uint8_t> file(data, data + size);
  auto header = kite::parse_safetensors_header(file.data(), file.size(), "fuzz.safetensors");
  if (!header.ok()) {
    if (header.status().message().empty()) std::abort();
    return 0;
  }
  if (header->data_start > size) std::abort();
  volatile uint8_t sink = 0;
  for (const auto& t : header->tensors) {
    // 128-bit, saturating: the product of a shape the parser wrongly accepted must not
    // overflow here and hide the bug.
    unsigned __int128 bytes = kite::dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) std::abort();
      bytes = bytes > (unsigned __int128)1 << 64 ? bytes : bytes * static_cast<uint64_t>(d);
    }
    if (bytes != t.size_bytes) std::abort();
    if (t.offset < header->data_start || t.offset + t.size_bytes > size) std::abort();
    if (t.size_bytes > 0) sink = sink + file[t.offset] + file[t.offset + t.size_bytes - 1];
  }
  return 0;
}
