// AdamW (see adamw.h).
#include "tlaloc/train/adamw.h"

#include <cmath>
#include <numbers>

#include "tlaloc/train/step_ports.h"

namespace tlaloc::train {

double LearningRateAt(const AdamWConfig& c, int64_t step) {
  if (c.warmup_steps > 0 && step <= c.warmup_steps)
    return c.lr * static_cast<double>(step) / static_cast<double>(c.warmup_steps);
  if (c.total_steps <= c.warmup_steps) return c.lr;
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup_steps) /
                                            static_cast<double>(c.total_steps - c.warmup_steps));
  const double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + (c.lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

namespace {

// The schedule of LearningRateAt on an f64 scalar step tensor.
Tensor ScheduledLr(const AdamWConfig& c, const Tensor& t) {
  OpBuilder& b = *t.builder();
  auto s = [&](double v) { return Full(b, {}, v, ElementType::kF64); };
  Tensor lr = s(c.lr);
  if (c.total_steps > c.warmup_steps) {
    Tensor progress = Min(s(1.0), (t - s(static_cast<double>(c.warmup_steps))) /
                                      s(static_cast<double>(c.total_steps - c.warmup_steps)));
    const double min_lr = c.lr * c.min_lr_ratio;
    lr = s(min_lr) + s((c.lr - min_lr) * 0.5) * (s(1.0) + Cos(progress * std::numbers::pi));
  }
  if (c.warmup_steps > 0) {
    Tensor warm = t * (c.lr / static_cast<double>(c.warmup_steps));
    lr = Where(Le(t, s(static_cast<double>(c.warmup_steps))), warm, lr);
  }
  return lr;
}

}  // namespace

AdamWTensors EmitAdamW(const AdamWConfig& c, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                       const std::vector<Tensor>& v, const Tensor& step,
                       const GlobalSumOfSquares& global_sum_of_squares) {
  OpBuilder& b = *step.builder();
  auto f64 = [&](double x) { return Full(b, {}, x, ElementType::kF64); };
  auto to_f32 = [](const Tensor& x) { return Convert(x, ElementType::kF32); };
  AdamWTensors out;
  // Global norm as clip_grad_norm_ computes it: the norm of the per-tensor norms, in f32.
  Tensor sq = Full(b, {}, 0.0);
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    std::vector<int64_t> all;
    for (int64_t d = 0; d < g.rank(); ++d) all.push_back(d);
    Tensor local = Sum(g * g, all);
    Tensor norm = Sqrt(global_sum_of_squares ? global_sum_of_squares(i, local) : local);
    sq = sq + norm * norm;
  }
  out.grad_norm = Sqrt(sq);
  std::vector<Tensor> gs = grads;
  if (c.grad_clip_norm > 0) {
    Tensor coef = Full(b, {}, c.grad_clip_norm) / (out.grad_norm + 1e-6);
    coef = Min(coef, Full(b, {}, 1.0));
    for (Tensor& g : gs) g = g * coef;
  }
  Tensor t = Convert(step, ElementType::kF64);
  Tensor lr = ScheduledLr(c, t);
  out.lr = to_f32(lr);
  Tensor decay = to_f32(f64(1.0) - lr * c.weight_decay);
  Tensor bias1 = f64(1.0) - Pow(f64(c.beta1), t);
  Tensor bias2_sqrt = Sqrt(f64(1.0) - Pow(f64(c.beta2), t));
  Tensor step_size = to_f32(lr / bias1);
  Tensor inv_bias2_sqrt = to_f32(bias2_sqrt);
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = c.weight_decay != 0 ? params[i] * decay : params[i];
    Tensor mi = m[i] * c.beta1 + gs[i] * (1.0 - c.beta1);
    Tensor vi = v[i] * c.beta2 + gs[i] * gs[i] * (1.0 - c.beta2);
    Tensor denom = Sqrt(vi) / inv_bias2_sqrt + c.eps;
    out.params.push_back(p - step_size * (mi / denom));
    out.m.push_back(mi);
    out.v.push_back(vi);
  }
  return out;
}

StatusOr<std::shared_ptr<Module>> BuildAdamWProgram(const AdamWConfig& config,
                                                    const std::vector<TensorType>& param_types) {
  auto module = std::make_shared<Module>("adamw");
  FunctionBuilder fb(module.get(), "adamw_step");
  const StepPorts ports = StepPorts::AdamW(param_types.size());
  std::vector<Tensor> args;
  for (auto [port, i] : ports.args.Each()) {
    if (port == Port::kStep) {
      args.push_back(fb.AddArg(TensorType(ElementType::kS32, {})));
      continue;
    }
    const TensorType& t = param_types[i];
    if (t.element_type != ElementType::kF32)
      return InvalidArgument("AdamW parameter " + Type(t).ToString() + ": expected f32");
    args.push_back(fb.AddArg(t));
  }
  auto group = [&](Port port) {
    std::vector<Tensor> g;
    for (size_t i = 0; i < param_types.size(); ++i) g.push_back(args[ports.args(port, i)]);
    return g;
  };
  AdamWTensors out = EmitAdamW(config, group(Port::kParams), group(Port::kGrads), group(Port::kM),
                               group(Port::kV), args[ports.args(Port::kStep)]);
  std::vector<Tensor> results(ports.results.size());
  for (size_t i = 0; i < param_types.size(); ++i) {
    results[ports.results(Port::kParams, i)] = out.params[i];
    results[ports.results(Port::kM, i)] = out.m[i];
    results[ports.results(Port::kV, i)] = out.v[i];
  }
  results[ports.results(Port::kGradNorm)] = out.grad_norm;
  results[ports.results(Port::kLr)] = out.lr;
  TL_RETURN_IF_ERROR(fb.Return(results));
  ports.SetAliases(*fb.function());
  return module;
}

}  // namespace tlaloc::train
