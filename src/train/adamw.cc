// AdamW (see adamw.h).
#include "tlaloc/train/adamw.h"

#include <cmath>
#include <numbers>

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
  std::vector<Tensor> p, g, m, v;
  for (auto* group : {&p, &g, &m, &v})
    for (const TensorType& t : param_types) {
      if (t.element_type != ElementType::kF32)
        return InvalidArgument("AdamW parameter " + Type(t).ToString() + ": expected f32");
      group->push_back(fb.AddArg(t));
    }
  Tensor step = fb.AddArg(TensorType(ElementType::kS32, {}));
  AdamWTensors out = EmitAdamW(config, p, g, m, v, step);
  std::vector<Tensor> results = out.params;
  results.insert(results.end(), out.m.begin(), out.m.end());
  results.insert(results.end(), out.v.begin(), out.v.end());
  results.push_back(out.grad_norm);
  results.push_back(out.lr);
  TL_RETURN_IF_ERROR(fb.Return(results));
  const int n = static_cast<int>(param_types.size());
  Function* fn = fb.function();
  for (int i = 0; i < n; ++i) {
    fn->arg_attrs(i)["tf.aliasing_output"] = Attribute::Int(i, ElementType::kS32);
    fn->arg_attrs(2 * n + i)["tf.aliasing_output"] = Attribute::Int(n + i, ElementType::kS32);
    fn->arg_attrs(3 * n + i)["tf.aliasing_output"] = Attribute::Int(2 * n + i, ElementType::kS32);
  }
  return module;
}

}  // namespace tlaloc::train
