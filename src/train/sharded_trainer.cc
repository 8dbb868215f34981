// Training over several devices (see sharded_trainer.h). Every device runs the same per-device
// step: the Trainer's step program with each weight's part, its batch rows, and collectives
// where the plan splits work:
//
//   dp     loss terms all_reduce over `data`; gradients all_reduce over `data`
//   fsdp   weights all_gather over `data` before use; their gradients come out of the
//          all_gather's transpose, a reduce_scatter; loss terms all_reduce over `data`
//   tp     one all_reduce over `model` after each row-parallel product (o_proj, down_proj,
//          a MoE block's experts split on E), and its transpose in the backward pass;
//          replicated weights' gradients all_reduce
//   dp_tp  both, on a data x model mesh
//
// Why the seed is 1/N: each device differentiates its own copy of the (identical) global loss,
// and the collectives' transposes sum cotangents over devices, so the backward pass computes the
// gradient of N copies of the loss. Seeding 1/N (a power of two here, so an exact scaling)
// makes it the gradient of one; a weight held whole on several devices then sums its copies'
// parts over them.
#include "tlaloc/train/sharded_trainer.h"

#include <cmath>
#include <map>

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/train/memory_check.h"
#include "tlaloc/train/step_ports.h"
#include "train/train_step.h"

namespace tlaloc::train {

using shard::ShardingPlan;

namespace {

// The per-device lowering; `emit` numbers the collectives' channels and must outlive the build.
StepLowering DeviceLowering(const ShardingPlan& plan, int64_t seq_len,
                            shard::CollectiveEmitter& emit) {
  StepLowering l;
  for (size_t i = 0; i < plan.weights().size(); ++i)
    l.weight_types.push_back(plan.LocalWeightType(i));
  l.tokens = TensorType(ElementType::kS32, {plan.local_batch(), seq_len});
  const ShardingPlan* p = &plan;
  shard::CollectiveEmitter* e = &emit;
  if (plan.kind() == shard::PlanKind::kFsdp) {
    l.use_weight = [p, e](size_t i, const Tensor& held) {
      const int64_t dim = p->WeightDim(i);
      return dim < 0 ? held : e->AllGather(held, p->Groups(p->WeightAxes(i)), dim);
    };
  }
  if (plan.model_size() > 1) {
    const auto model_groups = plan.Groups({shard::kModelAxis});
    l.parallel.reduce_partial = [e, model_groups](const Tensor& x) {
      return e->AllReduceSum(x, model_groups);
    };
    l.parallel.first_expert = shard::FirstExpertHook(plan);
  }
  if (plan.data_size() > 1) {
    const auto data_groups = plan.Groups({shard::kDataAxis});
    l.reduce_loss = [e, data_groups](const LossTerms& t) {
      return LossTerms{e->AllReduceSum(t.loss_sum, data_groups),
                       e->AllReduceSum(t.count, data_groups)};
    };
  }
  l.seed = 1.0 / static_cast<double>(plan.num_devices());
  // A gradient part is complete once summed over the devices holding the same part (none for
  // FSDP's split weights: the reduce_scatter already summed every device).
  l.finish_grad = [p, e](size_t i, const Tensor& g) {
    return e->AllReduceSum(g, p->Groups(p->OtherAxes(p->WeightAxes(i))));
  };
  l.global_sum_of_squares = [p, e](size_t i, const Tensor& s) {
    return e->AllReduceSum(s, p->Groups(p->WeightAxes(i)));
  };
  return l;
}

StatusOr<Literal> ToF32(const Literal& l, const std::string& name) {
  if (!IsFloat(l.element_type()))
    return InvalidArgument(name + " of type " + Type(l.type()).ToString() +
                           ": expected a floating-point tensor");
  if (l.element_type() == ElementType::kF32) return l;
  Literal out(TensorType(ElementType::kF32, l.dims()));
  for (int64_t i = 0; i < l.num_elements(); ++i) out.SetFromDouble(i, l.GetAsDouble(i));
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<Module>> BuildDeviceStepProgram(const io::ModelConfig& config,
                                                         const TrainOptions& options,
                                                         const ShardingPlan& plan, int64_t seq_len,
                                                         bool grads_only) {
  shard::CollectiveEmitter emit;
  StepLowering lowering = DeviceLowering(plan, seq_len, emit);
  return BuildStepProgram(config, options, plan.weights(), plan.local_batch(), seq_len, &lowering,
                          grads_only);
}

namespace {

StatusOr<std::shared_ptr<Module>> BuildDeviceEvalProgram(const io::ModelConfig& config,
                                                         const TrainOptions& options,
                                                         const ShardingPlan& plan,
                                                         int64_t seq_len) {
  shard::CollectiveEmitter emit;
  StepLowering lowering = DeviceLowering(plan, seq_len, emit);
  return BuildEvalProgram(config, options, plan.weights(), plan.local_batch(), seq_len, &lowering);
}

}  // namespace

StatusOr<std::shared_ptr<Module>> BuildAnnotatedStepProgram(const io::ModelConfig& config,
                                                            const TrainOptions& options,
                                                            const ShardingPlan& plan,
                                                            int64_t seq_len) {
  StepLowering l;
  const auto& specs = plan.weights();
  for (const auto& s : specs) l.weight_types.push_back(TensorType(ElementType::kF32, s.shape));
  l.tokens = TensorType(ElementType::kS32, {plan.batch(), seq_len});
  const ShardingPlan* p = &plan;
  if (plan.kind() == shard::PlanKind::kFsdp) {
    // The weight as used is whole: the partitioner inserts the all_gather.
    l.use_weight = [p](size_t i, const Tensor& w) {
      return p->WeightDim(i) < 0
                 ? w
                 : shard::ShardingConstraint(w, Sharding::Replicated(w.rank(), shard::kMeshName));
    };
  }
  l.parallel.annotate = [p](std::string_view what, const Tensor& x) {
    return shard::ShardingConstraint(x, p->activation(what));
  };
  // Gradients take their weight's sharding (FSDP: the reduce_scatter).
  l.finish_grad = [p](size_t i, const Tensor& g) {
    return shard::ShardingConstraint(g, p->weight(i));
  };
  TL_ASSIGN_OR_RETURN(auto module,
                      BuildStepProgram(config, options, specs, plan.batch(), seq_len, &l, false));
  AddMesh(*module, shard::kMeshName, plan.mesh());
  Function* fn = module->Find("train_step");
  if (!fn) return Internal("annotated train step has no train_step function");
  // Parameters and moments take their weight's sharding; the batch is split as the plan says;
  // the scalars are replicated.
  const StepPorts ports = StepPorts::TrainStep(specs.size());
  auto sharding = [&](Port port, size_t i) {
    if (IsPerWeight(port)) return plan.weight(i);
    if (port == Port::kInputIds || port == Port::kLabels) return plan.tokens();
    return Sharding::Replicated(0, shard::kMeshName);
  };
  for (auto [port, i] : ports.args.Each())
    SetArgSharding(*fn, ports.args(port, i), sharding(port, i));
  for (auto [port, i] : ports.results.Each())
    SetResultSharding(*fn, ports.results(port, i), sharding(port, i));
  TL_RETURN_IF_ERROR(CheckShardings(*module, *fn));
  TL_RETURN_IF_ERROR(Verify(*module));
  return module;
}

struct ShardedTrainer::Impl {
  io::ModelConfig config;
  TrainOptions options;
  Backend* backend = nullptr;
  std::optional<ShardingPlan> plan;
  int64_t seq_len = 0;
  std::shared_ptr<Module> step_module;
  std::unique_ptr<CompiledProgram> step_program, grad_program, eval_program;
  // [device][weight]
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> params, m, v;
  int64_t step = 0;

  int devices() const { return static_cast<int>(plan->num_devices()); }
  // Whether this process holds device d (all of them unless launched by mpirun).
  bool local(int d) const { return backend->is_addressable(d); }
  StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> RunOnBatch(
      CompiledProgram& program, const StepPorts& ports, const Batch& batch);
  int first_local() const {
    for (int d = 0; d < devices(); ++d)
      if (local(d)) return d;
    return 0;
  }

  // Splits `global` weight i over the devices as the plan says.
  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Upload(size_t i, const Literal& global) {
    std::vector<std::unique_ptr<DeviceBuffer>> out;
    for (int d = 0; d < devices(); ++d) {
      if (!local(d)) {  // another process uploads its own part
        out.push_back(nullptr);
        continue;
      }
      TL_ASSIGN_OR_RETURN(Literal part, shard::LocalPart(global, plan->mesh(), plan->weight(i), d));
      TL_ASSIGN_OR_RETURN(auto buf, backend->Adopt(std::move(part), d));
      out.push_back(std::move(buf));
    }
    return out;
  }

  // Assembles weight i's whole tensor from `group`'s parts; across processes every rank must
  // call it (the parts are exchanged), and every rank gets the whole tensor.
  StatusOr<Literal> Download(const std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>& group,
                             size_t i) {
    std::vector<Literal> parts(devices());
    std::vector<Literal> mine;
    for (int d = 0; d < devices(); ++d) {
      if (!local(d)) continue;
      TL_ASSIGN_OR_RETURN(parts[d], backend->ToHost(*group[d][i]));
      mine.push_back(parts[d]);
    }
    ProcessWorld& world = backend->world();
    if (world.size() > 1) {
      std::string bytes;
      AppendLiterals(mine, bytes);
      TL_ASSIGN_OR_RETURN(auto all, world.AllGather(bytes, CollectiveTimeout(),
                                                    "the parts of " + plan->weights()[i].name));
      int d = 0;
      for (const std::string& rank_bytes : all) {
        size_t pos = 0;
        TL_ASSIGN_OR_RETURN(auto theirs, ReadLiterals(rank_bytes, pos));
        for (Literal& l : theirs) {
          if (d >= devices()) return Internal("the ranks sent more parts than there are devices");
          parts[d++] = std::move(l);
        }
      }
      if (d != devices())
        return Internal("the ranks sent " + std::to_string(d) + " parts of " +
                        plan->weights()[i].name + " for " + std::to_string(devices()) + " devices");
    }
    return shard::Assemble(parts, plan->mesh(), plan->weight(i),
                           TensorType(ElementType::kF32, plan->weights()[i].shape));
  }

  // Each device's rows of the batch, uploaded there: [device] -> (ids, labels).
  StatusOr<std::vector<std::pair<std::unique_ptr<DeviceBuffer>, std::unique_ptr<DeviceBuffer>>>>
  UploadBatch(const Batch& batch) {
    const TensorType want(ElementType::kS32, {plan->batch(), seq_len});
    if (batch.input_ids.type() != want || batch.labels.type() != want)
      return InvalidArgument("batch " + Type(batch.input_ids.type()).ToString() + " / " +
                             Type(batch.labels.type()).ToString() + ": expected " +
                             Type(want).ToString() + " for both");
    std::vector<std::pair<std::unique_ptr<DeviceBuffer>, std::unique_ptr<DeviceBuffer>>> out;
    for (int d = 0; d < devices(); ++d) {
      if (!local(d)) {
        out.emplace_back(nullptr, nullptr);
        continue;
      }
      TL_ASSIGN_OR_RETURN(Literal ids,
                          shard::LocalPart(batch.input_ids, plan->mesh(), plan->tokens(), d));
      TL_ASSIGN_OR_RETURN(Literal labels,
                          shard::LocalPart(batch.labels, plan->mesh(), plan->tokens(), d));
      TL_ASSIGN_OR_RETURN(auto i, backend->Adopt(std::move(ids), d));
      TL_ASSIGN_OR_RETURN(auto l, backend->Adopt(std::move(labels), d));
      out.emplace_back(std::move(i), std::move(l));
    }
    return out;
  }
};

ShardedTrainer::ShardedTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardedTrainer::~ShardedTrainer() = default;

StatusOr<std::unique_ptr<ShardedTrainer>> ShardedTrainer::Create(
    io::ModelConfig config, std::vector<Literal> weights, TrainOptions options, Backend& backend,
    ShardingPlan plan, int64_t seq_len) {
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  if (seq_len <= 0)
    return InvalidArgument("trainer seq_len " + std::to_string(seq_len) + ": expected > 0");
  if (options.compute_dtype != ElementType::kF32 && options.compute_dtype != ElementType::kBF16)
    return InvalidArgument("trainer compute dtype " + std::string(MlirName(options.compute_dtype)) +
                           ": expected f32 or bf16");
  if (options.loss_chunk < 0)
    return InvalidArgument("trainer loss_chunk " + std::to_string(options.loss_chunk) +
                           ": expected >= 0");
  if (plan.num_devices() > backend.num_devices())
    return InvalidArgument("mesh " + plan.mesh().ToString() + " needs " +
                           std::to_string(plan.num_devices()) + " devices; backend " +
                           backend.name() + " has " + std::to_string(backend.num_devices()) +
                           " (TLALOC_CPU_DEVICES)");
  auto impl = std::make_unique<Impl>();
  impl->backend = &backend;
  impl->plan = std::move(plan);
  impl->seq_len = seq_len;
  const auto& specs = impl->plan->weights();
  if (weights.size() != specs.size())
    return InvalidArgument("trainer got " + std::to_string(weights.size()) +
                           " weights; the config needs " + std::to_string(specs.size()));
  const int n = impl->devices();
  impl->params.resize(n);
  impl->m.resize(n);
  impl->v.resize(n);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (weights[i].dims() != specs[i].shape)
      return InvalidArgument("weight " + specs[i].name + " " + Type(weights[i].type()).ToString() +
                             ": expected shape " + DimsToString(specs[i].shape));
    TL_ASSIGN_OR_RETURN(Literal f32, ToF32(weights[i], "weight " + specs[i].name));
    weights[i] = Literal();
    TL_ASSIGN_OR_RETURN(auto p, impl->Upload(i, f32));
    Literal zeros(f32.type());
    TL_ASSIGN_OR_RETURN(auto m, impl->Upload(i, zeros));
    TL_ASSIGN_OR_RETURN(auto v, impl->Upload(i, zeros));
    for (int d = 0; d < n; ++d) {
      impl->params[d].push_back(std::move(p[d]));
      impl->m[d].push_back(std::move(m[d]));
      impl->v[d].push_back(std::move(v[d]));
    }
  }
  TL_ASSIGN_OR_RETURN(impl->step_module,
                      BuildDeviceStepProgram(config, options, *impl->plan, seq_len));
  const ProcessGrid grid{1, impl->plan->num_devices()};
  TL_ASSIGN_OR_RETURN(impl->step_program, backend.CompileForDevices(impl->step_module, grid));
  // Every device runs its own copy of the step: each must fit beside its part of the state.
  // One device (the Trainer's case) is refused with the single-device advice.
  for (int d = 0; d < n; ++d) {
    if (!impl->local(d)) continue;
    const int64_t resident =
        ResidentBytes(impl->params[d]) + ResidentBytes(impl->m[d]) + ResidentBytes(impl->v[d]);
    TL_RETURN_IF_ERROR(n == 1 ? CheckTrainStepFits(backend, *impl->step_program, options,
                                                   impl->plan->batch(), seq_len, resident)
                              : CheckDeviceStepFits(backend, *impl->step_program, options,
                                                    *impl->plan, seq_len, d, resident));
  }
  impl->config = std::move(config);
  impl->options = options;
  return std::unique_ptr<ShardedTrainer>(new ShardedTrainer(std::move(impl)));
}

StatusOr<StepStats> ShardedTrainer::Step(const Batch& batch) {
  Impl& s = *impl_;
  TL_ASSIGN_OR_RETURN(auto inputs, s.UploadBatch(batch));
  const int n = s.devices();
  const size_t w = s.plan->weights().size();
  const StepPorts ports = StepPorts::TrainStep(w);
  std::vector<std::unique_ptr<DeviceBuffer>> steps;
  std::vector<std::vector<ExecuteArg>> args(n);
  for (int d = 0; d < n; ++d) {
    if (!s.local(d)) continue;
    TL_ASSIGN_OR_RETURN(
        auto step,
        s.backend->ToDevice(Literal::Scalar<int32_t>(static_cast<int32_t>(s.step + 1)), d));
    std::vector<ExecuteArg>& a = args[d];
    a.resize(ports.args.size());
    for (size_t i = 0; i < w; ++i) {
      a[ports.args(Port::kParams, i)] = {s.params[d][i].get(), true};
      a[ports.args(Port::kM, i)] = {s.m[d][i].get(), true};
      a[ports.args(Port::kV, i)] = {s.v[d][i].get(), true};
    }
    a[ports.args(Port::kStep)] = {step.get(), false};
    a[ports.args(Port::kInputIds)] = {inputs[d].first.get(), false};
    a[ports.args(Port::kLabels)] = {inputs[d].second.get(), false};
    steps.push_back(std::move(step));
  }
  TL_ASSIGN_OR_RETURN(auto out, s.backend->ExecuteOnDevices(*s.step_program, args));
  for (int d = 0; d < n; ++d) {
    if (!s.local(d)) continue;
    if (static_cast<int>(out[d].size()) != ports.results.size())
      return Internal("train_step on device " + std::to_string(d) + " returned " +
                      std::to_string(out[d].size()) + " results; expected " +
                      std::to_string(ports.results.size()));
    for (size_t i = 0; i < w; ++i) {
      s.params[d][i] = std::move(out[d][ports.results(Port::kParams, i)]);
      s.m[d][i] = std::move(out[d][ports.results(Port::kM, i)]);
      s.v[d][i] = std::move(out[d][ports.results(Port::kV, i)]);
    }
  }
  // Every device computed the same scalars; the first one here has the step's.
  const int first = s.first_local();
  auto scalar = [&](Port port) -> StatusOr<double> {
    TL_ASSIGN_OR_RETURN(Literal l, s.backend->ToHost(*out[first][ports.results(port)]));
    return l.GetAsDouble(0);
  };
  StepStats stats;
  TL_ASSIGN_OR_RETURN(stats.loss, scalar(Port::kLoss));
  TL_ASSIGN_OR_RETURN(double tokens, scalar(Port::kTokens));
  stats.tokens = static_cast<int64_t>(std::llround(tokens));
  TL_ASSIGN_OR_RETURN(stats.grad_norm, scalar(Port::kGradNorm));
  TL_ASSIGN_OR_RETURN(stats.lr, scalar(Port::kLr));
  ++s.step;
  return stats;
}

// Runs the eval or gradient program (parameters and the batch in, nothing donated) on each of
// this process's devices.
StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> ShardedTrainer::Impl::RunOnBatch(
    CompiledProgram& program, const StepPorts& ports, const Batch& batch) {
  Impl& s = *this;
  TL_ASSIGN_OR_RETURN(auto inputs, s.UploadBatch(batch));
  const size_t w = s.plan->weights().size();
  std::vector<std::vector<ExecuteArg>> args(s.devices());
  for (int d = 0; d < s.devices(); ++d) {
    if (!s.local(d)) continue;
    std::vector<ExecuteArg>& a = args[d];
    a.resize(ports.args.size());
    for (size_t i = 0; i < w; ++i) a[ports.args(Port::kParams, i)] = {s.params[d][i].get(), false};
    a[ports.args(Port::kInputIds)] = {inputs[d].first.get(), false};
    a[ports.args(Port::kLabels)] = {inputs[d].second.get(), false};
  }
  return s.backend->ExecuteOnDevices(program, args);
}

StatusOr<double> ShardedTrainer::EvalLoss(const Batch& batch) {
  Impl& s = *impl_;
  if (!s.eval_program) {
    TL_ASSIGN_OR_RETURN(auto module,
                        BuildDeviceEvalProgram(s.config, s.options, *s.plan, s.seq_len));
    TL_ASSIGN_OR_RETURN(s.eval_program, s.backend->CompileForDevices(
                                            module, ProcessGrid{1, s.plan->num_devices()}));
  }
  const StepPorts ports = StepPorts::Eval(s.plan->weights().size());
  TL_ASSIGN_OR_RETURN(auto out, s.RunOnBatch(*s.eval_program, ports, batch));
  // Every device computed the same loss.
  TL_ASSIGN_OR_RETURN(Literal loss,
                      s.backend->ToHost(*out[s.first_local()][ports.results(Port::kLoss)]));
  return loss.GetAsDouble(0);
}

StatusOr<LossAndGrads> ShardedTrainer::LossAndGrad(const Batch& batch) {
  Impl& s = *impl_;
  if (!s.grad_program) {
    TL_ASSIGN_OR_RETURN(auto module,
                        BuildDeviceStepProgram(s.config, s.options, *s.plan, s.seq_len, true));
    TL_ASSIGN_OR_RETURN(s.grad_program, s.backend->CompileForDevices(
                                            module, ProcessGrid{1, s.plan->num_devices()}));
  }
  const size_t w = s.plan->weights().size();
  const StepPorts ports = StepPorts::Grads(w);
  TL_ASSIGN_OR_RETURN(auto out, s.RunOnBatch(*s.grad_program, ports, batch));
  LossAndGrads r;
  const int first = s.first_local();
  TL_ASSIGN_OR_RETURN(Literal loss, s.backend->ToHost(*out[first][ports.results(Port::kLoss)]));
  TL_ASSIGN_OR_RETURN(Literal tokens, s.backend->ToHost(*out[first][ports.results(Port::kTokens)]));
  r.loss = loss.GetAsDouble(0);
  r.tokens = tokens.GetAsDouble(0);
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> grads(s.devices());
  for (int d = 0; d < s.devices(); ++d)
    for (size_t i = 0; i < w; ++i)
      grads[d].push_back(s.local(d) ? std::move(out[d][ports.results(Port::kGrads, i)]) : nullptr);
  for (size_t i = 0; i < w; ++i) {
    TL_ASSIGN_OR_RETURN(Literal g, s.Download(grads, i));
    r.grads.push_back(std::move(g));
  }
  return r;
}

StatusOr<std::vector<Literal>> ShardedTrainer::Weights() {
  std::vector<Literal> out;
  for (size_t i = 0; i < impl_->plan->weights().size(); ++i) {
    TL_ASSIGN_OR_RETURN(Literal l, impl_->Download(impl_->params, i));
    out.push_back(std::move(l));
  }
  return out;
}

int64_t ShardedTrainer::step() const { return impl_->step; }

StatusOr<std::vector<std::pair<std::string, Literal>>> ShardedTrainer::OptimizerState() {
  std::vector<std::pair<std::string, Literal>> out;
  out.emplace_back("step", Literal::Scalar<int64_t>(impl_->step));
  const auto& specs = impl_->plan->weights();
  for (const char* which : {"m", "v"}) {
    auto& group = which[0] == 'm' ? impl_->m : impl_->v;
    for (size_t i = 0; i < specs.size(); ++i) {
      TL_ASSIGN_OR_RETURN(Literal l, impl_->Download(group, i));
      out.emplace_back(std::string(which) + "." + specs[i].name, std::move(l));
    }
  }
  return out;
}

Status ShardedTrainer::LoadOptimizerState(
    const std::vector<std::pair<std::string, Literal>>& state) {
  Impl& s = *impl_;
  std::map<std::string, const Literal*> by_name;
  for (const auto& [name, l] : state) by_name[name] = &l;
  auto step = by_name.find("step");
  if (step == by_name.end() || step->second->num_elements() != 1 ||
      !IsInteger(step->second->element_type()))
    return InvalidArgument("optimizer state: expected an integer scalar \"step\"");
  const int n = s.devices();
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> m(n), v(n);
  const auto& specs = s.plan->weights();
  for (const char* which : {"m", "v"}) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string name = std::string(which) + "." + specs[i].name;
      auto it = by_name.find(name);
      if (it == by_name.end())
        return InvalidArgument("optimizer state: missing tensor \"" + name + "\"");
      if (it->second->dims() != specs[i].shape)
        return InvalidArgument("optimizer state \"" + name + "\" " +
                               Type(it->second->type()).ToString() + ": expected shape " +
                               DimsToString(specs[i].shape));
      TL_ASSIGN_OR_RETURN(Literal f32, ToF32(*it->second, "optimizer state \"" + name + "\""));
      TL_ASSIGN_OR_RETURN(auto parts, s.Upload(i, f32));
      for (int d = 0; d < n; ++d) (which[0] == 'm' ? m : v)[d].push_back(std::move(parts[d]));
    }
  }
  s.m = std::move(m);
  s.v = std::move(v);
  s.step = step->second->GetAsInt64(0);
  return OkStatus();
}

const ShardingPlan& ShardedTrainer::plan() const { return *impl_->plan; }
std::shared_ptr<const Module> ShardedTrainer::step_module() const { return impl_->step_module; }

std::vector<int64_t> ShardedTrainer::last_peak_bytes() const {
  return impl_->backend->LastPeakLiveBytes(*impl_->step_program);
}

int64_t ShardedTrainer::state_bytes_per_device() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < impl_->plan->weights().size(); ++i)
    bytes += 3 * impl_->plan->LocalWeightType(i).byte_size();
  return bytes;
}

const DeviceBuffer& ShardedTrainer::held(int which, int device, size_t i) const {
  const auto& group = which == 0 ? impl_->params : which == 1 ? impl_->m : impl_->v;
  return *group[device][i];
}

}  // namespace tlaloc::train
