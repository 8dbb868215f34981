// Named composites the builder emits (builder/composite.h): builder::RmsNorm is one
// stablehlo.composite "tlaloc.rms_norm" whose decomposition is one private function per types
// and eps (a model's norms share it: the module does not grow per layer), the printed module
// parses back with the same text and runs with the same bits, and a builder without a module
// emits the decomposition's ops in place.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tlaloc/builder/composite.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

int CountOps(const Function& f, std::string_view name) {
  int n = 0;
  for (const auto& op : f.entry().operations()) n += op->name() == name;
  return n;
}

int CountFunctions(const Module& m) {
  int n = 0;
  for (const auto& f : m.functions()) n += f != nullptr;
  return n;
}

TEST(CompositeKernels, NormsShareOneDecompositionPerTypesAndEps) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor h = fb.AddArg(TensorType(ElementType::kBF16, {1, 5, 64}));
  Tensor q = fb.AddArg(TensorType(ElementType::kBF16, {1, 5, 4, 16}));
  Tensor w = fb.AddArg(TensorType(ElementType::kBF16, {64}));
  Tensor wq = fb.AddArg(TensorType(ElementType::kBF16, {16}));
  // Ten "layers" of two hidden norms and a head norm, and one norm with another eps.
  Tensor x = h, y = q;
  for (int layer = 0; layer < 10; ++layer) {
    x = RmsNorm(RmsNorm(x, w, 1e-6), w, 1e-6);
    y = RmsNorm(y, wq, 1e-6);
  }
  Tensor z = RmsNorm(x, w, 1e-5);
  ASSERT_TRUE(fb.Return({z, y}).ok()) << fb.status().ToString();
  EXPECT_EQ(CountOps(*fb.function(), "stablehlo.composite"), 31);
  EXPECT_EQ(CountOps(*fb.function(), "stablehlo.rsqrt"), 0) << "the chain was emitted in place";
  // main and three decompositions: [1,5,64] eps 1e-6, [1,5,4,16] eps 1e-6, [1,5,64] eps 1e-5.
  EXPECT_EQ(CountFunctions(*module), 4);
  ASSERT_TRUE(Verify(*module).ok());
}

TEST(CompositeKernels, WithoutAModuleTheChainIsEmittedInPlace) {
  Module module("t");
  Function* f = module.AddFunction(
      "main", {TensorType(ElementType::kF32, {2, 8}), TensorType(ElementType::kF32, {8})}, {});
  OpBuilder b(&f->entry());  // no module: nowhere to put a decomposition
  Tensor y = RmsNorm(Tensor(f->entry().argument(0), &b), Tensor(f->entry().argument(1), &b), 1e-6);
  ASSERT_TRUE(y.valid()) << b.status().ToString();
  EXPECT_EQ(CountOps(*f, "stablehlo.composite"), 0);
  EXPECT_EQ(CountOps(*f, "stablehlo.rsqrt"), 1);
}

TEST(CompositeKernels, RmsNormPrintsParsesAndRunsWithTheSameBits) {
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    auto module = std::make_shared<Module>("t");
    FunctionBuilder fb(module.get(), "main");
    Tensor x = fb.AddArg(TensorType(et, {3, 7, 96}));
    Tensor w = fb.AddArg(TensorType(et, {96}));
    ASSERT_TRUE(fb.Return({RmsNorm(x, w, 1e-6)}).ok());
    const std::string printed = PrintModule(*module);
    EXPECT_NE(printed.find("stablehlo.composite \"tlaloc.rms_norm\""), std::string::npos)
        << printed;
    auto again = ParseModule(printed);
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
    ASSERT_TRUE(Verify(**again).ok());
    EXPECT_EQ(PrintModule(**again), printed);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    Literal xv(TensorType(et, {3, 7, 96})), wv(TensorType(et, {96}));
    for (Literal* l : {&xv, &wv})
      for (int64_t i = 0; i < l->num_elements(); ++i) {
        const float v = nd(rng);
        if (et == ElementType::kF32)
          l->span<float>()[i] = v;
        else
          reinterpret_cast<uint16_t*>(l->data())[i] = FloatToBf16Bits(v);
      }
    std::vector<Literal> outs;
    for (const Module* m : {module.get(), again->get()})
      for (bool fuse : {true, false}) {
        InterpreterOptions options;
        options.fuse = fuse;
        auto out = Interpret(*m, "main", {xv, wv}, nullptr, options);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        outs.push_back((*out)[0]);
      }
    for (size_t k = 1; k < outs.size(); ++k)
      EXPECT_EQ(std::memcmp(outs[k].data(), outs[0].data(), outs[0].byte_size()), 0)
          << MlirName(et) << " run " << k << " (kernel/decomposition, built/parsed)";
  }
}

}  // namespace
}  // namespace tlaloc
