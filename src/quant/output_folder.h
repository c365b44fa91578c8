// Where `kite quantize` may write, and a folder that takes its place only once complete.
//
// --out may be a new folder, an empty one, or the folder an earlier `kite quantize` wrote (only
// the files it writes, its config.json naming a kite_method), which is replaced whole.
// Anything else is refused before any work: the source model's own folder (writing there put a
// model.safetensors beside its shards and rewrote its config.json), another checkpoint, a
// folder of the user's files. The checkpoint is built in a hidden folder beside --out and
// renamed into place at the end, so a failure part-way (a tensor the format cannot hold, a
// full disk) leaves --out as it was.
#pragma once

#include <string>
#include <utility>

#include "core/status.h"

namespace kite {

// Whether out_dir may receive a checkpoint of model_dir (see above).
Status check_output_folder(const std::string& out_dir, const std::string& model_dir);

class StagedFolder {
 public:
  // Creates the hidden folder beside out_dir (and out_dir's parents).
  static Result<StagedFolder> create(const std::string& out_dir);
  StagedFolder(StagedFolder&& other) noexcept;
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  StagedFolder& operator=(StagedFolder&&) = delete;
  ~StagedFolder();  // removes the hidden folder unless committed

  const std::string& path() const { return staging_; }
  // Puts the hidden folder in out_dir's place (an empty folder or an earlier kite quantize
  // output there is removed once the new one is in place).
  Status commit();

 private:
  StagedFolder(std::string out_dir, std::string staging)
      : out_dir_(std::move(out_dir)), staging_(std::move(staging)) {}
  std::string out_dir_, staging_;
  bool done_ = false;
};

}  // namespace kite
