// runtime::OpenBackend: a run's backend from its target, mesh and process world. Here (no PJRT
// client linked) the interpreter's cases and the errors; tests/pjrt/open_backend_test.cc opens
// Tlaloc's plugin through it.
#include "tlaloc/runtime/open_backend.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace tlaloc::runtime {
namespace {

// A world of `size` ranks that never exchanges anything: OpenBackend only reads its shape.
class ShapeOnlyWorld : public ProcessWorld {
 public:
  ShapeOnlyWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "test"; }
  StatusOr<std::vector<std::string>> AllGather(std::string_view, std::chrono::milliseconds,
                                               const std::string& what) override {
    return Unimplemented("test world: no exchange (" + what + ")");
  }
  [[noreturn]] void Abort(int) override { std::abort(); }

 private:
  int rank_, size_;
};

// TLALOC_CPU_DEVICES changes the device counts; these tests need it unset.
class OpenBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* env = std::getenv("TLALOC_CPU_DEVICES")) saved_ = env;
    unsetenv("TLALOC_CPU_DEVICES");
  }
  void TearDown() override {
    if (saved_) setenv("TLALOC_CPU_DEVICES", saved_->c_str(), 1);
  }
  std::optional<std::string> saved_;
};

Mesh MeshOf(const std::string& text) {
  auto mesh = Mesh::Parse(text);
  EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
  return *mesh;
}

TEST_F(OpenBackendTest, OneProcessGetsTheMeshDevices) {
  auto one = OpenBackend(BackendChoice{}, std::nullopt, SingleProcessWorld());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*one)->name(), "interp");
  EXPECT_EQ((*one)->num_devices(), 1);
  auto four = OpenBackend(BackendChoice{}, MeshOf("data=2,model=2"), SingleProcessWorld());
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_EQ((*four)->num_devices(), 4);
}

TEST_F(OpenBackendTest, TheVariableDecidesTheDeviceCount) {
  setenv("TLALOC_CPU_DEVICES", "3", 1);
  auto b = OpenBackend(BackendChoice{}, MeshOf("data=2"), SingleProcessWorld());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->num_devices(), 3);
}

TEST_F(OpenBackendTest, RanksShareTheMeshDevices) {
  ShapeOnlyWorld world(1, 2);
  auto b = OpenBackend(BackendChoice{}, MeshOf("data=4"), world);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->num_devices(), 4);
  // Rank 1 holds devices 2 and 3.
  EXPECT_FALSE((*b)->is_addressable(1));
  EXPECT_TRUE((*b)->is_addressable(2));
  EXPECT_TRUE((*b)->is_addressable(3));
}

TEST_F(OpenBackendTest, MultiProcessUsageErrorsNameTheProblem) {
  ShapeOnlyWorld world(0, 2);
  auto cpu = OpenBackend(BackendChoice{false, PjrtTarget::Cpu()}, MeshOf("data=2"), world);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu.status().message(),
            "--target pjrt:cpu across 2 processes (mpirun -np 2): multi-process runs use the "
            "interpreter (--target interp)");
  auto no_mesh = OpenBackend(BackendChoice{}, std::nullopt, world);
  ASSERT_FALSE(no_mesh.ok());
  EXPECT_NE(no_mesh.status().message().find("needs a mesh"), std::string::npos)
      << no_mesh.status().message();
  auto uneven = OpenBackend(BackendChoice{}, MeshOf("data=3"), world);
  ASSERT_FALSE(uneven.ok());
  EXPECT_EQ(uneven.status().message(),
            "--mesh data=3 has 3 devices, which do not split evenly over 2 processes (mpirun "
            "-np 2)");
}

TEST_F(OpenBackendTest, APjrtTargetWithoutAClientSaysSo) {
  auto b =
      OpenBackend(BackendChoice{false, PjrtTarget::Cuda()}, std::nullopt, SingleProcessWorld());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "target pjrt:cuda: PJRT target cuda: this binary has no PJRT client (link "
            "tlaloc_pjrt and call pjrt::RegisterBackendOpener() at start-up)");
}

}  // namespace
}  // namespace tlaloc::runtime
