// PjrtSession end to end through the real C ABI: dlopen of Tlaloc's plugin (or the plugin
// TLALOC_TEST_PJRT_TARGET names), compile, transfers, execute with donation, memory stats.
#include "tlaloc/pjrt/session.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "pjrt_test_util.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::pjrt {
namespace {

constexpr const char* kAddMul = R"(
func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  %1 = stablehlo.multiply %0, %a : tensor<4xf32>
  return %1 : tensor<4xf32>
})";

constexpr const char* kSgdStep = R"(
func.func public @main(%w: tensor<3xf32> {tf.aliasing_output = 0 : i32}, %g: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.subtract %w, %g : tensor<3xf32>
  return %0 : tensor<3xf32>
})";

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::Lane lane = testing::TestLane();
    ASSERT_TRUE(lane.error.empty()) << lane.error;
    if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
    SessionOptions o;
    o.target = lane.target;
    auto s = PjrtSession::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
  }
  std::unique_ptr<PjrtSession> session_;
};

TEST_F(SessionTest, ReportsPlatformAndDevices) {
  EXPECT_FALSE(session_->platform_name().empty());
  ASSERT_GE(session_->devices().size(), 1u);
  EXPECT_FALSE(session_->devices()[0].kind.empty());
}

TEST_F(SessionTest, RunsAProgramLikeTheInterpreter) {
  auto exe = session_->Compile(kAddMul);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  EXPECT_EQ((*exe)->num_outputs(), 1u);
  EXPECT_EQ((*exe)->output_types()[0], TensorType(ElementType::kF32, {4}));
  std::vector<Literal> args = {Literal::FromVector<float>({4}, {1, 2, 3, -4}),
                               Literal::FromVector<float>({4}, {0.5f, -2, 10, 4})};
  auto out = session_->Run(**exe, args);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto module = ParseModule(kAddMul);
  ASSERT_TRUE(module.ok());
  auto want = Interpret(**module, "main", args);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_TRUE((*out)[0].BitwiseEquals((*want)[0])) << (*out)[0].ToString();
}

TEST_F(SessionTest, TransfersEveryElementTypeBothWays) {
  for (ElementType et : kAllElementTypes) {
    std::vector<double> values = {0, 1, 3, 7, 100, 1};
    if (IsFloat(et) || IsSignedInt(et)) values[2] = -3;
    if (et == ElementType::kPred) values = {0, 1, 1, 0, 1, 0};
    Literal l = Literal::FromDoubles(et, {2, 3}, values);
    auto buffer = session_->ToDevice(l);
    ASSERT_TRUE(buffer.ok()) << ShortName(et) << ": " << buffer.status().ToString();
    EXPECT_EQ(buffer->type(), l.type());
    auto back = session_->ToHost(*buffer);
    ASSERT_TRUE(back.ok()) << ShortName(et) << ": " << back.status().ToString();
    EXPECT_TRUE(back->BitwiseEquals(l)) << ShortName(et) << ": " << back->ToString();
  }
}

TEST_F(SessionTest, IdentityProgramPreservesEveryElementType) {
  for (ElementType et : kAllElementTypes) {
    std::string t = "tensor<3x" + std::string(MlirName(et)) + ">";
    std::string text =
        "func.func public @main(%a: " + t + ") -> " + t + " {\n  return %a : " + t + "\n}\n";
    auto exe = session_->Compile(text);
    ASSERT_TRUE(exe.ok()) << ShortName(et) << ": " << exe.status().ToString();
    Literal l = Literal::FromDoubles(et, {3}, {1, 0, 1});
    auto out = session_->Run(**exe, {l});
    ASSERT_TRUE(out.ok()) << ShortName(et) << ": " << out.status().ToString();
    EXPECT_TRUE((*out)[0].BitwiseEquals(l)) << ShortName(et);
  }
}

TEST_F(SessionTest, DonationDeletesTheArgumentUnlessKept) {
  auto exe = session_->Compile(kSgdStep);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto w = session_->ToDevice(Literal::FromVector<float>({3}, {1, 2, 3}));
  auto g = session_->ToDevice(Literal::FromVector<float>({3}, {0.5f, 0.5f, 0.5f}));
  ASSERT_TRUE(w.ok() && g.ok());

  // Kept: listed as non-donatable, the weight survives.
  ExecuteRequest keep;
  keep.non_donatable_input_indices = {0};
  auto kept = session_->Execute(**exe, {&*w, &*g}, keep);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_FALSE(w->IsDeleted());
  auto w_after = session_->ToHost(*w);
  ASSERT_TRUE(w_after.ok());
  EXPECT_EQ(w_after->span<float>()[0], 1.0f);

  // Donated: the program aliases it, so the plugin may reuse it and the handle is dead.
  auto donated = session_->Execute(**exe, {&*w, &*g});
  ASSERT_TRUE(donated.ok()) << donated.status().ToString();
  EXPECT_TRUE(w->IsDeleted());
  auto result = session_->ToHost((*donated)[0]);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->span<float>()[2], 2.5f);
  EXPECT_FALSE(session_->ToHost(*w).ok());
  // Using it again is refused, not a crash.
  auto again = session_->Execute(**exe, {&*w, &*g});
  EXPECT_FALSE(again.ok());
}

TEST_F(SessionTest, CompiledMemoryStatsCountAliasingOnce) {
  // Arguments, outputs and aliasing follow from the program's shapes on any plugin; temporaries
  // are each compiler's own (XLA:CPU's figures are printed and recorded in docs/PJRT.md).
  const bool exact = testing::TestLane().is_tlaloc_plugin();
  auto exe = session_->Compile(kAddMul);
  ASSERT_TRUE(exe.ok());
  auto stats = (*exe)->MemoryStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->argument_bytes, 32);
  EXPECT_EQ(stats->output_bytes, 16);
  if (exact) {
    EXPECT_EQ(stats->temp_bytes, 16);  // the sum lives until the product
  }
  EXPECT_EQ(stats->alias_bytes, 0);
  auto sgd = session_->Compile(kSgdStep);
  ASSERT_TRUE(sgd.ok());
  auto s2 = (*sgd)->MemoryStats();
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->alias_bytes, 12);
  if (exact) {
    EXPECT_EQ(s2->temp_bytes, 0);
  }
  std::printf("  %s: add-mul temp %lld bytes, peak %s; sgd alias %lld, temp %lld bytes\n",
              session_->platform_name().c_str(), static_cast<long long>(stats->temp_bytes),
              stats->peak_bytes ? std::to_string(*stats->peak_bytes).c_str() : "not reported",
              static_cast<long long>(s2->alias_bytes), static_cast<long long>(s2->temp_bytes));
}

TEST_F(SessionTest, BadProgramsAreStatusesWithThePluginsMessage) {
  auto bad = session_->Compile("func.func @main( {");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PJRT_Client_Compile"), std::string::npos);
  if (session_->api().origin() == testing::CpuPluginPath()) {
    auto bytecode = session_->Compile(std::string("ML\xEFR\x00\x01", 6));
    ASSERT_FALSE(bytecode.ok());
    EXPECT_EQ(bytecode.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bytecode.status().message().find("bytecode"), std::string::npos);
  }
}

TEST(PjrtSessionPlatform, RefusesAPluginOfAnotherPlatform) {
  SessionOptions o;
  o.target = PjrtTarget::Cuda();
  o.plugin_path = testing::CpuPluginPath();
  auto s = PjrtSession::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("'cpu'"), std::string::npos);
  EXPECT_NE(s.status().message().find("'cuda'"), std::string::npos);
}

TEST(PjrtSessionPlatform, CpuDeviceCountCreatesDevices) {
  SessionOptions o;
  o.target = PjrtTarget::Path(testing::CpuPluginPath());
  o.cpu_device_count = 4;
  auto s = PjrtSession::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ((*s)->devices().size(), 4u);
  EXPECT_EQ((*s)->devices()[3].id, 3);
  // A buffer on device 2 runs there.
  auto exe = (*s)->Compile(kAddMul);
  ASSERT_TRUE(exe.ok());
  auto a = (*s)->ToDevice(Literal::FromVector<float>({4}, {1, 1, 1, 1}), 2);
  auto b = (*s)->ToDevice(Literal::FromVector<float>({4}, {2, 2, 2, 2}), 2);
  ASSERT_TRUE(a.ok() && b.ok());
  ExecuteRequest on2;
  on2.device_index = 2;
  auto out = (*s)->Execute(**exe, {&*a, &*b}, on2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto host = (*s)->ToHost((*out)[0]);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->span<float>()[0], 3.0f);
}

TEST(PjrtSessionPlatform, TpuLaneSkipsWithoutLibtpu) {
  PluginResolution r = ResolvePjrtPlugin(PjrtTarget::Tpu(), ResolveEnvironment::Process());
  if (!r.found()) GTEST_SKIP() << "no libtpu on this machine: " << r.ToStatus().message();
  SessionOptions o;
  o.target = PjrtTarget::Tpu();
  auto s = PjrtSession::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->platform_name(), "tpu");
}

TEST(PjrtSessionPlatform, CudaLaneSkipsWithoutXlaCudaPlugin) {
  PluginResolution r = ResolvePjrtPlugin(PjrtTarget::Cuda(), ResolveEnvironment::Process());
  if (!r.found()) GTEST_SKIP() << "no XLA CUDA plugin on this machine: " << r.ToStatus().message();
  SessionOptions o;
  o.target = PjrtTarget::Cuda();
  o.preallocate = false;
  auto s = PjrtSession::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto exe = (*s)->Compile(kAddMul);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  auto out = (*s)->Run(**exe, {Literal::FromVector<float>({4}, {1, 2, 3, 4}),
                               Literal::FromVector<float>({4}, {1, 1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].span<float>()[3], 20.0f);
}

}  // namespace
}  // namespace tlaloc::pjrt
