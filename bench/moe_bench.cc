// Mixture-of-experts timings on the interpreter (docs/performance.md records the figures):
//
//   BM_RouterTopK/method  the router's top-k over 2,048 rows x 128 experts, k = 8 (Qwen3-30B-A3B):
//                         0 = chlo.top_k, 1 = k passes of argmax-and-mask, 2 = full stable sort
//   BM_MoeForm/form/tokens  one MoE block of Qwen3-30B-A3B's widths (hidden 2048, 128 experts of
//                         768, top 8) in f32 on `tokens` rows, for each expert form: 1 =
//                         ragged_dot, 2 = one-hot permute, 3 = pair gather, 4 = dense-masked
//                         (the last only at small sizes: it runs all 128 experts). The crossover
//                         of the forms by pair count (tokens x 8) sets nn::MoeFormForPairs.
//   BM_DenseMlp/tokens    a dense SwiGLU of the same active width (8 x 768 = 6,144), the cost
//                         an MoE layer should approach.
//   BM_GroupedBf16/rows, BM_GroupedF32/rows  one thread's grouped tile kernel (bf16, f32) on
//                         one expert's gate projection (rows x 2048 times 768 x 2048): GFLOP/s
//                         against the core's peak.
//   BM_MoeFormBf16, BM_DenseMlpBf16  the same in bf16 (weights, activations; f32 accumulation),
//                         the models' usual dtype.
//   BM_MoeInt8/form/tokens  the ragged_dot block on int8 experts (s8, f16 scales per 32-block:
//                         the tlaloc.ragged_int8_linear composite) in f32, form 0 = exact,
//                         1 = q8_0 (TLALOC_INT8_REPACK=0: the experts read in place, not
//                         packed).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "bench_util.h"
#include "cpu/ragged_dot_grouped.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/moe.h"
#include "tlaloc/support/half.h"

namespace {

using tlaloc::ElementType;
using tlaloc::Literal;
using tlaloc::Tensor;
using tlaloc::TensorType;

constexpr int64_t kHidden = 2048, kExperts = 128, kWidth = 768, kTopK = 8;

Literal Random(std::vector<int64_t> dims, uint32_t seed, float scale) {
  Literal l(TensorType(ElementType::kF32, dims));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (float& x : l.span<float>()) x = d(rng);
  return l;
}

// Prepares main(args) = body(args) and times Execute; reports ms per run.
template <typename Body>
void TimeProgram(benchmark::State& state, const std::vector<TensorType>& types,
                 std::vector<Literal> args, Body body) {
  auto module = std::make_shared<tlaloc::Module>("bench");
  tlaloc::FunctionBuilder fb(module.get(), "main");
  std::vector<Tensor> ins;
  for (const auto& t : types) ins.push_back(fb.AddArg(t));
  const tlaloc::Status built = fb.Return(body(ins));
  if (!built.ok()) {
    state.SkipWithError(built.ToString().c_str());
    return;
  }
  auto exe = tlaloc::Executable::Prepare(module, "main");
  if (!exe.ok()) {
    state.SkipWithError(exe.status().ToString().c_str());
    return;
  }
  tlaloc::bench::TimeExecutions(state, **exe, args);
}

void BM_RouterTopK(benchmark::State& state) {
  const auto method = static_cast<tlaloc::nn::TopKMethod>(state.range(0));
  const int64_t rows = 2048;
  state.SetLabel(method == tlaloc::nn::TopKMethod::kMaxMask    ? "max_and_mask"
                 : method == tlaloc::nn::TopKMethod::kChloTopK ? "chlo.top_k"
                                                               : "full_sort");
  TimeProgram(state, {TensorType(ElementType::kF32, {rows, kExperts})},
              {Random({rows, kExperts}, 1, 1.0f)}, [&](const std::vector<Tensor>& a) {
                auto r = tlaloc::nn::RouteTopK(a[0], kTopK, true, method);
                return std::vector<Tensor>{r.weights, r.experts};
              });
}
BENCHMARK(BM_RouterTopK)
    ->ArgName("method")
    ->DenseRange(0, 2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The MoE weights are shared by every run of every form (1.2 GB in f32 would not fit twice),
// in f32 and, for the bf16 benchmarks, the same values rounded to bf16.
const std::vector<Literal>& MoeWeights(ElementType et) {
  static const std::vector<Literal> w = {
      Random({kExperts, kHidden}, 2, 0.02f), Random({kExperts, kWidth, kHidden}, 3, 0.02f),
      Random({kExperts, kWidth, kHidden}, 4, 0.02f), Random({kExperts, kHidden, kWidth}, 5, 0.02f)};
  if (et == ElementType::kF32) return w;
  static const std::vector<Literal> bf16 = [] {
    std::vector<Literal> out;
    for (const Literal& l : w) out.push_back(tlaloc::ConvertElementType(l, ElementType::kBF16));
    return out;
  }();
  return bf16;
}

Literal OfType(Literal f32, ElementType et) {
  return et == ElementType::kF32 ? f32 : tlaloc::ConvertElementType(f32, et);
}

void MoeForm(benchmark::State& state, ElementType et) {
  const auto form = static_cast<tlaloc::nn::MoeForm>(state.range(0));
  const int64_t tokens = state.range(1);
  state.SetLabel(std::string(tlaloc::nn::MoeFormName(form)) +
                 " pairs=" + std::to_string(tokens * kTopK));
  std::vector<Literal> args{OfType(Random({tokens, kHidden}, 6, 1.0f), et)};
  for (const Literal& w : MoeWeights(et)) args.push_back(w);
  std::vector<TensorType> types;
  for (const Literal& a : args) types.push_back(a.type());
  TimeProgram(state, types, std::move(args), [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{
        tlaloc::nn::SparseMoe(a[0], {a[1], a[2], a[3], a[4]}, kTopK, true, form)};
  });
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
void BM_MoeForm(benchmark::State& state) { MoeForm(state, ElementType::kF32); }
void BM_MoeFormBf16(benchmark::State& state) { MoeForm(state, ElementType::kBF16); }
void MoeFormArgs(benchmark::internal::Benchmark* b) {
  for (int form = 1; form <= 2; ++form)
    for (int tokens : {1, 4, 16, 64, 128, 256, 1024}) b->Args({form, tokens});
  // The pair gather copies each pair's expert weights (151 MB per token here), the dense-masked
  // form runs all 128 experts: both only where they are not hopeless.
  for (int tokens : {1, 4}) b->Args({3, tokens});
  for (int tokens : {1, 16}) b->Args({4, tokens});
}
BENCHMARK(BM_MoeForm)->Apply(MoeFormArgs)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MoeFormBf16)->Apply(MoeFormArgs)->UseRealTime()->Unit(benchmark::kMillisecond);

void DenseMlp(benchmark::State& state, ElementType et) {
  const int64_t tokens = state.range(0), width = kWidth * kTopK;
  std::vector<Literal> args{OfType(Random({tokens, kHidden}, 6, 1.0f), et),
                            OfType(Random({width, kHidden}, 7, 0.02f), et),
                            OfType(Random({width, kHidden}, 8, 0.02f), et),
                            OfType(Random({kHidden, width}, 9, 0.02f), et)};
  std::vector<TensorType> types;
  for (const Literal& a : args) types.push_back(a.type());
  TimeProgram(state, types, std::move(args), [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{tlaloc::nn::SwiGluMlp(a[0], a[1], a[2], a[3])};
  });
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
void BM_DenseMlp(benchmark::State& state) { DenseMlp(state, ElementType::kF32); }
void BM_DenseMlpBf16(benchmark::State& state) { DenseMlp(state, ElementType::kBF16); }
// One thread's tile kernel on one expert's gate projection, rows x 2048 times 768 x 2048; each
// run takes the next of the 128 experts' weights, so they come from memory as in a layer.
template <typename T, typename Kernel>
void GroupedKernel(benchmark::State& state, T one, T small, Kernel kernel) {
  const int64_t rows = state.range(0), size = kWidth * kHidden;
  std::vector<T> a(rows * kHidden, one), w(kExperts * size, small);
  std::vector<float> c(rows * kWidth);
  if (!kernel(a.data(), kHidden, rows, w.data(), kHidden, kWidth, kHidden, c.data(), kWidth)) {
    state.SkipWithError("this CPU lacks the kernel's instructions");
    return;
  }
  int64_t expert = 0;
  for (auto _ : state) {
    kernel(a.data(), kHidden, rows, w.data() + expert * size, kHidden, kWidth, kHidden, c.data(),
           kWidth);
    expert = (expert + 1) % kExperts;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * kWidth * kHidden,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
void BM_GroupedBf16(benchmark::State& state) {
  GroupedKernel<uint16_t>(state, 0x3f80, 0x3c00, tlaloc::cpu::Bf16RowsTimesRowsT);  // 1, 1/128
}
void BM_GroupedF32(benchmark::State& state) {
  GroupedKernel<float>(state, 1.0f, 1.0f / 128, tlaloc::cpu::F32RowsTimesRowsT);
}
BENCHMARK(BM_GroupedBf16)->ArgName("rows")->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64);
BENCHMARK(BM_GroupedF32)->ArgName("rows")->Arg(1)->Arg(4)->Arg(16)->Arg(32);

// The experts as s8 stacks with f16 scales per 32-block (quantised from the f32 weights as
// `tlaloc quantize` does: scale = amax / 127, values rounded), shared by every run.
const std::vector<Literal>& MoeInt8Weights() {
  static const std::vector<Literal> w = [] {
    const std::vector<Literal>& f = MoeWeights(ElementType::kF32);
    std::vector<Literal> out{f[0]};
    std::vector<Literal> scales;
    for (int i = 1; i <= 3; ++i) {
      const auto& dims = f[i].dims();
      Literal q(TensorType(ElementType::kS8, dims));
      Literal s(TensorType(ElementType::kF16, {dims[0], dims[1], dims[2] / 32}));
      const auto x = f[i].span<float>();
      auto qs = q.span<int8_t>();
      auto ss = s.span<uint16_t>();
      for (size_t b = 0; b < ss.size(); ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const float d = amax / 127;
        ss[b] = tlaloc::FloatToHalfBits(d);
        for (int j = 0; j < 32; ++j)
          qs[b * 32 + j] = static_cast<int8_t>(d == 0 ? 0 : std::lround(x[b * 32 + j] / d));
      }
      out.push_back(std::move(q));
      scales.push_back(std::move(s));
    }
    for (Literal& s : scales) out.push_back(std::move(s));
    return out;
  }();
  return w;
}

void BM_MoeInt8(benchmark::State& state) {
  const auto form =
      state.range(0) == 0 ? tlaloc::nn::Int8Form::kExact : tlaloc::nn::Int8Form::kQ8_0;
  const int64_t tokens = state.range(1);
  state.SetLabel(std::string(tlaloc::nn::Int8FormName(form)) +
                 " pairs=" + std::to_string(tokens * kTopK));
  std::vector<Literal> args{Random({tokens, kHidden}, 6, 1.0f)};
  for (const Literal& w : MoeInt8Weights()) args.push_back(w);
  std::vector<TensorType> types;
  for (const Literal& a : args) types.push_back(a.type());
  tlaloc::nn::SetInt8Form(form);
  TimeProgram(state, types, std::move(args), [&](const std::vector<Tensor>& a) {
    tlaloc::nn::MoeWeights w{a[1], a[2], a[3], a[4]};
    w.gate_scale = a[5];
    w.up_scale = a[6];
    w.down_scale = a[7];
    return std::vector<Tensor>{
        tlaloc::nn::SparseMoe(a[0], w, kTopK, true, tlaloc::nn::MoeForm::kRaggedDot)};
  });
  tlaloc::nn::SetInt8Form(std::nullopt);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MoeInt8)
    ->ArgsProduct({{0, 1}, {1, 64, 512}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_DenseMlp)
    ->ArgName("tokens")
    ->Arg(1)
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseMlpBf16)
    ->ArgName("tokens")
    ->Arg(1)
    ->Arg(16)
    ->Arg(256)
    ->Arg(1024)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
