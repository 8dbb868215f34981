// The Qwen3 family's GGUF export: metadata, tokenizer rules, tensor names and errors, read back
// with the GGUF reader.
#include "tlaloc/models/gguf_export.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;
using io::Checkpoint;
using io::DefaultModelConfig;
using io::GgmlType;
using io::GgufContents;
using io::GgufTensorInfo;
using io::GgufType;
using io::GgufValue;
using io::ModelConfig;
using io::NamedTensor;
using io::ParseGguf;
using io::ReadGgufTensor;
using io::ValidateModelConfig;
using io::WriteCheckpoint;
using io::WriteModelConfig;
using io::testing::ReadText;
using io::testing::TempDir;
using io::testing::WriteText;

std::vector<std::byte> ReadBytes(const fs::path& p) {
  std::string s = ReadText(p);
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// A byte-level BPE tokenizer.json with the Qwen2 pre-tokenizer: a few normal tokens, merges in
// both spellings, and added tokens (special, special-looking, and plain).
std::string SmallTokenizerJson() {
  nlohmann::json j;
  j["model"] = {
      {"type", "BPE"},
      {"vocab",
       {{"a", 0},
        {"b", 1},
        {"\xC4\xA0", 2},
        {"ab", 3},
        {"\xC4\xA0"
         "ab",
         4}}},
      {"merges", nlohmann::json::array({"a b", nlohmann::json::array({"\xC4\xA0", "ab"})})}};
  j["added_tokens"] =
      nlohmann::json::array({{{"id", 5}, {"content", "<|endoftext|>"}, {"special", true}},
                             {{"id", 6}, {"content", "<|im_end|>"}, {"special", false}},
                             {{"id", 7}, {"content", "<think>"}, {"special", false}}});
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       nlohmann::json::array(
           {{{"type", "Split"},
             {"pattern",
              {{"Regex",
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
             {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}}})}};
  return j.dump();
}

ModelConfig SmallConfig(bool tied) {
  ModelConfig c = DefaultModelConfig(models::qwen3::kQwen3);
  c.vocab_size = 12;
  c.hidden_size = 8;
  c.intermediate_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  models::qwen3::MutableSlidingWindow(c).max_window_layers = 2;
  c.layer_types.assign(2, "full_attention");
  c.tie_word_embeddings = tied;
  c.rope_theta = 12345;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 5;
  c.eos_token_ids = {6};
  c.pad_token_id = 5;
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  return c;
}

// Every tensor the config expects (the tied head's copy too), with distinct values.
std::vector<NamedTensor> SmallWeights(const ModelConfig& c, ElementType dtype) {
  std::vector<NamedTensor> out;
  float next = 0;
  for (const auto& t : ExpectedTensors(c)) {
    Literal lit(TensorType(dtype, t.shape));
    for (int64_t i = 0; i < lit.num_elements(); ++i) lit.SetFromDouble(i, (next += 0.01f));
    out.push_back({t.name, std::move(lit)});
  }
  return out;
}

void WriteFolder(const fs::path& dir, const ModelConfig& c, ElementType dtype) {
  ASSERT_TRUE(WriteCheckpoint(dir, SmallWeights(c, dtype)).ok());
  ASSERT_TRUE(WriteModelConfig(dir / "config.json", c).ok());
  WriteText(dir / "tokenizer.json", SmallTokenizerJson());
}

TEST(GgufExport, Qwen3MetadataTokenizerAndTensors) {
  TempDir dir;
  const ModelConfig c = SmallConfig(false);
  WriteFolder(dir.path(), c, ElementType::kF32);
  WriteText(dir / "tokenizer_config.json",
            R"({"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"})");
  auto summary = ExportGguf(dir.path(), dir / "m.gguf");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->tensors, 2 + 2 * 11 + 1);
  EXPECT_FALSE(summary->tied_output);
  EXPECT_TRUE(summary->chat_template);

  const auto bytes = ReadBytes(dir / "m.gguf");
  auto g = ParseGguf(bytes, "m.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto u = [&](const char* key) {
    const GgufValue* v = g->Find(key);
    EXPECT_NE(v, nullptr) << key;
    return v ? v->integer : -1;
  };
  EXPECT_EQ(g->Find("general.architecture")->text, "qwen3");
  EXPECT_EQ(u("qwen3.context_length"), 128);
  EXPECT_EQ(u("qwen3.embedding_length"), 8);
  EXPECT_EQ(u("qwen3.block_count"), 2);
  EXPECT_EQ(u("qwen3.feed_forward_length"), 16);
  EXPECT_EQ(u("qwen3.attention.head_count"), 2);
  EXPECT_EQ(u("qwen3.attention.head_count_kv"), 1);
  EXPECT_EQ(u("qwen3.attention.key_length"), 8);
  EXPECT_EQ(u("qwen3.attention.value_length"), 8);
  EXPECT_FLOAT_EQ(g->Find("qwen3.attention.layer_norm_rms_epsilon")->real, 1e-5f);
  EXPECT_EQ(g->Find("qwen3.rope.freq_base")->real, 12345);
  EXPECT_EQ(g->Find("tokenizer.ggml.model")->text, "gpt2");
  EXPECT_EQ(g->Find("tokenizer.ggml.pre")->text, "qwen2");
  EXPECT_EQ(u("tokenizer.ggml.eos_token_id"), 6) << "tokenizer_config.json's eos_token";
  EXPECT_EQ(u("tokenizer.ggml.bos_token_id"), 5);
  EXPECT_EQ(u("tokenizer.ggml.padding_token_id"), 5);
  EXPECT_EQ(u("tokenizer.ggml.add_bos_token"), 0);
  EXPECT_EQ(g->Find("tokenizer.chat_template")->text, "{{ messages }}");

  // One token per embedding row: unused ids padded, added tokens typed.
  const auto& tokens = g->Find("tokenizer.ggml.tokens")->texts;
  const auto& types = g->Find("tokenizer.ggml.token_type")->integers;
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens[2], "\xC4\xA0");
  EXPECT_EQ(tokens[5], "<|endoftext|>");
  EXPECT_EQ(tokens[11], "[PAD11]");
  EXPECT_EQ(types, (std::vector<int64_t>{1, 1, 1, 1, 1, 3, 3, 4, 5, 5, 5, 5}))
      << "normal, control (special or <|...|>), user-defined, unused";
  EXPECT_EQ(g->Find("tokenizer.ggml.merges")->texts,
            (std::vector<std::string>{"a b", "\xC4\xA0 ab"}));

  // llama.cpp's names, dims reversed, bytes as stored.
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  const std::pair<const char*, const char*> names[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight"},
      {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
      {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
      {"blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
      {"blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  for (const auto& [gguf_name, hf_name] : names) {
    const GgufTensorInfo* t = g->FindTensor(gguf_name);
    ASSERT_NE(t, nullptr) << gguf_name;
    auto ours = ReadGgufTensor(bytes, *g, *t);
    auto theirs = ckpt->Get(hf_name);
    ASSERT_TRUE(ours.ok() && theirs.ok());
    EXPECT_EQ(t->ne.size(), theirs->dims().size());
    EXPECT_EQ(t->ne.front(), static_cast<uint64_t>(theirs->dims().back())) << gguf_name;
    EXPECT_TRUE(ours->BitwiseEquals(*theirs)) << gguf_name;
  }
}

TEST(GgufExport, Qwen3MoeKeysAndStackedExperts) {
  TempDir dir;
  ModelConfig c = SmallConfig(false);
  c.architecture = models::qwen3::kQwen3Moe;
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(c);
  moe_fields.num_experts = 3;
  moe_fields.num_experts_per_tok = 2;
  moe_fields.moe_intermediate_size = 4;
  moe_fields.norm_topk_prob = true;
  ASSERT_TRUE(ValidateModelConfig(c).ok());
  WriteFolder(dir.path(), c, ElementType::kF32);
  auto summary = ExportGguf(dir.path(), dir / "m.gguf");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  // Per layer: 8 attention and norm tensors, the router and three stacked expert tensors.
  EXPECT_EQ(summary->tensors, 2 + 2 * (8 + 4) + 1);
  const auto bytes = ReadBytes(dir / "m.gguf");
  auto g = ParseGguf(bytes, "m.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->Find("general.architecture")->text, "qwen3moe");
  EXPECT_EQ(g->Find("qwen3moe.block_count")->integer, 2);
  EXPECT_EQ(g->Find("qwen3moe.expert_count")->integer, 3);
  EXPECT_EQ(g->Find("qwen3moe.expert_used_count")->integer, 2);
  EXPECT_EQ(g->Find("qwen3moe.expert_feed_forward_length")->integer, 4);
  EXPECT_EQ(g->Find("qwen3.block_count"), nullptr);
  EXPECT_EQ(g->FindTensor("blk.0.ffn_gate.weight"), nullptr);
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  const GgufTensorInfo* router = g->FindTensor("blk.1.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->ne, (std::vector<uint64_t>{8, 3}));
  // ffn_down_exps: [experts, hidden, width] in PyTorch order, so ne = {width, hidden, experts};
  // expert e's bytes are its down_proj's.
  for (const char* proj : {"gate", "up", "down"}) {
    const std::string name = std::string("blk.0.ffn_") + proj + "_exps.weight";
    const GgufTensorInfo* t = g->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    const bool down = std::string(proj) == "down";
    EXPECT_EQ(t->ne, down ? (std::vector<uint64_t>{4, 8, 3}) : (std::vector<uint64_t>{8, 4, 3}));
    auto ours = ReadGgufTensor(bytes, *g, *t);
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    for (int e = 0; e < 3; ++e) {
      auto expert = ckpt->Get("model.layers.0.mlp.experts." + std::to_string(e) + "." + proj +
                              "_proj.weight");
      ASSERT_TRUE(expert.ok());
      EXPECT_EQ(
          std::memcmp(ours->data() + e * expert->byte_size(), expert->data(), expert->byte_size()),
          0)
          << name << " expert " << e;
    }
  }
}

TEST(GgufExport, TiedHeadAndDtypeKeepNormsF32) {
  TempDir dir;
  const ModelConfig c = SmallConfig(true);
  WriteFolder(dir.path(), c, ElementType::kBF16);  // stores the tied copy of lm_head too
  auto as_stored = ExportGguf(dir.path(), dir / "s.gguf");
  ASSERT_TRUE(as_stored.ok()) << as_stored.status().ToString();
  EXPECT_TRUE(as_stored->tied_output);
  auto bytes = ReadBytes(dir / "s.gguf");
  auto g = ParseGguf(bytes);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->FindTensor("output.weight"), nullptr) << "llama.cpp reuses token_embd";
  EXPECT_EQ(g->FindTensor("token_embd.weight")->type, GgmlType::kBF16);
  EXPECT_EQ(g->FindTensor("blk.0.attn_q_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(g->Find("general.file_type")->integer, 32);
  EXPECT_FALSE(g->Find("tokenizer.chat_template"));
  EXPECT_EQ(g->Find("tokenizer.ggml.eos_token_id")->integer, 6) << "config.json's eos id";

  GgufExportOptions f16;
  f16.dtype = ElementType::kF16;
  ASSERT_TRUE(ExportGguf(dir.path(), dir / "h.gguf", f16).ok());
  bytes = ReadBytes(dir / "h.gguf");
  g = ParseGguf(bytes);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->FindTensor("blk.1.ffn_up.weight")->type, GgmlType::kF16);
  EXPECT_EQ(g->FindTensor("output_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(g->Find("general.file_type")->integer, 1);
}

// finetune-demo's kind of tokenizer: ByteLevel alone (no regex split) and no merges. Every byte
// is its own token whatever llama.cpp splits on, so it exports; with merges it would not.
TEST(GgufExport, ByteLevelTokenizerWithoutMergesExports) {
  TempDir dir;
  WriteFolder(dir.path(), SmallConfig(false), ElementType::kF32);
  auto bytes_only = nlohmann::json::parse(SmallTokenizerJson());
  bytes_only["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", false}};
  bytes_only["model"]["merges"] = nlohmann::json::array();
  WriteText(dir / "tokenizer.json", bytes_only.dump());
  auto summary = ExportGguf(dir.path(), dir / "m.gguf");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const auto image = ReadBytes(dir / "m.gguf");
  auto g = ParseGguf(image, "m.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->Find("tokenizer.ggml.pre")->text, "qwen2");
  EXPECT_TRUE(g->Find("tokenizer.ggml.merges")->texts.empty());

  bytes_only["model"]["merges"] = nlohmann::json::array({"a b"});
  WriteText(dir / "tokenizer.json", bytes_only.dump());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "pre-tokenizer", "finetune-demo");
}

TEST(GgufExport, BadInputNamesTheProblem) {
  TempDir dir;
  const ModelConfig c = SmallConfig(false);
  ASSERT_TRUE(WriteModelConfig(dir / "config.json", c).ok());
  WriteText(dir / "tokenizer.json", SmallTokenizerJson());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "no model.safetensors");

  auto weights = SmallWeights(c, ElementType::kF32);
  auto missing = weights;
  missing.erase(missing.begin() + 2);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), missing).ok());
  const std::string missing_message = "missing tensor \"" + weights[2].name + "\"";
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), missing_message.c_str());
  auto wrong = weights;
  wrong[0].value = Literal(TensorType(ElementType::kF32, {12, 9}));
  ASSERT_TRUE(WriteCheckpoint(dir.path(), wrong).ok());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"),
                        "\"model.embed_tokens.weight\" has shape [12, 9], expected [12, 8]");
  ASSERT_TRUE(WriteCheckpoint(dir.path(), weights).ok());

  GgufExportOptions s32;
  s32.dtype = ElementType::kS32;
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf", s32), "dtype s32");

  fs::remove(dir / "tokenizer.json");
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "no tokenizer.json");
  auto other_pre = nlohmann::json::parse(SmallTokenizerJson());
  other_pre["pre_tokenizer"] = {{"type", "ByteLevel"}};
  WriteText(dir / "tokenizer.json", other_pre.dump());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "pre-tokenizer");
  auto big_id = nlohmann::json::parse(SmallTokenizerJson());
  big_id["added_tokens"][0]["id"] = 12;
  WriteText(dir / "tokenizer.json", big_id.dump());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "has id 12", "12 embedding rows");

  // What llama.cpp's qwen3moe graph cannot compute is refused by field name.
  ModelConfig moe = DefaultModelConfig(models::qwen3::kQwen3Moe);  // norm_topk_prob false
  ASSERT_TRUE(WriteModelConfig(dir / "config.json", moe).ok());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "norm_topk_prob false",
                        "renormalises");
  models::qwen3::MoeConfig& moe_fields = models::qwen3::MutableMoe(moe);
  moe_fields.norm_topk_prob = true;
  moe_fields.decoder_sparse_step = 2;
  ASSERT_TRUE(WriteModelConfig(dir / "config.json", moe).ok());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "decoder_sparse_step 2");
  moe_fields.decoder_sparse_step = 1;
  moe_fields.mlp_only_layers = {0};
  ASSERT_TRUE(WriteModelConfig(dir / "config.json", moe).ok());
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "mlp_only_layers");
  WriteText(dir / "config.json", R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})");
  EXPECT_ERROR_CONTAINS(ExportGguf(dir.path(), dir / "m.gguf"), "GPT2LMHeadModel");
  EXPECT_ERROR_CONTAINS(ExportGguf(dir / "nowhere", dir / "m.gguf"), "nowhere",
                        "no such checkpoint folder");
  EXPECT_FALSE(fs::exists(dir / "m.gguf")) << "no half-written file on failure";
}

}  // namespace
}  // namespace tlaloc::models
