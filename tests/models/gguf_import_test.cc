// GGUF import (models::ImportGguf) without llama.cpp: export -> import round trips give back the
// config, the tensors bit for bit (float types; an int8 checkpoint's blocks as Q8_0 and back)
// and a tokenizer that encodes as the original; bad files are refused naming what is wrong.
// The llama.cpp oracle on real quantized files: tests/generate/gguf_import_oracle_test.cc.
#include "tlaloc/models/gguf_import.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;
using io::testing::TempDir;
using io::testing::WriteText;

const fs::path kTokenizer = fs::path(TLALOC_SOURCE_DIR) / "data/qwen3/tokenizer.json";

io::ModelConfig Config(bool moe) {
  auto c = PresetConfig(moe ? "tiny-moe" : "tiny");
  EXPECT_TRUE(c.ok());
  c->hidden_size = 32;
  c->num_attention_heads = 2;
  c->num_key_value_heads = 1;
  c->head_dim = 16;
  c->intermediate_size = 64;
  if (moe) models::qwen3::MutableMoe(*c).moe_intermediate_size = 32;
  return *c;
}

void ExpectSameTensors(const fs::path& a, const fs::path& b) {
  auto ca = io::Checkpoint::Open(a), cb = io::Checkpoint::Open(b);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  for (const std::string& name : ca->names()) {
    if (name == "lm_head.weight" && !cb->Contains(name)) continue;  // a tied head's copy
    auto x = ca->Get(name), y = cb->Get(name);
    ASSERT_TRUE(y.ok()) << name << ": " << y.status().ToString();
    ASSERT_EQ(x->dims(), y->dims()) << name;
    if (x->element_type() == y->element_type()) {
      EXPECT_EQ(std::memcmp(x->data(), y->data(), static_cast<size_t>(x->byte_size())), 0) << name;
      continue;
    }
    // 1-D norm weights are exported as f32 whatever their stored type: the same values.
    ASSERT_EQ(x->dims().size(), 1u)
        << name << ": " << x->type().ToString() << " came back as " << y->type().ToString();
    for (int64_t i = 0; i < x->num_elements(); ++i)
      ASSERT_EQ(x->GetAsDouble(i), y->GetAsDouble(i)) << name << "[" << i << "]";
  }
}

class GgufImportRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(GgufImportRoundTrip, FloatAndInt8CheckpointsComeBackAsTheyWere) {
  ASSERT_TRUE(fs::exists(kTokenizer)) << "the checkout lacks " << kTokenizer;
  const bool moe = GetParam();
  TempDir dir;
  InitOptions init;
  init.seed = 3;
  init.dtype = ElementType::kBF16;
  init.tokenizer_json = kTokenizer;
  const io::ModelConfig config = Config(moe);
  ASSERT_TRUE(WriteRandomCheckpoint(config, dir / "src", init).ok());
  ASSERT_TRUE(ExportGguf(dir / "src", dir / "m.gguf").ok());
  auto imported = ImportGguf(dir / "m.gguf", dir / "back");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->architecture, moe ? "qwen3moe" : "qwen3");
  EXPECT_FALSE(imported->int8);
  EXPECT_EQ(imported->dequantised, 0);
  ExpectSameTensors(dir / "src", dir / "back");

  auto back = io::LoadModelConfig(dir / "back");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->architecture, config.architecture);
  EXPECT_EQ(back->vocab_size, config.vocab_size);
  EXPECT_EQ(back->num_hidden_layers, config.num_hidden_layers);
  EXPECT_EQ(back->head_dim, config.head_dim);
  EXPECT_EQ(back->rope_theta, config.rope_theta);
  EXPECT_EQ(back->rms_norm_eps, config.rms_norm_eps);
  EXPECT_EQ(back->tie_word_embeddings, config.tie_word_embeddings);
  EXPECT_EQ(back->dtype, ElementType::kBF16);
  if (moe) {
    EXPECT_EQ(models::qwen3::Moe(*back).num_experts, models::qwen3::Moe(config).num_experts);
    EXPECT_EQ(models::qwen3::Moe(*back).num_experts_per_tok,
              models::qwen3::Moe(config).num_experts_per_tok);
    EXPECT_EQ(models::qwen3::Moe(*back).moe_intermediate_size,
              models::qwen3::Moe(config).moe_intermediate_size);
  }
  // <|im_end|> (the export's eos) first, then <|endoftext|>, which llama.cpp also stops at.
  EXPECT_EQ(back->eos_token_ids, (std::vector<int64_t>{151645, 151643}));

  auto original = Tokenizer::FromFile(kTokenizer.string());
  auto ours = Tokenizer::FromFile((dir / "back" / "tokenizer.json").string());
  ASSERT_TRUE(original.ok() && ours.ok());
  const std::string text = "Hello, world! <|im_start|>user\n<think>ok</think> 12345 你好";
  EXPECT_EQ(ours->Encode(text), original->Encode(text));
  const std::string config_text = io::testing::ReadText(dir / "back" / "tokenizer_config.json");
  EXPECT_NE(config_text.find("chat_template"), std::string::npos);
  EXPECT_NE(config_text.find("\"eos_token\": \"<|im_end|>\""), std::string::npos) << config_text;

  // An int8 checkpoint: exported as Q8_0, imported back as int8 without dequantising.
  ASSERT_TRUE(QuantizeCheckpoint(dir / "src", dir / "int8").ok());
  ASSERT_TRUE(ExportGguf(dir / "int8", dir / "q8.gguf").ok());
  auto q8 = ImportGguf(dir / "q8.gguf", dir / "q8back");
  ASSERT_TRUE(q8.ok()) << q8.status().ToString();
  EXPECT_TRUE(q8->int8);
  EXPECT_EQ(q8->dequantised, 0);
  ExpectSameTensors(dir / "int8", dir / "q8back");
  auto q8config = io::LoadModelConfig(dir / "q8back");
  ASSERT_TRUE(q8config.ok()) << q8config.status().ToString();
  EXPECT_TRUE(q8config->quantization.has_value());
}

INSTANTIATE_TEST_SUITE_P(Dense, GgufImportRoundTrip, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Moe, GgufImportRoundTrip, ::testing::Values(true));

// A GGUF of `keys` and one f32 token embedding [8, 32] (plus `extra_tensor` when named).
fs::path WriteFile(const TempDir& dir, const std::string& name, std::vector<io::GgufKeyValue> keys,
                   const std::string& extra_tensor = "") {
  std::vector<io::GgufTensorToWrite> tensors;
  tensors.push_back({"token_embd.weight", Literal(TensorType(ElementType::kF32, {8, 32}))});
  if (!extra_tensor.empty())
    tensors.push_back({extra_tensor, Literal(TensorType(ElementType::kF32, {32}))});
  const fs::path path = dir / (name + ".gguf");
  EXPECT_TRUE(io::WriteGguf(path, keys, tensors).ok());
  return path;
}

std::vector<io::GgufKeyValue> Qwen3Keys() {
  using io::GgufValue;
  return {{"general.architecture", GgufValue::String("qwen3")},
          {"qwen3.block_count", GgufValue::U32(1)},
          {"qwen3.embedding_length", GgufValue::U32(32)},
          {"qwen3.attention.head_count", GgufValue::U32(2)},
          {"qwen3.context_length", GgufValue::U32(64)},
          {"qwen3.feed_forward_length", GgufValue::U32(64)},
          {"tokenizer.ggml.model", GgufValue::String("gpt2")},
          {"tokenizer.ggml.pre", GgufValue::String("qwen2")},
          {"tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b"})}};
}

std::string ErrorOf(const fs::path& file, const TempDir& dir) {
  auto r = ImportGguf(file, dir / "out");
  return r.ok() ? std::string("(imported)") : r.status().message();
}

TEST(GgufImport, RefusesBadFilesNamingWhatIsWrong) {
  TempDir dir;
  auto keys = Qwen3Keys();
  // An architecture no family registers is refused naming those that are (Llama's is one).
  keys[0].value = io::GgufValue::String("gemma3");
  const std::string unknown = ErrorOf(WriteFile(dir, "gemma3", keys), dir);
  EXPECT_NE(unknown.find("architecture \"gemma3\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("llama, qwen3, qwen3moe"), std::string::npos) << unknown;

  keys = Qwen3Keys();
  keys.erase(keys.begin() + 1);  // qwen3.block_count
  EXPECT_NE(ErrorOf(WriteFile(dir, "noblocks", keys), dir)
                .find("missing metadata key \"qwen3.block_count\""),
            std::string::npos);

  keys = Qwen3Keys();
  keys[7].value = io::GgufValue::String("llama-bpe");
  EXPECT_NE(ErrorOf(WriteFile(dir, "pre", keys), dir).find("tokenizer.ggml.pre \"llama-bpe\""),
            std::string::npos);

  EXPECT_NE(ErrorOf(WriteFile(dir, "name", Qwen3Keys(), "blk.0.mystery.weight"), dir)
                .find("tensor \"blk.0.mystery.weight\""),
            std::string::npos);

  WriteText(dir / "text.gguf", "not a gguf file at all");
  EXPECT_NE(ErrorOf(dir / "text.gguf", dir).find("GGUF file"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::models
