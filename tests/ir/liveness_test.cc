#include "tlaloc/ir/liveness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tlaloc/ir/builder.h"

namespace tlaloc {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// main(%a, %s, %unused):
//   0: %x = add %a, %a
//   1: %c = constant 0
//   2: %r = reduce(%x, %s) { ^(p, q): return add(add(p, q), %c) }   (%c captured)
//   3: %dead = negate %x
//   4: return %r
TEST(BlockUsesTest, CountsEachUseAndRegionCapturesAtTheirOwner) {
  Module m("t");
  const TensorType vec(ElementType::kF32, {4}), scalar(ElementType::kF32, {});
  Function* fn = m.AddFunction("main", {Type(vec), Type(scalar), Type(vec)}, {Type(scalar)});
  Block& entry = fn->entry();
  OpBuilder b(&entry, &m);
  Value a = entry.argument(0), s = entry.argument(1), unused = entry.argument(2);
  Value x = b.CreateOne("stablehlo.add", {a, a});
  Value c =
      b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(Literal(scalar))}});
  auto region = std::make_unique<Region>();
  Block& body = region->AddBlock();
  Value p = body.AddArgument(Type(scalar)), q = body.AddArgument(Type(scalar));
  OpBuilder rb(&body);
  Value inner = rb.CreateOne("stablehlo.add", {rb.CreateOne("stablehlo.add", {p, q}), c});
  rb.Create("stablehlo.return", {inner});
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(region));
  Value r = b.CreateOne("stablehlo.reduce", {x, s}, {{"dimensions", Attribute::IntArray({0})}}, {},
                        std::move(regions));
  Value dead = b.CreateOne("stablehlo.negate", {x});
  b.Create("func.return", {r});
  ASSERT_TRUE(b.ok() && rb.ok()) << b.status().ToString() << rb.status().ToString();

  const BlockUses uses(entry);
  EXPECT_THAT(uses.Users(a), ElementsAre(0, 0));
  EXPECT_EQ(uses.OnlyUser(a), -1);  // two uses by one op are still two uses
  EXPECT_EQ(uses.LastUse(a), 0);
  EXPECT_THAT(uses.Users(x), ElementsAre(2, 3));
  EXPECT_EQ(uses.LastUse(x), 3);
  EXPECT_THAT(uses.Users(c), ElementsAre(2));  // used only inside op 2's region
  EXPECT_EQ(uses.OnlyUser(c), 2);
  EXPECT_EQ(uses.OnlyUser(s), 2);
  EXPECT_EQ(uses.LastUse(r), 4);
  EXPECT_THAT(uses.Users(unused), IsEmpty());
  EXPECT_EQ(uses.LastUse(unused), -1);
  EXPECT_EQ(uses.LastUse(dead), -1);

  // Inside the region, only the region's own ops count.
  const BlockUses body_uses(body);
  EXPECT_EQ(body_uses.OnlyUser(p), 0);
  EXPECT_EQ(body_uses.LastUse(c), 1);
  EXPECT_EQ(body_uses.LastUse(inner), 2);
}

}  // namespace
}  // namespace tlaloc
