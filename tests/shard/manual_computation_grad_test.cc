// The gradient rule of sdy.manual_computation: the cotangents are a manual computation over the
// same manual axes (the body's reverse mode on the parts) with the cotangents' shardings, and
// an operand that the manual axes do not split gets the sum of every part's share. Checked
// against the gradient of the same function without the manual computation (the unsharded
// gradient), on one device, built and parsed back; the gradient program prints and parses back.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::shard {
namespace {

Sharding Split(std::vector<std::vector<std::string>> dims) {
  Sharding s;
  s.dims = std::move(dims);
  return s;
}

// y = tanh(x * w + sin(x)) + rowsum(x) per row, x [8, 4], w [4] (the row sum is a reduce, an op
// with a region of its own).
std::vector<Tensor> Body(const std::vector<Tensor>& in) {
  Tensor w = BroadcastInDim(in[1], in[0].type().dims, {1});
  Tensor rows = BroadcastInDim(Sum(in[0], {1}), in[0].type().dims, {0});
  return {Tanh(in[0] * w + Sin(in[0])) + rows};
}

// main(x, w) -> sum(y): with the body inside a manual computation over `mesh`'s one axis (x's
// rows split, w replicated), or plain (mesh null).
std::unique_ptr<Module> Build(const Mesh* mesh) {
  auto m = std::make_unique<Module>("grad");
  if (mesh) AddMesh(*m, "mesh", *mesh);
  FunctionBuilder fb(m.get(), "main");
  Tensor x = fb.AddArg(TensorType(ElementType::kF32, {8, 4}));
  Tensor w = fb.AddArg(TensorType(ElementType::kF32, {4}));
  std::vector<Tensor> y;
  if (mesh) {
    const std::string axis = mesh->axes()[0].name;
    y = ManualComputation(*mesh, {x, w}, {Split({{axis}, {}}), Split({{}})}, {Split({{axis}, {}})},
                          {axis}, Body);
  } else {
    y = Body({x, w});
  }
  EXPECT_EQ(y.size(), 1u);
  EXPECT_TRUE(fb.Return({Sum(y[0], {0, 1})}).ok());
  auto g = autodiff::Grad(*m, *fb.function(), {{0, 1}, 0, nullptr}, "grad");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return m;
}

std::vector<Literal> Inputs() {
  std::vector<float> x(32), w(4);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
  for (int i = 0; i < 4; ++i) w[i] = 0.3f * static_cast<float>(i) - 0.5f;
  return {Literal::FromVector<float>({8, 4}, x), Literal::FromVector<float>({4}, w)};
}

TEST(ManualComputationGrad, EqualsTheUnshardedGradient) {
  auto plain = Build(nullptr);
  auto want = Interpret(*plain, "grad", Inputs());
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const char* mesh_text : {"data=2", "data=4"}) {
    auto mesh = Mesh::Parse(mesh_text);
    ASSERT_TRUE(mesh.ok());
    auto m = Build(&*mesh);
    for (int pass = 0; pass < 2; ++pass) {  // built, and parsed back from its text
      std::unique_ptr<Module> parsed;
      const Module* run = m.get();
      if (pass == 1) {
        auto back = ParseModule(PrintModule(*m));
        ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << PrintModule(*m);
        parsed = std::move(*back);
        run = parsed.get();
      }
      auto got = Interpret(*run, "grad", Inputs());
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), 2u);
      // x's cotangent: each part's rows are the unsharded rule's rows, bit for bit.
      EXPECT_EQ((*got)[0].span<float>().size(), 32u);
      for (int i = 0; i < 32; ++i)
        EXPECT_EQ((*got)[0].span<float>()[i], (*want)[0].span<float>()[i]) << mesh_text << " " << i;
      // w's: the sum of the parts' shares, added in another order than one sum over 8 rows.
      for (int i = 0; i < 4; ++i) {
        const float a = (*got)[1].span<float>()[i], b = (*want)[1].span<float>()[i];
        EXPECT_NEAR(a, b, 1e-6 * std::max(1.f, std::abs(b))) << mesh_text << " w " << i;
        EXPECT_GT(std::abs(b), 1e-3);  // not a zero gradient
      }
    }
  }
}

TEST(ManualComputationGrad, TheCotangentsAreAManualComputationWithTheirShardings) {
  auto mesh = Mesh::Parse("data=2");
  ASSERT_TRUE(mesh.ok());
  auto m = Build(&*mesh);
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).ToString();
  const std::string text = PrintModule(*m);
  // Operands x, w and y's cotangent; out: x's cotangent split as x, w's two shares stacked on a
  // new dimension split over data, then summed outside.
  for (const char* want : {
           "in_shardings=[<@mesh, [{\"data\"}, {}]>, <@mesh, [{}]>, <@mesh, [{\"data\"}, {}]>] "
           "out_shardings=[<@mesh, [{\"data\"}, {}]>, <@mesh, [{\"data\"}, {}]>] "
           "manual_axes={\"data\"} (%",
           ": (tensor<8x4xf32>, tensor<4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, "
           "tensor<2x4xf32>)",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\nin\n" << text;
  size_t count = 0;
  for (size_t at = text.find("sdy.manual_computation("); at != std::string::npos;
       at = text.find("sdy.manual_computation(", at + 1))
    ++count;
  // main's and grad's cotangents (grad needs no forward result: the cotangents' body recomputes
  // the forward on its parts).
  EXPECT_EQ(count, 2u);
  auto back = ParseModule(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(PrintModule(**back), text);
}

TEST(ManualComputationGrad, ABodyOpWithoutARuleIsNamed) {
  auto mesh = Mesh::Parse("data=2");
  ASSERT_TRUE(mesh.ok());
  Module m("nograd");
  AddMesh(m, "mesh", *mesh);
  FunctionBuilder fb(&m, "main");
  Tensor x = fb.AddArg(TensorType(ElementType::kF32, {8, 4}));
  auto y = ManualComputation(*mesh, {x}, {Split({{"data"}, {}})}, {Split({{"data"}, {}})}, {"data"},
                             [](const std::vector<Tensor>& local) {
                               OpBuilder* b = local[0].builder();
                               AttrDict a;
                               a["call_target_name"] = Attribute::String("test.kernel");
                               Value v = b->CreateOne("stablehlo.custom_call", {local[0].value()},
                                                      a, std::vector<Type>{local[0].type()});
                               return std::vector<Tensor>{Tensor(v, b)};
                             });
  ASSERT_EQ(y.size(), 1u);
  ASSERT_TRUE(fb.Return({Sum(y[0], {0, 1})}).ok());
  auto g = autodiff::Grad(m, *fb.function(), {{0}, 0, nullptr}, "grad");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("stablehlo.custom_call in the body has no gradient rule"),
            std::string::npos)
      << g.status().ToString();
}

}  // namespace
}  // namespace tlaloc::shard
