#include "model/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace kite {
namespace {

using json = nlohmann::json;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Reads a non-negative integer that fits size_t; false for anything else.
bool as_size(const json& v, size_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<size_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// numel × element size without silent wrap-around; false on overflow.
bool checked_bytes(const Shape& shape, size_t elem_size, size_t* out) {
  size_t bytes = elem_size;
  for (int64_t d : shape) {
    size_t ud = static_cast<size_t>(d);
    if (ud != 0 && bytes > std::numeric_limits<size_t>::max() / ud) return false;
    bytes *= ud;
  }
  *out = bytes;
  return true;
}

Result<SafetensorsTensor> parse_entry(const std::string& name, const json& v, size_t data_start,
                                      size_t data_size, const std::string& path) {
  const std::string where = path + ": tensor " + quoted(name);
  if (!v.is_object()) return corrupt(where + ": header entry is not a JSON object");
  auto dtype_it = v.find("dtype");
  auto shape_it = v.find("shape");
  auto offsets_it = v.find("data_offsets");
  if (dtype_it == v.end() || !dtype_it->is_string())
    return corrupt(where + ": header entry has no string 'dtype'");
  if (shape_it == v.end() || !shape_it->is_array())
    return corrupt(where + ": header entry has no list 'shape'");
  if (offsets_it == v.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    return corrupt(where + ": header entry has no 'data_offsets' [begin, end]");

  SafetensorsTensor t;
  t.name = name;
  const std::string dtype_name_str = dtype_it->get<std::string>();
  auto dtype = dtype_from_safetensors(dtype_name_str);
  if (!dtype)
    return unsupported(where + " has dtype " + quoted(dtype_name_str) +
                       ", which kite does not support (supported: F64, F32, F16, BF16, "
                       "F8_E4M3, I64, I32, I16, I8, U8, BOOL)");
  t.dtype = *dtype;
  for (const json& d : *shape_it) {
    size_t dim = 0;
    if (!as_size(d, &dim) || dim > static_cast<size_t>(std::numeric_limits<int64_t>::max()))
      return corrupt(where + ": shape " + shape_it->dump() +
                     " has a non-integer or negative entry");
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  size_t begin = 0, end = 0;
  if (!as_size((*offsets_it)[0], &begin) || !as_size((*offsets_it)[1], &end) || begin > end)
    return corrupt(where + ": data_offsets " + offsets_it->dump() +
                   " are not two non-negative integers with begin <= end");
  if (end > data_size)
    return corrupt(where + ": data_offsets " + offsets_it->dump() +
                   " run past the end of the data section (" + std::to_string(data_size) +
                   " bytes); the file is truncated or corrupt");
  size_t need = 0;
  if (!checked_bytes(t.shape, dtype_size(t.dtype), &need) || need != end - begin)
    return corrupt(where + ": data_offsets " + offsets_it->dump() + " span " +
                   std::to_string(end - begin) + " bytes but dtype " + dtype_name_str +
                   " with shape " + shape_to_string(t.shape) + " needs " +
                   (need ? std::to_string(need) : std::string("an overflowing number of")) +
                   " bytes");
  t.offset = data_start + begin;
  t.size_bytes = end - begin;
  return t;
}

Status check_no_overlap(std::vector<const SafetensorsTensor*> sorted, const std::string& path) {
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  const SafetensorsTensor* prev = nullptr;
  for (const SafetensorsTensor* t : sorted) {
    if (t->size_bytes == 0) continue;  // empty tensors own no bytes
    if (prev && t->offset < prev->offset + prev->size_bytes)
      return corrupt(path + ": tensors " + quoted(prev->name) + " and " + quoted(t->name) +
                     " overlap in the data section");
    prev = t;
  }
  return ok_status();
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* file_bytes, size_t file_size,
                                                   const std::string& path) {
  if (file_size < 8)
    return corrupt(path + ": file is " + std::to_string(file_size) +
                   " bytes, shorter than the 8-byte header length that starts a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_bytes[i];
  if (header_len > file_size - 8)
    return corrupt(path + ": header length " + std::to_string(header_len) +
                   " exceeds the file size (" + std::to_string(file_size) +
                   " bytes); the file is truncated or not safetensors");
  json header;
  try {
    header = json::parse(file_bytes + 8, file_bytes + 8 + header_len);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (1e999)
    return corrupt(path + ": safetensors header is not valid JSON: " + e.what());
  }
  if (!header.is_object())
    return corrupt(path + ": safetensors header is a JSON " + header.type_name() +
                   ", expected an object of tensors");

  SafetensorsHeader out;
  out.data_start = 8 + static_cast<size_t>(header_len);
  const size_t data_size = file_size - out.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return corrupt(path + ": __metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m)
        out.metadata[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    KITE_ASSIGN_OR_RETURN(auto t, parse_entry(it.key(), *it, out.data_start, data_size, path));
    out.tensors.push_back(std::move(t));
  }
  std::vector<const SafetensorsTensor*> ptrs;
  for (const auto& t : out.tensors) ptrs.push_back(&t);
  KITE_RETURN_IF_ERROR(check_no_overlap(std::move(ptrs), path));
  return out;
}

}  // namespace kite
