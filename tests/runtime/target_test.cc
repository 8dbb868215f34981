// Plugin resolution against fake directory trees, per the runbook's order and gates.
#include "tlaloc/runtime/target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("tlaloc_target_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    env_.root = root_.string();
    env_.getenv = [this](const std::string& name) -> std::optional<std::string> {
      auto it = vars_.find(name);
      if (it == vars_.end()) return std::nullopt;
      return it->second;
    };
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Touch(const std::string& rel) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "fake";
    return p.string();
  }
  std::string Dir(const std::string& rel) {
    fs::create_directories(root_ / rel);
    return (root_ / rel).string();
  }

  fs::path root_;
  std::map<std::string, std::string> vars_;
  ResolveEnvironment env_;
};

TEST_F(TargetTest, TpuFromVirtualEnvWheel) {
  vars_["VIRTUAL_ENV"] = Dir("venv");
  std::string so = Touch("venv/lib/python3.11/site-packages/libtpu/libtpu.so");
  auto r = ResolvePjrtPlugin(PjrtTarget::Tpu(), env_);
  EXPECT_EQ(r.path, so);
  EXPECT_NE(r.trace.back().find("libtpu wheel"), std::string::npos);
}

TEST_F(TargetTest, TpuPrefersNewestPythonAndThenUserSite) {
  vars_["VIRTUAL_ENV"] = Dir("venv");
  Dir("venv/lib/python3.9/site-packages");
  vars_["HOME"] = Dir("home");
  std::string user = Touch("home/.local/lib/python3.12/site-packages/libtpu/libtpu.so");
  std::string newest = Touch("venv/lib/python3.13/site-packages/libtpu/libtpu.so");
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Tpu(), env_).path, newest);
  fs::remove(newest);
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Tpu(), env_).path, user);
}

TEST_F(TargetTest, TpuSystemImageLocations) {
  std::string usr = Touch("usr/lib/libtpu.so");
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Tpu(), env_).path, usr);
  std::string lib = Touch("lib/libtpu.so");
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Tpu(), env_).path, lib);  // /lib comes first
}

TEST_F(TargetTest, EnvVarEntersTheTpuLaneOnlyWhenTpuShaped) {
  std::string cuda = Touch("opt/xla_cuda_plugin.so");
  std::string usr = Touch("usr/lib/libtpu.so");
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = cuda;
  auto r = ResolvePjrtPlugin(PjrtTarget::Tpu(), env_);
  EXPECT_EQ(r.path, usr);
  EXPECT_NE(r.trace.front().find("not tpu-shaped"), std::string::npos);
  std::string old_image = Touch("opt/pjrt_c_api_tpu_plugin.so");
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = old_image;
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Tpu(), env_).path, old_image);
}

TEST_F(TargetTest, CudaPrefersCuda13AndKeepsTpuPathsOut) {
  vars_["VIRTUAL_ENV"] = Dir("venv");
  std::string c12 =
      Touch("venv/lib/python3.12/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so");
  std::string c13 =
      Touch("venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so");
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = Touch("opt/libtpu.so");
  auto r = ResolvePjrtPlugin(PjrtTarget::Cuda(), env_);
  EXPECT_EQ(r.path, c13);
  EXPECT_NE(r.trace.front().find("tpu-shaped"), std::string::npos);
  fs::remove(c13);
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Cuda(), env_).path, c12);
  std::string mine = Touch("opt/my_cuda_plugin.so");
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = mine;
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Cuda(), env_).path, mine);
}

TEST_F(TargetTest, NothingFoundNamesEveryPlace) {
  vars_["HOME"] = Dir("home");
  auto r = ResolvePjrtPlugin(PjrtTarget::Tpu(), env_);
  EXPECT_FALSE(r.found());
  Status s = r.ToStatus();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("tpu"), std::string::npos);
  EXPECT_NE(s.message().find("/usr/lib/libtpu.so"), std::string::npos);
  EXPECT_NE(s.message().find("TLALOC_PJRT_PLUGIN_PATH not set"), std::string::npos);
}

TEST_F(TargetTest, CpuFindsTlalocsPluginNextToTheExecutable) {
  env_.executable_dir = Dir("prefix/bin");
  std::string installed = Touch("prefix/lib/libtlaloc_pjrt_cpu.so");
  auto r = ResolvePjrtPlugin(PjrtTarget::Cpu(), env_);
  EXPECT_TRUE(r.found());
  EXPECT_EQ(fs::canonical(r.path), fs::canonical(installed));
  env_.executable_dir = Dir("nowhere");
  env_.builtin_cpu_plugin = installed;
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Cpu(), env_).path, installed);
}

TEST_F(TargetTest, XlaCpuFromVirtualEnvThenUserSiteThenCheckoutVenv) {
  const std::string wheel = std::string("/site-packages/") + kXlaCpuWheelPlugin;
  std::string checkout = Touch("checkout/third_party_py/lib/python3.11" + wheel);
  env_.checkout_venv = (root_ / "checkout/third_party_py").string();
  vars_["VIRTUAL_ENV"] = Dir("venv");
  vars_["HOME"] = Dir("home");
  std::string user = Touch("home/.local/lib/python3.12" + wheel);
  std::string venv = Touch("venv/lib/python3.11" + wheel);
  auto r = ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_);
  EXPECT_EQ(r.path, venv);
  EXPECT_NE(r.trace.back().find("lammps-jax-pjrt-cpu wheel"), std::string::npos);
  fs::remove(venv);
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_).path, user);
  fs::remove(user);
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_).path, checkout);
  fs::remove(checkout);
  auto none = ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_);
  EXPECT_FALSE(none.found());
  EXPECT_NE(none.ToStatus().message().find("checkout/third_party_py/lib/python3.11"),
            std::string::npos);
}

TEST_F(TargetTest, XlaCpuNeverTakesTlalocsPluginAndCpuNeverTakesXlas) {
  // Tlaloc's own plugin in the build tree and XLA's in a venv: each lane keeps to its own.
  env_.builtin_cpu_plugin = Touch("build/libtlaloc_pjrt_cpu.so");
  vars_["VIRTUAL_ENV"] = Dir("venv");
  std::string xla = Touch(std::string("venv/lib/python3.11/site-packages/") + kXlaCpuWheelPlugin);
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = env_.builtin_cpu_plugin;
  auto x = ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_);
  EXPECT_EQ(x.path, xla);
  EXPECT_NE(x.trace.front().find("not Tlaloc's own plugin"), std::string::npos);
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Cpu(), env_).path, env_.builtin_cpu_plugin);

  std::string other_xla = Touch("opt/pjrt_c_api_cpu_plugin.so");
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = other_xla;
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_).path, other_xla);
  auto c = ResolvePjrtPlugin(PjrtTarget::Cpu(), env_);
  EXPECT_EQ(c.path, env_.builtin_cpu_plugin);
  EXPECT_NE(c.trace.front().find("cpu lane is Tlaloc's plugin"), std::string::npos);

  // A file that is not cpu-shaped stays out of both.
  vars_["TLALOC_PJRT_PLUGIN_PATH"] = Touch("opt/xla_cuda_plugin.so");
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::XlaCpu(), env_).path, xla);
}

TEST_F(TargetTest, ExplicitPathIsTakenAsIs) {
  std::string so = Touch("x/anything.so");
  EXPECT_EQ(ResolvePjrtPlugin(PjrtTarget::Path(so), env_).path, so);
  EXPECT_FALSE(ResolvePjrtPlugin(PjrtTarget::Path(so + ".missing"), env_).found());
}

TEST(TargetParse, TargetsAndBackendChoices) {
  EXPECT_EQ(ParsePjrtTarget("cpu")->kind, PjrtTarget::Kind::kCpu);
  EXPECT_EQ(ParsePjrtTarget("gpu")->kind, PjrtTarget::Kind::kCuda);
  EXPECT_EQ(ParsePjrtTarget("tpu")->kind, PjrtTarget::Kind::kTpu);
  EXPECT_EQ(ParsePjrtTarget("xla-cpu")->kind, PjrtTarget::Kind::kXlaCpu);
  EXPECT_EQ(PjrtTarget::XlaCpu().ToString(), "xla-cpu");
  EXPECT_EQ(PjrtTarget::XlaCpu().ExpectedPlatform(), "cpu");
  EXPECT_EQ(ParseBackendChoice("xla-cpu")->ToString(), "pjrt:xla-cpu");
  EXPECT_NE(ParsePjrtTarget("xla").status().message().find("xla-cpu"), std::string::npos);
  EXPECT_EQ(ParsePjrtTarget("./libx.so")->path, "./libx.so");
  auto bad = ParsePjrtTarget("quantum");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("quantum"), std::string::npos);
  EXPECT_TRUE(ParseBackendChoice("interp")->interpreter);
  auto tpu = ParseBackendChoice("tpu");
  ASSERT_TRUE(tpu.ok());
  EXPECT_FALSE(tpu->interpreter);
  EXPECT_EQ(tpu->ToString(), "pjrt:tpu");
  EXPECT_EQ(PjrtTarget::Cuda().ExpectedPlatform(), "cuda");
  EXPECT_EQ(PjrtTarget::Path("/x.so").ExpectedPlatform(), "");
  EXPECT_TRUE(IsTpuShapedPath("/a/b/LibTPU.so"));
  EXPECT_FALSE(IsTpuShapedPath("/tpu/dir/xla_cuda_plugin.so"));
}

}  // namespace
}  // namespace tlaloc
