// init-model's tiny preset with the real Qwen3 tokenizer, end to end through the library:
// write the folder, load it, tokenize, generate, stream-decode.
#include <gtest/gtest.h>

#include <filesystem>

#include "testing/oracle.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/init.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

TEST(EndToEnd, TinyPresetWithTheRealTokenizer) {
  const fs::path tok_json = fs::path(TLALOC_SOURCE_DIR) / "data/qwen3/tokenizer.json";
  ASSERT_TRUE(fs::exists(tok_json)) << tok_json << " is missing (the repository carries it)";
  auto config = models::PresetConfig("tiny");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  fs::path dir = fs::temp_directory_path() / ("tlaloc_e2e_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  models::InitOptions init;
  init.seed = 7;
  init.tokenizer_json = tok_json;
  ASSERT_TRUE(models::WriteRandomCheckpoint(*config, dir, init).ok());
  for (const char* f :
       {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;

  auto gen = generate::Generator::Load(dir);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto tok = Tokenizer::FromFile((dir / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int32_t> ids = tok->Encode("Hello, world! The quick brown fox.");
  EXPECT_EQ(ids, (std::vector<int32_t>{9707, 11, 1879, 0, 576, 3974, 13876, 38835, 13}));
  auto gcfg = io::LoadGenerationConfig(dir);
  ASSERT_TRUE(gcfg.ok()) << gcfg.status().ToString();
  EXPECT_EQ(gcfg->eos_token_ids, std::vector<int64_t>{151645});

  generate::GenerateOptions opts;
  opts.max_new_tokens = 5;
  opts.sampling = nn::SamplingParams{0.8, 40, 0.95};
  opts.seed = 3;
  StreamDecoder stream(*tok);
  std::string text;
  auto res = (*gen)->Generate({ids}, opts, [&](size_t, int32_t id) {
    auto piece = stream.Push(id);
    ASSERT_TRUE(piece.ok()) << piece.status().ToString();
    text += *piece;
  });
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  text += stream.Finish();
  ASSERT_EQ((*res)[0].generated_ids.size(), 5u);
  auto whole = tok->Decode((*res)[0].generated_ids);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(text, *whole);
  EXPECT_TRUE(utf8::IsValid(text));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tlaloc
