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

TEST(InterpreterBackend, RefusesOtherDevices) {
  auto backend = MakeInterpreterBackend();
  auto r = backend->ToDevice(Literal::FromVector<float>({1}, {1}), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device 3"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc
