// The Trainer (see trainer.h): one train-step program, compiled once, with the f32 master
// weights and AdamW moments kept on the backend and donated to every step.
#include "tlaloc/train/trainer.h"

#include <cmath>
#include <map>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/ir/collectives.h"
#include "tlaloc/models/family.h"
#include "tlaloc/train/adamw.h"
#include "tlaloc/train/loss.h"
#include "tlaloc/train/memory_check.h"
#include "tlaloc/train/packed_positions.h"
#include "tlaloc/train/sharded_trainer.h"
#include "tlaloc/train/step_ports.h"
#include "train/train_step.h"

namespace tlaloc::train {

// The Trainer is the sharded trainer's 1-device case (or its planned case, sharded()).
struct Trainer::Impl {
  std::unique_ptr<ShardedTrainer> core;
  bool planned = false;  // options.mesh and options.plan given
  int64_t batch = 0, seq_len = 0;
};

namespace {

// Emits the mean loss (and the counted tokens) of the config's model over one batch into fb's
// function, from f32 master weights `w32` (in WeightSpecs order).
StatusOr<std::pair<Tensor, Tensor>> EmitLoss(const io::ModelConfig& config,
                                             const TrainOptions& options,
                                             const std::vector<models::WeightSpec>& specs,
                                             const std::vector<Tensor>& w32, const Tensor& ids,
                                             const Tensor& labels, autodiff::Marks* marks,
                                             const StepLowering* lowering = nullptr) {
  TL_ASSIGN_OR_RETURN(const models::ModelFamily* family, models::FamilyOf(config));
  auto as_used = [&](size_t i, const Tensor& held) {
    Tensor used = lowering && lowering->use_weight ? lowering->use_weight(i, held) : held;
    return options.compute_dtype == ElementType::kF32 ? used : Convert(used, options.compute_dtype);
  };
  // With remat, a layer's weights are made usable (FSDP: gathered) inside its remat region, so
  // the backward pass gathers them again instead of keeping all of them gathered.
  const bool per_layer = lowering && lowering->use_weight && options.remat_layers;
  std::map<std::string, size_t> layer_weight_index;
  models::WeightTensors w;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (per_layer && specs[i].name.rfind("model.layers.", 0) == 0) {
      layer_weight_index[specs[i].name] = i;
      w[specs[i].name] = w32[i];
    } else {
      w[specs[i].name] = as_used(i, w32[i]);
    }
  }
  models::ParallelHooks parallel;
  if (lowering) parallel = lowering->parallel;
  if (per_layer)
    parallel.use_layer_weight = [&](const std::string& name, const Tensor& held) {
      return as_used(layer_weight_index.at(name), held);
    };
  std::optional<Tensor> positions;
  if (options.document_end_id) positions = PackedPositions(ids, *options.document_end_id);
  TL_ASSIGN_OR_RETURN(models::TrainForward forward,
                      family->train_forward(config, w, ids, positions ? &*positions : nullptr,
                                            options.remat_layers ? marks : nullptr,
                                            lowering ? &parallel : nullptr));
  const int64_t tokens = ids.dim(0) * ids.dim(1);
  Tensor hidden = Reshape(forward.hidden, {tokens, config.hidden_size});
  LossTerms terms = LmHeadCrossEntropy(hidden, w.at(forward.head_weight), Reshape(labels, {tokens}),
                                       options.loss_chunk, marks);
  if (lowering && lowering->reduce_loss) terms = lowering->reduce_loss(terms);
  Tensor mean = terms.loss_sum / Max(terms.count, FullLike(terms.count, 1.0));
  return std::make_pair(mean, terms.count);
}

struct ProgramArgs {
  std::vector<TensorType> weight_types;
  TensorType tokens;
};

ProgramArgs ArgTypes(const std::vector<models::WeightSpec>& specs, int64_t batch, int64_t seq_len) {
  ProgramArgs a{{}, TensorType(ElementType::kS32, {batch, seq_len})};
  for (const auto& s : specs) a.weight_types.push_back(TensorType(ElementType::kF32, s.shape));
  return a;
}

}  // namespace

StatusOr<std::shared_ptr<Module>> BuildStepProgram(const io::ModelConfig& config,
                                                   const TrainOptions& options,
                                                   const std::vector<models::WeightSpec>& specs,
                                                   int64_t batch, int64_t seq_len,
                                                   const StepLowering* lowering, bool grads_only) {
  ProgramArgs types = ArgTypes(specs, batch, seq_len);
  if (lowering) types = ProgramArgs{lowering->weight_types, lowering->tokens};
  // The loss as a function of its own, differentiated into the step program.
  Module scratch("loss");
  autodiff::Marks marks;
  FunctionBuilder lf(&scratch, "loss");
  std::vector<Tensor> w;
  for (const auto& t : types.weight_types) w.push_back(lf.AddArg(t));
  Tensor ids = lf.AddArg(types.tokens), labels = lf.AddArg(types.tokens);
  TL_ASSIGN_OR_RETURN(auto loss,
                      EmitLoss(config, options, specs, w, ids, labels, &marks, lowering));
  TL_RETURN_IF_ERROR(lf.Return({loss.first, loss.second}));

  const char* name = grads_only ? "grads" : "train_step";
  auto module = std::make_shared<Module>(name);
  CopyPrivateFunctions(scratch, *module);  // the loss's composites' decompositions
  FunctionBuilder fb(module.get(), name);
  const size_t n = specs.size();
  const StepPorts ports = grads_only ? StepPorts::Grads(n) : StepPorts::TrainStep(n);
  std::vector<Tensor> in;
  for (auto [port, i] : ports.args.Each()) {
    if (IsPerWeight(port)) {
      in.push_back(fb.AddArg(types.weight_types[i]));
    } else {
      in.push_back(
          fb.AddArg(port == Port::kStep ? TensorType(ElementType::kS32, {}) : types.tokens));
    }
  }
  auto group = [&](Port port) {
    std::vector<Tensor> g;
    if (ports.args.has(port))
      for (size_t i = 0; i < n; ++i) g.push_back(in[ports.args(port, i)]);
    return g;
  };
  const std::vector<Tensor> p = group(Port::kParams), m = group(Port::kM), v = group(Port::kV);
  std::vector<Value> args;
  for (const Tensor& t : p) args.push_back(t.value());
  args.push_back(in[ports.args(Port::kInputIds)].value());
  args.push_back(in[ports.args(Port::kLabels)].value());
  autodiff::GradOptions grad_options;
  for (size_t i = 0; i < n; ++i) grad_options.wrt.push_back(static_cast<int>(i));
  grad_options.marks = &marks;
  Value seed = Full(fb.ops(), {}, lowering ? lowering->seed : 1.0).value();
  TL_ASSIGN_OR_RETURN(auto gv, autodiff::EmitGradient(fb.ops(), *lf.function(), args,
                                                      {seed, Value()}, grad_options));
  std::vector<Tensor> grads;
  for (Value g : gv.gradients) grads.emplace_back(g, &fb.ops());
  if (lowering && lowering->finish_grad)
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = lowering->finish_grad(i, grads[i]);
  std::vector<Tensor> results(ports.results.size());
  results[ports.results(Port::kLoss)] = Tensor(gv.results[0], &fb.ops());
  results[ports.results(Port::kTokens)] = Tensor(gv.results[1], &fb.ops());
  if (grads_only) {
    for (size_t i = 0; i < n; ++i) results[ports.results(Port::kGrads, i)] = grads[i];
  } else {
    AdamWTensors upd = EmitAdamW(options.adamw, p, grads, m, v, in[ports.args(Port::kStep)],
                                 lowering ? lowering->global_sum_of_squares : nullptr);
    for (size_t i = 0; i < n; ++i) {
      results[ports.results(Port::kParams, i)] = upd.params[i];
      results[ports.results(Port::kM, i)] = upd.m[i];
      results[ports.results(Port::kV, i)] = upd.v[i];
    }
    results[ports.results(Port::kGradNorm)] = upd.grad_norm;
    results[ports.results(Port::kLr)] = upd.lr;
  }
  TL_RETURN_IF_ERROR(fb.Return(results));
  Function* fn = fb.function();
  autodiff::RemoveDeadOps(*fn);
  NumberChannels(*fn);  // the gradients' collectives copied their forward handles
  // Parameters and moments alias their updated results, so backends update them in place.
  ports.SetAliases(*fn);
  TL_RETURN_IF_ERROR(Verify(*module));
  return module;
}

StatusOr<std::shared_ptr<Module>> BuildEvalProgram(const io::ModelConfig& config,
                                                   const TrainOptions& options,
                                                   const std::vector<models::WeightSpec>& specs,
                                                   int64_t batch, int64_t seq_len,
                                                   const StepLowering* lowering) {
  ProgramArgs types = ArgTypes(specs, batch, seq_len);
  if (lowering) types = ProgramArgs{lowering->weight_types, lowering->tokens};
  auto module = std::make_shared<Module>("eval_loss");
  FunctionBuilder fb(module.get(), "eval_loss");
  const StepPorts ports = StepPorts::Eval(specs.size());
  std::vector<Tensor> in;
  for (auto [port, i] : ports.args.Each())
    in.push_back(fb.AddArg(IsPerWeight(port) ? types.weight_types[i] : types.tokens));
  std::vector<Tensor> w;
  for (size_t i = 0; i < specs.size(); ++i) w.push_back(in[ports.args(Port::kParams, i)]);
  TL_ASSIGN_OR_RETURN(auto loss,
                      EmitLoss(config, options, specs, w, in[ports.args(Port::kInputIds)],
                               in[ports.args(Port::kLabels)], nullptr, lowering));
  std::vector<Tensor> results(ports.results.size());
  results[ports.results(Port::kLoss)] = loss.first;
  results[ports.results(Port::kTokens)] = loss.second;
  TL_RETURN_IF_ERROR(fb.Return(results));
  NumberChannels(*fb.function());
  TL_RETURN_IF_ERROR(Verify(*module));
  return module;
}

StatusOr<std::shared_ptr<Module>> BuildLossAndGradProgram(const io::ModelConfig& config,
                                                          const TrainOptions& options,
                                                          int64_t batch, int64_t seq_len) {
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  const auto specs = models::WeightSpecs(config);
  const ProgramArgs types = ArgTypes(specs, batch, seq_len);
  auto module = std::make_shared<Module>("loss_and_grad");
  autodiff::Marks marks;
  FunctionBuilder lf(module.get(), "loss");
  lf.function()->set_public(false);
  std::vector<Tensor> w;
  for (const auto& t : types.weight_types) w.push_back(lf.AddArg(t));
  Tensor ids = lf.AddArg(types.tokens), labels = lf.AddArg(types.tokens);
  TL_ASSIGN_OR_RETURN(auto loss, EmitLoss(config, options, specs, w, ids, labels, &marks));
  TL_RETURN_IF_ERROR(lf.Return({loss.first, loss.second}));
  autodiff::GradOptions grad_options;
  for (size_t i = 0; i < specs.size(); ++i) grad_options.wrt.push_back(static_cast<int>(i));
  grad_options.marks = &marks;
  TL_ASSIGN_OR_RETURN(Function * fn, autodiff::ValueAndGrad(*module, *lf.function(), grad_options,
                                                            "loss_and_grad"));
  fn->set_public(true);
  return module;
}

namespace {

Status CheckBatch(const Batch& batch, int64_t b, int64_t t) {
  const TensorType want(ElementType::kS32, {b, t});
  if (batch.input_ids.type() != want)
    return InvalidArgument("batch input_ids " + Type(batch.input_ids.type()).ToString() +
                           ": expected " + Type(want).ToString());
  if (batch.labels.type() != want)
    return InvalidArgument("batch labels " + Type(batch.labels.type()).ToString() + ": expected " +
                           Type(want).ToString());
  return OkStatus();
}

}  // namespace

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(io::ModelConfig config,
                                                   std::vector<Literal> weights,
                                                   TrainOptions options, Backend& backend,
                                                   int64_t batch, int64_t seq_len) {
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  if (batch <= 0 || seq_len <= 0)
    return InvalidArgument("trainer batch " + std::to_string(batch) + " and seq_len " +
                           std::to_string(seq_len) + ": expected positive sizes");
  if (options.compute_dtype != ElementType::kF32 && options.compute_dtype != ElementType::kBF16)
    return InvalidArgument("trainer compute dtype " + std::string(MlirName(options.compute_dtype)) +
                           ": expected f32 or bf16");
  if (options.loss_chunk < 0)
    return InvalidArgument("trainer loss_chunk " + std::to_string(options.loss_chunk) +
                           ": expected >= 0");
  auto impl = std::make_unique<Impl>();
  impl->batch = batch;
  impl->seq_len = seq_len;
  impl->planned = !options.plan.empty() || !options.mesh.empty();
  if (impl->planned && (options.plan.empty() || options.mesh.empty()))
    return InvalidArgument("a sharded trainer needs both a mesh and a plan (got mesh '" +
                           options.mesh + "', plan '" + options.plan + "')");
  // One device is the 1-device mesh: the dp plan over data=1 holds every weight whole and emits
  // no collective, so its step program is the single-device step.
  TL_ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse(impl->planned ? options.mesh : "data=1"));
  TL_ASSIGN_OR_RETURN(auto plan, shard::ShardingPlan::Make(impl->planned ? options.plan : "dp",
                                                           mesh, config, batch));
  TL_ASSIGN_OR_RETURN(
      impl->core, ShardedTrainer::Create(std::move(config), std::move(weights), options, backend,
                                         std::move(plan), seq_len));
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

ShardedTrainer* Trainer::sharded() const { return impl_->planned ? impl_->core.get() : nullptr; }

StatusOr<StepStats> Trainer::Step(const Batch& batch) {
  if (!impl_->planned) TL_RETURN_IF_ERROR(CheckBatch(batch, impl_->batch, impl_->seq_len));
  return impl_->core->Step(batch);
}

StatusOr<double> Trainer::EvalLoss(const Batch& batch) {
  if (!impl_->planned) TL_RETURN_IF_ERROR(CheckBatch(batch, impl_->batch, impl_->seq_len));
  return impl_->core->EvalLoss(batch);
}

StatusOr<std::vector<Literal>> Trainer::Weights() { return impl_->core->Weights(); }

int64_t Trainer::step() const { return impl_->core->step(); }

StatusOr<std::vector<std::pair<std::string, Literal>>> Trainer::OptimizerState() {
  return impl_->core->OptimizerState();
}

Status Trainer::LoadOptimizerState(const std::vector<std::pair<std::string, Literal>>& state) {
  return impl_->core->LoadOptimizerState(state);
}

}  // namespace tlaloc::train
