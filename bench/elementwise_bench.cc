// The transcendental elementwise ops the models spend time in (exp for softmax, logistic for
// SiLU, rsqrt for RMSNorm) over 16M-element f32 tensors: the portable scalar kernel (double libm
// call per element) against the vector kernel (AVX-512 or AVX2 + FMA) that gives the same bits,
// both on one thread, and the op as the interpreter runs it (vector kernel over the thread
// pool, TLALOC_NUM_THREADS).
// Each reports GB/s (4 bytes read + 4 written per element) and elements per second.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "cpu/vector_math.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"

namespace {

namespace vmath = tlaloc::ops::vmath;      // the scalar references
namespace cpu_vmath = tlaloc::cpu::vmath;  // the CPU layer's kernels
using tlaloc::ElementType;
using tlaloc::Literal;
using tlaloc::TensorType;

constexpr int64_t kElements = int64_t{1} << 24;

enum OpIndex { kExp = 0, kLogistic = 1, kRsqrt = 2, kMaskedExp = 3 };
const char* const kOpNames[] = {"exp", "logistic", "rsqrt", "exp_half_masked"};

// Inputs like the model's: softmax exponents (scores minus their max, <= 0; in the masked case
// half are -inf), SiLU gates around 0, RMSNorm mean squares (positive).
std::vector<float> Inputs(int op) {
  std::vector<float> xs(kElements);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> exponent(-30.0f, 0.0f), gate(-8.0f, 8.0f),
      mean_square(1e-6f, 10.0f);
  for (int64_t i = 0; i < kElements; ++i) {
    switch (op) {
      case kExp:
        xs[i] = exponent(rng);
        break;
      case kLogistic:
        xs[i] = gate(rng);
        break;
      case kRsqrt:
        xs[i] = mean_square(rng);
        break;
      default:
        xs[i] = (i / 64) % 2 ? -std::numeric_limits<float>::infinity() : exponent(rng);
    }
  }
  return xs;
}

void ReportRates(benchmark::State& state, double seconds_per_run) {
  if (seconds_per_run <= 0) return;
  state.counters["GB/s"] = 8.0 * kElements / seconds_per_run / 1e9;
  state.counters["Gelem/s"] = kElements / seconds_per_run / 1e9;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One kernel call over the whole tensor on this thread; args: op, vector (0 scalar, 1 vector).
void BM_KernelF32(benchmark::State& state) {
  const int op = static_cast<int>(state.range(0));
  const bool vector = state.range(1) != 0;
  if (vector && !cpu_vmath::HasVectorKernels()) {
    state.SkipWithError("vector kernels off (CPU lacks AVX2 + FMA, or TLALOC_VECTOR_MATH=0)");
    return;
  }
  state.SetLabel(kOpNames[op]);
  const vmath::F32Kernel scalar_kernels[] = {vmath::ExpF32Scalar, vmath::LogisticF32Scalar,
                                             vmath::RsqrtF32Scalar, vmath::ExpF32Scalar};
  const vmath::F32Kernel vector_kernels[] = {cpu_vmath::ExpF32, cpu_vmath::LogisticF32,
                                             cpu_vmath::RsqrtF32, cpu_vmath::ExpF32};
  const vmath::F32Kernel kernel = vector ? vector_kernels[op] : scalar_kernels[op];
  const std::vector<float> xs = Inputs(op);
  std::vector<float> out(kElements);
  double total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const double t0 = Now();
    kernel(xs.data(), out.data(), kElements);
    total += Now() - t0;
    ++runs;
    benchmark::DoNotOptimize(out.data());
  }
  ReportRates(state, runs ? total / runs : 0);
}
BENCHMARK(BM_KernelF32)
    ->ArgNames({"op", "vector"})
    ->ArgsProduct({{kExp, kLogistic, kRsqrt, kMaskedExp}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The op through the interpreter (a prepared one-op program), as a model runs it.
void BM_OpF32(benchmark::State& state) {
  const int op = static_cast<int>(state.range(0));
  state.SetLabel(kOpNames[op]);
  auto module = std::make_shared<tlaloc::Module>("bench");
  tlaloc::FunctionBuilder fb(module.get(), "main");
  tlaloc::Tensor x = fb.AddArg(TensorType(ElementType::kF32, {kElements}));
  tlaloc::Tensor y = op == kLogistic ? tlaloc::Logistic(x)
                     : op == kRsqrt  ? tlaloc::Rsqrt(x)
                                     : tlaloc::Exp(x);
  const tlaloc::Status built = fb.Return({y});
  if (!built.ok()) {
    state.SkipWithError(built.ToString().c_str());
    return;
  }
  auto exe = tlaloc::Executable::Prepare(module, "main");
  if (!exe.ok()) {
    state.SkipWithError(exe.status().ToString().c_str());
    return;
  }
  std::vector<Literal> args = {Literal::FromVector<float>({kElements}, Inputs(op))};
  double total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const double t0 = Now();
    auto out = (*exe)->Execute(args);
    total += Now() - t0;
    ++runs;
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front().data());
  }
  ReportRates(state, runs ? total / runs : 0);
}
BENCHMARK(BM_OpF32)
    ->ArgName("op")
    ->DenseRange(kExp, kMaskedExp)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
