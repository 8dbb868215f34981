// The decode loop over the Qwen3 prefill / decode-step programs.
#include "tlaloc/generate/generator.h"

#include <algorithm>
#include <chrono>

namespace tlaloc::generate {

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Literal KeyLiteral(uint64_t seed) {
  // jax.random.PRNGKey(seed) layout: [high word, low word].
  return Literal::FromVector<uint32_t>(
      {2}, {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed & 0xffffffffu)});
}
}  // namespace

StatusOr<std::unique_ptr<Generator>> Generator::Create(io::ModelConfig config,
                                                       std::vector<Literal> weights,
                                                       ElementType dtype,
                                                       std::shared_ptr<Backend> backend) {
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  auto specs = models::WeightSpecs(config);
  if (weights.size() != specs.size())
    return InvalidArgument("Generator: expected " + std::to_string(specs.size()) +
                           " weight tensors, got " + std::to_string(weights.size()));
  for (size_t i = 0; i < specs.size(); ++i)
    if (weights[i].type() != TensorType(dtype, specs[i].shape))
      return InvalidArgument("Generator: weight \"" + specs[i].name + "\" is " +
                             weights[i].type().ToString() + ", expected " +
                             TensorType(dtype, specs[i].shape).ToString());
  std::unique_ptr<Generator> g(new Generator());
  g->backend_ = backend ? std::move(backend) : std::shared_ptr<Backend>(MakeInterpreterBackend());
  g->config_ = std::move(config);
  g->dtype_ = dtype;
  // Uploaded once; the interpreter adopts the (possibly file-mapped) storage without a copy.
  g->weights_.reserve(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    auto buffer = g->backend_->Adopt(std::move(weights[i]));
    if (!buffer.ok())
      return Status(buffer.status().code(), "uploading weight \"" + specs[i].name + "\" to " +
                                                g->backend_->name() + ": " +
                                                buffer.status().message());
    g->weights_.push_back(std::move(*buffer));
  }
  return g;
}

StatusOr<std::unique_ptr<Generator>> Generator::Load(const std::filesystem::path& dir,
                                                     std::optional<ElementType> dtype,
                                                     std::shared_ptr<Backend> backend) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return NotFound("model folder " + dir.string() + " does not exist");
  if (!std::filesystem::exists(dir / "config.json", ec))
    return NotFound("model folder " + dir.string() + " has no config.json");
  TL_ASSIGN_OR_RETURN(io::ModelConfig config, io::LoadModelConfig(dir));
  TL_RETURN_IF_ERROR(models::CheckSupported(config));
  bool has_weights = std::filesystem::exists(dir / io::kSingleSafetensorsName, ec) ||
                     std::filesystem::exists(dir / io::kSafetensorsIndexName, ec);
  if (!has_weights) {
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") has_weights = true;
  }
  if (!has_weights)
    return NotFound("model folder " + dir.string() +
                    " has no weights (model.safetensors or model.safetensors.index.json)");
  TL_ASSIGN_OR_RETURN(io::Checkpoint ckpt, io::Checkpoint::Open(dir));
  ElementType et = ElementType::kF32;
  if (dtype) {
    et = *dtype;
  } else if (const auto* info = ckpt.Find("model.embed_tokens.weight");
             info && (info->dtype == ElementType::kBF16 || info->dtype == ElementType::kF16)) {
    et = info->dtype;  // run as stored
  }
  auto weights = LoadWeights(config, ckpt, et);
  if (!weights.ok())
    return Status(weights.status().code(), dir.string() + ": " + weights.status().message());
  return Create(std::move(config), std::move(*weights), et, std::move(backend));
}

void Generator::set_sample_vocab(int64_t n) {
  if (n == sample_vocab_) return;
  sample_vocab_ = n;
  programs_.clear();
}

int64_t Generator::ContextLimit(const GenerateOptions& options) const {
  const int64_t model = config_.max_position_embeddings;
  return options.max_context > 0 ? std::min(options.max_context, model) : model;
}

int64_t Generator::PromptBucket(int64_t len) const {
  int64_t t = 16;
  while (t < len) t *= 2;
  return std::min(t, config_.max_position_embeddings);
}

int64_t Generator::CacheBucket(int64_t len) const {
  int64_t s = (len + 63) / 64 * 64;
  return std::min(s, config_.max_position_embeddings);
}

StatusOr<CompiledProgram*> Generator::GetProgram(bool prefill, const models::ProgramShape& shape) {
  ProgramKey key{prefill, shape.batch, prefill ? shape.prompt_len : 0, shape.max_len,
                 shape.sampling};
  auto it = programs_.find(key);
  if (it != programs_.end()) return it->second.get();
  double t0 = Now();
  nn::LayerTrace trace;
  nn::LayerTrace* traced = program_transform_ ? &trace : nullptr;
  TL_ASSIGN_OR_RETURN(std::shared_ptr<Module> module,
                      prefill ? models::BuildPrefill(config_, shape, traced)
                              : models::BuildDecodeStep(config_, shape, traced));
  if (program_transform_)
    TL_RETURN_IF_ERROR(program_transform_(module, trace).WithContext("program transform"));
  auto program = backend_->Compile(
      module, std::string(prefill ? models::kPrefillEntry : models::kDecodeEntry));
  if (!program.ok())
    return Status(program.status().code(),
                  std::string("compiling the ") + (prefill ? "prefill" : "decode-step") +
                      " program on " + backend_->name() + ": " + program.status().message());
  compile_seconds_ += Now() - t0;
  CompiledProgram* raw = program->get();
  programs_[key] = std::move(*program);
  return raw;
}

StatusOr<Generator::StepOutput> Generator::RunStep(
    CompiledProgram& program, std::vector<Literal> step_inputs,
    std::vector<std::unique_ptr<DeviceBuffer>> caches) {
  std::vector<std::unique_ptr<DeviceBuffer>> inputs;
  for (Literal& l : step_inputs) {
    TL_ASSIGN_OR_RETURN(auto buffer, backend_->Adopt(std::move(l)));
    inputs.push_back(std::move(buffer));
  }
  std::vector<ExecuteArg> args;
  args.reserve(weights_.size() + inputs.size() + caches.size());
  for (auto& w : weights_) args.push_back({w.get(), false});
  for (auto& in : inputs) args.push_back({in.get(), true});
  // Donated: the program aliases each cache to its updated result (tf.aliasing_output), so
  // the backend writes the new keys and values into the same buffer.
  for (auto& c : caches) args.push_back({c.get(), true});
  TL_ASSIGN_OR_RETURN(auto out, backend_->Execute(program, args));
  const size_t want = 2 + caches.size();
  if (out.size() != want)
    return Internal("the step program returned " + std::to_string(out.size()) +
                    " results, expected " + std::to_string(want));
  StepOutput result;
  TL_ASSIGN_OR_RETURN(Literal next, backend_->ToHost(*out[0]));
  auto ids = next.span<int32_t>();
  result.tokens.assign(ids.begin(), ids.end());
  TL_ASSIGN_OR_RETURN(result.logits, backend_->ToHost(*out[1]));
  caches_.assign(std::make_move_iterator(out.begin() + 2), std::make_move_iterator(out.end()));
  return result;
}

StatusOr<Generator::StepOutput> Generator::Prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                   int64_t max_len,
                                                   const nn::SamplingParams& sampling,
                                                   uint64_t seed) {
  const int64_t bsz = static_cast<int64_t>(prompts.size());
  if (bsz == 0) return InvalidArgument("Prefill: no prompts");
  int64_t longest = 0;
  for (size_t r = 0; r < prompts.size(); ++r) {
    if (prompts[r].empty()) return InvalidArgument("prompt " + std::to_string(r) + " is empty");
    for (int32_t id : prompts[r])
      if (id < 0 || id >= config_.vocab_size)
        return InvalidArgument("prompt " + std::to_string(r) + " has token id " +
                               std::to_string(id) + " outside the vocabulary [0, " +
                               std::to_string(config_.vocab_size) + ")");
    longest = std::max<int64_t>(longest, prompts[r].size());
  }
  if (longest > max_len)
    return InvalidArgument("prompt of " + std::to_string(longest) +
                           " tokens is longer than the context of " + std::to_string(max_len));
  models::ProgramShape shape;
  shape.batch = bsz;
  shape.prompt_len = std::min(PromptBucket(longest), max_len);
  shape.max_len = max_len;
  shape.dtype = dtype_;
  shape.sampling = sampling;
  shape.sample_vocab = sample_vocab_;
  TL_ASSIGN_OR_RETURN(CompiledProgram * program, GetProgram(true, shape));
  const int64_t t = shape.prompt_len;
  std::vector<int32_t> tokens(bsz * t, 0), positions(bsz * t), lengths(bsz);
  for (int64_t r = 0; r < bsz; ++r) {
    std::copy(prompts[r].begin(), prompts[r].end(), tokens.begin() + r * t);
    for (int64_t i = 0; i < t; ++i) positions[r * t + i] = static_cast<int32_t>(i);
    lengths[r] = static_cast<int32_t>(prompts[r].size());
  }
  std::vector<Literal> inputs;
  inputs.push_back(Literal::FromVector<int32_t>({bsz, t}, tokens));
  inputs.push_back(Literal::FromVector<int32_t>({bsz, t}, positions));
  inputs.push_back(Literal::FromVector<int32_t>({bsz}, lengths));
  inputs.push_back(KeyLiteral(seed));
  inputs.push_back(Literal::Scalar<uint32_t>(0));
  // A fresh zeroed cache; the previous one is dropped first so two never coexist.
  caches_.clear();
  cache_batch_ = cache_len_ = 0;
  const TensorType cache_type = models::KvCacheType(config_, shape);
  std::vector<std::unique_ptr<DeviceBuffer>> caches;
  for (int64_t i = 0; i < 2 * config_.num_hidden_layers; ++i) {
    TL_ASSIGN_OR_RETURN(auto buffer, backend_->Adopt(Literal(cache_type)));
    caches.push_back(std::move(buffer));
  }
  TL_ASSIGN_OR_RETURN(StepOutput result, RunStep(*program, std::move(inputs), std::move(caches)));
  cache_batch_ = bsz;
  cache_len_ = max_len;
  return result;
}

StatusOr<Generator::StepOutput> Generator::DecodeStep(const std::vector<int32_t>& tokens,
                                                      const std::vector<int32_t>& positions,
                                                      const nn::SamplingParams& sampling,
                                                      uint64_t seed, uint32_t step) {
  const int64_t bsz = static_cast<int64_t>(tokens.size());
  if (caches_.empty()) return FailedPrecondition("DecodeStep: no KV cache (run Prefill first)");
  if (bsz != cache_batch_ || positions.size() != tokens.size())
    return InvalidArgument("DecodeStep: " + std::to_string(bsz) + " tokens and " +
                           std::to_string(positions.size()) + " positions for a batch of " +
                           std::to_string(cache_batch_));
  for (int64_t r = 0; r < bsz; ++r) {
    if (positions[r] < 0 || positions[r] >= cache_len_)
      return InvalidArgument("DecodeStep: position " + std::to_string(positions[r]) + " of row " +
                             std::to_string(r) + " is outside the context of " +
                             std::to_string(cache_len_));
    if (tokens[r] < 0 || tokens[r] >= config_.vocab_size)
      return InvalidArgument("DecodeStep: token id " + std::to_string(tokens[r]) +
                             " outside the vocabulary");
  }
  models::ProgramShape shape;
  shape.batch = bsz;
  shape.max_len = cache_len_;
  shape.dtype = dtype_;
  shape.sampling = sampling;
  shape.sample_vocab = sample_vocab_;
  TL_ASSIGN_OR_RETURN(CompiledProgram * program, GetProgram(false, shape));
  std::vector<Literal> inputs;
  inputs.push_back(Literal::FromVector<int32_t>({bsz}, tokens));
  inputs.push_back(Literal::FromVector<int32_t>({bsz}, positions));
  inputs.push_back(KeyLiteral(seed));
  inputs.push_back(Literal::Scalar<uint32_t>(step));
  // The caches leave caches_ for the run: donated buffers are gone whatever happens, and a
  // failed step must leave "no cache" behind rather than deleted buffers.
  std::vector<std::unique_ptr<DeviceBuffer>> caches = std::move(caches_);
  caches_.clear();
  return RunStep(*program, std::move(inputs), std::move(caches));
}

StatusOr<std::vector<GenerateResult>> Generator::Generate(
    const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options,
    const TokenCallback& on_token, GenerateTimings* timings) {
  GenerateTimings local;
  GenerateTimings& tm = timings ? *timings : local;
  tm = GenerateTimings();
  const size_t bsz = prompts.size();
  std::vector<GenerateResult> results(bsz);
  if (bsz == 0) return results;
  int64_t longest = 0, total_prompt = 0;
  for (const auto& p : prompts) {
    longest = std::max<int64_t>(longest, p.size());
    total_prompt += p.size();
  }
  const int64_t context = ContextLimit(options);
  if (longest > context)
    return InvalidArgument(
        "prompt of " + std::to_string(longest) +
        (context == config_.max_position_embeddings
             ? " tokens is longer than the model's context of " + std::to_string(context) +
                   " (max_position_embeddings)"
             : " tokens is longer than the context of " + std::to_string(context)));
  if (options.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  if (options.max_new_tokens == 0) {
    for (auto& r : results) r.finish_reason = "length";
    return results;
  }
  const int64_t max_len = CacheBucket(std::min(longest + options.max_new_tokens, context));
  auto is_eos = [&](int32_t id) {
    return std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), id) !=
           options.eos_token_ids.end();
  };
  std::vector<bool> done(bsz, false);
  std::vector<int32_t> pos(bsz);
  size_t active = bsz;
  // Appends a row's new token, and finishes the row on an end token, the budget or the context.
  auto accept = [&](size_t r, int32_t id) {
    results[r].generated_ids.push_back(id);
    if (on_token) on_token(r, id);
    if (is_eos(id) || (options.stop_requested && options.stop_requested(r))) {
      results[r].finish_reason = "stop";
    } else if (static_cast<int64_t>(results[r].generated_ids.size()) >= options.max_new_tokens ||
               pos[r] + 1 >= std::min<int64_t>(max_len, context)) {
      // The row holds `context` tokens, prompt included (the last one is never fed back).
      results[r].finish_reason = "length";
    } else {
      return;
    }
    done[r] = true;
    --active;
  };

  double c0 = compile_seconds_;
  double t0 = Now();
  TL_ASSIGN_OR_RETURN(StepOutput first, Prefill(prompts, max_len, options.sampling, options.seed));
  double c1 = compile_seconds_;
  // Compilation happens inside the timed spans; it is reported separately.
  tm.prefill_seconds = Now() - t0 - (c1 - c0);
  tm.prefill_tokens = total_prompt;
  for (size_t r = 0; r < bsz; ++r) {
    pos[r] = static_cast<int32_t>(prompts[r].size());  // where the new token goes
    accept(r, first.tokens[r]);
  }
  double d0 = Now();
  uint32_t step = 1;
  while (active > 0) {
    std::vector<int32_t> toks(bsz), ps(bsz);
    for (size_t r = 0; r < bsz; ++r) {
      toks[r] = done[r] ? options.pad_token_id : results[r].generated_ids.back();
      // A finished row still runs; it rewrites its last slot, which nothing reads.
      ps[r] = std::min<int32_t>(pos[r], static_cast<int32_t>(max_len - 1));
    }
    TL_ASSIGN_OR_RETURN(StepOutput out,
                        DecodeStep(toks, ps, options.sampling, options.seed, step++));
    for (size_t r = 0; r < bsz; ++r) {
      if (done[r]) continue;
      ++pos[r];
      ++tm.decode_tokens;
      accept(r, out.tokens[r]);
    }
  }
  tm.decode_seconds = Now() - d0 - (compile_seconds_ - c1);
  tm.compile_seconds = compile_seconds_ - c0;
  return results;
}

}  // namespace tlaloc::generate
