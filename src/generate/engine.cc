// The engine: weights on the backend, a paged KV cache, step programs cached by shape.
#include "tlaloc/generate/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "generate/tensor_parallel.h"
#include "tlaloc/generate/memory_check.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/shard/lowering.h"
#include "tlaloc/shard/plan.h"

namespace tlaloc::generate {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The sampling inputs of a batch, one entry per program row (idle rows greedy).
struct SamplingColumns {
  std::vector<float> temperature, top_p, min_p;
  std::vector<int32_t> top_k;
  std::vector<uint32_t> keys, steps;

  explicit SamplingColumns(int64_t rows)
      : temperature(rows, 0.f),
        top_p(rows, 1.f),
        min_p(rows, 0.f),
        top_k(rows, 0),
        keys(2 * rows, 0),
        steps(rows, 0) {}
  void Set(int64_t row, const RowSampling& s, uint32_t step) {
    temperature[row] = static_cast<float>(s.params.temperature);
    top_k[row] = static_cast<int32_t>(std::clamp<int64_t>(s.params.top_k, 0, INT32_MAX));
    top_p[row] = static_cast<float>(s.params.top_p);
    min_p[row] = static_cast<float>(std::max(0.0, s.params.min_p));
    // jax.random.PRNGKey(seed) layout: [high word, low word].
    keys[2 * row] = static_cast<uint32_t>(s.seed >> 32);
    keys[2 * row + 1] = static_cast<uint32_t>(s.seed & 0xffffffffu);
    steps[row] = step;
  }
  void AddTo(std::map<models::Port, Literal>& in) const {
    const int64_t n = static_cast<int64_t>(temperature.size());
    in[models::Port::kTemperature] = Literal::FromVector<float>({n}, temperature);
    in[models::Port::kTopK] = Literal::FromVector<int32_t>({n}, top_k);
    in[models::Port::kTopP] = Literal::FromVector<float>({n}, top_p);
    in[models::Port::kMinP] = Literal::FromVector<float>({n}, min_p);
    in[models::Port::kKeys] = Literal::FromVector<uint32_t>({n, 2}, keys);
    in[models::Port::kSteps] = Literal::FromVector<uint32_t>({n}, steps);
  }
};

Status CheckSampling(const nn::SamplingParams& p, int64_t vocab, const std::string& what) {
  if (!(p.temperature == p.temperature) || !(p.top_p > 0 && p.top_p <= 1))
    return InvalidArgument(what + ": temperature must be a number and top_p in (0, 1]");
  if (!(p.min_p >= 0 && p.min_p <= 1))
    return InvalidArgument(what + ": min_p " + std::to_string(p.min_p) + " is outside [0, 1]");
  if (!(p.repetition_penalty > 0 && std::isfinite(p.repetition_penalty)))
    return InvalidArgument(what + ": repetition_penalty " + std::to_string(p.repetition_penalty) +
                           " is not a positive number");
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    return InvalidArgument(what + ": presence_penalty and frequency_penalty must be numbers");
  for (const auto& [id, bias] : p.logit_bias)
    if (id < 0 || id >= vocab || !std::isfinite(bias))
      return InvalidArgument(what + ": logit_bias of token id " + std::to_string(id) +
                             ": expected an id in [0, " + std::to_string(vocab) +
                             ") and a finite bias");
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(io::ModelConfig config,
                                                 std::vector<Literal> weights, ElementType dtype,
                                                 std::shared_ptr<Backend> backend,
                                                 std::optional<Mesh> tensor_parallel) {
  TL_ASSIGN_OR_RETURN(const models::ModelFamily* family, models::FamilyOf(config));
  TL_RETURN_IF_ERROR(family->check_supported(config));
  auto specs = family->weight_specs(config);
  if (weights.size() != specs.size())
    return InvalidArgument("Engine: expected " + std::to_string(specs.size()) +
                           " weight tensors, got " + std::to_string(weights.size()));
  for (size_t i = 0; i < specs.size(); ++i)
    if (weights[i].type() != TensorType(specs[i].TypeFor(dtype), specs[i].shape))
      return InvalidArgument("Engine: weight \"" + specs[i].name + "\" is " +
                             weights[i].type().ToString() + ", expected " +
                             TensorType(specs[i].TypeFor(dtype), specs[i].shape).ToString());
  std::unique_ptr<Engine> e(new Engine());
  e->backend_ = backend ? std::move(backend) : std::shared_ptr<Backend>(MakeInterpreterBackend());
  e->config_ = std::move(config);
  e->device_config_ = e->config_;
  e->family_ = family;
  e->dtype_ = dtype;
  e->caches_.resize(1);
  if (tensor_parallel) {
    e->mesh_ = std::move(tensor_parallel);
    TL_RETURN_IF_ERROR(e->UploadTensorParallel(std::move(weights)));
    return e;
  }
  // Uploaded once; the interpreter adopts the (possibly file-mapped) storage without a copy.
  e->weights_.resize(1);
  e->weights_[0].reserve(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    auto buffer = e->backend_->Adopt(std::move(weights[i]));
    if (!buffer.ok())
      return Status(buffer.status().code(), "uploading weight \"" + specs[i].name + "\" to " +
                                                e->backend_->name() + ": " +
                                                buffer.status().message());
    e->weights_[0].push_back(std::move(*buffer));
  }
  e->PrepareInt8Weights(specs);
  return e;
}

void Engine::PrepareInt8Weights(const std::vector<models::WeightSpec>& specs) {
  // Only the q8_0 form multiplies through the backend's int8 kernels; the exact form
  // dequantises, and a copy laid out for those kernels would only take memory.
  auto form = nn::CurrentInt8Form();
  if (!form.ok() || *form != nn::Int8Form::kQ8_0) return;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[specs[i].name] = i;
  // Each device holds its own parts under tensor parallelism (a part keeps whole 32-column
  // blocks, so it is laid out as a matrix of its own); a device of another process holds none.
  for (const auto& held : weights_) {
    if (held.size() != specs.size()) continue;
    for (size_t i = 0; i < specs.size(); ++i) {
      // A table read a row per token is never multiplied whole.
      if (specs[i].fixed_type != ElementType::kS8 || specs[i].read_by_rows) continue;
      auto scale = index.find(models::Int8ScaleName(specs[i].name));
      if (scale == index.end()) continue;
      backend_->PrepareInt8Weight(*held[i], *held[scale->second]);
    }
  }
}

Status Engine::UploadTensorParallel(std::vector<Literal> weights) {
  const std::string what = "tensor-parallel generation over mesh " + mesh_->ToString();
  TL_ASSIGN_OR_RETURN(TensorParallelLayout layout,
                      LayOutTensorParallel(*family_, config_, *mesh_, what));
  const int n = static_cast<int>(layout.plan.num_devices());
  if (n > backend_->num_devices())
    return InvalidArgument(what + " needs " + std::to_string(n) + " devices; " + backend_->name() +
                           " has " + std::to_string(backend_->num_devices()) +
                           " (TLALOC_CPU_DEVICES)");
  device_config_ = layout.device_config;
  layout_ = std::make_shared<const TensorParallelLayout>(std::move(layout));
  const shard::ShardingPlan* plan = &layout_->plan;
  const auto& device_specs = plan->weights();
  home_device_ = -1;
  for (int d = 0; d < n && home_device_ < 0; ++d)
    if (backend_->is_addressable(d)) home_device_ = d;
  if (home_device_ < 0) return InvalidArgument(what + ": this process holds none of its devices");
  weights_.clear();
  weights_.resize(n);
  caches_.clear();
  caches_.resize(n);
  for (size_t i = 0; i < weights.size(); ++i) {
    for (int d = 0; d < n; ++d) {
      if (!backend_->is_addressable(d)) continue;  // another process (mpirun) holds that part
      TL_ASSIGN_OR_RETURN(Literal part, shard::LocalPart(weights[i], *mesh_, plan->weight(i), d));
      auto buffer = backend_->Adopt(std::move(part), d);
      if (!buffer.ok())
        return Status(buffer.status().code(), "uploading device " + std::to_string(d) +
                                                  "'s part of weight \"" + device_specs[i].name +
                                                  "\" to " + backend_->name() + ": " +
                                                  buffer.status().message());
      weights_[d].push_back(std::move(*buffer));
    }
    weights[i] = Literal();  // the whole tensor is no longer needed
  }
  PrepareInt8Weights(device_specs);
  return OkStatus();
}

int64_t Engine::weight_bytes(int device) const { return ResidentBytes(weights_.at(device)); }
int64_t Engine::cache_bytes(int device) const { return ResidentBytes(caches_.at(device)); }

Status Engine::Reserve(int64_t num_slots, int64_t max_len, int64_t num_blocks) {
  // Past max_position_embeddings is allowed: RoPE extends there (a -c larger than the trained
  // length, with a warning where the request is prepared).
  if (num_slots <= 0 || max_len <= 0)
    return InvalidArgument("KV cache of " + std::to_string(num_slots) + " slots x " +
                           std::to_string(max_len) +
                           " positions: expected at least one slot and one position");
  if (num_blocks < 0 || num_blocks > INT32_MAX)
    return InvalidArgument("KV cache of " + std::to_string(num_blocks) +
                           " blocks: expected a positive number (0: every slot at full length)");
  if (num_blocks == 0) num_blocks = num_slots * BlocksFor(max_len);
  if (num_slots == num_slots_ && max_len == max_len_ && num_blocks == num_blocks_ && HasCache())
    return OkStatus();
  // The old cache goes first, so two never coexist.
  DropCache();
  models::StepShape shape = StepShapeFor(models::StepKind::kDecode, 1, 0, 1);
  shape.num_slots = num_slots;  // what the refusal names
  shape.max_len = max_len;
  shape.num_blocks = num_blocks;
  // Each device's pools hold its KV heads.
  const TensorType cache_type = models::KvCacheType(device_config_, shape);
  TL_RETURN_IF_ERROR(
      CheckCacheFits(*backend_, cache_type, 2 * config_.num_hidden_layers, shape, home_device_));
  for (int d = 0; d < num_devices(); ++d) {
    if (!backend_->is_addressable(d)) continue;
    for (int64_t i = 0; i < 2 * config_.num_hidden_layers; ++i) {
      auto buffer = backend_->Adopt(Literal(cache_type), d);
      if (!buffer.ok()) {
        DropCache();
        return Status(buffer.status().code(),
                      "allocating the KV cache (" + std::to_string(2 * config_.num_hidden_layers) +
                          " x " + cache_type.ToString() + ") on " + backend_->name() +
                          (num_devices() > 1 ? " device " + std::to_string(d) : "") + ": " +
                          buffer.status().message());
      }
      caches_[d].push_back(std::move(*buffer));
    }
  }
  num_slots_ = num_slots;
  max_len_ = max_len;
  num_blocks_ = num_blocks;
  lengths_.assign(num_slots, 0);
  tables_.assign(num_slots, {});
  history_.assign(num_slots, {});
  prompt_ends_.assign(num_slots, 0);
  // Handed out lowest first.
  free_.resize(num_blocks);
  for (int64_t i = 0; i < num_blocks; ++i) free_[i] = static_cast<int32_t>(num_blocks - 1 - i);
  refs_.assign(num_blocks, 0);
  return OkStatus();
}

Status Engine::SetKvDtype(ElementType type) {
  if (type == kv_dtype()) return OkStatus();
  TL_RETURN_IF_ERROR(models::CheckKvCacheType(dtype_, type));
  DropCache();
  programs_.clear();
  if (type == dtype_)
    kv_dtype_.reset();
  else
    kv_dtype_ = type;
  return OkStatus();
}

void Engine::DropCache() {
  for (auto& device : caches_) device.clear();
  num_slots_ = max_len_ = num_blocks_ = 0;
  lengths_.clear();
  tables_.clear();
  history_.clear();
  prompt_ends_.clear();
  free_.clear();
  refs_.clear();
}

void Engine::Release(int64_t slot) {
  if (slot < 0 || slot >= num_slots_) return;
  auto& table = tables_[slot];
  // Back in reverse, so the next sequence takes the same blocks in the same order.
  for (auto it = table.rbegin(); it != table.rend(); ++it)
    if (--refs_[*it] == 0) free_.push_back(*it);
  table.clear();
  lengths_[slot] = 0;
  history_[slot].clear();
  prompt_ends_[slot] = 0;
}

Status Engine::Share(int64_t src, int64_t dst, int64_t positions) {
  if (src < 0 || src >= num_slots_ || dst < 0 || dst >= num_slots_ || src == dst)
    return InvalidArgument("Share: slots " + std::to_string(src) + " and " + std::to_string(dst) +
                           ": expected two distinct slots of " + std::to_string(num_slots_));
  if (positions < 0 || positions % kKvBlockSize != 0 || positions > lengths_[src])
    return InvalidArgument("Share: " + std::to_string(positions) + " positions of slot " +
                           std::to_string(src) + ": expected whole blocks of " +
                           std::to_string(kKvBlockSize) + " within its " +
                           std::to_string(lengths_[src]) + " positions");
  Release(dst);
  const auto& from = tables_[src];
  auto& table = tables_[dst];
  table.assign(from.begin(), from.begin() + positions / kKvBlockSize);
  for (int32_t b : table) ++refs_[b];
  lengths_[dst] = positions;
  history_[dst].assign(history_[src].begin(), history_[src].begin() + positions);
  prompt_ends_[dst] = std::min(prompt_ends_[src], positions);
  return OkStatus();
}

StatusOr<bool> Engine::AddPenalties(const std::vector<int64_t>& slots,
                                    const std::vector<const nn::SamplingParams*>& params,
                                    std::map<models::Port, Literal>& in) const {
  bool any = false;
  for (const nn::SamplingParams* p : params) any = any || (p && p->penalized());
  if (!any) return false;
  // Dense [rows, vocab] inputs filled here from each slot's history: one upload per step, and
  // only in steps with a penalised row (the others run the program without these inputs).
  const int64_t n = static_cast<int64_t>(slots.size()), v = config_.vocab_size;
  std::vector<float> bias(n * v, 0.f), scale(n * v, 1.f), offset(n * v, 0.f);
  std::vector<uint8_t> mask;
  for (int64_t r = 0; r < n; ++r) {
    const nn::SamplingParams* p = params[r];
    if (slots[r] < 0 || !p || !p->penalized()) continue;
    const std::vector<int32_t>& history = history_[slots[r]];
    const size_t prompt_end = std::min<size_t>(prompt_ends_[slots[r]], history.size());
    const std::span<const int32_t> ids(history);
    nn::FillPenaltyRow(*p, ids.first(prompt_end), ids.subspan(prompt_end),
                       std::span<float>(bias).subspan(r * v, v),
                       std::span<float>(scale).subspan(r * v, v),
                       std::span<float>(offset).subspan(r * v, v));
    if (p->constraint) {
      // The constraint sees the tokens drawn since it was last asked (the history holds them,
      // whichever front end fed them), then says what may come next.
      nn::TokenConstraint& c = *p->constraint;
      const std::span<const int32_t> generated = ids.subspan(prompt_end);
      if (c.accepted() > static_cast<int64_t>(generated.size()))
        return Internal("slot " + std::to_string(slots[r]) + "'s token constraint has seen " +
                        std::to_string(c.accepted()) + " tokens; the sequence generated " +
                        std::to_string(generated.size()));
      for (size_t i = static_cast<size_t>(c.accepted()); i < generated.size(); ++i)
        TL_RETURN_IF_ERROR(c.Accept(generated[i]));
      mask.resize(v);
      c.AllowedMask(mask);
      float* row_bias = bias.data() + r * v;
      for (int64_t id = 0; id < v; ++id)
        if (!mask[id]) row_bias[id] += nn::kRefusedTokenBias;
    }
  }
  in[models::Port::kLogitBias] = Literal::FromVector<float>({n, v}, bias);
  in[models::Port::kPenaltyScale] = Literal::FromVector<float>({n, v}, scale);
  in[models::Port::kPenaltyOffset] = Literal::FromVector<float>({n, v}, offset);
  return true;
}

int64_t Engine::block_bytes() const {
  return 2 * config_.num_hidden_layers * device_config_.num_key_value_heads * kKvBlockSize *
         config_.head_dim * ElementSize(kv_dtype());
}

Status Engine::Grow(const std::vector<std::pair<int64_t, int64_t>>& needs) {
  int64_t more = 0;
  for (const auto& [slot, positions] : needs)
    more += std::max<int64_t>(0, BlocksFor(positions) - static_cast<int64_t>(tables_[slot].size()));
  if (more > free_blocks())
    return ResourceExhausted("the KV cache is full: this step needs " + std::to_string(more) +
                             " more blocks of " + std::to_string(kKvBlockSize) + " positions and " +
                             std::to_string(free_blocks()) + " of " + std::to_string(num_blocks_) +
                             " are free");
  for (const auto& need : needs) {
    auto& table = tables_[need.first];
    while (static_cast<int64_t>(table.size()) < BlocksFor(need.second)) {
      table.push_back(free_.back());
      refs_[free_.back()] = 1;
      free_.pop_back();
    }
  }
  return OkStatus();
}

void Engine::FillTables(int64_t slot, int64_t start, int64_t table, int64_t write,
                        std::vector<int32_t>& table_out, std::vector<int32_t>& write_out) const {
  // Entries past the sequence's blocks name block 0: masked when read, never written.
  const auto& blocks = tables_[slot];
  for (int64_t i = 0; i < table; ++i)
    table_out.push_back(i < static_cast<int64_t>(blocks.size()) ? blocks[i] : 0);
  const int64_t first = start / kKvBlockSize;
  for (int64_t i = 0; i < write; ++i)
    write_out.push_back(first + i < static_cast<int64_t>(blocks.size()) ? blocks[first + i] : 0);
}

void Engine::set_sample_vocab(int64_t n) {
  if (n == sample_vocab_) return;
  sample_vocab_ = n;
  programs_.clear();
}

void Engine::set_max_candidates(int64_t n) {
  if (n == max_candidates_) return;
  max_candidates_ = n;
  programs_.clear();
}

int64_t Engine::PromptBucket(int64_t len) const {
  // From 4, not 16: a step of short prompts (chat turns, a burst of requests) computes every row
  // of its padded chunks, and 16 prompts of 4 tokens padded to 16 cost four times their work.
  // Powers of two and 1.5 times them (4, 6, 8, 12, 16, 24, ...): a chunk pads to less than 1.5
  // times its length, not up to twice (5 tokens to 6, not 8), so a step of short prompts computes
  // fewer padded rows and holds more prompts in the prefill row budget, for twice the programs.
  int64_t t = 4;
  while (t < len && t + t / 2 < len) t *= 2;
  if (t < len) t += t / 2;
  return std::min(t, max_len_ > 0 ? max_len_ : config_.max_position_embeddings);
}

int64_t Engine::TableBucket(int64_t positions) const {
  int64_t m = 1;
  while (m * kKvBlockSize < positions) m *= 2;
  return std::min(m, BlocksFor(max_len_));
}

int64_t Engine::RowBucket(int64_t rows) const {
  int64_t n = 1;
  while (n < rows) n *= 2;
  return std::min(n, num_slots_);
}

StatusOr<Engine::Program*> Engine::GetProgram(const models::StepShape& shape) {
  ProgramKey key{shape.kind,         shape.batch,      shape.prompt_len,
                 shape.table_blocks, shape.num_blocks, shape.penalties};
  auto it = programs_.find(key);
  if (it != programs_.end()) return &it->second;
  const bool prefill = shape.kind == models::StepKind::kPrefill;
  double t0 = Now();
  nn::LayerTrace trace;
  // Tensor parallel: each device's part, with the block all_reduces over the `model` axis.
  shard::CollectiveEmitter emit;
  models::ParallelHooks hooks;
  if (mesh_) hooks = TensorParallelHooks(*layout_, emit);
  TL_ASSIGN_OR_RETURN(
      models::ModelProgram built,
      family_->build_step(device_config_, shape, program_transform_ ? &trace : nullptr,
                          mesh_ ? &hooks : nullptr));
  if (program_transform_)
    TL_RETURN_IF_ERROR(program_transform_(built.module, trace).WithContext("program transform"));
  auto compiled =
      mesh_ ? backend_->CompileForDevices(built.module, ProcessGrid{1, num_devices()}, built.entry)
            : backend_->Compile(built.module, built.entry);
  if (!compiled.ok())
    return Status(compiled.status().code(),
                  std::string("compiling the ") + (prefill ? "prefill" : "decode-step") +
                      " program on " + backend_->name() + ": " + compiled.status().message());
  TL_RETURN_IF_ERROR(CheckStepFits(*backend_, **compiled, shape,
                                   weight_bytes(home_device_) + cache_bytes(home_device_),
                                   home_device_));
  compile_seconds_ += Now() - t0;
  Program& p = programs_[key];
  p.compiled = std::move(*compiled);
  p.signature = std::move(built.signature);
  return &p;
}

models::StepShape Engine::StepShapeFor(models::StepKind kind, int64_t batch, int64_t prompt_len,
                                       int64_t table_blocks, bool penalties) const {
  models::StepShape shape;
  shape.kind = kind;
  shape.batch = batch;
  shape.prompt_len = prompt_len;
  shape.num_slots = num_slots_;
  shape.max_len = max_len_;
  shape.page_size = kKvBlockSize;
  shape.num_blocks = num_blocks_;
  shape.table_blocks = table_blocks;
  shape.dtype = dtype_;
  shape.kv_dtype = kv_dtype_;
  shape.sample_vocab = sample_vocab_;
  shape.max_candidates = max_candidates_;
  shape.penalties = penalties;
  return shape;
}

Status Engine::CheckSlot(int64_t slot, std::vector<bool>& seen) const {
  if (slot < 0 || slot >= num_slots_)
    return InvalidArgument("slot " + std::to_string(slot) + " is outside the KV cache's " +
                           std::to_string(num_slots_) + " slots");
  if (seen[slot]) return InvalidArgument("slot " + std::to_string(slot) + " appears twice");
  seen[slot] = true;
  return OkStatus();
}

StatusOr<EngineStep> Engine::Run(Program& program, std::map<models::Port, Literal> step_inputs,
                                 const std::vector<int64_t>& rows) {
  const models::ProgramSignature& sig = program.signature;
  const int n = num_devices();
  std::vector<std::unique_ptr<DeviceBuffer>> uploaded;
  std::vector<std::vector<ExecuteArg>> args(n);
  for (int d = 0; d < n; ++d) {
    if (!backend_->is_addressable(d)) continue;  // another process runs it (mpirun)
    args[d].resize(sig.inputs.size());
    size_t next_weight = 0, next_cache = 0;
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      const models::Port port = sig.inputs[i].port;
      if (port == models::Port::kWeight) {
        args[d][i] = {weights_[d].at(next_weight++).get(), false};
      } else if (sig.IsCacheInput(static_cast<int>(i))) {
        // Donated: the program aliases each cache to its updated result, so the backend writes
        // the new keys and values into the same buffer.
        args[d][i] = {caches_[d].at(next_cache++).get(), true};
      } else {
        auto in = step_inputs.find(port);
        if (in == step_inputs.end())
          return Internal("no value for the program input \"" + sig.inputs[i].name + "\"");
        // Every device gets its copy of the step's inputs; the last one takes the literal.
        Literal value = d + 1 < n ? in->second.Clone() : std::move(in->second);
        TL_ASSIGN_OR_RETURN(auto buffer, backend_->Adopt(std::move(value), d));
        args[d][i] = {buffer.get(), true};
        uploaded.push_back(std::move(buffer));
      }
    }
  }
  // The caches leave caches_ for the run: donated buffers are gone whatever happens, and a
  // failed step must leave "no cache" behind rather than deleted buffers.
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> donated(n);
  for (int d = 0; d < n; ++d) {
    donated[d] = std::move(caches_[d]);
    caches_[d].clear();
  }
  StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> out =
      std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>(1);
  if (mesh_) {
    out = backend_->ExecuteOnDevices(*program.compiled, args);
  } else {
    auto single = backend_->Execute(*program.compiled, args[0]);
    if (single.ok())
      (*out)[0] = std::move(*single);
    else
      out = single.status();
  }
  donated.clear();
  if (!out.ok()) {
    DropCache();
    return out.status();
  }
  for (int d = 0; d < n; ++d)
    if (backend_->is_addressable(d) && (*out)[d].size() != sig.outputs.size())
      return Internal("the step program returned " + std::to_string((*out)[d].size()) +
                      " results on device " + std::to_string(d) + ", expected " +
                      std::to_string(sig.outputs.size()));
  const int next_out = sig.Output(models::Port::kNextTokens);
  std::vector<std::unique_ptr<DeviceBuffer>>& home = (*out)[home_device_];
  TL_ASSIGN_OR_RETURN(Literal next, backend_->ToHost(*home[next_out]));
  TL_ASSIGN_OR_RETURN(Literal logits, backend_->ToHost(*home[sig.Output(models::Port::kLogits)]));
  for (int d = 0; d < n; ++d) {
    if (!backend_->is_addressable(d)) continue;
    if (d != home_device_) {
      // Same logits everywhere (the all_reduce folds in device order), so the same draw.
      TL_ASSIGN_OR_RETURN(Literal other, backend_->ToHost(*(*out)[d][next_out]));
      auto a = next.span<int32_t>(), b = other.span<int32_t>();
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end()))
        return Internal("tensor-parallel step: device " + std::to_string(d) +
                        " drew other tokens than device " + std::to_string(home_device_));
    }
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      if (sig.outputs[i].aliased_input >= 0) caches_[d].push_back(std::move((*out)[d][i]));
  }
  EngineStep step;
  auto ids = next.span<int32_t>();
  bool in_order = static_cast<int64_t>(rows.size()) == logits.dims()[0];
  for (size_t r = 0; r < rows.size() && in_order; ++r)
    in_order = rows[r] == static_cast<int64_t>(r);
  if (in_order) {  // every row, in program order: the downloaded logits as they are
    step.tokens.assign(ids.begin(), ids.end());
    step.logits = std::move(logits);
    return step;
  }
  const int64_t vocab = logits.dims()[1];
  step.logits = Literal::Uninitialized(
      TensorType(ElementType::kF32, {static_cast<int64_t>(rows.size()), vocab}));
  auto src = logits.span<float>();
  auto dst = step.logits.span<float>();
  for (size_t r = 0; r < rows.size(); ++r) {
    step.tokens.push_back(ids[rows[r]]);
    std::copy_n(src.begin() + rows[r] * vocab, vocab, dst.begin() + r * vocab);
  }
  return step;
}

StatusOr<EngineStep> Engine::Prefill(std::span<const PrefillRow> rows) {
  if (!HasCache()) return FailedPrecondition("Prefill: no KV cache (call Reserve first)");
  const int64_t bsz = static_cast<int64_t>(rows.size());
  if (bsz == 0) return InvalidArgument("Prefill: no prompts");
  std::vector<bool> seen(num_slots_, false);
  int64_t longest = 0, reach = 0;
  for (int64_t r = 0; r < bsz; ++r) {
    const auto& prompt = rows[r].prompt;
    const std::string what = "prompt " + std::to_string(r);
    TL_RETURN_IF_ERROR(CheckSlot(rows[r].slot, seen));
    if (prompt.empty()) return InvalidArgument(what + " is empty");
    for (int32_t id : prompt)
      if (id < 0 || id >= config_.vocab_size)
        return InvalidArgument(what + " has token id " + std::to_string(id) +
                               " outside the vocabulary [0, " + std::to_string(config_.vocab_size) +
                               ")");
    TL_RETURN_IF_ERROR(CheckSampling(rows[r].sampling.params, config_.vocab_size, what));
    const int64_t start = rows[r].start, end = start + static_cast<int64_t>(prompt.size());
    if (start != 0 && start != lengths_[rows[r].slot])
      return InvalidArgument(what + " continues slot " + std::to_string(rows[r].slot) +
                             " at position " + std::to_string(start) + " but its sequence holds " +
                             std::to_string(lengths_[rows[r].slot]) + " positions");
    if (end > max_len_)
      return InvalidArgument(what + " ends at position " + std::to_string(end) +
                             ", past the context of " + std::to_string(max_len_));
    longest = std::max<int64_t>(longest, prompt.size());
    reach = std::max(reach, end);
  }
  // A row starting at 0 drops what its slot held before; blocks for the chunks come next.
  std::vector<std::pair<int64_t, int64_t>> needs;
  int64_t dropped = 0;
  for (const PrefillRow& row : rows)
    if (row.start == 0)
      for (int32_t b : tables_[row.slot]) dropped += refs_[b] == 1;  // shared ones stay held
  int64_t more = -dropped;
  for (const PrefillRow& row : rows) {
    const int64_t held = row.start == 0 ? 0 : static_cast<int64_t>(tables_[row.slot].size());
    more += std::max<int64_t>(0, BlocksFor(row.start + row.prompt.size()) - held);
  }
  if (more > free_blocks())
    return ResourceExhausted("the KV cache is full: these prompts need " + std::to_string(more) +
                             " more blocks of " + std::to_string(kKvBlockSize) + " positions and " +
                             std::to_string(free_blocks()) + " of " + std::to_string(num_blocks_) +
                             " are free");
  for (const PrefillRow& row : rows) {
    if (row.start == 0) Release(row.slot);
    needs.push_back({row.slot, row.start + static_cast<int64_t>(row.prompt.size())});
  }
  TL_RETURN_IF_ERROR(Grow(needs));
  std::vector<int64_t> row_slots;
  std::vector<const nn::SamplingParams*> row_params;
  for (const PrefillRow& row : rows) {
    auto& history = history_[row.slot];
    history.resize(row.start);
    history.insert(history.end(), row.prompt.begin(), row.prompt.end());
    prompt_ends_[row.slot] = static_cast<int64_t>(history.size());
    row_slots.push_back(row.slot);
    row_params.push_back(&row.sampling.params);
  }
  std::map<models::Port, Literal> in;
  TL_ASSIGN_OR_RETURN(const bool penalties, AddPenalties(row_slots, row_params, in));
  const models::StepShape shape = StepShapeFor(
      models::StepKind::kPrefill, bsz, PromptBucket(longest), TableBucket(reach), penalties);
  TL_ASSIGN_OR_RETURN(Program * program, GetProgram(shape));
  const int64_t t = shape.prompt_len, m = shape.table_blocks, w = shape.write_blocks();
  std::vector<int32_t> tokens(bsz * t, 0), positions(bsz * t), lengths(bsz), table, write;
  SamplingColumns sampling(bsz);
  std::vector<int64_t> out_rows(bsz);
  for (int64_t r = 0; r < bsz; ++r) {
    std::copy(rows[r].prompt.begin(), rows[r].prompt.end(), tokens.begin() + r * t);
    for (int64_t i = 0; i < t; ++i) positions[r * t + i] = static_cast<int32_t>(rows[r].start + i);
    lengths[r] = static_cast<int32_t>(rows[r].prompt.size());
    FillTables(rows[r].slot, rows[r].start, m, w, table, write);
    sampling.Set(r, rows[r].sampling, 0);
    out_rows[r] = r;
  }
  in[models::Port::kTokens] = Literal::FromVector<int32_t>({bsz, t}, tokens);
  in[models::Port::kPositions] = Literal::FromVector<int32_t>({bsz, t}, positions);
  in[models::Port::kLengths] = Literal::FromVector<int32_t>({bsz}, lengths);
  in[models::Port::kBlockTable] = Literal::FromVector<int32_t>({bsz, m}, table);
  in[models::Port::kWriteBlocks] = Literal::FromVector<int32_t>({bsz, w}, write);
  sampling.AddTo(in);
  TL_ASSIGN_OR_RETURN(EngineStep step, Run(*program, std::move(in), out_rows));
  for (const PrefillRow& row : rows)
    lengths_[row.slot] = row.start + static_cast<int64_t>(row.prompt.size());
  return step;
}

StatusOr<EngineStep> Engine::Decode(std::span<const DecodeRow> rows) {
  if (!HasCache()) return FailedPrecondition("DecodeStep: no KV cache (run Prefill first)");
  if (rows.empty()) return InvalidArgument("DecodeStep: no rows");
  std::vector<bool> seen(num_slots_, false);
  std::vector<std::pair<int64_t, int64_t>> needs;
  int64_t reach = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    TL_RETURN_IF_ERROR(CheckSlot(rows[r].slot, seen));
    if (rows[r].position < 0 || rows[r].position >= max_len_ ||
        rows[r].position > lengths_[rows[r].slot])
      return InvalidArgument("DecodeStep: position " + std::to_string(rows[r].position) +
                             " of row " + std::to_string(r) + " is outside the context of " +
                             std::to_string(max_len_) + " or past its sequence's " +
                             std::to_string(lengths_[rows[r].slot]) + " positions");
    if (rows[r].token < 0 || rows[r].token >= config_.vocab_size)
      return InvalidArgument("DecodeStep: token id " + std::to_string(rows[r].token) +
                             " outside the vocabulary");
    TL_RETURN_IF_ERROR(
        CheckSampling(rows[r].sampling.params, config_.vocab_size, "row " + std::to_string(r)));
    needs.push_back({rows[r].slot, rows[r].position + 1});
    reach = std::max<int64_t>(reach, rows[r].position + 1);
  }
  TL_RETURN_IF_ERROR(Grow(needs));
  // Rows in the order given, padded to the bucket with rows that write and keep nothing.
  const int64_t n = RowBucket(static_cast<int64_t>(rows.size()));
  // The token a row feeds is its latest generated one: it joins the slot's history.
  std::vector<int64_t> row_slots(n, -1);
  std::vector<const nn::SamplingParams*> row_params(n, nullptr);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto& history = history_[rows[r].slot];
    history.resize(rows[r].position);
    history.push_back(rows[r].token);
    row_slots[r] = rows[r].slot;
    row_params[r] = &rows[r].sampling.params;
  }
  std::map<models::Port, Literal> in;
  TL_ASSIGN_OR_RETURN(const bool penalties, AddPenalties(row_slots, row_params, in));
  const models::StepShape shape =
      StepShapeFor(models::StepKind::kDecode, n, 0, TableBucket(reach), penalties);
  TL_ASSIGN_OR_RETURN(Program * program, GetProgram(shape));
  const int64_t m = shape.table_blocks, w = shape.write_blocks();
  std::vector<int32_t> tokens(n, 0), positions(n, 0), lengths(n, 0), table, write;
  SamplingColumns sampling(n);
  std::vector<int64_t> out_rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    const DecodeRow& row = rows[r];
    tokens[r] = row.token;
    positions[r] = row.position;
    lengths[r] = 1;
    FillTables(row.slot, row.position, m, w, table, write);
    sampling.Set(static_cast<int64_t>(r), row.sampling, row.step);
    out_rows.push_back(static_cast<int64_t>(r));
  }
  table.resize(n * m, 0);
  write.resize(n * w, 0);
  in[models::Port::kTokens] = Literal::FromVector<int32_t>({n}, tokens);
  in[models::Port::kPositions] = Literal::FromVector<int32_t>({n}, positions);
  in[models::Port::kLengths] = Literal::FromVector<int32_t>({n}, lengths);
  in[models::Port::kBlockTable] = Literal::FromVector<int32_t>({n, m}, table);
  in[models::Port::kWriteBlocks] = Literal::FromVector<int32_t>({n, w}, write);
  sampling.AddTo(in);
  TL_ASSIGN_OR_RETURN(EngineStep step, Run(*program, std::move(in), out_rows));
  for (const DecodeRow& row : rows)
    lengths_[row.slot] = std::max<int64_t>(lengths_[row.slot], row.position + 1);
  return step;
}

}  // namespace tlaloc::generate
