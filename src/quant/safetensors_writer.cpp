#include "quant/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kite {
namespace {

// dtype_name spells every DType as safetensors does ("F32", "BF16", "F8_E4M3", ...).
std::string safetensors_dtype(DType d) { return std::string(dtype_name(d)); }

}  // namespace

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, const Shape& shape,
                            const void* data, size_t bytes) {
  const size_t begin = data_.size();
  data_.append(static_cast<const char*>(data), bytes);
  entries_.push_back({name, dtype, shape, begin, data_.size()});
}

void SafetensorsWriter::add(const std::string& name, const Tensor& t) {
  add(name, safetensors_dtype(t.dtype()), t.shape(), t.raw(), t.size_bytes());
}

Status SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  for (const Entry& e : entries_)
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found("cannot create '" + path + "'");
  const uint64_t n = h.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(data_.data(), static_cast<std::streamsize>(data_.size()));
  if (!out) return internal_error("writing '" + path + "' failed (disk full?)");
  return ok_status();
}

}  // namespace kite
