// A paged decode step's fused operations are named composites (issue 37, item 3): each layer's
// keys and values products over the pool are tlaloc.paged_dot, its probabilities
// tlaloc.masked_softmax, and the greedy pick is tlaloc.argmax, with no gather -> reshape ->
// dot_general chain left in the step's own function.
// Generation on the interpreter with its kernels (fusion on) and with every composite's
// decomposition (fusion off) gives the same ids and bit for bit the same logits, in f32 and bf16.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "testing/tiny_qwen3.h"
#include "testing/tiny_qwen3_variants.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc {
namespace {

io::ModelConfig Config() {
  return testing::TinyQwen3Config({.vocab_size = 96, .initializer_range = 0.2});
}

int CountComposites(const Function& fn, std::string_view name) {
  int n = 0;
  std::function<void(const Block&)> walk = [&](const Block& block) {
    for (const auto& op : block.operations()) {
      n += op->name() == "stablehlo.composite" && GetStringAttr(op->attrs(), "name") == name;
      for (const auto& region : op->regions())
        for (const auto& inner : region->blocks()) walk(*inner);
    }
  };
  walk(fn.entry());
  return n;
}

// dot_generals of `fn`'s entry whose right operand is a reshape of a gather: the chain the
// interpreter used to recognise.
int GatherDotChains(const Function& fn) {
  int n = 0;
  for (const auto& op : fn.entry().operations()) {
    if (op->name() != "stablehlo.dot_general" || op->operand(1).is_block_argument()) continue;
    const Operation* r = op->operand(1).producer();
    if (r->name() == "stablehlo.reshape" && !r->operand(0).is_block_argument() &&
        r->operand(0).producer()->name() == "stablehlo.gather")
      ++n;
  }
  return n;
}

TEST(CompositeDecode, PagedDecodeStepHoldsTheComposites) {
  const io::ModelConfig c = Config();
  models::StepShape shape;
  shape.kind = models::StepKind::kDecode;
  shape.batch = 2;
  shape.page_size = 4;
  shape.num_blocks = 8;
  shape.table_blocks = 3;
  auto program = models::BuildStep(c, shape);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const Function* fn = program->module->Find(program->entry);
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(CountComposites(*fn, "tlaloc.paged_dot"), 2 * c.num_hidden_layers);
  EXPECT_GE(CountComposites(*fn, "tlaloc.argmax"), 1);
  EXPECT_EQ(CountComposites(*fn, "tlaloc.masked_softmax"), c.num_hidden_layers);
  EXPECT_EQ(GatherDotChains(*fn), 0);
  // Each product's decomposition is the chain: private, a gather and a dot_general.
  int decompositions = 0;
  for (const auto& f : program->module->functions()) {
    if (f->name().rfind("tlaloc_paged_dot_", 0) != 0) continue;
    ++decompositions;
    EXPECT_FALSE(f->is_public());
    int gathers = 0, dots = 0;
    for (const auto& op : f->entry().operations()) {
      gathers += op->name() == "stablehlo.gather";
      dots += op->name() == "stablehlo.dot_general";
    }
    EXPECT_EQ(gathers, 1) << f->name();
    EXPECT_EQ(dots, 1) << f->name();
  }
  EXPECT_EQ(decompositions, 2) << "one per product and types, shared by the layers";
}

bool SameBits(const Literal& a, const Literal& b) {
  return a.type() == b.type() && std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

TEST(CompositeDecode, KernelsGiveTheDecompositionsBits) {
  const io::ModelConfig c = Config();
  for (ElementType dtype : {ElementType::kF32, ElementType::kBF16}) {
    SCOPED_TRACE(std::string(MlirName(dtype)));
    std::vector<Literal> weights;
    for (auto& t : models::RandomWeights(c, 5, dtype)) weights.push_back(std::move(t.value));
    InterpreterOptions plain_options;
    plain_options.fuse = false;
    auto fused = generate::Generator::Create(c, weights, dtype, MakeInterpreterBackend({}));
    auto plain =
        generate::Generator::Create(c, weights, dtype, MakeInterpreterBackend(plain_options));
    ASSERT_TRUE(fused.ok()) << fused.status().ToString();
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    const std::vector<std::vector<int32_t>> prompts = {{5, 17, 42, 8, 63},
                                                       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
    generate::GenerateOptions o;
    o.max_new_tokens = 6;
    o.row_sampling = {nn::SamplingParams{}, nn::SamplingParams{1.3, 0, 1.0}};
    o.row_seeds = {0, 99};
    auto want = (*plain)->Generate(prompts, o);
    auto got = (*fused)->Generate(prompts, o);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t r = 0; r < prompts.size(); ++r)
      EXPECT_EQ((*got)[r].generated_ids, (*want)[r].generated_ids) << "row " << r;
    auto pa = (*plain)->Prefill({prompts[1]}, 64, {}, 0);
    auto pb = (*fused)->Prefill({prompts[1]}, 64, {}, 0);
    ASSERT_TRUE(pa.ok()) << pa.status().ToString();
    ASSERT_TRUE(pb.ok()) << pb.status().ToString();
    EXPECT_TRUE(SameBits(pb->logits, pa->logits)) << "prefill logits";
    EXPECT_EQ(pb->tokens, pa->tokens);
    // Three decode steps: the table grows into a second block of 16 positions.
    std::vector<int32_t> tokens = pa->tokens;
    for (int32_t pos = 11; pos < 14; ++pos) {
      auto da = (*plain)->DecodeStep(tokens, {pos}, {}, 0, 1);
      auto db = (*fused)->DecodeStep(tokens, {pos}, {}, 0, 1);
      ASSERT_TRUE(da.ok()) << da.status().ToString();
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      EXPECT_TRUE(SameBits(db->logits, da->logits)) << "decode logits at position " << pos;
      EXPECT_EQ(db->tokens, da->tokens);
      tokens = da->tokens;
    }
  }
}

}  // namespace
}  // namespace tlaloc
