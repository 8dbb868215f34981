// `tlaloc example`: builds a small causal self-attention program with the builder API (inputs
// drawn with the threefry PRNG inside the program), prints it as StableHLO and runs it on the
// interpreter.
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "tlaloc/builder/random.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::cli {

namespace {

struct ExampleOptions {
  uint64_t seed = 0;
  int64_t tokens = 4;
  int64_t head_dim = 8;
  bool quiet = false;
};

// attention(x) over `tokens` positions: q = k = v projections of random x, causal mask.
Status BuildExample(Module& module, const ExampleOptions& o) {
  FunctionBuilder fb(&module, "main",
                     {Type(TensorType(ElementType::kF32, {o.head_dim, o.head_dim}))});
  OpBuilder& b = fb.ops();
  Tensor w = fb.arg(0);
  Tensor keys = SplitKey(PrngKey(b, o.seed), 2);
  Tensor x = Normal(SplitKeyAt(keys, 0), {o.tokens, o.head_dim});
  Tensor q = Matmul(x, w), k = Matmul(x, Transpose(w, {1, 0})), v = x;
  Tensor scores = Einsum("qd,kd->qk", q, k) * (1.0 / std::sqrt(static_cast<double>(o.head_dim)));
  Tensor row = Iota(b, {o.tokens, o.tokens}, 0), col = Iota(b, {o.tokens, o.tokens}, 1);
  Tensor masked = Where(Ge(row, col), scores, FullLike(scores, -INFINITY));
  Tensor probs = Softmax(masked, -1);
  Tensor out = Matmul(probs, v);
  return fb.Return({out, Argmax(probs, -1)});
}

int RunExample(const ExampleOptions& o) {
  auto module = std::make_shared<Module>("tlaloc_example");
  Status s = BuildExample(*module, o);
  if (!s.ok()) {
    std::fprintf(stderr, "tlaloc example: building the program failed: %s\n", s.ToString().c_str());
    return 1;
  }
  if (!o.quiet) std::printf("%s\n", PrintModule(*module).c_str());
  auto exe = Executable::Prepare(module, "main");
  if (!exe.ok()) {
    std::fprintf(stderr, "tlaloc example: %s\n", exe.status().ToString().c_str());
    return 1;
  }
  // The weight: identity plus a small ramp, so attention is not uniform.
  Literal w(TensorType(ElementType::kF32, {o.head_dim, o.head_dim}));
  for (int64_t i = 0; i < o.head_dim; ++i)
    for (int64_t j = 0; j < o.head_dim; ++j)
      w.span<float>()[i * o.head_dim + j] =
          (i == j ? 1.0f : 0.0f) + 0.05f * static_cast<float>(j - i);
  ExecutionStats stats;
  auto out = (*exe)->Execute({std::move(w)}, &stats);
  if (!out.ok()) {
    std::fprintf(stderr, "tlaloc example: %s\n", out.status().ToString().c_str());
    return 1;
  }
  std::printf("attention output: %s\n", (*out)[0].ToString(16).c_str());
  std::printf("most attended position per query: %s\n", (*out)[1].ToString().c_str());
  std::printf("ops executed: %lld, peak live bytes: %lld\n",
              static_cast<long long>(stats.ops_executed),
              static_cast<long long>(stats.peak_live_bytes));
  return 0;
}

}  // namespace

void RegisterExampleCommand(CLI::App& app) {
  auto opts = std::make_shared<ExampleOptions>();
  auto* cmd = app.add_subcommand(
      "example",
      "Build a small attention program, print it as StableHLO, run it on the interpreter");
  cmd->add_option("--seed", opts->seed, "PRNG seed of the random inputs");
  cmd->add_option("--tokens", opts->tokens, "sequence length")->check(CLI::Range(1, 4096));
  cmd->add_option("--head-dim", opts->head_dim, "head dimension")->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet", opts->quiet, "do not print the program text");
  cmd->callback([opts] { SetExitCode(RunExample(*opts)); });
}

}  // namespace tlaloc::cli
