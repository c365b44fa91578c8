// safetensors header parsing and validation.
//
// File layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"<tensor name>": {"dtype": "BF16", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"format": "pt", ...}}
// and then the data section; data_offsets are relative to its start (byte 8 + N).
// The parser trusts nothing: every offset is checked against the file size and against the
// bytes its dtype × shape need, and tensors may not overlap, so a WeightStore can hand out
// pointers into the mapping without further checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace kite {

// One tensor as described by a safetensors header, offsets resolved to the whole file.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  size_t offset = 0;  // absolute byte offset in the file
  size_t size_bytes = 0;
};

struct SafetensorsHeader {
  size_t data_start = 0;                   // 8 + header length
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::map<std::string, std::string> metadata;
};

// Parses the header of a safetensors file whose complete contents are `file_bytes`
// (`file_size` bytes, e.g. an mmap). `path` only names the file in error messages.
// Errors: corrupt() for anything the format forbids, unsupported() for a valid dtype kite
// does not handle.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* file_bytes, size_t file_size,
                                                   const std::string& path);

}  // namespace kite
