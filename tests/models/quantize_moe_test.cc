// int8 Qwen3-MoE checkpoints (models/quantize.h): `quantize` makes every expert projection s8
// with f16 block scales under transformers' per-expert names and keeps the router float; each
// projection's experts (and then their scales) lie one after another in expert order, so loading
// maps the stacked [E, out, in] s8 tensor and its [E, out, in / 32] scales as views of the file;
// the step program runs the experts' products as the composite tlaloc.ragged_int8_linear on the s8
// stacks (exact form: chlo.ragged_dot on the dequantised stack); GGUF export writes
// the experts as Q8_0 blocks, losslessly; a width that is not whole blocks is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "testing/int8_form.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/models/quantize.h"
#include "tlaloc/models/qwen3.h"
#include "tlaloc/nn/int8_linear.h"

namespace tlaloc::models {
namespace {

namespace fs = std::filesystem;
using io::testing::TempDir;

io::ModelConfig SmallMoe(int64_t moe_width = 64) {
  auto c = io::ParseModelConfig(R"({"model_type": "qwen3_moe", "vocab_size": 40,
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
      "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": true,
      "max_position_embeddings": 64, "eos_token_id": 3, "torch_dtype": "float32"})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  models::qwen3::MutableMoe(*c).moe_intermediate_size = moe_width;
  return *c;
}

// A byte-level BPE tokenizer.json (GGUF export carries the tokenizer).
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
  std::ofstream(dir / "tokenizer.json") << SmallTokenizerJson();
}

TEST(Int8Moe, ExpertsQuantizedRouterFloatAndStacksLoadAsViews) {
  TempDir tmp;
  const io::ModelConfig c = SmallMoe();
  WriteFloatFolder(c, tmp / "f32");
  auto summary = QuantizeCheckpoint(tmp / "f32", tmp / "int8");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  // Embedding and head, 4 attention projections and 3 x 4 experts per layer.
  EXPECT_EQ(summary->quantized_tensors, 2 + 2 * (4 + 3 * 4));
  EXPECT_EQ(summary->kept_tensors, 1 + 2 * (4 + 1));  // norms, and each layer's router

  auto q = io::LoadModelConfig(tmp / "int8");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_TRUE(q->quantization);
  auto ckpt = io::Checkpoint::Open(tmp / "int8");
  auto source = io::Checkpoint::Open(tmp / "f32");
  ASSERT_TRUE(ckpt.ok() && source.ok());
  const auto* router = ckpt->Find("model.layers.1.mlp.gate.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->dtype, ElementType::kF32);
  EXPECT_EQ(ckpt->Find("model.layers.1.mlp.gate.weight_scale"), nullptr);
  const std::string expert = "model.layers.1.mlp.experts.3.down_proj.weight";
  const auto* w = ckpt->Find(expert);
  const auto* s = ckpt->Find(Int8ScaleName(expert));
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->dtype, ElementType::kS8);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(s->dtype, ElementType::kF16);
  EXPECT_EQ(s->shape, (std::vector<int64_t>{64, 2}));
  // Each expert is the quantisation of its float source.
  auto want = QuantizeInt8Matrix(*source->Get(expert), expert);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(std::memcmp(ckpt->Get(expert)->data(), want->first.data(), want->first.byte_size()), 0);

  // Loaded in f32 and in bf16 (the fixed types do not depend on it): every stacked spec is a
  // view of its first expert in the file, holding each expert's bytes.
  const auto specs = WeightSpecs(*q);
  for (ElementType dtype : {ElementType::kF32, ElementType::kBF16}) {
    auto loaded = LoadWeights(*q, *ckpt, dtype);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    int stacked_s8 = 0, stacked_f16 = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      const Literal& v = (*loaded)[i];
      EXPECT_EQ(v.type(), TensorType(specs[i].TypeFor(dtype), specs[i].shape)) << specs[i].name;
      if (specs[i].stacked.empty()) continue;
      stacked_s8 += specs[i].fixed_type == ElementType::kS8;
      stacked_f16 += specs[i].fixed_type == ElementType::kF16;
      EXPECT_EQ(v.data(), ckpt->Get(specs[i].stacked[0])->data())
          << specs[i].name << ": not a view of the file's first expert";
      const int64_t part = v.byte_size() / static_cast<int64_t>(specs[i].stacked.size());
      for (size_t e = 0; e < specs[i].stacked.size(); ++e)
        EXPECT_EQ(std::memcmp(v.data() + static_cast<int64_t>(e) * part,
                              ckpt->Get(specs[i].stacked[e])->data(), part),
                  0)
            << specs[i].stacked[e];
    }
    EXPECT_EQ(stacked_s8, 2 * 3);
    EXPECT_EQ(stacked_f16, 2 * 3);
  }

  // The same tensors in the reference layout (sorted by name) still load, copied.
  std::vector<io::NamedTensor> all;
  for (const auto& name : ckpt->names()) all.push_back({name, *ckpt->Get(name)});
  ASSERT_TRUE(io::WriteCheckpoint(tmp / "reference", all).ok());
  auto ref = io::Checkpoint::Open(tmp / "reference");
  ASSERT_TRUE(ref.ok());
  auto copied = LoadWeights(*q, *ref, ElementType::kF32);
  auto viewed = LoadWeights(*q, *ckpt, ElementType::kF32);
  ASSERT_TRUE(copied.ok() && viewed.ok()) << copied.status().ToString();
  for (size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(std::memcmp((*copied)[i].data(), (*viewed)[i].data(), (*viewed)[i].byte_size()), 0)
        << specs[i].name;
}

// The experts' products are the composite tlaloc.ragged_int8_linear on the s8 stacks, in the
// int8 form chosen (q8_0 by default, as for nn::Linear), whose exact decomposition is
// chlo.ragged_dot on the dequantised stack.
TEST(Int8Moe, StepProgramRunsTheRaggedInt8CompositeInTheChosenForm) {
  io::ModelConfig c = SmallMoe();
  c.quantization = io::WeightQuantization{};
  StepShape shape;
  shape.kind = StepKind::kDecode;
  shape.batch = 1;
  shape.max_len = 16;
  for (nn::Int8Form form : {nn::Int8Form::kQ8_0, nn::Int8Form::kExact}) {
    const testing::ScopedInt8Form scoped(form);
    auto program = BuildStep(c, shape);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    const Function* fn = program->module->Find(program->entry);
    ASSERT_NE(fn, nullptr);
    int composites = 0, on_s8 = 0;
    for (const auto& op : fn->body().front().operations()) {
      if (op->name() != "stablehlo.composite" ||
          GetStringAttr(op->attrs(), "name") != nn::kRaggedInt8LinearComposite)
        continue;
      ++composites;
      const Attribute* a = FindAttr(op->attrs(), "composite_attributes");
      ASSERT_NE(a, nullptr);
      EXPECT_EQ(GetStringAttr(a->as_dict(), "mode"), nn::Int8FormName(form));
      on_s8 += op->operand(0).tensor_type().element_type == ElementType::kF32 &&
               op->operand(1).tensor_type().element_type == ElementType::kS8 &&
               op->operand(2).tensor_type().element_type == ElementType::kF16;
      // The exact form's decomposition is chlo.ragged_dot on the dequantised stack.
      const Function* d = program->module->Find(GetStringAttr(op->attrs(), "decomposition"));
      ASSERT_NE(d, nullptr);
      if (form == nn::Int8Form::kExact) {
        int ragged_on_dequantised = 0;
        for (const auto& dop : d->body().front().operations()) {
          if (dop->name() != "chlo.ragged_dot") continue;
          const Value w = dop->operand(1);
          ragged_on_dequantised +=
              !w.is_block_argument() && w.producer()->name() == "stablehlo.reshape" &&
              w.producer()->operand(0).producer()->name() == "stablehlo.multiply";
        }
        EXPECT_EQ(ragged_on_dequantised, 1);
      }
    }
    EXPECT_EQ(composites, 2 * 3);  // gate, up and down per MoE layer
    EXPECT_EQ(on_s8, composites);
  }
}

TEST(Int8Moe, GgufExportWritesTheExpertsAsQ8_0Losslessly) {
  TempDir tmp;
  const io::ModelConfig c = SmallMoe();
  WriteFloatFolder(c, tmp / "f32");
  ASSERT_TRUE(QuantizeCheckpoint(tmp / "f32", tmp / "int8").ok());
  auto summary = ExportGguf(tmp / "int8", tmp / "m.gguf");
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();

  std::ifstream f(tmp / "m.gguf", std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  auto g = io::ParseGguf(bytes, "m.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->Find("general.architecture")->text, "qwen3moe");
  EXPECT_EQ(g->Find("general.file_type")->integer, 7);  // LLAMA_FTYPE_MOSTLY_Q8_0
  auto ckpt = io::Checkpoint::Open(tmp / "int8");
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(g->FindTensor("blk.1.ffn_gate_inp.weight")->type, io::GgmlType::kF32);
  for (const auto& [proj, gguf] :
       {std::pair<std::string, std::string>{"gate_proj", "ffn_gate_exps"},
        {"up_proj", "ffn_up_exps"},
        {"down_proj", "ffn_down_exps"}}) {
    const io::GgufTensorInfo* t = g->FindTensor("blk.1." + gguf + ".weight");
    ASSERT_NE(t, nullptr) << gguf;
    EXPECT_EQ(t->type, io::GgmlType::kQ8_0) << gguf;
    auto back = io::ReadGgufTensor(bytes, *g, *t);  // dequantised, f32 [E, out, in]
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->dims(), (std::vector<int64_t>{4, 64, 64}));
    const int64_t part = back->byte_size() / 4;
    for (int e = 0; e < 4; ++e) {
      const std::string hf =
          "model.layers.1.mlp.experts." + std::to_string(e) + "." + proj + ".weight";
      const Literal want = DequantizeInt8Matrix(*ckpt->Get(hf), *ckpt->Get(Int8ScaleName(hf)));
      ASSERT_EQ(want.byte_size(), part);
      EXPECT_EQ(std::memcmp(back->data() + e * part, want.data(), part), 0) << hf;
    }
  }
}

TEST(Int8Moe, ExpertWidthNotWholeBlocksIsRefusedByName) {
  TempDir tmp;
  const io::ModelConfig c = SmallMoe(48);
  WriteFloatFolder(c, tmp / "f32");
  auto refused = QuantizeCheckpoint(tmp / "f32", tmp / "int8");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("moe_intermediate_size 48 is not a multiple"),
            std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(fs::exists(tmp / "int8"));
}

}  // namespace
}  // namespace tlaloc::models
