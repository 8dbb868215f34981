// A Llama GGUF file (llama.cpp's `llama`, as `tlaloc export gguf` writes it) imports through the
// family registry (models::ModelFamily::gguf_architecture): export then import of a random
// tiny-llama checkpoint gives back every tensor bit for bit (q and k rows back from llama.cpp's
// interleaved pairs), the config, and the same logits and greedy tokens. A "llama3" rope scaling,
// which llama.cpp stores as rope_freqs.weight, is refused by name. (llama.cpp itself runs the
// exported file in llama_family_test.cc.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "generate/oracle_logits.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/gguf_import.h"
#include "tlaloc/models/init.h"

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

// Bytes 'Hello, world' after <|begin_of_text|> (the built-in byte-level tokenizer's ids).
const std::vector<int32_t> kPrompt = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};

struct TempFolder {
  fs::path path;
  explicit TempFolder(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempFolder() { fs::remove_all(path); }
};

// A random tiny-llama checkpoint (its built-in tokenizer) in `dir`, without rope scaling when
// `plain_rope`.
void WriteTinyLlama(const fs::path& dir, bool plain_rope) {
  auto c = models::PresetConfig("tiny-llama");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  if (plain_rope) c->rope_scaling.reset();
  c->initializer_range = 0.2;  // logits of order one
  models::InitOptions init;
  init.seed = 11;
  Status s = models::WriteRandomCheckpoint(*c, dir, init);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::unique_ptr<generate::Generator> Load(const fs::path& dir) {
  auto g = generate::Generator::Load(dir, ElementType::kF32);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : nullptr;
}

TEST(LlamaGgufImport, ExportThenImportGivesTheSameTensorsConfigAndTokens) {
  TempFolder tmp("tlaloc_llama_gguf_import");
  const fs::path src = tmp.path / "src", gguf = tmp.path / "m.gguf", back = tmp.path / "back";
  WriteTinyLlama(src, /*plain_rope=*/true);
  ASSERT_FALSE(HasFailure());
  auto exported = models::ExportGguf(src, gguf);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  auto imported = models::ImportGguf(gguf, back);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->architecture, "llama");
  EXPECT_FALSE(imported->int8);
  EXPECT_EQ(imported->dequantised, 0);

  // Every tensor bit for bit (all f32), q and k included: the export interleaves their rows and
  // the import undoes it.
  auto a = io::Checkpoint::Open(src), b = io::Checkpoint::Open(back);
  ASSERT_TRUE(a.ok() && b.ok());
  int compared = 0, reordered = 0;
  for (const std::string& name : a->names()) {
    if (name == "lm_head.weight" && !b->Contains(name)) continue;  // a tied head's copy
    auto x = a->Get(name), y = b->Get(name);
    ASSERT_TRUE(x.ok() && y.ok()) << name;
    ASSERT_EQ(x->type().ToString(), y->type().ToString()) << name;
    EXPECT_EQ(std::memcmp(x->data(), y->data(), static_cast<size_t>(x->byte_size())), 0) << name;
    ++compared;
    reordered += name.ends_with("q_proj.weight") || name.ends_with("k_proj.weight");
  }
  EXPECT_EQ(reordered, 4);  // q and k of both layers
  EXPECT_GE(compared, 1 + 2 * 9 + 1);

  auto want = models::LoadConfig(src), got = models::LoadConfig(back);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
  EXPECT_EQ(got->architecture, want->architecture);
  EXPECT_EQ(got->vocab_size, want->vocab_size);
  EXPECT_EQ(got->hidden_size, want->hidden_size);
  EXPECT_EQ(got->intermediate_size, want->intermediate_size);
  EXPECT_EQ(got->num_hidden_layers, want->num_hidden_layers);
  EXPECT_EQ(got->num_attention_heads, want->num_attention_heads);
  EXPECT_EQ(got->num_key_value_heads, want->num_key_value_heads);
  EXPECT_EQ(got->head_dim, want->head_dim);
  EXPECT_EQ(got->rope_theta, want->rope_theta);
  EXPECT_EQ(got->rms_norm_eps, want->rms_norm_eps);
  EXPECT_EQ(got->max_position_embeddings, want->max_position_embeddings);
  EXPECT_EQ(got->tie_word_embeddings, want->tie_word_embeddings);
  EXPECT_FALSE(got->rope_scaling.has_value());
  EXPECT_EQ(got->bos_token_id, want->bos_token_id);
  // The same end tokens (the file's eos, <|eot_id|>, first, then <|end_of_text|>).
  std::vector<int64_t> want_ends = want->eos_token_ids, got_ends = got->eos_token_ids;
  std::sort(want_ends.begin(), want_ends.end());
  std::sort(got_ends.begin(), got_ends.end());
  EXPECT_EQ(got_ends, want_ends);

  // The same logits at every position (full and KV-cached) and the same greedy tokens.
  auto g_src = Load(src), g_back = Load(back);
  ASSERT_TRUE(g_src && g_back);
  const testing::TlalocLogits x = testing::RunTlaloc(*g_src, kPrompt);
  const testing::TlalocLogits y = testing::RunTlaloc(*g_back, kPrompt);
  ASSERT_EQ(x.full.size(), kPrompt.size());
  ASSERT_EQ(y.full.size(), x.full.size());
  for (size_t p = 0; p < x.full.size(); ++p)
    EXPECT_EQ(testing::MaxAbsDiff(x.full[p], y.full[p]), 0.0) << "position " << p;
  generate::GenerateOptions opts;
  opts.max_new_tokens = 12;
  auto out_src = g_src->Generate({kPrompt}, opts), out_back = g_back->Generate({kPrompt}, opts);
  ASSERT_TRUE(out_src.ok() && out_back.ok());
  EXPECT_EQ((*out_back)[0].generated_ids, (*out_src)[0].generated_ids);
  EXPECT_EQ((*out_src)[0].generated_ids.size(), 12u);
}

TEST(LlamaGgufImport, Llama3RopeScalingIsRefusedByName) {
  TempFolder tmp("tlaloc_llama_gguf_import_scaled");
  WriteTinyLlama(tmp.path / "src", /*plain_rope=*/false);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(models::ExportGguf(tmp.path / "src", tmp.path / "m.gguf").ok());
  auto imported = models::ImportGguf(tmp.path / "m.gguf", tmp.path / "back");
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("rope_freqs.weight"), std::string::npos)
      << imported.status().ToString();
}

}  // namespace
}  // namespace tlaloc
