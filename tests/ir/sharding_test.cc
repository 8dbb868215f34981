// Meshes and shardings (ir/sharding.h): parsing "data=2,model=2", Shardy's text forms, and the
// checks whose errors must name the axis, the dimension or the mesh.
#include "tlaloc/ir/sharding.h"

#include <gtest/gtest.h>

namespace tlaloc {
namespace {

std::string ErrorOf(const Status& s) { return s.ok() ? "" : s.message(); }

TEST(Mesh, ParsesNamedAxes) {
  auto m = Mesh::Parse("data=2, model=2", 4);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_devices(), 4);
  EXPECT_EQ(m->AxisIndex("model"), 1);
  EXPECT_EQ(m->AxisIndex("x"), -1);
  EXPECT_EQ(m->ToSdy(), "<[\"data\"=2, \"model\"=2]>");
  EXPECT_EQ(m->ToString(), "data=2,model=2");
  EXPECT_EQ(m->Coordinates(3), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m->Coordinates(1), (std::vector<int64_t>{0, 1}));
  auto back = Mesh::FromSdy(m->ToSdy());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToString(), "data=2,model=2");
}

TEST(Mesh, BadMeshesAreRefusedNamingThem) {
  std::string e = ErrorOf(Mesh::Parse("data=2,model=2", 8).status());
  EXPECT_NE(e.find("mesh 'data=2,model=2'"), std::string::npos) << e;
  EXPECT_NE(e.find("multiply to 4, the run has 8 device(s)"), std::string::npos) << e;
  e = ErrorOf(Mesh::Parse("data=2,data=2").status());
  EXPECT_NE(e.find("axis 'data' appears twice"), std::string::npos) << e;
  e = ErrorOf(Mesh::Parse("2x=2").status());
  EXPECT_NE(e.find("axis name '2x' is not an identifier"), std::string::npos) << e;
  e = ErrorOf(Mesh::Parse("data=0").status());
  EXPECT_NE(e.find("axis 'data' has size 0, expected >= 1"), std::string::npos) << e;
  e = ErrorOf(Mesh::Parse("data").status());
  EXPECT_NE(e.find("expected NAME=SIZE, got 'data'"), std::string::npos) << e;
  e = ErrorOf(Mesh::Parse("data=two").status());
  EXPECT_NE(e.find("expected a positive integer"), std::string::npos) << e;
}

TEST(Sharding, PrintsAndParsesShardysForm) {
  Sharding s;
  s.dims = {{"data"}, {}};
  EXPECT_EQ(s.ToSdy(), "#sdy.sharding<@mesh, [{\"data\"}, {}]>");
  s.dims = {{"data", "model"}, {}};
  s.replicated = {"pipe"};
  EXPECT_EQ(s.ToSdyBody(), "<@mesh, [{\"data\", \"model\"}, {}], replicated={\"pipe\"}>");
  auto back = Sharding::FromSdy(s.ToSdy());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(Sharding::FromSdy("#sdy.sharding<@mesh, [{\"a\", ?}]>").ok());
}

TEST(Sharding, ChecksAxesAndDivisibility) {
  Mesh mesh = *Mesh::Parse("data=2,model=4");
  TensorType t(ElementType::kF32, {8, 6});
  Sharding ok;
  ok.dims = {{"data"}, {}};
  EXPECT_TRUE(ok.Check(mesh, t).ok());
  EXPECT_EQ(ok.LocalType(mesh, t)->dims, (std::vector<int64_t>{4, 6}));
  Sharding bad;
  bad.dims = {{}, {"model"}};
  std::string e = ErrorOf(bad.Check(mesh, t));
  EXPECT_NE(e.find("dimension 1 (size 6) does not divide by axis 'model'"), std::string::npos) << e;
  bad.dims = {{"expert"}, {}};
  e = ErrorOf(bad.Check(mesh, t));
  EXPECT_NE(e.find("names axis 'expert', which mesh @mesh (data=2,model=4) does not have"),
            std::string::npos)
      << e;
  bad.dims = {{"data"}, {"data"}};
  e = ErrorOf(bad.Check(mesh, t));
  EXPECT_NE(e.find("axis 'data' is used twice"), std::string::npos) << e;
  bad.dims = {{"data"}};
  e = ErrorOf(bad.Check(mesh, t));
  EXPECT_NE(e.find("names 1 dimension(s), the tensor has 2"), std::string::npos) << e;
}

TEST(Sharding, LivesOnFunctionArgumentsAndResults) {
  Module m("t");
  TensorType t(ElementType::kF32, {8, 16});
  Function* f = m.AddFunction("main", {Type(t)}, {Type(t)});
  AddMesh(m, "mesh", *Mesh::Parse("data=2,model=2"));
  Sharding s;
  s.dims = {{"data"}, {"model"}};
  SetArgSharding(*f, 0, s);
  SetResultSharding(*f, 0, Sharding::Replicated(2));
  EXPECT_EQ(**ArgSharding(*f, 0), s);
  EXPECT_EQ((*ResultSharding(*f, 0))->dims.size(), 2u);
  EXPECT_TRUE(CheckShardings(m, *f).ok());
  EXPECT_EQ(FindMesh(m, "mesh")->num_devices(), 4);
  s.mesh = "other";
  SetArgSharding(*f, 0, s);
  std::string e = ErrorOf(CheckShardings(m, *f));
  EXPECT_NE(e.find("no mesh @other"), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc
