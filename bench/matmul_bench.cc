// Kernels that dominate Qwen3-0.6B on the interpreter, run as one-op (or one-layer) programs so
// the figures include the interpreter's own cost: matrix products at the model's shapes (decode
// M=1 and prefill M=512, f32 and bf16), attention over a growing KV cache, and an elementwise
// chain (SiLU(gate) * up), and the interpreter's fixed cost per op; decode's matrix-vector
// products also with weights cycled through enough copies to come from memory; the small-M bf16
// kernel of batched decode called directly, its tilings side by side. Each reports GFLOP/s
// or GB/s and its fraction of this machine's peak, measured in the same binary: a STREAM-like read
// bandwidth and an FMA peak, over the interpreter's thread pool (TLALOC_NUM_THREADS threads).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/matmul_small_m.h"
#include "cpu/ragged_dot_grouped.h"
#include "cpu/reduction_matmul.h"
#include "cpu/reduction_matmul_q8.h"
#include "cpu/reduction_matmul_q8_packed.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/machine_probe.h"
#include "tlaloc/support/memory_bandwidth.h"
#include "tlaloc/support/thread_pool.h"

namespace {

using tlaloc::ElementType;
using tlaloc::Literal;
using tlaloc::TensorType;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// ---- Machine peaks ----------------------------------------------------------------------------

TLALOC_AVX512_CORE_TARGET double FmaLoop(int64_t iters) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  // Unrolled so the twelve chains live in registers (a rolled loop keeps them in memory and
  // measures store-forwarding latency instead).
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (auto& a : acc) a = _mm512_fmadd_ps(a, m, c);
  float out[16];
  __m512 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
  _mm512_storeu_ps(out, s);
  return out[0];
}

// Peak f32 FLOP/s: independent AVX-512 FMA chains on every pool thread (0 without AVX-512).
double MeasurePeakFlops() {
  if (!tlaloc::HasAvx512Core()) return 0;
  tlaloc::ThreadPool& pool = tlaloc::DefaultThreadPool();
  const int64_t iters = 20'000'000;
  std::atomic<double> sink{0};
  double t0 = Now();
  pool.ParallelFor(pool.size(), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sink = sink + FmaLoop(iters);
  });
  double secs = Now() - t0;
  benchmark::DoNotOptimize(sink.load());
  return pool.size() * iters * 12.0 * 16 * 2 / secs;
}

double PeakBandwidth() {
  static const double bw = tlaloc::MeasureReadBandwidth(tlaloc::DefaultThreadPool());
  return bw;
}
double PeakFlops() {
  static const double f = MeasurePeakFlops();
  return f;
}

void BM_PeakReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(PeakBandwidth());
  state.counters["GB/s"] = PeakBandwidth() / 1e9;
}
BENCHMARK(BM_PeakReadBandwidth)->Iterations(1);

void BM_PeakFmaFlops(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(PeakFlops());
  state.counters["GFLOP/s"] = PeakFlops() / 1e9;
}
BENCHMARK(BM_PeakFmaFlops)->Iterations(1);

// ---- Programs ---------------------------------------------------------------------------------

Literal RandomLiteral(const TensorType& type, uint64_t seed) {
  Literal f32(TensorType(ElementType::kF32, type.dims));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : f32.span<float>()) v = dist(rng);
  if (type.element_type == ElementType::kF32) return f32;
  if (type.element_type != ElementType::kBF16) return Literal(type);  // zeros; the caller fills
  Literal out(type);
  auto src = f32.span<float>();
  auto dst = out.span<uint16_t>();  // bf16 bits, truncated: values only need to be finite
  for (size_t i = 0; i < src.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    dst[i] = static_cast<uint16_t>(u >> 16);
  }
  return out;
}

struct Program {
  std::shared_ptr<tlaloc::Module> module;
  std::unique_ptr<tlaloc::Executable> exe;
  std::vector<Literal> args;
};

template <typename BuildFn>
Program MakeProgram(const std::vector<TensorType>& arg_types, BuildFn build, bool fuse = true) {
  Program p;
  p.module = std::make_shared<tlaloc::Module>("bench");
  tlaloc::FunctionBuilder fb(p.module.get(), "main");
  std::vector<tlaloc::Tensor> args;
  for (const auto& t : arg_types) args.push_back(fb.AddArg(t));
  if (!fb.Return({build(args)}).ok()) return p;
  tlaloc::InterpreterOptions options;
  options.fuse = fuse;
  auto exe = tlaloc::Executable::Prepare(p.module, "main", options);
  if (exe.ok()) p.exe = std::move(*exe);
  for (size_t i = 0; i < arg_types.size(); ++i) p.args.push_back(RandomLiteral(arg_types[i], i));
  return p;
}

// Runs the program once per iteration; returns seconds per run.
double RunProgram(benchmark::State& state, const Program& p) {
  if (!p.exe) {
    state.SkipWithError("program failed to build or prepare");
    return 0;
  }
  double total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    double t0 = Now();
    auto out = p.exe->Execute(p.args);
    total += Now() - t0;
    ++runs;
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return 0;
    }
    benchmark::DoNotOptimize(out->front().data());
  }
  return runs ? total / runs : 0;
}

void ReportRates(benchmark::State& state, double secs, double flops, double bytes) {
  if (secs <= 0) return;
  state.counters["GFLOP/s"] = flops / secs / 1e9;
  state.counters["GB/s"] = bytes / secs / 1e9;
  if (PeakFlops() > 0) state.counters["of_peak_flops"] = flops / secs / PeakFlops();
  state.counters["of_peak_bw"] = bytes / secs / PeakBandwidth();
}

// x [M, K] . W [N, K] over K, as nn::Linear emits it; args: M, K, N, dtype (0 f32, 1 bf16).
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const ElementType et = state.range(3) ? ElementType::kBF16 : ElementType::kF32;
  Program p =
      MakeProgram({TensorType(et, {m, k}), TensorType(et, {n, k})},
                  [](std::vector<tlaloc::Tensor>& a) { return tlaloc::nn::Linear(a[0], a[1]); });
  double secs = RunProgram(state, p);
  const double elem = et == ElementType::kF32 ? 4 : 2;
  ReportRates(state, secs, 2.0 * m * k * n, elem * (m * k + n * k + m * n));
}
// The LM head's products in a training step's loss chunk (train::LmHeadCrossEntropy): the
// forward logits h [R, H] . W [V, H] over H, and the backward ones from dlogits [R, V]: the
// weight gradient dlogits^T h (contracting the rows) and the input gradient dlogits W
// (contracting the vocabulary). Args: R, H, V, which (0 logits, 1 weight grad, 2 input grad).
void BM_LmHeadProducts(benchmark::State& state) {
  const int64_t r = state.range(0), h = state.range(1), v = state.range(2);
  const int which = static_cast<int>(state.range(3));
  const ElementType f32 = ElementType::kF32;
  Program p;
  if (which == 0)
    p = MakeProgram({TensorType(f32, {r, h}), TensorType(f32, {v, h})},
                    [](std::vector<tlaloc::Tensor>& a) { return tlaloc::nn::Linear(a[0], a[1]); });
  else if (which == 1)
    p = MakeProgram({TensorType(f32, {r, v}), TensorType(f32, {r, h})},
                    [](std::vector<tlaloc::Tensor>& a) {
                      return tlaloc::DotGeneral(a[0], a[1], {}, {}, {0}, {0});
                    });
  else
    p = MakeProgram({TensorType(f32, {r, v}), TensorType(f32, {v, h})},
                    [](std::vector<tlaloc::Tensor>& a) {
                      return tlaloc::DotGeneral(a[0], a[1], {}, {}, {1}, {0});
                    });
  double secs = RunProgram(state, p);
  ReportRates(state, secs, 2.0 * r * h * v, 4.0 * (r * h + v * h + r * v));
}
BENCHMARK(BM_LmHeadProducts)
    ->ArgNames({"R", "H", "V", "which"})
    ->ArgsProduct({{256}, {64}, {151936}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The loss chunk's row work on [R, V] logits (train::CrossEntropy's forward): the row maximum
// subtracted, then the log of the row sum of exponentials; fused (fusion_xent.cc) or op by op.
void BM_LossChunkRows(benchmark::State& state) {
  const int64_t r = state.range(0), v = state.range(1);
  Program p = MakeProgram(
      {TensorType(ElementType::kF32, {r, v})},
      [](std::vector<tlaloc::Tensor>& a) {
        tlaloc::Tensor shifted = a[0] - tlaloc::ReduceMax(a[0], {1}, true);
        return tlaloc::Log(tlaloc::Sum(tlaloc::Exp(shifted), {1}));
      },
      state.range(2) != 0);
  double secs = RunProgram(state, p);
  ReportRates(state, secs, 0, 4.0 * r * v);
}
BENCHMARK(BM_LossChunkRows)
    ->ArgNames({"R", "V", "fused"})
    ->ArgsProduct({{256}, {151936}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Qwen3-0.6B: hidden 1024, q 2048, kv 1024, MLP 3072, vocabulary 151936.
#define LINEAR_SHAPES(M, DT)      \
  Args({M, 1024, 2048, DT})       \
      ->Args({M, 1024, 3072, DT}) \
      ->Args({M, 3072, 1024, DT}) \
      ->Args({M, 1024, 151936, DT})
BENCHMARK(BM_Linear)
    ->ArgNames({"M", "K", "N", "bf16"})
    ->LINEAR_SHAPES(1, 0)
    ->LINEAR_SHAPES(1, 1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Linear)
    ->ArgNames({"M", "K", "N", "bf16"})
    ->Args({512, 1024, 2048, 0})
    ->Args({512, 1024, 3072, 0})
    ->Args({512, 3072, 1024, 0})
    ->Args({512, 1024, 2048, 1})
    ->Args({512, 1024, 3072, 1})
    ->Args({512, 3072, 1024, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Decode's matrix-vector products as a decode step meets them: x [1, K] . W [N, K] with W read
// from memory, not from the caches. BM_Linear repeats one W, which fits in L3 below the LM
// head; here each iteration takes the next of enough distinct copies of W to fill 512 MiB (the
// weights of one decode step are 1.2 GB in bf16). The read bandwidth is measured again right
// after each case (best of five passes), so `of_probe`, the best run's rate over the probe's, is
// a share of the bandwidth seen at that moment (the machine's load drifts); args: K, N, dtype
// (0 f32, 1 bf16).
void BM_LinearColdWeights(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1);
  const ElementType et = state.range(2) ? ElementType::kBF16 : ElementType::kF32;
  Program p =
      MakeProgram({TensorType(et, {1, k}), TensorType(et, {n, k})},
                  [](std::vector<tlaloc::Tensor>& a) { return tlaloc::nn::Linear(a[0], a[1]); });
  if (!p.exe) {
    state.SkipWithError("program failed to build or prepare");
    return;
  }
  const int64_t elem = et == ElementType::kF32 ? 4 : 2, weight_bytes = elem * n * k;
  const int64_t copies = std::max<int64_t>(1, (int64_t{512} << 20) / weight_bytes);
  std::vector<Literal> weights{p.args[1]};
  for (int64_t c = 1; c < copies; ++c) {
    Literal w(p.args[1].type());
    std::memcpy(w.data(), p.args[1].data(), static_cast<size_t>(weight_bytes));
    weights.push_back(std::move(w));
  }
  double total = 0, best = 1e30;
  int64_t runs = 0;
  for (auto _ : state) {
    const double t0 = Now();
    auto out = p.exe->Execute({p.args[0], weights[runs % copies]});
    const double secs = Now() - t0;
    total += secs;
    best = std::min(best, secs);
    ++runs;
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front().data());
  }
  if (runs == 0) return;
  const double probe =
      tlaloc::MeasureReadBandwidth(tlaloc::DefaultThreadPool(), int64_t{256} << 20);
  // Best run against the probe's best pass: both as close as the load lets them come to an
  // idle machine. GB/s is the mean run's rate, as elsewhere.
  state.counters["GB/s"] = weight_bytes / (total / runs) / 1e9;
  state.counters["best_GB/s"] = weight_bytes / best / 1e9;
  state.counters["probe_GB/s"] = probe / 1e9;
  state.counters["of_probe"] = weight_bytes / best / probe;
}
BENCHMARK(BM_LinearColdWeights)
    ->ArgNames({"K", "N", "bf16"})
    ->ArgsProduct({{1024}, {1024, 2048, 3072, 151936}, {0, 1}})
    ->Args({3072, 1024, 0})
    ->Args({3072, 1024, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// x [M, K] f32 times an int8 W [N, K] with f16 scales per 32 inputs, as nn::Linear emits it for
// an int8 checkpoint (the interpreter's fused int8 kernel); args: M, K, N. Compare with BM_Linear
// at the same shape in bf16 (the ratio of their times is the int8 decode speed-up per matrix).
void BM_LinearInt8(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Program p =
      MakeProgram({TensorType(ElementType::kF32, {m, k}), TensorType(ElementType::kS8, {n, k}),
                   TensorType(ElementType::kF16, {n, k / 32})},
                  [](std::vector<tlaloc::Tensor>& a) {
                    return tlaloc::nn::Linear(a[0], a[1], nullptr, "", a[2]);
                  });
  std::mt19937 rng(3);
  p.args[1] = Literal(TensorType(ElementType::kS8, {n, k}));
  for (int8_t& v : p.args[1].span<int8_t>()) v = static_cast<int8_t>(rng() % 255 - 127);
  p.args[2] = Literal(TensorType(ElementType::kF16, {n, k / 32}));
  for (uint16_t& v : p.args[2].span<uint16_t>()) v = 0x2000;  // 2^-7
  double secs = RunProgram(state, p);
  ReportRates(state, secs, 2.0 * m * k * n, 4.0 * m * k + n * k + 2.0 * n * k / 32 + 4.0 * m * n);
}
BENCHMARK(BM_LinearInt8)
    ->ArgNames({"M", "K", "N"})
    ->Args({1, 1024, 2048})
    ->Args({1, 1024, 3072})
    ->Args({1, 3072, 1024})
    ->Args({1, 1024, 151936})
    ->Args({512, 1024, 3072})
    ->Args({8, 1024, 3072})
    ->Args({64, 1024, 3072})
    ->Args({8, 1024, 151936})
    ->Args({64, 1024, 151936})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The int8 kernels called directly (no interpreter around them), so that the modes and the
// q8_0 mode's two kernels can be compared at one shape: x [M, K] f32 times an int8 W [N, K]
// (f16 scales per 32), args M, K, N and kernel: 0 the exact kernel (cpu::Int8Matmul: in-register
// dequantisation for M <= 4, dequantise + sgemm above), 1 q8_0 row stream (VNNI, activations
// rounded per 32-block), 2 q8_0 in block order on w in place (Q8Kernel::kInOrder: row kernel up
// to two rows, tiles packed per call above), 3 q8_0 as Int8MatmulQ8_0 chooses, 4 q8_0 in block
// order on w repacked once before the timing (Int8MatmulQ8_0Packed: what the tlaloc.int8_linear
// composite runs; same bits as 2), 5 q8_0 by the portable loop (Q8Kernel::kPortable). Without
// AVX512-VNNI, 1 to 3 run the AVX2 kernel where the CPU has AVX2 (all three the same bits as 5).
// GB/s counts the
// weight bytes (1.0625 per weight) and `of_peak_bw` is their rate over this run's read probe.
class PoolContext : public tlaloc::EvalContext {
 public:
  tlaloc::StatusOr<std::vector<Literal>> RunRegion(const tlaloc::Region&,
                                                   std::vector<Literal>) override {
    return tlaloc::InvalidArgument("no regions");
  }
  tlaloc::StatusOr<std::vector<Literal>> CallFunction(const std::string&,
                                                      std::vector<Literal>) override {
    return tlaloc::InvalidArgument("no functions");
  }
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    tlaloc::DefaultThreadPool().ParallelFor(n, grain, body);
  }
  bool CanReuseOperand(int) const override { return false; }
  const std::function<tlaloc::Status(std::span<const Literal>, std::vector<Literal>&)>*
  FindCustomCall(const std::string&) const override {
    return nullptr;
  }
};

// An int8 product's operands: activations in [-1, 1], weights in [-127, 127] with 2^-7 scales,
// the result [m, n].
struct Int8Operands {
  Int8Operands(int64_t m, int64_t k, int64_t n)
      : x(m * k), w(n * k), scales(n * k / 32, 0x2000), c(m * n) {
    std::mt19937 rng(3);
    for (float& v : x) v = static_cast<float>(rng() % 2001) / 1000.f - 1.f;
    for (int8_t& v : w) v = static_cast<int8_t>(rng() % 255 - 127);
  }
  std::vector<float> x;
  std::vector<int8_t> w;
  std::vector<uint16_t> scales;
  std::vector<float> c;
};

void BM_Int8Kernel(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int kernel = static_cast<int>(state.range(3));
  if (kernel == 4 && !tlaloc::cpu::Q8UsesVnni() && !tlaloc::HasAvx2()) {
    state.SkipWithError("neither AVX512-VNNI nor AVX2 here: no packed q8_0 weights");
    return;
  }
  if ((kernel == 1 || kernel == 2 || kernel == 3) && !tlaloc::cpu::Q8UsesVnni() &&
      !tlaloc::HasAvx2()) {
    state.SkipWithError(
        "neither AVX512-VNNI nor AVX2 here: the q8_0 kernels run the portable loop");
    return;
  }
  Int8Operands ops(m, k, n);
  auto &x = ops.x, &c = ops.c;
  auto& w = ops.w;
  auto& scales = ops.scales;
  PoolContext ctx;
  const tlaloc::cpu::Q8Kernel kernels[] = {
      tlaloc::cpu::Q8Kernel::kAuto,    tlaloc::cpu::Q8Kernel::kRowStream,
      tlaloc::cpu::Q8Kernel::kInOrder, tlaloc::cpu::Q8Kernel::kAuto,
      tlaloc::cpu::Q8Kernel::kAuto,    tlaloc::cpu::Q8Kernel::kPortable};
  std::shared_ptr<const tlaloc::cpu::Q8PackedWeights> packed;
  if (kernel == 4) packed = tlaloc::cpu::PackQ8Weights(w.data(), scales.data(), n, k, ctx);
  double total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const double t0 = Now();
    if (kernel == 4)
      tlaloc::cpu::Int8MatmulQ8_0Packed(x.data(), m, *packed, c.data(), ctx);
    else if (kernel == 0)
      tlaloc::cpu::Int8Matmul(x.data(), m, w.data(), scales.data(), n, k, c.data(), ctx);
    else
      tlaloc::cpu::Int8MatmulQ8_0(x.data(), m, w.data(), scales.data(), n, k, c.data(), ctx,
                                  kernels[kernel]);
    total += Now() - t0;
    ++runs;
    benchmark::DoNotOptimize(c.data());
  }
  if (runs == 0) return;
  const double secs = total / runs;
  state.counters["GB/s"] = n * k * (1.0 + 2.0 / 32) / secs / 1e9;
  state.counters["of_peak_bw"] = n * k * (1.0 + 2.0 / 32) / secs / PeakBandwidth();
  state.counters["GMAC/s"] = double(m) * k * n / secs / 1e9;
}
BENCHMARK(BM_Int8Kernel)
    ->ArgNames({"M", "K", "N", "kernel"})
    ->ArgsProduct({{1}, {1024}, {3072, 151936}, {0, 1, 2, 4}})
    ->ArgsProduct({{1}, {3072}, {1024}, {0, 1, 2, 4}})
    ->ArgsProduct({{2, 4}, {1024}, {3072}, {1, 2, 4}})
    ->ArgsProduct({{8, 64, 512}, {1024}, {3072}, {0, 1, 2, 4}})
    ->ArgsProduct({{8, 64}, {1024}, {151936}, {0, 1, 2, 4}})
    ->Args({1, 1024, 3072, 5})
    ->Args({1, 3072, 1024, 5})
    ->Args({512, 1024, 3072, 5})
    ->Args({512, 3072, 1024, 5})
    ->Args({512, 3072, 1024, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// Prefill's and decode's shapes again with the CPU time of the whole process (the pool's threads
// included): on a loaded machine it moves less than the wall time when comparing kernels.
BENCHMARK(BM_Int8Kernel)
    ->Name("BM_Int8KernelProcessCpu")
    ->ArgNames({"M", "K", "N", "kernel"})
    ->Args({512, 1024, 3072, 2})
    ->Args({512, 3072, 1024, 2})
    ->Args({64, 1024, 3072, 2})
    ->Args({8, 1024, 3072, 2})
    ->Args({5, 1024, 3072, 2})
    ->Args({4, 1024, 3072, 2})
    ->Args({1, 1024, 3072, 2})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

// Decode's int8 product against bf16's at the same shape, weights from memory: x [M, K] f32
// times W [N, K] int8 (f16 scales per 32) through the in-order q8_0 kernel on packed weights
// (cpu::Int8MatmulQ8_0Packed, what the default tlaloc.int8_linear program runs; `int8` with its
// default prefetch (kAll), `int8weights` with Q8PackedPrefetch::kWeights on AVX512-VNNI),
// `int8inplace` the same product read in place (Q8Kernel::kInOrder, what TLALOC_INT8_REPACK=0
// runs), against x bf16 times W bf16 through the kernels a bf16 decode step runs (ViewMatmul's
// matrix-vector kernel at M = 1, SmallMMatmul above). Each call takes the next of enough copies of
// W to fill 256 MiB, so W comes from memory, not from L3; the variants are timed in alternating
// rounds so that other work on the machine weighs on all alike, each figure the median over rounds.
// `*_GB/s` counts the weight bytes read (int8: 1.0625 a weight with the scales; bf16: 2),
// `*_of_probe` is that over the read bandwidth probed right after (best of five passes),
// `int8_speedup` the median of the rounds' bf16 time / int8 time (both at the probe's rate: 2
// / 1.0625 = 1.88), `int8/int8weights` the median of the rounds' int8weights time / int8 time
// (above 1: the default prefetch, kAll, beats kWeights, the default before stop 36). Args: M, K, N.
void BM_Int8DecodeCold(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool vnni = tlaloc::cpu::Q8UsesVnni();
  if (!vnni && !tlaloc::HasAvx2()) {
    state.SkipWithError("neither AVX512-VNNI nor AVX2 here: the q8_0 kernel is the portable loop");
    return;
  }
  Int8Operands ops(m, k, n);
  auto &x = ops.x, &c = ops.c;
  auto& w = ops.w;
  auto& scales = ops.scales;
  PoolContext ctx;
  const double int8_bytes = n * k * (1.0 + 2.0 / 32), bf16_bytes = 2.0 * n * k;
  constexpr double kFill = 256 << 20;
  const int64_t int8_copies = std::max<int64_t>(1, static_cast<int64_t>(kFill / int8_bytes));
  const int64_t bf16_copies = std::max<int64_t>(1, static_cast<int64_t>(kFill / bf16_bytes));
  std::vector<std::shared_ptr<const tlaloc::cpu::Q8PackedWeights>> packed;
  std::vector<Int8Operands> in_place;
  for (int64_t i = 0; i < int8_copies; ++i) {
    packed.push_back(tlaloc::cpu::PackQ8Weights(w.data(), scales.data(), n, k, ctx));
    in_place.push_back(ops);
  }
  if (packed[0] == nullptr) {
    state.SkipWithError("PackQ8Weights gave no packed copy on this CPU");
    return;
  }
  Literal xb = RandomLiteral(TensorType(ElementType::kBF16, {m, k}), 1);
  std::vector<Literal> wb{RandomLiteral(TensorType(ElementType::kBF16, {n, k}), 2)};
  for (int64_t i = 1; i < bf16_copies; ++i) {
    wb.emplace_back(wb[0].type());
    std::memcpy(wb.back().data(), wb[0].data(), static_cast<size_t>(bf16_bytes));
  }
  const tlaloc::cpu::MatrixView a{reinterpret_cast<const std::byte*>(xb.data()), ElementType::kBF16,
                                  0, k, 1};
  int64_t next_int8 = 0, next_bf16 = 0;
  using Prefetch = tlaloc::cpu::Q8PackedPrefetch;
  auto int8 = [&](Prefetch prefetch) {
    return [&, prefetch] {
      tlaloc::cpu::Int8MatmulQ8_0Packed(x.data(), m, *packed[next_int8++ % int8_copies], c.data(),
                                        ctx, prefetch);
    };
  };
  auto run_in_place = [&] {
    const Int8Operands& copy = in_place[next_int8++ % int8_copies];
    tlaloc::cpu::Int8MatmulQ8_0(x.data(), m, copy.w.data(), copy.scales.data(), n, k, c.data(), ctx,
                                tlaloc::cpu::Q8Kernel::kInOrder);
  };
  auto run_bf16 = [&] {
    const tlaloc::cpu::MatrixView b{
        reinterpret_cast<const std::byte*>(wb[next_bf16++ % bf16_copies].data()),
        ElementType::kBF16, 0, 1, k};
    if (m == 1 || !tlaloc::cpu::SmallMMatmul(a, b, 1, m, k, n, c.data(), ctx))
      tlaloc::cpu::ViewMatmul(a, b, 1, m, k, n, c.data(), ctx);
  };
  constexpr int kRounds = 9;
  // Seconds per call, per round: [0] int8, [1] bf16, [2] int8inplace, [3] int8weights.
  std::vector<double> secs[4];
  auto time = [&](const auto& run, int64_t copies) {
    int64_t calls = 0;
    const double t0 = Now();
    double t = t0;
    for (; calls < copies || t - t0 < 0.1; t = Now(), ++calls) run();
    benchmark::DoNotOptimize(c.data());
    return (t - t0) / calls;
  };
  for (auto _ : state)
    for (int round = 0; round < kRounds; ++round) {
      secs[0].push_back(time(int8(Prefetch::kAuto), int8_copies));
      secs[1].push_back(time(run_bf16, bf16_copies));
      secs[2].push_back(time(run_in_place, int8_copies));
      if (vnni) secs[3].push_back(time(int8(Prefetch::kWeights), int8_copies));
    }
  const double probe =
      tlaloc::MeasureReadBandwidth(tlaloc::DefaultThreadPool(), int64_t{256} << 20);
  const double bytes[4] = {int8_bytes, bf16_bytes, int8_bytes, int8_bytes};
  const char* names[4] = {"int8", "bf16", "int8inplace", "int8weights"};
  for (int v = 0; v < (vnni ? 4 : 3); ++v) {
    const double rate = bytes[v] / Median(secs[v]);
    state.counters[std::string(names[v]) + "_GB/s"] = rate / 1e9;
    state.counters[std::string(names[v]) + "_of_probe"] = rate / probe;
  }
  std::vector<double> speedup, prefetch_gain;
  for (int i = 0; i < kRounds; ++i) {
    speedup.push_back(secs[1][i] / secs[0][i]);
    if (vnni) prefetch_gain.push_back(secs[3][i] / secs[0][i]);
  }
  state.counters["int8_speedup"] = Median(speedup);
  if (vnni) state.counters["int8/int8weights"] = Median(prefetch_gain);
  state.counters["probe_GB/s"] = probe / 1e9;
}
BENCHMARK(BM_Int8DecodeCold)
    ->ArgNames({"M", "K", "N"})
    ->ArgsProduct({{1, 4}, {1024}, {3072, 2048, 1024}})
    ->ArgsProduct({{1, 4}, {3072}, {1024}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The one-time repacking of an int8 weight [N, K] for the in-order q8_0 kernel (what the first
// product with a weight pays, then kept: cpu::CachedQ8Weights); args K, N.
void BM_Int8Pack(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1);
  if (!tlaloc::cpu::Q8UsesVnni() && !tlaloc::HasAvx2()) {
    state.SkipWithError("neither AVX512-VNNI nor AVX2 here: nothing is packed");
    return;
  }
  std::vector<int8_t> w(n * k, 3);
  std::vector<uint16_t> scales(n * k / 32, 0x2000);
  PoolContext ctx;
  for (auto _ : state) {
    auto packed = tlaloc::cpu::PackQ8Weights(w.data(), scales.data(), n, k, ctx);
    benchmark::DoNotOptimize(packed.get());
  }
  state.counters["GB/s"] = benchmark::Counter(n * k * (1.0 + 2.0 / 32) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Int8Pack)
    ->ArgNames({"K", "N"})
    ->Args({1024, 3072})
    ->Args({1024, 151936})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The small-M bf16 kernel called directly (cpu::SmallMMatmul), as a batched decode step meets
// it: x [M, K] bf16 times W [N, K] bf16 on T threads of its own pool. Its tiles unpacking the
// weight rows again for every pair of vectors (`pair`) against tiles reading them unpacked once
// into an L1 buffer (`packed`), timed in alternating rounds so that other work on the machine
// weighs on both alike; each figure is the median over rounds (`packed/pair` the median of the
// rounds' ratios), `*_of_peak` its share of the bf16 dot peak probed on T pinned threads
// (support/machine_probe.h). M = 1 is the matrix-vector kernel (ViewMatmul), for reference.
// cold = 1 cycles through copies of W filling 256 MiB, so W comes from memory as in a decode
// step, not from L3 (the LM head always does). On AVX2 CPUs (no AVX-512) `pair` is the AVX2
// tiles of 2 weight rows x 1 vector, `group` and `packed` both those of 1 row x 3 vectors, and
// `*_of_peak` is against the AVX2 FMA peak. `experts` and `onednn` time two kernels whose sums
// differ from the matrix-vector kernel's (so a batched decode step cannot take them as they are):
// the MoE experts' 4 x 6 tiles and oneDNN. Args: M, K, N, threads, cold.
class OwnPoolContext : public PoolContext {
 public:
  explicit OwnPoolContext(int threads) : pool_(threads) {}
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override {
    pool_.ParallelFor(n, grain, body);
  }

 private:
  tlaloc::ThreadPool pool_;
};

double Bf16Peak(int threads) {
  static std::map<int, double> peaks;
  auto [it, fresh] = peaks.try_emplace(threads, 0.0);
  if (fresh) it->second = tlaloc::ProbePeakFlops(threads, tlaloc::PeakKind::kBf16).median;
  return it->second;
}

// Seconds of CPU this thread has run: on a machine others load, a one-thread kernel's CPU time
// is its time had it had the core to itself (less the caches the others evict).
double ThreadCpuNow() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Chains of VDPBF16PS (the probe's), `iters` times twelve.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) float DotBf16Loop(
    int64_t iters) {
  constexpr int kChains = 12;
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 small = _mm512_set1_ps(1e-3f);
  const __m512bh x = _mm512_cvtne2ps_pbh(small, small);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, x);
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0];
}

// One core's VDPBF16PS peak over this thread's CPU time: the reference for the one-thread
// CPU-time rates.
double CoreBf16Peak() {
  static const double peak = [] {
    if (!tlaloc::HasAvx512Bf16()) return 0.0;
    constexpr int64_t kIters = 20'000'000;
    const double t0 = ThreadCpuNow();
    benchmark::DoNotOptimize(DotBf16Loop(kIters));
    return kIters * 12 * 64.0 / (ThreadCpuNow() - t0);  // 16 lanes x 2 products x 2 operations
  }();
  return peak;
}

void BM_SmallMKernel(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const bool cold = state.range(4) != 0;
  const int64_t weight_bytes = 2 * n * k;
  const int64_t copies = cold ? std::max<int64_t>(1, (int64_t{256} << 20) / weight_bytes) : 1;
  Literal x = RandomLiteral(TensorType(ElementType::kBF16, {m, k}), 1);
  std::vector<Literal> w{RandomLiteral(TensorType(ElementType::kBF16, {n, k}), 2)};
  for (int64_t i = 1; i < copies; ++i) {
    w.emplace_back(w[0].type());
    std::memcpy(w.back().data(), w[0].data(), static_cast<size_t>(weight_bytes));
  }
  std::vector<float> c(m * n);
  OwnPoolContext ctx(threads);
  tlaloc::cpu::MatrixView a{reinterpret_cast<const std::byte*>(x.data()), ElementType::kBF16, 0, k,
                            1};
  // The variants by name; M = 1 has only the matrix-vector kernel. Two kernels with other sums
  // (other bits) for comparison: "experts", the MoE expert products' 4 x 6 tiles (one
  // accumulator per result, cpu/ragged_dot_grouped.h) over blocks of 96 weight rows, and
  // "onednn", the products of more than kSmallMMaxRows rows; each only where this CPU runs it.
  using Tiles = tlaloc::cpu::SmallMTiles;
  constexpr auto kExperts = static_cast<Tiles>(100), kOneDnn = static_cast<Tiles>(101);
  std::vector<std::pair<const char*, Tiles>> variants = {
      {"pair", Tiles::kPerPair}, {"group", Tiles::kPerGroup}, {"packed", Tiles::kPacked}};
  if (m == 1) variants.resize(1);
  int64_t next = 0;
  // False where the variant does not run here.
  auto run = [&](Tiles tiles) {
    const Literal& wc = w[next++ % copies];
    tlaloc::cpu::MatrixView b{reinterpret_cast<const std::byte*>(wc.data()), ElementType::kBF16, 0,
                              1, k};
    if (tiles == kOneDnn) return tlaloc::cpu::DnnlMatmul(a, b, 1, m, k, n, c.data(), ctx);
    if (tiles == kExperts) {
      constexpr int64_t kColumns = 96;
      std::atomic<bool> ran{true};
      tlaloc::cpu::ForEachTask(ctx, (n + kColumns - 1) / kColumns, [&](int64_t t) {
        const int64_t j0 = t * kColumns;
        ran = tlaloc::cpu::Bf16RowsTimesRowsT(reinterpret_cast<const uint16_t*>(x.data()), k, m,
                                              reinterpret_cast<const uint16_t*>(wc.data()) + j0 * k,
                                              k, std::min(kColumns, n - j0), k, c.data() + j0, n) &&
              ran;
      });
      return ran.load();
    }
    if (m == 1 || !tlaloc::cpu::SmallMMatmul(a, b, 1, m, k, n, c.data(), ctx, tiles))
      tlaloc::cpu::ViewMatmul(a, b, 1, m, k, n, c.data(), ctx);
    return true;
  };
  if (m > 1)
    for (auto other : {std::pair{"experts", kExperts}, std::pair{"onednn", kOneDnn}})
      if (run(other.second)) variants.push_back(other);
  constexpr int kRounds = 7;
  const double flops = 2.0 * m * k * n;
  // Per variant, per round: the wall-clock rate, and with one thread the CPU-time rate.
  std::vector<std::vector<double>> rates(variants.size()), cpu_rates(variants.size());
  for (auto _ : state)
    for (int round = 0; round < kRounds; ++round)
      for (size_t v = 0; v < variants.size(); ++v) {
        run(variants[v].second);  // warm-up: the pool's threads, the vectors
        int64_t calls = 0;
        const double t0 = Now(), c0 = ThreadCpuNow();
        double t = t0;
        for (; calls < 2 || t - t0 < 0.1; t = Now(), ++calls) run(variants[v].second);
        rates[v].push_back(flops * calls / (t - t0));
        cpu_rates[v].push_back(flops * calls / (ThreadCpuNow() - c0));
      }
  const double peak = Bf16Peak(threads), core_peak = CoreBf16Peak();
  auto report = [&](const std::string& what, const std::vector<std::vector<double>>& r,
                    double reference) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const std::string name = std::string(variants[v].first) + what;
      state.counters[name + "_GFLOP/s"] = Median(r[v]) / 1e9;
      if (reference > 0) state.counters[name + "_of_peak"] = Median(r[v]) / reference;
      if (v > 0) {
        std::vector<double> ratio;
        for (int i = 0; i < kRounds; ++i) ratio.push_back(r[v][i] / r[0][i]);
        state.counters[name + "/pair"] = Median(ratio);
      }
    }
  };
  report("", rates, peak);
  state.counters["bf16_peak_GFLOP/s"] = peak / 1e9;
  if (threads == 1) {
    report("_cpu", cpu_rates, core_peak);
    state.counters["core_bf16_peak_GFLOP/s"] = core_peak / 1e9;
  }
}
BENCHMARK(BM_SmallMKernel)
    ->ArgNames({"M", "K", "N", "T", "cold"})
    ->ArgsProduct({{1, 4, 8, 16}, {1024}, {3072}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 4, 8, 16}, {3072}, {1024}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 4, 8, 16}, {2048}, {1024}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 4, 8, 16}, {1024}, {151936}, {1, 2}, {1}})
    ->ArgsProduct({{32, 64}, {1024, 3072}, {1024, 3072}, {1, 2}, {1}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One decode step's attention of one layer (16 query heads, 8 KV heads, head_dim 128) over a
// cache of S slots; args: S, dtype.
void BM_DecodeAttention(benchmark::State& state) {
  const int64_t s = state.range(0), d = 128;
  const ElementType et = state.range(1) ? ElementType::kBF16 : ElementType::kF32;
  Program p = MakeProgram(
      {TensorType(et, {1, 1, 16, d}), TensorType(et, {1, 8, s, d}), TensorType(et, {1, 8, s, d})},
      [s](std::vector<tlaloc::Tensor>& a) {
        tlaloc::OpBuilder& b = *a[0].builder();
        tlaloc::Tensor iota = tlaloc::Iota(b, {1, 1, s}, 2);
        tlaloc::Tensor mask = tlaloc::Ge(iota, iota);  // all slots visible
        return tlaloc::nn::GroupedAttention(a[0], a[1], a[2], mask, 0.088);
      });
  double secs = RunProgram(state, p);
  const double elem = et == ElementType::kF32 ? 4 : 2;
  ReportRates(state, secs, 2.0 * 2 * 16 * s * d, elem * 2 * 8 * s * d);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgNames({"S", "bf16"})
    ->ArgsProduct({{128, 640, 2048}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// SiLU(gate) * up over the MLP activations of M tokens (f32): three tensors of M x 3072.
void BM_SiluAndMul(benchmark::State& state) {
  const int64_t m = state.range(0), n = 3072;
  Program p = MakeProgram(
      {TensorType(ElementType::kF32, {m, n}), TensorType(ElementType::kF32, {m, n})},
      [](std::vector<tlaloc::Tensor>& a) { return tlaloc::nn::SiluAndMul(a[0], a[1]); });
  double secs = RunProgram(state, p);
  ReportRates(state, secs, 5.0 * m * n, 4.0 * 3 * m * n);
}
BENCHMARK(BM_SiluAndMul)->Arg(1)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The interpreter's fixed cost per op: a chain of 200 adds on [1, 1024] f32 (a decode step's
// activation size), reported as microseconds per op.
void BM_OpOverhead(benchmark::State& state) {
  // constexpr needs no capture: clang flags capturing a constant as unused (-Werror).
  constexpr int kOps = 200;
  Program p =
      MakeProgram({TensorType(ElementType::kF32, {1, 1024})}, [](std::vector<tlaloc::Tensor>& a) {
        tlaloc::Tensor x = a[0];
        for (int i = 0; i < kOps; ++i) x = x + a[0];
        return x;
      });
  double secs = RunProgram(state, p);
  state.counters["us_per_op"] = secs / kOps * 1e6;
}
BENCHMARK(BM_OpOverhead)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
