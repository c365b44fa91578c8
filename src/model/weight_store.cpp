#include "model/weight_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config.h"
#include "model/dummy_weights.h"
#include "model/safetensors.h"

namespace kite {

namespace fs = std::filesystem;

// A read-only private mapping of a whole file. Tensors returned by get_raw() hold a
// shared_ptr to it, so the bytes stay mapped for as long as any view exists.
struct WeightStore::MappedFile {
  std::string path;
  const uint8_t* data = nullptr;
  size_t size = 0;

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data) ::munmap(const_cast<uint8_t*>(data), size);
  }

  static Result<std::shared_ptr<MappedFile>> map(const std::string& path) {
    auto file = std::make_shared<MappedFile>();
    file->path = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return not_found(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return not_found(path + ": not a regular file");
    }
    file->size = static_cast<size_t>(st.st_size);
    if (file->size > 0) {  // mmap of length 0 fails; the header parser reports the short file
      void* p = ::mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
      int err = errno;
      ::close(fd);
      if (p == MAP_FAILED) return internal_error(path + ": mmap failed: " + std::strerror(err));
      file->data = static_cast<const uint8_t*>(p);
    } else {
      ::close(fd);
    }
    return file;
  }
};

namespace {

constexpr int64_t kChunkElements = 1 << 14;
// Below this, thread start-up costs more than the conversion.
constexpr int64_t kParallelMinElements = 1 << 16;

bool is_float_dtype(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64 ||
         d == DType::kF8E4M3;
}

// Calls fn(begin, end) on contiguous chunks, in parallel for large n.
template <typename Fn>
void for_each_chunk(int64_t n, Fn fn) {
  const int64_t chunks = (n + kChunkElements - 1) / kChunkElements;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t c = 0; c < chunks; ++c)
    fn(c * kChunkElements, std::min(n, (c + 1) * kChunkElements));
}

// Loads go through memcpy: safetensors does not promise aligned offsets.
template <typename T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// Converts n elements of a float dtype at `src` into `dst`. Caller checked is_float_dtype.
void convert_to_f32(const uint8_t* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      for_each_chunk(n,
                     [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + 4 * b, 4 * (e - b)); });
      break;
    case DType::kBF16:
      for_each_chunk(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src, i));
      });
      break;
    case DType::kF16:
      for_each_chunk(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = f16_to_f32(load<uint16_t>(src, i));
      });
      break;
    case DType::kF64:
      for_each_chunk(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = static_cast<float>(load<double>(src, i));
      });
      break;
    case DType::kF8E4M3: {
      const float* lut = fp8e4m3_table();
      for_each_chunk(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = lut[src[i]];
      });
      break;
    }
    default:
      break;
  }
}

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

Result<std::string> read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Shard names come from a file we do not control; keep them inside the model folder.
bool is_plain_file_name(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (const auto& part : fs::path(name))
    if (part == "..") return false;
  return true;
}

}  // namespace

WeightStoreOptions WeightStoreOptions::from_config(const ModelConfig& config) {
  WeightStoreOptions o;
  o.fp8_block_rows = config.fp8_block_rows;
  o.fp8_block_cols = config.fp8_block_cols;
  return o;
}

Result<WeightStore> WeightStore::open(const std::string& model_dir) {
  return open(model_dir, WeightStoreOptions{});
}

Result<WeightStore> WeightStore::open(const std::string& model_dir,
                                      const WeightStoreOptions& options) {
  if (options.fp8_block_rows <= 0 || options.fp8_block_cols <= 0)
    return invalid_argument("WeightStore: fp8 block size must be positive, got " +
                            std::to_string(options.fp8_block_rows) + "x" +
                            std::to_string(options.fp8_block_cols));
  WeightStore store;
  store.model_dir_ = model_dir;
  store.options_ = options;
  std::error_code ec;
  const fs::path dir(model_dir);
  if (fs::is_regular_file(dir, ec)) {
    KITE_RETURN_IF_ERROR(store.add_file(dir.string()));
    return store;
  }
  if (!fs::is_directory(dir, ec))
    return not_found("model directory '" + model_dir + "' does not exist");
  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path single = dir / "model.safetensors";
  if (fs::exists(index, ec)) {
    KITE_RETURN_IF_ERROR(store.add_index(index.string()));
  } else if (fs::exists(single, ec)) {
    KITE_RETURN_IF_ERROR(store.add_file(single.string()));
  } else {
    std::vector<std::string> shards;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") shards.push_back(e.path().string());
    if (shards.empty())
      return not_found("no model.safetensors, model.safetensors.index.json or *.safetensors in '" +
                       model_dir + "'");
    std::sort(shards.begin(), shards.end());
    for (const auto& s : shards) KITE_RETURN_IF_ERROR(store.add_file(s));
  }
  return store;
}

Status WeightStore::add_file(const std::string& path) {
  KITE_ASSIGN_OR_RETURN(auto file, MappedFile::map(path));
  KITE_ASSIGN_OR_RETURN(auto header, parse_safetensors_header(file->data, file->size, path));
  const size_t file_index = files_.size();
  for (auto& t : header.tensors) {
    auto [it, inserted] = entries_.try_emplace(
        t.name, Entry{file_index, t.dtype, std::move(t.shape), t.offset, t.size_bytes});
    if (!inserted)
      return corrupt("tensor '" + t.name + "' appears in both '" + file_path(it->second) +
                     "' and '" + path + "'");
  }
  files_.push_back(std::move(file));
  return ok_status();
}

Status WeightStore::add_index(const std::string& index_path) {
  KITE_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e999)
    return corrupt(index_path + ": not valid JSON: " + e.what());
  }
  auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object())
    return corrupt(index_path + ": has no \"weight_map\" object {tensor name: shard file}");
  std::map<std::string, std::string> first_tensor_of_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string() || !is_plain_file_name(it->get<std::string>()))
      return corrupt(index_path + ": weight_map entry for tensor '" + it.key() +
                     "' is not a file name inside the model folder: " + it->dump());
    first_tensor_of_shard.try_emplace(it->get<std::string>(), it.key());
  }
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, size_t> shard_index;
  for (const auto& [shard, tensor] : first_tensor_of_shard) {
    const fs::path shard_path = dir / shard;
    std::error_code ec;
    if (!fs::is_regular_file(shard_path, ec))
      return not_found(index_path + " lists shard '" + shard + "' (for tensor '" + tensor +
                       "' and others) but '" + shard_path.string() + "' does not exist");
    shard_index[shard] = files_.size();
    KITE_RETURN_IF_ERROR(add_file(shard_path.string()));
  }
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string shard = it->get<std::string>();
    auto e = entries_.find(it.key());
    if (e == entries_.end() || e->second.file_index != shard_index[shard])
      return corrupt(index_path + " lists tensor '" + it.key() + "' in shard '" + shard +
                     "' but that shard does not contain it");
  }
  return ok_status();
}

WeightStore WeightStore::dummy(const ModelConfig& config, uint64_t seed) {
  WeightStore store;
  store.model_dir_ = "<dummy weights>";
  store.options_ = WeightStoreOptions::from_config(config);
  store.dummy_ = DummySpec{seed, config.tie_word_embeddings};
  return store;
}

const std::string& WeightStore::file_path(const Entry& e) const {
  return files_[e.file_index]->path;
}

bool WeightStore::contains(const std::string& name) const {
  if (dummy_) return !(dummy_->tie_word_embeddings && name == "lm_head.weight");
  return entries_.count(name) > 0;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

Result<const WeightStore::Entry*> WeightStore::find_entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it != entries_.end()) return &it->second;
  std::string msg = "tensor '" + name + "' not found in " + model_dir_ + " (" +
                    std::to_string(entries_.size()) + " tensors present)";
  // A near miss (wrong prefix, renamed projection) is the usual cause; name the closest.
  const std::string* best = nullptr;
  size_t best_len = 0;
  for (const auto& [other, e] : entries_) {
    size_t len = common_prefix(name, other);
    if (len > best_len) best_len = len, best = &other;
  }
  if (best && best_len * 2 >= name.size()) msg += "; closest name: '" + *best + "'";
  return not_found(msg);
}

Result<TensorInfo> WeightStore::info(const std::string& name) const {
  KITE_ASSIGN_OR_RETURN(const Entry* e, find_entry(name));
  return TensorInfo{e->dtype, e->shape, file_path(*e)};
}

Result<Tensor> WeightStore::get_raw(const std::string& name) const {
  KITE_ASSIGN_OR_RETURN(const Entry* e, find_entry(name));
  const std::shared_ptr<MappedFile>& file = files_[e->file_index];
  // The mapping is PROT_READ: callers must treat the view as read-only.
  void* data = const_cast<uint8_t*>(file->data) + e->offset;
  return Tensor::wrap(data, e->shape, e->dtype, std::shared_ptr<void>(file));
}

Result<Tensor> WeightStore::get_f32(const std::string& name, const Shape& expected) const {
  if (dummy_) return make_dummy_tensor(name, expected, dummy_->seed);
  KITE_ASSIGN_OR_RETURN(const Entry* e, find_entry(name));
  if (e->shape != expected)
    return invalid_argument("tensor '" + name + "' has shape " + shape_to_string(e->shape) +
                            " but the model expects " + shape_to_string(expected) + " (file " +
                            file_path(*e) + ")");
  if (!is_float_dtype(e->dtype))
    return unsupported("tensor '" + name + "' has dtype " + std::string(dtype_name(e->dtype)) +
                       "; get_f32 reads only F64/F32/F16/BF16/F8_E4M3 (file " + file_path(*e) +
                       ")");
  if (e->dtype == DType::kF8E4M3) {
    if (contains(name + "_scale_inv")) return dequant_fp8_block(name, *e);
    // Per-tensor scales (compressed-tensors layout) would silently be ignored otherwise.
    if (contains(name + "_scale"))
      return unsupported("tensor '" + name + "' has a per-tensor scale '" + name +
                         "_scale'; only block-wise '_scale_inv' FP8 checkpoints are supported");
  }
  Tensor out = Tensor::empty(e->shape, DType::kF32);
  convert_to_f32(files_[e->file_index]->data + e->offset, e->dtype, out.numel(), out.data<float>());
  return out;
}

Result<Tensor> WeightStore::dequant_fp8_block(const std::string& name, const Entry& w) const {
  const std::string scale_name = name + "_scale_inv";
  const Entry& s = entries_.at(scale_name);
  if (w.shape.size() != 2)
    return unsupported("FP8 tensor '" + name + "' has shape " + shape_to_string(w.shape) +
                       "; block scales apply only to 2-D weights (file " + file_path(w) + ")");
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const int64_t br = options_.fp8_block_rows, bc = options_.fp8_block_cols;
  const Shape want{(rows + br - 1) / br, (cols + bc - 1) / bc};
  if (s.shape != want)
    return corrupt("scale tensor '" + scale_name + "' has shape " + shape_to_string(s.shape) +
                   " but weight '" + name + "' " + shape_to_string(w.shape) + " with " +
                   std::to_string(br) + "x" + std::to_string(bc) + " blocks needs " +
                   shape_to_string(want) + " (file " + file_path(s) + ")");
  if (!is_float_dtype(s.dtype) || s.dtype == DType::kF8E4M3)
    return corrupt("scale tensor '" + scale_name + "' has dtype " +
                   std::string(dtype_name(s.dtype)) + "; expected F32 or BF16 (file " +
                   file_path(s) + ")");
  std::vector<float> scale(static_cast<size_t>(want[0] * want[1]));
  convert_to_f32(files_[s.file_index]->data + s.offset, s.dtype, scale.size(), scale.data());

  const float* lut = fp8e4m3_table();
  Tensor out = Tensor::empty(w.shape, DType::kF32);
  const uint8_t* src = files_[w.file_index]->data + w.offset;
  float* dst = out.data<float>();
  const int64_t scale_cols = want[1];
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scale.data() + (r / br) * scale_cols;
    const uint8_t* in = src + r * cols;
    float* o = dst + r * cols;
    for (int64_t cb = 0; cb < scale_cols; ++cb) {
      const float sc = srow[cb];
      const int64_t end = std::min(cols, (cb + 1) * bc);
      for (int64_t c = cb * bc; c < end; ++c) o[c] = lut[in[c]] * sc;
    }
  }
  return out;
}

}  // namespace kite
