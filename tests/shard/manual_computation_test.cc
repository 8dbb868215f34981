// sdy.manual_computation around a kernel's custom call in a global (Shardy-annotated) program:
// printed as Shardy prints it, parsed back to the same text, and run on one device by the
// interpreter as the per-device body over each device's part (a row-sum kernel shows the body
// ran per part: each device's rows are summed separately).
#include <gtest/gtest.h>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::shard {
namespace {

// The kernel: f32 [n, k] -> [1, k], the sum of the rows (a stand-in for any custom call).
InterpreterOptions RowSumKernel() {
  InterpreterOptions o;
  o.custom_calls["test.row_sum"] = [](std::span<const Literal> in, std::vector<Literal>& out) {
    const int64_t n = in[0].dims()[0], k = in[0].dims()[1];
    Literal sum(TensorType(ElementType::kF32, {1, k}));
    auto x = in[0].span<float>();
    auto s = sum.span<float>();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) s[c] += x[r * k + c];
    out.assign(1, std::move(sum));
    return OkStatus();
  };
  return o;
}

Sharding Split(std::vector<std::vector<std::string>> dims) {
  Sharding s;
  s.dims = std::move(dims);
  return s;
}

// main(x f32[8, 4] over data) -> f32[2, 4]: each device's 4 rows summed by the kernel.
std::unique_ptr<Module> Build(const Mesh& mesh) {
  auto m = std::make_unique<Module>("manual");
  AddMesh(*m, "mesh", mesh);
  TensorType x_type(ElementType::kF32, {8, 4});
  FunctionBuilder fb(m.get(), "main");
  Tensor x = fb.AddArg(x_type);
  std::vector<Tensor> out = ManualComputation(
      mesh, {x}, {Split({{"data"}, {}})}, {Split({{"data"}, {}})}, {"data"},
      [](const std::vector<Tensor>& local) {
        OpBuilder* b = local[0].builder();
        AttrDict a;
        a["call_target_name"] = Attribute::String("test.row_sum");
        Value v = b->CreateOne("stablehlo.custom_call", {local[0].value()}, a,
                               std::vector<Type>{TensorType(ElementType::kF32, {1, 4})});
        return std::vector<Tensor>{Tensor(v, b)};
      });
  EXPECT_EQ(out.size(), 1u);
  EXPECT_TRUE(fb.Return(out).ok());
  return m;
}

Literal Input() {
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i);
  return Literal::FromVector<float>({8, 4}, v);
}

TEST(ManualComputation, PrintsAsShardyAndRoundTrips) {
  auto mesh = Mesh::Parse("data=2");
  ASSERT_TRUE(mesh.ok());
  auto m = Build(*mesh);
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).ToString();
  const std::string text = PrintModule(*m);
  // The body takes each device's part (8 rows over data=2: 4) and returns its part (1 row);
  // the op's own types are the global ones.
  for (const char* want : {
           "sdy.mesh @mesh = <[\"data\"=2]>",
           "%0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{\"data\"}, {}]>] "
           "out_shardings=[<@mesh, [{\"data\"}, {}]>] manual_axes={\"data\"} "
           "(%arg1: tensor<4x4xf32>) {",
           "stablehlo.custom_call @test.row_sum(%arg1)",
           "sdy.return %",
           "} : (tensor<8x4xf32>) -> tensor<2x4xf32>",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\nin\n" << text;
  auto back = ParseModule(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_EQ(PrintModule(**back), text);
}

TEST(ManualComputation, RunsTheBodyOnEachPartOnOneDevice) {
  for (const char* mesh_text : {"data=2", "data=4"}) {
    auto mesh = Mesh::Parse(mesh_text);
    ASSERT_TRUE(mesh.ok());
    const int64_t n = mesh->num_devices();
    auto m = Build(*mesh);
    for (int pass = 0; pass < 2; ++pass) {  // built, and parsed back from its text
      std::unique_ptr<Module> parsed;
      const Module* run = m.get();
      if (pass == 1) {
        auto back = ParseModule(PrintModule(*m));
        ASSERT_TRUE(back.ok()) << back.status().ToString();
        parsed = std::move(*back);
        run = parsed.get();
      }
      auto r = Interpret(*run, "main", {Input()}, nullptr, RowSumKernel());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ((*r)[0].dims(), (std::vector<int64_t>{n, 4}));
      auto got = (*r)[0].span<float>();
      const int64_t rows = 8 / n;
      for (int64_t d = 0; d < n; ++d)
        for (int64_t c = 0; c < 4; ++c) {
          float want = 0;  // device d's rows of x[r][c] = 4r + c
          for (int64_t r = d * rows; r < (d + 1) * rows; ++r) want += static_cast<float>(4 * r + c);
          EXPECT_EQ(got[d * 4 + c], want) << mesh_text << " device " << d << " column " << c;
        }
    }
  }
}

TEST(ManualComputation, ShardyTextParses) {
  // Shardy's form as written by hand: two manual axes, a replicated operand, the body's
  // arguments declared before its braces.
  const std::string text = R"(module @m {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func public @main(%arg0: tensor<8x6xf32>, %arg1: tensor<6xf32>) -> tensor<8x6xf32> {
    %0 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"data"}, {"model"}]>, <@mesh, [{"model"}]>] out_shardings=[<@mesh, [{"data"}, {"model"}]>] manual_axes={"data", "model"} (%arg2: tensor<4x3xf32>, %arg3: tensor<3xf32>) {
      %1 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
      %2 = stablehlo.add %arg2, %1 : tensor<4x3xf32>
      sdy.return %2 : tensor<4x3xf32>
    } : (tensor<8x6xf32>, tensor<6xf32>) -> tensor<8x6xf32>
    return %0 : tensor<8x6xf32>
  }
}
)";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(PrintModule(**m), text);
  // Elementwise body: the one-device run equals the global computation.
  std::vector<float> x(48), bias(6);
  for (int i = 0; i < 48; ++i) x[i] = static_cast<float>(i);
  for (int i = 0; i < 6; ++i) bias[i] = static_cast<float>(100 * i);
  auto r = Interpret(
      **m, "main", {Literal::FromVector<float>({8, 6}, x), Literal::FromVector<float>({6}, bias)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto got = (*r)[0].span<float>();
  for (int i = 0; i < 48; ++i) EXPECT_EQ(got[i], x[i] + bias[i % 6]) << i;
}

TEST(ManualComputation, MismatchedPartsAreRefusedByName) {
  const std::string text = R"(module @m {
  sdy.mesh @mesh = <["data"=2]>
  func.func public @main(%arg0: tensor<8x6xf32>) -> tensor<8x6xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"data"} (%arg1: tensor<4x3xf32>) {
      sdy.return %arg1 : tensor<4x3xf32>
    } : (tensor<8x6xf32>) -> tensor<8x6xf32>
    return %0 : tensor<8x6xf32>
  }
}
)";
  auto m = ParseModule(text);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("operand 0: dimension 1 is 6 globally and 3 in the body "
                                      "(not split over manual axes)"),
            std::string::npos)
      << m.status().ToString();
  // The builder refuses a manual axis the mesh does not have.
  auto mesh = Mesh::Parse("data=2");
  Module bad("bad");
  FunctionBuilder fb(&bad, "main");
  Tensor x = fb.AddArg(TensorType(ElementType::kF32, {8, 4}));
  auto out = ManualComputation(*mesh, {x}, {Split({{"data"}, {}})}, {Split({{"data"}, {}})},
                               {"model"}, [](const std::vector<Tensor>& l) { return l; });
  EXPECT_TRUE(out.empty());
  ASSERT_FALSE(fb.ops().ok());
  EXPECT_NE(fb.ops().status().message().find("manual axis 'model' is not in mesh data=2"),
            std::string::npos)
      << fb.ops().status().ToString();
}

}  // namespace
}  // namespace tlaloc::shard
