// Tensor-parallel greedy generation (see tensor_parallel.h).
#include "tlaloc/generate/tensor_parallel.h"

#include <algorithm>
#include <cmath>

#include "tlaloc/generate/memory_check.h"
#include "tlaloc/models/family.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/shard/plan.h"

namespace tlaloc::generate {

struct TensorParallelGreedy::Impl {
  io::ModelConfig config;
  Backend* backend = nullptr;
  std::optional<shard::ShardingPlan> plan;
  int64_t max_len = 0;
  std::unique_ptr<CompiledProgram> program;
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> weights;  // [device][weight]
};

namespace {

// next(weights..., ids s32 [1, max_len], last s32) -> s32 [1]: the argmax after position
// `last`, on this device's part of the weights.
StatusOr<std::shared_ptr<Module>> BuildNextTokenProgram(const io::ModelConfig& config,
                                                        const shard::ShardingPlan& plan,
                                                        int64_t max_len, int64_t sample_vocab) {
  TL_ASSIGN_OR_RETURN(const models::ModelFamily* family, models::FamilyOf(config));
  auto module = std::make_shared<Module>("tp_next_token");
  FunctionBuilder fb(module.get(), "next_token");
  models::WeightTensors w;
  for (size_t i = 0; i < plan.weights().size(); ++i)
    w[plan.weights()[i].name] = fb.AddArg(plan.LocalWeightType(i));
  Tensor ids = fb.AddArg(TensorType(ElementType::kS32, {1, max_len}));
  Tensor last = fb.AddArg(TensorType(ElementType::kS32, {}));
  shard::CollectiveEmitter emit;
  models::ParallelHooks hooks;
  const auto groups = plan.Groups({shard::kModelAxis});
  hooks.reduce_partial = [&emit, groups](const Tensor& x) { return emit.AllReduceSum(x, groups); };
  TL_ASSIGN_OR_RETURN(models::TrainForward forward,
                      family->train_forward(config, w, ids, nullptr, &hooks));
  // Causal attention: positions after `last` (padding) never reach it.
  Tensor zero = Scalar(fb.ops(), 0, ElementType::kS32);
  Tensor h = Reshape(DynamicSlice(forward.hidden, {zero, last, zero}, {1, 1, config.hidden_size}),
                     {1, config.hidden_size});
  Tensor logits = nn::Linear(h, w.at(forward.head_weight));
  if (sample_vocab > 0 && sample_vocab < config.vocab_size) {
    const std::vector<int64_t> row = {1, config.vocab_size};
    Tensor allowed = Lt(Iota(fb.ops(), row, 1),
                        Full(fb.ops(), row, static_cast<double>(sample_vocab), ElementType::kS32));
    logits = Where(allowed, logits, FullLike(logits, -INFINITY));
  }
  TL_RETURN_IF_ERROR(fb.Return({Argmax(logits, 1)}));
  TL_RETURN_IF_ERROR(Verify(*module));
  return module;
}

}  // namespace

TensorParallelGreedy::TensorParallelGreedy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TensorParallelGreedy::~TensorParallelGreedy() = default;

StatusOr<std::unique_ptr<TensorParallelGreedy>> TensorParallelGreedy::Create(
    const io::ModelConfig& config, std::vector<Literal> weights, Backend& backend, const Mesh& mesh,
    int64_t max_len, int64_t sample_vocab) {
  TL_ASSIGN_OR_RETURN(auto plan, shard::ShardingPlan::Make("tp", mesh, config, 1));
  if (max_len < 1 || max_len > config.max_position_embeddings)
    return InvalidArgument("tensor-parallel generation: max_len " + std::to_string(max_len) +
                           " must be in [1, max_position_embeddings " +
                           std::to_string(config.max_position_embeddings) + "]");
  if (plan.num_devices() > backend.num_devices())
    return InvalidArgument(
        "mesh " + mesh.ToString() + " needs " + std::to_string(plan.num_devices()) + " devices; " +
        backend.name() + " has " + std::to_string(backend.num_devices()) + " (TLALOC_CPU_DEVICES)");
  if (weights.size() != plan.weights().size())
    return InvalidArgument("tensor-parallel generation got " + std::to_string(weights.size()) +
                           " weights; the config needs " + std::to_string(plan.weights().size()));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->backend = &backend;
  impl->max_len = max_len;
  const int n = static_cast<int>(plan.num_devices());
  impl->weights.resize(n);
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto& spec = plan.weights()[i];
    if (weights[i].dims() != spec.shape || !IsFloat(weights[i].element_type()))
      return InvalidArgument("weight " + spec.name + " " + Type(weights[i].type()).ToString() +
                             ": expected a float tensor of shape " + DimsToString(spec.shape));
    Literal f32(TensorType(ElementType::kF32, spec.shape));
    for (int64_t e = 0; e < f32.num_elements(); ++e)
      f32.SetFromDouble(e, weights[i].GetAsDouble(e));
    weights[i] = Literal();
    for (int d = 0; d < n; ++d) {
      if (!backend.is_addressable(d)) {  // another process (mpirun) holds that part
        impl->weights[d].push_back(nullptr);
        continue;
      }
      TL_ASSIGN_OR_RETURN(Literal part, shard::LocalPart(f32, mesh, plan.weight(i), d));
      TL_ASSIGN_OR_RETURN(auto buf, backend.Adopt(std::move(part), d));
      impl->weights[d].push_back(std::move(buf));
    }
  }
  TL_ASSIGN_OR_RETURN(auto module, BuildNextTokenProgram(config, plan, max_len, sample_vocab));
  TL_ASSIGN_OR_RETURN(impl->program, backend.CompileForDevices(module, ProcessGrid{1, n}));
  for (int d = 0; d < n; ++d) {
    if (!backend.is_addressable(d)) continue;
    TL_RETURN_IF_ERROR(CheckTensorParallelStepFits(backend, *impl->program, mesh.ToString(),
                                                   max_len, d, ResidentBytes(impl->weights[d])));
  }
  impl->plan = std::move(plan);
  return std::unique_ptr<TensorParallelGreedy>(new TensorParallelGreedy(std::move(impl)));
}

StatusOr<std::vector<int32_t>> TensorParallelGreedy::Generate(const std::vector<int32_t>& prompt,
                                                              int64_t max_new_tokens,
                                                              const std::vector<int64_t>& eos) {
  Impl& s = *impl_;
  if (prompt.empty()) return InvalidArgument("tensor-parallel generation: empty prompt");
  if (static_cast<int64_t>(prompt.size()) >= s.max_len)
    return InvalidArgument("tensor-parallel generation: prompt of " +
                           std::to_string(prompt.size()) + " tokens leaves no room in max_len " +
                           std::to_string(s.max_len));
  for (int32_t t : prompt)
    if (t < 0 || t >= s.config.vocab_size)
      return InvalidArgument("tensor-parallel generation: token " + std::to_string(t) +
                             " is outside the vocabulary of " +
                             std::to_string(s.config.vocab_size));
  std::vector<int32_t> seq = prompt, out;
  seq.resize(s.max_len, 0);
  int64_t len = static_cast<int64_t>(prompt.size());
  const int n = static_cast<int>(s.weights.size());
  while (static_cast<int64_t>(out.size()) < max_new_tokens && len < s.max_len) {
    std::vector<std::unique_ptr<DeviceBuffer>> inputs;
    std::vector<std::vector<ExecuteArg>> args(n);
    int first = -1;  // the first device this process holds: every device picks the same token
    for (int d = 0; d < n; ++d) {
      if (!s.backend->is_addressable(d)) continue;
      if (first < 0) first = d;
      for (auto& w : s.weights[d]) args[d].push_back({w.get(), false});
      TL_ASSIGN_OR_RETURN(
          auto ids, s.backend->ToDevice(Literal::FromVector<int32_t>({1, s.max_len}, seq), d));
      TL_ASSIGN_OR_RETURN(
          auto last,
          s.backend->ToDevice(Literal::Scalar<int32_t>(static_cast<int32_t>(len - 1)), d));
      args[d].push_back({ids.get(), false});
      args[d].push_back({last.get(), false});
      inputs.push_back(std::move(ids));
      inputs.push_back(std::move(last));
    }
    TL_ASSIGN_OR_RETURN(auto results, s.backend->ExecuteOnDevices(*s.program, args));
    TL_ASSIGN_OR_RETURN(Literal next, s.backend->ToHost(*results[first][0]));
    const int32_t token = static_cast<int32_t>(next.GetAsInt64(0));
    out.push_back(token);
    seq[len++] = token;
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) break;
  }
  return out;
}

}  // namespace tlaloc::generate
