// Random checkpoints carry their family's tokenizer files (models::WriteRandomCheckpoint,
// `tlaloc init-model`): the tiny-llama preset gets the built-in byte-level tokenizer.json with
// Llama 3's special tokens and a Llama 3-style tokenizer_config.json whose chat template renders
// Llama 3's format; Qwen3 keeps Qwen3's tokenizer_config.json.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;

nlohmann::json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

fs::path TempDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("tlaloc_init_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(LlamaInit, TinyLlamaGetsLlama3TokenizerFiles) {
  auto c = PresetConfig("tiny-llama");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture.model_type, "llama");
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->rope_type, "llama3");
  const fs::path dir = TempDir("llama");
  ASSERT_TRUE(WriteRandomCheckpoint(*c, dir, {}).ok());

  // The built-in tokenizer: bytes are ids 0-255, Llama 3's special tokens 256-260.
  auto tok = Tokenizer::FromFile((dir / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Encode("<|begin_of_text|>Hi!<|eot_id|>"),
            (std::vector<int32_t>{256, 'H', 'i', '!', 260}));
  // The config's special ids are its tokens.
  const std::vector<int32_t> bos_id = {static_cast<int32_t>(*c->bos_token_id)};
  auto bos = tok->Decode(bos_id);
  ASSERT_TRUE(bos.ok());
  EXPECT_EQ(*bos, "<|begin_of_text|>");
  ASSERT_EQ(c->eos_token_ids.size(), 2u);
  const std::vector<int32_t> eos_ids = {static_cast<int32_t>(c->eos_token_ids[0]),
                                        static_cast<int32_t>(c->eos_token_ids[1])};
  auto eos = tok->Decode(eos_ids);
  ASSERT_TRUE(eos.ok());
  EXPECT_EQ(*eos, "<|end_of_text|><|eot_id|>");

  const nlohmann::json tc = ReadJson(dir / "tokenizer_config.json");
  ASSERT_TRUE(tc.is_object());
  EXPECT_EQ(tc["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(tc["eos_token"], "<|eot_id|>");
  EXPECT_EQ(tc["add_bos_token"], true);
  EXPECT_EQ(tc["model_max_length"], c->max_position_embeddings);
  auto family = FindFamily("llama");
  ASSERT_TRUE(family.ok());
  EXPECT_EQ(tc["chat_template"], (*family)->chat_template_jinja());

  auto chat = ChatTemplate::FromCheckpoint(dir);
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  std::vector<ChatMessage> messages(2);
  messages[0].role = "system";
  messages[0].content = "Be brief.";
  messages[1].role = "user";
  messages[1].content = " Hello ";
  auto text = chat->Render(messages);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  fs::remove_all(dir);
}

TEST(LlamaInit, Qwen3KeepsItsTokenizerConfigAndNeedsAGivenTokenizer) {
  auto c = PresetConfig("tiny");
  ASSERT_TRUE(c.ok());
  c->vocab_size = 512;  // a small model; the tokenizer's ids need not fit for this test
  const fs::path bare = TempDir("qwen3_bare");
  ASSERT_TRUE(WriteRandomCheckpoint(*c, bare, {}).ok());
  EXPECT_FALSE(fs::exists(bare / "tokenizer.json")) << "Qwen3 has no built-in tokenizer";
  EXPECT_FALSE(fs::exists(bare / "tokenizer_config.json"));

  // With a tokenizer.json given (here the Llama folder's), Qwen3's tokenizer_config.json.
  auto llama = PresetConfig("tiny-llama");
  ASSERT_TRUE(llama.ok());
  const fs::path llama_dir = TempDir("llama_src");
  ASSERT_TRUE(WriteRandomCheckpoint(*llama, llama_dir, {}).ok());
  InitOptions opts;
  opts.tokenizer_json = llama_dir / "tokenizer.json";
  const fs::path dir = TempDir("qwen3");
  ASSERT_TRUE(WriteRandomCheckpoint(*c, dir, opts).ok());
  const nlohmann::json tc = ReadJson(dir / "tokenizer_config.json");
  ASSERT_TRUE(tc.is_object());
  EXPECT_EQ(tc["tokenizer_class"], "Qwen2Tokenizer");
  EXPECT_EQ(tc["eos_token"], "<|im_end|>");
  EXPECT_EQ(tc["chat_template"], Qwen3ChatTemplate());
  for (const fs::path& d : {bare, llama_dir, dir}) fs::remove_all(d);
}

}  // namespace
}  // namespace tlaloc::models
