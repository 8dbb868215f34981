// The interpreter backend with several devices: buffers placed per device, a program compiled
// for a grid of replicas x partitions, one argument list per device, and the single-device
// calls unchanged.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tlaloc/runtime/backend.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

constexpr const char* kSumAndIds = R"(
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<ui32>, tensor<ui32>) {
  %r = "stablehlo.all_reduce"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>}
     : (tensor<2xf32>) -> tensor<2xf32>
  %rid = stablehlo.replica_id : tensor<ui32>
  %pid = stablehlo.partition_id : tensor<ui32>
  return %r, %rid, %pid : tensor<2xf32>, tensor<ui32>, tensor<ui32>
})";

std::shared_ptr<const Module> Parse(const char* text) {
  auto m = ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::shared_ptr<const Module>(std::move(*m)) : nullptr;
}

TEST(MultiDeviceBackend, RunsOneListPerDeviceOnAGrid) {
  auto backend = MakeInterpreterBackend({}, 4);
  ASSERT_EQ(backend->num_devices(), 4);
  auto program = backend->CompileForDevices(Parse(kSumAndIds), ProcessGrid{2, 2});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::vector<std::vector<Literal>> args;
  for (int d = 0; d < 4; ++d)
    args.push_back({Literal::FromVector<float>({2}, {float(d), float(10 * d)})});
  auto out = backend->RunOnDevices(**program, args);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 4u);
  // cross_replica_and_partition over replicas {0, 1}: every device of the 2 x 2 grid.
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ((*out)[d][0].span<float>()[0], 6.0f);
    EXPECT_EQ((*out)[d][0].span<float>()[1], 60.0f);
    EXPECT_EQ((*out)[d][1].GetAsInt64(0), d / 2);
    EXPECT_EQ((*out)[d][2].GetAsInt64(0), d % 2);
  }
}

TEST(MultiDeviceBackend, ResultsStayOnTheirDeviceAndDonationWorksPerDevice) {
  auto backend = MakeInterpreterBackend({}, 2);
  auto program = backend->CompileForDevices(Parse(kSumAndIds), ProcessGrid{2, 1});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  for (int d = 0; d < 2; ++d) {
    auto b = backend->ToDevice(Literal::FromVector<float>({2}, {1, 2}), d);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*b)->device(), d);
    bufs.push_back(std::move(*b));
  }
  auto outs =
      backend->ExecuteOnDevices(**program, {{{bufs[0].get(), true}}, {{bufs[1].get(), false}}});
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  EXPECT_TRUE(bufs[0]->is_deleted());
  EXPECT_FALSE(bufs[1]->is_deleted());
  for (int d = 0; d < 2; ++d) EXPECT_EQ((*outs)[d][0]->device(), d);
  // A buffer on the wrong device is refused, naming both.
  auto wrong =
      backend->ExecuteOnDevices(**program, {{{bufs[1].get(), false}}, {{bufs[1].get(), false}}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("argument 0 of device 0 lives on device 1"),
            std::string::npos)
      << wrong.status().ToString();
}

TEST(MultiDeviceBackend, GridsThatDoNotFitAndDevicesOutOfRangeAreRefused) {
  auto backend = MakeInterpreterBackend({}, 2);
  auto big = backend->CompileForDevices(Parse(kSumAndIds), ProcessGrid{2, 2});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("does not fit the interpreter's 2 device(s)"),
            std::string::npos)
      << big.status().ToString();
  auto far = backend->ToDevice(Literal::Scalar<float>(1), 2);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("has 2 device(s); got device 2"), std::string::npos);
}

TEST(MultiDeviceBackend, DeviceCountFromTheEnvironment) {
  setenv("TLALOC_CPU_DEVICES", "3", 1);
  EXPECT_EQ(MakeInterpreterBackend()->num_devices(), 3);
  setenv("TLALOC_CPU_DEVICES", "0", 1);
  auto backend = MakeInterpreterBackend();
  auto program = backend->Compile(Parse(kSumAndIds), "");
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find("TLALOC_CPU_DEVICES"), std::string::npos);
  unsetenv("TLALOC_CPU_DEVICES");
  // The single-device path is unchanged: a group of one is the identity.
  backend = MakeInterpreterBackend();
  EXPECT_EQ(backend->num_devices(), 1);
  constexpr const char* kSolo = R"(
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = "stablehlo.all_reduce"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
})";
  auto solo = backend->Compile(Parse(kSolo), "");
  ASSERT_TRUE(solo.ok()) << solo.status().ToString();
  auto out = backend->Run(**solo, {Literal::FromVector<float>({2}, {3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].span<float>()[1], 4.0f);
}

}  // namespace
}  // namespace tlaloc
