// Where `kite quantize` writes (quant/output_folder.h): a new or empty folder, or an earlier
// output, which is replaced; never the model's own folder or a folder of other files (both
// left byte for byte as they were); and a failure part-way leaves no folder and no hidden
// staging folder behind. Writing into the model's folder once put a model.safetensors beside
// its shards and rewrote its config.json.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "quant/calibration.h"
#include "quant/export.h"
#include "quant/output_folder.h"

namespace kite {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = fs::path(KITE_SOURCE_DIR) / "tests/fixtures/models/llama3";

// A fresh folder under the temp directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("kite_outdir_" + tag + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every file under dir (relative name -> bytes).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    files[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? read_bytes(e.path()) : "/";
  return files;
}

std::shared_ptr<const QuantPlan> int4_plan(const std::string& model_dir) {
  LoadOptions o;
  o.quant.method = QuantMethod::kInt4;
  auto plan = build_quant_plan(model_dir, o);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : nullptr;
}

// Hidden staging folders (".name.partial-pid", ".old") left in dir.
int leftovers(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".partial-") != std::string::npos;
  return n;
}

TEST(QuantizeOutputFolder, TheModelsOwnFolderIsRefusedAndLeftAsItWas) {
  TempDir tmp("self");
  const fs::path model = tmp.path / "model";
  fs::copy(kFixture, model, fs::copy_options::recursive);
  const auto before = snapshot(model);
  const auto plan = int4_plan(model.string());
  ASSERT_TRUE(plan);
  for (const std::string& out : {model.string(), model.string() + "/", model.string() + "/."}) {
    const Status s = export_quantized_checkpoint(model.string(), *plan, out);
    ASSERT_FALSE(s.ok()) << out;
    EXPECT_NE(s.message().find("model's own folder"), std::string::npos) << s.message();
  }
  EXPECT_EQ(snapshot(model), before);
  EXPECT_EQ(leftovers(tmp.path), 0);
}

TEST(QuantizeOutputFolder, FoldersOfOtherFilesAreRefusedAndLeftAsTheyWere) {
  TempDir tmp("other");
  const auto plan = int4_plan(kFixture.string());
  ASSERT_TRUE(plan);
  // A folder of the user's files, and another checkpoint (kite's file names, but a config.json
  // that no kite quantize wrote).
  const fs::path notes = tmp.path / "notes", other = tmp.path / "other";
  fs::create_directories(notes);
  std::ofstream(notes / "todo.txt") << "keep me\n";
  fs::create_directories(other);
  fs::copy_file(kFixture / "config.json", other / "config.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(kFixture / "model.safetensors", other / "model.safetensors");
  for (const fs::path& dir : {notes, other}) {
    const auto before = snapshot(dir);
    const Status s = export_quantized_checkpoint(kFixture.string(), *plan, dir.string());
    ASSERT_FALSE(s.ok()) << dir;
    EXPECT_NE(s.message().find("holds files kite quantize did not write"), std::string::npos)
        << s.message();
    EXPECT_EQ(snapshot(dir), before) << dir;
  }
  // A file where the folder should be.
  const Status s =
      export_quantized_checkpoint(kFixture.string(), *plan, (notes / "todo.txt").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a folder"), std::string::npos) << s.message();
  EXPECT_EQ(leftovers(tmp.path), 0);
}

TEST(QuantizeOutputFolder, NewEmptyAndEarlierOutputFoldersTakeTheCheckpoint) {
  TempDir tmp("ok");
  const auto plan = int4_plan(kFixture.string());
  ASSERT_TRUE(plan);
  const fs::path fresh = tmp.path / "a" / "b", empty = tmp.path / "empty";
  fs::create_directories(empty);
  for (const fs::path& out : {fresh, empty}) {
    const Status s = export_quantized_checkpoint(kFixture.string(), *plan, out.string());
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(fs::exists(out / "model.safetensors")) << out;
    EXPECT_TRUE(fs::exists(out / "config.json")) << out;
  }
  // Again into an earlier output: accepted, replaced whole (a stray file of the earlier run's
  // kind, gone from the new one, would show a merge instead of a replacement).
  fs::copy_file(kFixture / "config.json", empty / "generation_config.json");
  EXPECT_TRUE(check_output_folder(empty.string(), kFixture.string()).ok());
  const Status s = export_quantized_checkpoint(kFixture.string(), *plan, empty.string());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(fs::exists(empty / "generation_config.json"));
  EXPECT_EQ(read_bytes(empty / "model.safetensors"), read_bytes(fresh / "model.safetensors"));
  EXPECT_EQ(leftovers(tmp.path), 0);
  EXPECT_EQ(leftovers(tmp.path / "a"), 0);
}

TEST(QuantizeOutputFolder, AFailurePartWayLeavesNoFolder) {
  TempDir tmp("fail");
  const fs::path model = tmp.path / "model", out = tmp.path / "out";
  fs::copy(kFixture, model, fs::copy_options::recursive);
  // The last step copies generation_config.json; a folder of that name makes it fail after the
  // weights and config.json were written.
  fs::create_directories(model / "generation_config.json");
  const auto plan = int4_plan(model.string());
  ASSERT_TRUE(plan);
  const Status s = export_quantized_checkpoint(model.string(), *plan, out.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("generation_config.json"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(leftovers(tmp.path), 0);
}

}  // namespace
}  // namespace kite
