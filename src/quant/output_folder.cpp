#include "quant/output_folder.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

#include "quant/export.h"
#include "quant/text_scoring.h"

namespace kite {
namespace fs = std::filesystem;
namespace {

// --out as a folder path: "dir/" names dir.
fs::path folder_path(const std::string& out_dir) {
  fs::path p = fs::path(out_dir).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

// What export_quantized_checkpoint writes (quant/export.h).
bool is_export_file(const std::string& name) {
  auto named = [&](const char* f) { return name == std::string_view(f); };
  return std::ranges::any_of(kExportWrittenFiles, named) ||
         std::ranges::any_of(kExportCopiedFiles, named);
}

bool is_kite_output(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || !is_export_file(e.path().filename().string())) return false;
  }
  if (ec || !fs::exists(dir / "model.safetensors")) return false;
  const Result<std::string> text = read_text_file((dir / "config.json").string());
  if (!text.ok()) return false;
  const nlohmann::json cfg = nlohmann::json::parse(text.value(), nullptr, false);
  return !cfg.is_discarded() && cfg.is_object() && cfg.contains("quantization_config") &&
         cfg["quantization_config"].is_object() &&
         cfg["quantization_config"].contains("kite_method");
}

}  // namespace

Status check_output_folder(const std::string& out_dir, const std::string& model_dir) {
  const fs::path out = folder_path(out_dir);
  if (out.empty()) return invalid_argument("--out needs a folder");
  std::error_code ec;
  if (!fs::exists(out, ec)) return ok_status();
  if (fs::equivalent(out, fs::path(model_dir), ec))
    return invalid_argument("--out '" + out_dir +
                            "' is the model's own folder; write the quantized checkpoint to a "
                            "new folder");
  if (!fs::is_directory(out, ec))
    return invalid_argument("--out '" + out_dir + "' exists and is not a folder");
  if (fs::is_empty(out, ec) || is_kite_output(out)) return ok_status();
  return invalid_argument("--out '" + out_dir +
                          "' holds files kite quantize did not write; give a new or empty "
                          "folder (an earlier kite quantize output there is replaced)");
}

Result<StagedFolder> StagedFolder::create(const std::string& out_dir) {
  const fs::path out = folder_path(out_dir);
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return invalid_argument("cannot create '" + parent.string() + "': " + ec.message());
  const fs::path staging =
      parent / ("." + out.filename().string() + ".partial-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);  // a leftover of a killed run with the same pid
  fs::create_directory(staging, ec);
  if (ec) return invalid_argument("cannot create '" + staging.string() + "': " + ec.message());
  return StagedFolder(out.string(), staging.string());
}

StagedFolder::StagedFolder(StagedFolder&& other) noexcept
    : out_dir_(std::move(other.out_dir_)), staging_(std::move(other.staging_)), done_(other.done_) {
  other.done_ = true;
}

StagedFolder::~StagedFolder() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

Status StagedFolder::commit() {
  std::error_code ec;
  const fs::path out(out_dir_), old(staging_ + ".old");
  // The folder there (empty, or an earlier output: check_output_folder) moves aside first, so a
  // failed rename puts it back instead of losing it.
  const bool had = fs::exists(out, ec);
  if (had) {
    fs::rename(out, old, ec);
    if (ec) return internal_error("cannot replace '" + out_dir_ + "': " + ec.message());
  }
  fs::rename(staging_, out, ec);
  if (ec) {
    std::error_code back;
    if (had) fs::rename(old, out, back);
    return internal_error("cannot move the checkpoint to '" + out_dir_ + "': " + ec.message());
  }
  done_ = true;
  if (had) fs::remove_all(old, ec);
  return ok_status();
}

}  // namespace kite
