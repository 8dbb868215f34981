// int8 weight-only checkpoints (models/quantize.h): the per-block quantisation and its error
// bound, the folder `tlaloc quantize` writes (config, tensors, refusals), the step program's
// form (ordinary StableHLO: s8 weights, convert, multiply, dot_general) and the GGUF Q8_0 export
// (a copy of the blocks: lossless).
#include "tlaloc/models/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"
#include "testing/int8_form.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/support/half.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;
using io::testing::TempDir;

Literal RandomMatrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = dist(rng);
  // Rows of very different magnitudes, an all-zero block, a single outlier, tiny values whose
  // scale is an f16 subnormal.
  for (int64_t j = 0; j < cols; ++j) v[1 * cols + j] *= 1000.0f;
  for (int64_t j = 0; j < 32; ++j) v[2 * cols + j] = 0.0f;
  v[3 * cols + 5] = 250.0f;
  for (int64_t j = 0; j < cols; ++j) v[4 * cols + j] *= 1e-6f;
  return Literal::FromVector<float>({rows, cols}, v);
}

TEST(Int8Quantize, EveryValueWithinHalfItsBlockScale) {
  const Literal x = RandomMatrix(9, 96, 1);
  auto qs = QuantizeInt8Matrix(x, "w");
  ASSERT_TRUE(qs.ok()) << qs.status().ToString();
  const auto& [q, scale] = *qs;
  EXPECT_EQ(q.type(), TensorType(ElementType::kS8, {9, 96}));
  EXPECT_EQ(scale.type(), TensorType(ElementType::kF16, {9, 3}));
  const Literal back = DequantizeInt8Matrix(q, scale);
  double worst_ratio = 0;
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t b = 0; b < 3; ++b) {
      const float d = HalfBitsToFloat(scale.span<uint16_t>()[r * 3 + b]);
      float amax = 0;
      int max_q = 0;
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t i = r * 96 + b * 32 + j;
        const float v = x.span<float>()[i];
        amax = std::max(amax, std::fabs(v));
        max_q = std::max(max_q, std::abs(static_cast<int>(q.span<int8_t>()[i])));
        EXPECT_GE(q.span<int8_t>()[i], -127);
        // Round to nearest: at most half a step, the step being the block's f16 scale.
        const double err = std::fabs(static_cast<double>(v) - back.span<float>()[i]);
        if (d == 0) {
          // The block's scale is below f16's smallest subnormal (2^-24) rounded: the block
          // becomes zero, an error under 127 * 2^-25 (as in ggml's Q8_0).
          EXPECT_EQ(back.span<float>()[i], 0.0f);
          EXPECT_LT(std::fabs(v), 127 * std::ldexp(1.0, -25)) << "row " << r << " block " << b;
          continue;
        }
        EXPECT_LE(err, 0.5 * d * (1 + 1e-6)) << "row " << r << " block " << b;
        if (d > 0) worst_ratio = std::max(worst_ratio, err / d);
      }
      if (amax == 0) {
        EXPECT_EQ(d, 0.0f);
      } else if (d >= 6.1e-5f) {  // a normal f16 scale: the block's largest value maps to 127
        EXPECT_EQ(max_q, 127) << "row " << r << " block " << b;
        EXPECT_NEAR(d, amax / 127, amax / 127 * 1e-3);  // f16 rounding of amax / 127
      }
    }
  EXPECT_LE(worst_ratio, 0.5 + 1e-6);
  std::printf("[int8] round trip: worst |x - q*d| / d = %.4f (bound 0.5)\n", worst_ratio);
}

TEST(Int8Quantize, Bf16InputAndRefusals) {
  Literal bf = ConvertElementType(RandomMatrix(5, 64, 2), ElementType::kBF16);
  auto qs = QuantizeInt8Matrix(bf, "w");
  ASSERT_TRUE(qs.ok()) << qs.status().ToString();

  auto wrong = QuantizeInt8Matrix(RandomMatrix(5, 48, 3), "model.x.weight");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("model.x.weight"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("multiple of 32"), std::string::npos);

  Literal nan = RandomMatrix(5, 64, 4);
  nan.span<float>()[70] = std::nanf("");
  auto bad = QuantizeInt8Matrix(nan, "w");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("non-finite value at [1, 6]"), std::string::npos)
      << bad.status().message();

  Literal huge = RandomMatrix(5, 64, 5);
  huge.span<float>()[3] = 1e8f;  // 1e8 / 127 > 65504
  auto over = QuantizeInt8Matrix(huge, "w");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("overflows the f16 block scale"), std::string::npos);
}

io::ModelConfig SmallConfig(bool tied) {
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3", "vocab_size": 40,
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
      "max_position_embeddings": 64, "eos_token_id": 3, "torch_dtype": "float32"})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c->tie_word_embeddings = tied;
  return *c;
}

// A byte-level BPE tokenizer.json (GGUF export carries the tokenizer): 40 byte-like tokens.
std::string SmallTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 26; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = i;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}};
  return j.dump();
}

void WriteFloatFolder(const io::ModelConfig& c, const fs::path& dir) {
  auto weights = RandomWeights(c, 7, ElementType::kF32);
  ASSERT_TRUE(WriteModelFolder(c, dir, weights, {}, {}).ok());
  std::ofstream(dir / "tokenizer.json") << "{}";
}

TEST(Int8Checkpoint, QuantizeWritesScalesConfigAndCopiesTheRest) {
  TempDir tmp;
  const io::ModelConfig c = SmallConfig(false);
  WriteFloatFolder(c, tmp / "f32");
  auto summary = QuantizeCheckpoint(tmp / "f32", tmp / "int8");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->quantized_tensors, 2 + 2 * 7);  // embedding, head, 7 per layer
  EXPECT_EQ(summary->kept_tensors, 1 + 2 * 4);       // final norm, 4 norms per layer
  EXPECT_LT(summary->bytes_out, summary->bytes_in / 3);
  EXPECT_TRUE(fs::exists(tmp / "int8/tokenizer.json"));
  EXPECT_TRUE(fs::exists(tmp / "int8/generation_config.json"));

  auto q = io::LoadModelConfig(tmp / "int8");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_TRUE(q->quantization);
  EXPECT_EQ(q->quantization->quant_method, "tlaloc_int8");
  EXPECT_EQ(q->quantization->group_size, 32);
  EXPECT_EQ(ParameterCount(*q), ParameterCount(c));  // scales are not parameters

  auto ckpt = io::Checkpoint::Open(tmp / "int8");
  ASSERT_TRUE(ckpt.ok());
  const auto* w = ckpt->Find("model.layers.1.mlp.down_proj.weight");
  const auto* s = ckpt->Find("model.layers.1.mlp.down_proj.weight_scale");
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->dtype, ElementType::kS8);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(s->dtype, ElementType::kF16);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(ckpt->Find("model.norm.weight")->dtype, ElementType::kF32);

  auto loaded = LoadWeights(*q, *ckpt, ElementType::kBF16);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto specs = WeightSpecs(*q);
  for (size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(loaded->at(i).type(),
              TensorType(specs[i].TypeFor(ElementType::kBF16), specs[i].shape))
        << specs[i].name;

  // Refusals: quantizing again, writing over a folder with files, an unknown dtype method.
  auto again = QuantizeCheckpoint(tmp / "int8", tmp / "int8b");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already quantized"), std::string::npos);
  auto over = QuantizeCheckpoint(tmp / "f32", tmp / "int8");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("not an empty folder"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp / "int8b"));
  auto other = io::ParseModelConfig(
      R"({"model_type": "qwen3", "quantization_config": {"quant_method": "fp8"}})");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("quant_method \"fp8\" is not supported"),
            std::string::npos);
  auto blocks = io::ParseModelConfig(
      R"({"model_type": "qwen3", "quantization_config": {"quant_method": "tlaloc_int8",
          "group_size": 64}})");
  ASSERT_FALSE(blocks.ok());
  EXPECT_NE(blocks.status().message().find("group_size must be 32"), std::string::npos);
}

TEST(Int8Checkpoint, MissingOrMisshapenScalesAreNamed) {
  TempDir tmp;
  const io::ModelConfig c = SmallConfig(true);
  WriteFloatFolder(c, tmp / "f32");
  ASSERT_TRUE(QuantizeCheckpoint(tmp / "f32", tmp / "int8").ok());
  auto q = io::LoadModelConfig(tmp / "int8");
  ASSERT_TRUE(q.ok());
  auto ckpt = io::Checkpoint::Open(tmp / "int8");
  ASSERT_TRUE(ckpt.ok());
  // Rewrite the folder without one scale, then with one of the wrong shape and type.
  const std::string victim = "model.layers.0.self_attn.k_proj.weight_scale";
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<io::NamedTensor> tensors;
    for (const auto& name : ckpt->names()) {
      auto v = ckpt->Get(name);
      ASSERT_TRUE(v.ok());
      Literal copy = v->Clone();
      if (name == victim) {
        if (variant == 0) continue;
        copy = variant == 1 ? Literal(TensorType(ElementType::kF16, {32, 1}))
                            : Literal(TensorType(ElementType::kF32, {32, 2}));
      }
      tensors.push_back({name, std::move(copy)});
    }
    const fs::path dir = tmp / ("broken" + std::to_string(variant));
    ASSERT_TRUE(io::WriteCheckpoint(dir, tensors).ok());
    auto broken = io::Checkpoint::Open(dir);
    ASSERT_TRUE(broken.ok());
    auto w = LoadWeights(*q, *broken, ElementType::kF32);
    ASSERT_FALSE(w.ok()) << variant;
    EXPECT_NE(w.status().message().find(victim), std::string::npos) << w.status().message();
  }
}

// The decode program takes s8 matrices and f16 scales and spells the product out as ordinary
// StableHLO: a stablehlo.composite "tlaloc.int8_linear" per product, whose decomposition is a
// private function of the module: in the default q8_0 form llama.cpp's arithmetic, in the exact
// form reshape, convert, broadcast_in_dim, multiply, reshape, dot_general.
TEST(Int8Checkpoint, StepProgramIsOrdinaryStablehlo) {
  {
    io::ModelConfig c = SmallConfig(true);
    c.quantization = io::WeightQuantization{};
    StepShape shape;
    shape.kind = StepKind::kDecode;
    shape.batch = 1;
    shape.max_len = 16;
    auto program = BuildStep(c, shape);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    const Function* fn = program->module->Find(program->entry);
    ASSERT_NE(fn, nullptr);
    int composites = 0;
    for (const auto& op : fn->body().front().operations())
      if (op->name() == "stablehlo.composite" &&
          GetStringAttr(op->attrs(), "name") == "tlaloc.int8_linear") {
        ++composites;
        const Function* d = program->module->Find(GetStringAttr(op->attrs(), "decomposition"));
        ASSERT_NE(d, nullptr);
        EXPECT_FALSE(d->is_public());
      }
    EXPECT_EQ(composites, 1 + 2 * 7);  // head, 7 per layer
  }
  const tlaloc::testing::ScopedInt8Form exact(nn::Int8Form::kExact);
  io::ModelConfig c = SmallConfig(true);
  c.quantization = io::WeightQuantization{};
  StepShape shape;
  shape.kind = StepKind::kDecode;
  shape.batch = 1;
  shape.max_len = 16;
  auto program = BuildStep(c, shape);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  int s8_args = 0, f16_args = 0;
  for (const auto& in : program->signature.inputs) {
    if (in.type.element_type == ElementType::kS8) ++s8_args;
    if (in.type.element_type == ElementType::kF16) ++f16_args;
  }
  EXPECT_EQ(s8_args, 1 + 2 * 7);  // the tied embedding serves as the head
  EXPECT_EQ(f16_args, s8_args);
  const Function* fn = program->module->Find(program->entry);
  ASSERT_NE(fn, nullptr);
  // The exact chain's ops in `block`.
  struct Chain {
    int converts_from_s8 = 0, dots_on_dequantised = 0;
  };
  auto count = [](const Block& block) {
    Chain c;
    for (const auto& op : block.operations()) {
      if (op->name() == "stablehlo.convert" &&
          op->operand(0).tensor_type().element_type == ElementType::kS8)
        ++c.converts_from_s8;
      if (op->name() == "stablehlo.dot_general" && !op->operand(1).is_block_argument() &&
          op->operand(1).producer()->name() == "stablehlo.reshape" &&
          op->operand(1).producer()->operand(0).producer()->name() == "stablehlo.multiply")
        ++c.dots_on_dequantised;
    }
    return c;
  };
  const Chain main_chain = count(fn->body().front());
  EXPECT_EQ(main_chain.converts_from_s8, 1);  // the embedding gather's rows
  EXPECT_EQ(main_chain.dots_on_dequantised, 0) << "a product outside its composite";
  int composites = 0;
  for (const auto& op : fn->body().front().operations()) {
    if (op->name() != "stablehlo.composite" ||
        GetStringAttr(op->attrs(), "name") != "tlaloc.int8_linear")
      continue;
    const Attribute* a = FindAttr(op->attrs(), "composite_attributes");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(GetStringAttr(a->as_dict(), "mode"), "exact");
    ++composites;
    const Function* d = program->module->Find(GetStringAttr(op->attrs(), "decomposition"));
    ASSERT_NE(d, nullptr);
    EXPECT_FALSE(d->is_public());
    const Chain chain = count(d->body().front());
    EXPECT_EQ(chain.converts_from_s8, 1);
    EXPECT_EQ(chain.dots_on_dequantised, 1);
  }
  EXPECT_EQ(composites, 1 + 2 * 7);  // head, 7 per layer
}

// Q8_0 export: the GGUF holds the checkpoint's blocks as they are.
TEST(Int8Checkpoint, GgufQ8_0ExportIsLossless) {
  TempDir tmp;
  const io::ModelConfig c = SmallConfig(false);
  WriteFloatFolder(c, tmp / "f32");
  ASSERT_TRUE(QuantizeCheckpoint(tmp / "f32", tmp / "int8").ok());
  std::ofstream(tmp / "int8/tokenizer.json") << SmallTokenizerJson();
  auto summary = ExportGguf(tmp / "int8", tmp / "m.gguf");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  GgufExportOptions bf16;
  bf16.dtype = ElementType::kBF16;
  auto refused = ExportGguf(tmp / "int8", tmp / "b.gguf", bf16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("int8 checkpoint"), std::string::npos);

  std::ifstream f(tmp / "m.gguf", std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  auto g = io::ParseGguf(bytes, "m.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_NE(g->Find("general.file_type"), nullptr);
  EXPECT_EQ(g->Find("general.file_type")->integer, 7);  // LLAMA_FTYPE_MOSTLY_Q8_0
  auto ckpt = io::Checkpoint::Open(tmp / "int8");
  ASSERT_TRUE(ckpt.ok());
  int q8 = 0;
  for (const auto& [hf, gguf] :
       {std::pair<std::string, std::string>{"model.embed_tokens.weight", "token_embd.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"}}) {
    const io::GgufTensorInfo* t = g->FindTensor(gguf);
    ASSERT_NE(t, nullptr) << gguf;
    EXPECT_EQ(t->type, io::GgmlType::kQ8_0) << gguf;
    auto back = io::ReadGgufTensor(bytes, *g, *t);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    auto q = ckpt->Get(hf);
    auto s = ckpt->Get(Int8ScaleName(hf));
    ASSERT_TRUE(q.ok() && s.ok());
    const Literal want = DequantizeInt8Matrix(*q, *s);
    ASSERT_EQ(back->byte_size(), want.byte_size());
    EXPECT_EQ(std::memcmp(back->data(), want.data(), want.byte_size()), 0) << gguf;
    ++q8;
  }
  EXPECT_EQ(q8, 3);
  EXPECT_EQ(g->FindTensor("output_norm.weight")->type, io::GgmlType::kF32);
}

}  // namespace
}  // namespace tlaloc::models
