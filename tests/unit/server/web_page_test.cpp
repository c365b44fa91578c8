// The embedded web page (src/server/web_page.h): byte-identical to src/server/web/index.html,
// self-contained, small, and carrying the pieces the browser test and the server rely on.
#include "server/web_page.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace kite {
namespace {

std::string read_source_page() {
  std::ifstream in(std::string(KITE_SOURCE_DIR) + "/src/server/web/index.html", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(WebPage, EmbeddedBytesEqualTheSourceFile) {
  const std::string source = read_source_page();
  ASSERT_FALSE(source.empty()) << "cannot read src/server/web/index.html";
  EXPECT_EQ(web_index_html(), source) << "rebuild: the embedded page is stale";
}

TEST(WebPage, IsACompleteHtmlDocumentUnder40KB) {
  const std::string_view page = web_index_html();
  EXPECT_TRUE(page.starts_with("<!doctype html>"));
  EXPECT_NE(page.find("</html>"), std::string_view::npos);
  EXPECT_LT(page.size(), 40u * 1024u) << "the page should stay small";
  EXPECT_EQ(page.find('\0'), std::string_view::npos);
}

TEST(WebPage, HasTheExpectedParts) {
  const std::string_view page = web_index_html();
  for (const char* marker : {"id=\"chat\"",
                             "id=\"engine\"",
                             "id=\"prompt\"",
                             "id=\"send\"",
                             "id=\"stop\"",
                             "id=\"system\"",
                             "id=\"temperature\"",
                             "id=\"top-p\"",
                             "id=\"max-tokens\"",
                             "id=\"key-dialog\"",
                             "/v1/chat/completions",
                             "/v1/models",
                             "/metrics",
                             "include_usage",
                             "AbortController",
                             "aria-live",
                             "sessionStorage",
                             "Bearer ",
                             "kite_requests_running",
                             "kite_time_to_first_token_seconds",
                             "name=\"viewport\""}) {
    EXPECT_NE(page.find(marker), std::string_view::npos) << "missing " << marker;
  }
}

TEST(WebPage, LoadsNothingFromOutside) {
  const std::string_view page = web_index_html();
  for (const char* outside : {"src=\"http", "href=\"http", "src=\"//", "href=\"//", "<link",
                              "@import", "url(http", "localStorage.setItem"}) {
    EXPECT_EQ(page.find(outside), std::string_view::npos) << "found " << outside;
  }
}

}  // namespace
}  // namespace kite
