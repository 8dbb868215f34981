// The sampling step of a decode program on the interpreter (nn::SampleRows), at Qwen3's 151,936
// ids and Qwen3.5's 248,320, with 8 rows of which one samples (temperature 0.7, top-p 0.9):
//
//   BM_SampleStep/vocab/selection  selection 0 = chlo.top_k of the 4,096 candidates (what the
//                                  step programs do; on the sampled rows only, gathered),
//                                  1 = a stable sort of each such row, then the first 4,096
//                                  (what they did before)
//   BM_GreedyStep/vocab            the same 8 rows all greedy (the candidate selection is skipped)
//
// docs/SERVING.md records the ratios. Run it short on a shared machine, e.g.
//   build/bench/sampling_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "bench_util.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/sampling.h"

namespace {

using tlaloc::ElementType;
using tlaloc::Literal;
using tlaloc::Tensor;
using tlaloc::TensorType;

constexpr int64_t kRows = 8;

void TimeSampling(benchmark::State& state, int64_t vocab, bool one_sampled,
                  tlaloc::nn::CandidateSelection selection) {
  auto module = std::make_shared<tlaloc::Module>("bench");
  tlaloc::FunctionBuilder fb(module.get(), "main");
  Tensor logits = fb.AddArg(TensorType(ElementType::kF32, {kRows, vocab}));
  tlaloc::nn::RowSamplingInputs in;
  in.temperature = fb.AddArg(TensorType(ElementType::kF32, {kRows}));
  in.top_k = fb.AddArg(TensorType(ElementType::kS32, {kRows}));
  in.top_p = fb.AddArg(TensorType(ElementType::kF32, {kRows}));
  in.keys = fb.AddArg(TensorType(ElementType::kU32, {kRows, 2}));
  in.steps = fb.AddArg(TensorType(ElementType::kU32, {kRows}));
  const tlaloc::Status built =
      fb.Return({tlaloc::nn::SampleRows(logits, in, tlaloc::nn::kDefaultMaxCandidates, selection)});
  if (!built.ok()) {
    state.SkipWithError(built.ToString().c_str());
    return;
  }
  auto exe = tlaloc::Executable::Prepare(module, "main");
  if (!exe.ok()) {
    state.SkipWithError(exe.status().ToString().c_str());
    return;
  }
  Literal values(TensorType(ElementType::kF32, {kRows, vocab}));
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& x : values.span<float>()) x = d(rng);
  std::vector<float> temperature(kRows, 0.f), top_p(kRows, 1.f);
  if (one_sampled) temperature[3] = 0.7f, top_p[3] = 0.9f;
  std::vector<Literal> args{values,
                            Literal::FromVector<float>({kRows}, temperature),
                            Literal::FromVector<int32_t>({kRows}, std::vector<int32_t>(kRows, 0)),
                            Literal::FromVector<float>({kRows}, top_p),
                            Literal::FromVector<uint32_t>({kRows, 2}, std::vector<uint32_t>(16, 7)),
                            Literal::FromVector<uint32_t>({kRows}, std::vector<uint32_t>(8, 1))};
  tlaloc::bench::TimeExecutions(state, **exe, args);
}

void BM_SampleStep(benchmark::State& state) {
  const auto selection = static_cast<tlaloc::nn::CandidateSelection>(state.range(1));
  state.SetLabel(selection == tlaloc::nn::CandidateSelection::kTopK ? "chlo.top_k 4096"
                                                                    : "full sort");
  TimeSampling(state, state.range(0), true, selection);
}
BENCHMARK(BM_SampleStep)
    ->ArgsProduct({{151936, 248320}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_GreedyStep(benchmark::State& state) {
  TimeSampling(state, state.range(0), false, tlaloc::nn::CandidateSelection::kTopK);
}
BENCHMARK(BM_GreedyStep)->Arg(151936)->Arg(248320)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
