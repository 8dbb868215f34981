// Shardy's annotations in printed StableHLO: sdy.mesh at module level, #sdy.sharding on
// arguments and results, sdy.sharding_constraint in the body; printed text parses back to the
// same text and the same meshes and shardings.
#include <gtest/gtest.h>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

constexpr const char* kGlobal = R"(module @sharded {
  sdy.mesh @mesh = <["data"=2, "model"=2]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {"model"}]> : tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}
)";

TEST(ShardingSyntax, ShardyTextRoundTrips) {
  auto m = ParseModule(kGlobal);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string printed = PrintModule(**m);
  EXPECT_EQ(printed, kGlobal);
  auto mesh = FindMesh(**m, "mesh");
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  EXPECT_EQ(mesh->ToString(), "data=2,model=2");
  const Function& f = *(*m)->Entry();
  auto arg = ArgSharding(f, 0);
  ASSERT_TRUE(arg.ok() && arg->has_value());
  EXPECT_EQ((**arg).dims, (std::vector<std::vector<std::string>>{{"data"}, {}}));
  EXPECT_TRUE(CheckShardings(**m, f).ok());
  // On one device the constraint is the identity.
  auto r = Interpret(**m, "main", {Literal(TensorType(ElementType::kF32, {8, 16}))});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST(ShardingSyntax, BuiltShardingsPrintAsShardy) {
  Module m("built");
  TensorType t(ElementType::kF32, {4, 6});
  Function* f = m.AddFunction("main", {Type(t)}, {Type(t)});
  AddMesh(m, "mesh", *Mesh::Parse("data=4"));
  Sharding s;
  s.dims = {{"data"}, {}};
  SetArgSharding(*f, 0, s);
  SetResultSharding(*f, 0, s);
  OpBuilder b(&f->entry(), &m);
  b.Create("func.return", {f->entry().argument(0)});
  ASSERT_TRUE(b.ok());
  std::string printed = PrintModule(m);
  EXPECT_NE(printed.find("sdy.mesh @mesh = <[\"data\"=4]>"), std::string::npos) << printed;
  EXPECT_NE(printed.find("{sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, {}]>}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("sdy.meshes"), std::string::npos) << printed;
  auto back = ParseModule(printed);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(PrintModule(**back), printed);
}

TEST(ShardingSyntax, BadConstraintsAreRefused) {
  std::string text = kGlobal;
  text.replace(text.find("<@mesh, [{}, {\"model\"}]>"), 25, "<@mesh, [{}]>");
  auto m = ParseModule(text);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("names 1 dimension(s)"), std::string::npos)
      << m.status().ToString();
}

}  // namespace
}  // namespace tlaloc
