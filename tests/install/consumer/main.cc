// A program outside the project that builds and runs a function through the installed package.
#include <cstdio>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/cpu/kernels.h"
#include "tlaloc/interp/interpreter.h"

int main() {
  using namespace tlaloc;
  Module m("consumer");
  FunctionBuilder fb(&m, "main", {Type(TensorType(ElementType::kF32, {3}))});
  Status s = fb.Return({fb.arg(0) * fb.arg(0) + 1.0});
  if (!s.ok()) {
    std::fprintf(stderr, "build failed: %s\n", s.ToString().c_str());
    return 1;
  }
  auto out = Interpret(m, "main", {Literal::FromVector<float>({3}, {1, 2, 3})});
  if (!out.ok() || (*out)[0].span<float>()[2] != 10.0f) {
    std::fprintf(stderr, "unexpected result\n");
    return 1;
  }
  // The CPU kernel layer is part of the package: dot_general has its fast kernel.
  if (cpu::FindKernel("stablehlo.dot_general") == nullptr) {
    std::fprintf(stderr, "the installed package has no CPU kernel for stablehlo.dot_general\n");
    return 1;
  }
  std::printf("consumer ok: %s\n", (*out)[0].ToString().c_str());
  return 0;
}
