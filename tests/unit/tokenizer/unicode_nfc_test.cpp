#include "tokenizer/unicode_nfc.h"

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace kite {
namespace {

TEST(UnicodeNfcTest, KnownCompositions) {
  EXPECT_EQ(unicode::to_nfc("e\xCC\x81"), "\xC3\xA9");     // e + acute -> é
  EXPECT_EQ(unicode::to_nfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å
  EXPECT_EQ(unicode::to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // 각
  // Out-of-order marks are reordered: dot below (220) before acute (230), then composed.
  EXPECT_EQ(unicode::to_nfc("e\xCC\x81\xCC\xA3"), unicode::to_nfc("e\xCC\xA3\xCC\x81"));
  EXPECT_EQ(unicode::to_nfc("plain ascii"), "plain ascii");
}

TEST(UnicodeNfcTest, MatchesNodeNormalizeGolden) {
  int failures = 0;
  auto rows = testing::read_jsonl(testing::fixtures_dir() + "/tokenizer/goldens/nfc.jsonl");
  ASSERT_GE(rows.size(), 1000u);
  for (const auto& row : rows) {
    std::string text = row["text"], want = row["nfc"];
    std::string got = unicode::to_nfc(text);
    if (got != want && ++failures <= 10) {
      ADD_FAILURE() << "NFC of " << row["text"].dump() << ": want " << row["nfc"].dump() << " got "
                    << nlohmann::json(got).dump();
    }
    // The quick check may only say "yes" for text that really is NFC.
    if (unicode::is_nfc_quick(text)) {
      EXPECT_EQ(got, text) << row["text"].dump();
    }
    EXPECT_EQ(unicode::to_nfc(got), got) << "NFC is idempotent";
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace kite
