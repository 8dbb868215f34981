#include "tlaloc/runtime/backend.h"

#include <gtest/gtest.h>

#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

constexpr const char* kStep = R"(
func.func public @main(%w: tensor<3xf32> {tf.aliasing_output = 0 : i32}, %g: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.subtract %w, %g : tensor<3xf32>
  return %0 : tensor<3xf32>
})";

TEST(InterpreterBackend, CompilesRunsAndDonates) {
  auto backend = MakeInterpreterBackend();
  EXPECT_EQ(backend->name(), "interp");
  ASSERT_EQ(backend->devices().size(), 1u);
  auto module = ParseModule(kStep);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto program = backend->Compile(std::shared_ptr<const Module>(std::move(*module)));
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_EQ((*program)->argument_types().size(), 2u);

  auto w = backend->ToDevice(Literal::FromVector<float>({3}, {1, 2, 3}));
  auto g = backend->ToDevice(Literal::FromVector<float>({3}, {1, 1, 1}));
  ASSERT_TRUE(w.ok() && g.ok());
  auto kept = backend->Execute(**program, {{w->get(), false}, {g->get(), false}});
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE((*w)->is_deleted());
  auto out = backend->Execute(**program, {{w->get(), true}, {g->get(), false}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE((*w)->is_deleted());
  EXPECT_FALSE(backend->ToHost(**w).ok());
  auto host = backend->ToHost(*(*out)[0]);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->span<float>()[2], 2.0f);
  auto again = backend->Execute(**program, {{w->get(), false}, {g->get(), false}});
  EXPECT_FALSE(again.ok());

  auto ran = backend->Run(**program, {Literal::FromVector<float>({3}, {5, 5, 5}),
                                      Literal::FromVector<float>({3}, {1, 2, 3})});
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ((*ran)[0].span<float>()[1], 3.0f);
  auto stats = backend->MemoryStats(**program);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->argument_bytes, 24);
  EXPECT_EQ(stats->output_bytes, 12);
}

// A cache update as the decode step does it: the donated cache comes back as the result.
constexpr const char* kCacheWrite = R"(
func.func public @main(%cache: tensor<4x8xf32> {tf.aliasing_output = 0 : i32}, %row: tensor<1x8xf32>, %at: tensor<i32>) -> tensor<4x8xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %cache, %row, %at, %zero : (tensor<4x8xf32>, tensor<1x8xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
})";

TEST(InterpreterBackend, DonatedBufferIsUpdatedInPlace) {
  auto backend = MakeInterpreterBackend();
  auto module = ParseModule(kCacheWrite);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto program = backend->Compile(std::shared_ptr<const Module>(std::move(*module)));
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto cache = backend->Adopt(Literal(TensorType(ElementType::kF32, {4, 8})));
  ASSERT_TRUE(cache.ok());
  std::unique_ptr<DeviceBuffer> current = std::move(*cache);
  const void* storage = current->host_data();
  ASSERT_NE(storage, nullptr);
  for (int step = 0; step < 3; ++step) {
    auto row = backend->Adopt(Literal::FromVector<float>({1, 8}, std::vector<float>(8, step + 1)));
    auto at = backend->Adopt(Literal::Scalar<int32_t>(step));
    ASSERT_TRUE(row.ok() && at.ok());
    auto out =
        backend->Execute(**program, {{current.get(), true}, {row->get(), true}, {at->get(), true}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_TRUE(current->is_deleted());
    EXPECT_EQ(current->host_data(), nullptr);
    current = std::move((*out)[0]);
    EXPECT_EQ(current->host_data(), storage) << "step " << step << " copied the donated cache";
  }
  auto host = backend->ToHost(*current);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->span<float>()[0], 1.0f);
  EXPECT_EQ(host->span<float>()[2 * 8 + 7], 3.0f);
  EXPECT_EQ(host->span<float>()[3 * 8], 0.0f);

  // Kept (not donated), the cache must not change under the caller: the result is a new buffer.
  auto row = backend->Adopt(Literal::FromVector<float>({1, 8}, std::vector<float>(8, 9)));
  auto at = backend->Adopt(Literal::Scalar<int32_t>(3));
  ASSERT_TRUE(row.ok() && at.ok());
  auto out = backend->Execute(**program,
                              {{current.get(), false}, {row->get(), false}, {at->get(), false}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE((*out)[0]->host_data(), storage);
  auto before = backend->ToHost(*current);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->span<float>()[3 * 8], 0.0f);
}

TEST(InterpreterBackend, AdoptKeepsTheStorageAndToDeviceCopies) {
  auto backend = MakeInterpreterBackend();
  Literal l = Literal::FromVector<float>({2}, {1, 2});
  const void* storage = l.data();
  auto copied = backend->ToDevice(l);
  ASSERT_TRUE(copied.ok());
  EXPECT_NE((*copied)->host_data(), storage);
  auto adopted = backend->Adopt(std::move(l));
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ((*adopted)->host_data(), storage);
  auto bad = backend->Adopt(Literal::Scalar<float>(1), 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("device 2"), std::string::npos);
}

TEST(InterpreterBackend, RefusesOtherDevices) {
  auto backend = MakeInterpreterBackend();
  auto r = backend->ToDevice(Literal::FromVector<float>({1}, {1}), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device 3"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc
