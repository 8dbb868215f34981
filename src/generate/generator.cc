// The decode loop over the engine's prefill and decode steps.
#include "tlaloc/generate/generator.h"

#include <algorithm>
#include <chrono>

#include "tlaloc/generate/batch_loop.h"
#include "tlaloc/models/load_weights.h"

namespace tlaloc::generate {

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One row of Generate: its tokens go to its result and the caller's callbacks.
class RowSequence : public Sequence {
 public:
  RowSequence(SequenceSpec spec, size_t row, GenerateResult& result, const TokenCallback& on_token,
              const GenerateOptions& options)
      : Sequence(std::move(spec)),
        row_(row),
        result_(result),
        on_token_(on_token),
        options_(options) {}

 protected:
  FinishReason OnToken(int32_t token, const float*, int64_t) override {
    result_.generated_ids.push_back(token);
    if (on_token_) on_token_(row_, token);
    // An end token finishes it anyway; otherwise the caller may stop it.
    const auto& eos = spec().eos_token_ids;
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) return FinishReason::kNone;
    return options_.stop_requested && options_.stop_requested(row_) ? FinishReason::kStop
                                                                    : FinishReason::kNone;
  }
  void OnFinish(const Status&) override { result_.finish_reason = finish_reason(); }

 private:
  size_t row_;
  GenerateResult& result_;
  const TokenCallback& on_token_;
  const GenerateOptions& options_;
};

}  // namespace

StatusOr<std::unique_ptr<Generator>> Generator::Create(io::ModelConfig config,
                                                       std::vector<Literal> weights,
                                                       ElementType dtype,
                                                       std::shared_ptr<Backend> backend,
                                                       std::optional<Mesh> tensor_parallel) {
  auto engine = Engine::Create(std::move(config), std::move(weights), dtype, std::move(backend),
                               std::move(tensor_parallel));
  if (!engine.ok())
    return Status(engine.status().code(), "Generator: " + std::string(engine.status().message()));
  std::unique_ptr<Generator> g(new Generator());
  g->engine_ = std::move(*engine);
  return g;
}

StatusOr<std::unique_ptr<Generator>> Generator::Load(const std::filesystem::path& dir,
                                                     std::optional<ElementType> dtype,
                                                     std::shared_ptr<Backend> backend,
                                                     std::optional<Mesh> tensor_parallel) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return NotFound("model folder " + dir.string() + " does not exist");
  if (!std::filesystem::exists(dir / "config.json", ec))
    return NotFound("model folder " + dir.string() + " has no config.json");
  TL_ASSIGN_OR_RETURN(io::ModelConfig config, models::LoadConfig(dir));
  TL_ASSIGN_OR_RETURN(const models::ModelFamily* family, models::FamilyOf(config));
  TL_RETURN_IF_ERROR(family->check_supported(config));
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
  } else if (const auto* info = ckpt.Find(std::string(family->embedding_weight));
             info && (info->dtype == ElementType::kBF16 || info->dtype == ElementType::kF16)) {
    et = info->dtype;  // run as stored
  } else if (config.quantization && config.dtype &&
             (*config.dtype == ElementType::kBF16 || *config.dtype == ElementType::kF16)) {
    et = *config.dtype;  // int8 matrices: the other weights' (and the activations') type
  }
  auto weights = models::LoadWeights(config, ckpt, et);
  if (!weights.ok())
    return Status(weights.status().code(), dir.string() + ": " + weights.status().message());
  return Create(std::move(config), std::move(*weights), et, std::move(backend),
                std::move(tensor_parallel));
}

int64_t Generator::ContextLimit(const GenerateOptions& options) const {
  // A larger context is honoured: RoPE positions extend past the trained length (quality may
  // drop there; TextGenerator::Prepare says so).
  return options.max_context > 0 ? options.max_context : config().max_position_embeddings;
}

// Buckets round up, but not past the trained length unless `len` itself is past it.
int64_t Generator::PromptBucket(int64_t len) const {
  int64_t t = 16;
  while (t < len) t *= 2;
  return std::min(t, std::max(len, config().max_position_embeddings));
}

int64_t Generator::CacheBucket(int64_t len) const {
  int64_t s = (len + 63) / 64 * 64;
  return std::min(s, std::max(len, config().max_position_embeddings));
}

StatusOr<Generator::StepOutput> Generator::Prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                   int64_t max_len,
                                                   const nn::SamplingParams& sampling,
                                                   uint64_t seed) {
  if (prompts.empty()) return InvalidArgument("Prefill: no prompts");
  TL_RETURN_IF_ERROR(engine_->Reserve(static_cast<int64_t>(prompts.size()), max_len));
  std::vector<PrefillRow> rows(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r) {
    rows[r].slot = static_cast<int64_t>(r);
    rows[r].prompt = prompts[r];
    rows[r].sampling = {sampling, seed};
  }
  TL_ASSIGN_OR_RETURN(EngineStep step, engine_->Prefill(rows));
  return StepOutput{std::move(step.tokens), std::move(step.logits)};
}

StatusOr<Generator::StepOutput> Generator::DecodeStep(const std::vector<int32_t>& tokens,
                                                      const std::vector<int32_t>& positions,
                                                      const nn::SamplingParams& sampling,
                                                      uint64_t seed, uint32_t step) {
  if (engine_->caches().empty())
    return FailedPrecondition("DecodeStep: no KV cache (run Prefill first)");
  const int64_t bsz = static_cast<int64_t>(tokens.size());
  if (bsz != engine_->num_slots() || positions.size() != tokens.size())
    return InvalidArgument("DecodeStep: " + std::to_string(bsz) + " tokens and " +
                           std::to_string(positions.size()) + " positions for a batch of " +
                           std::to_string(engine_->num_slots()));
  std::vector<DecodeRow> rows(tokens.size());
  for (int64_t r = 0; r < bsz; ++r)
    rows[r] = DecodeRow{r, tokens[r], positions[r], {sampling, seed}, step};
  TL_ASSIGN_OR_RETURN(EngineStep out, engine_->Decode(rows));
  return StepOutput{std::move(out.tokens), std::move(out.logits)};
}

StatusOr<std::vector<GenerateResult>> Generator::Generate(
    const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options,
    const TokenCallback& on_token, GenerateTimings* timings) {
  GenerateTimings local;
  GenerateTimings& tm = timings ? *timings : local;
  tm = GenerateTimings();
  if (options.choices < 1 || options.choices > kMaxChoices)
    return InvalidArgument("choices must be between 1 and " + std::to_string(kMaxChoices) +
                           ", not " + std::to_string(options.choices));
  const size_t choices = static_cast<size_t>(options.choices);
  const size_t bsz = prompts.size() * choices;  // rows
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
        (context == config().max_position_embeddings
             ? " tokens is longer than the model's context of " + std::to_string(context) +
                   " (max_position_embeddings)"
             : " tokens is longer than the context of " + std::to_string(context)));
  if (options.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  if ((!options.row_sampling.empty() && options.row_sampling.size() != bsz) ||
      (!options.row_seeds.empty() && options.row_seeds.size() != bsz))
    return InvalidArgument("per-row sampling settings and seeds must have one entry per row (" +
                           std::to_string(bsz) + ")");
  std::vector<RowSampling> sampling(bsz);
  for (size_t r = 0; r < bsz; ++r)
    sampling[r] = {options.row_sampling.empty() ? options.sampling : options.row_sampling[r],
                   options.row_seeds.empty() ? options.seed : options.row_seeds[r]};
  if (options.max_new_tokens == 0) {
    for (auto& r : results) r.finish_reason = FinishReason::kLength;
    return results;
  }
  const int64_t max_len = CacheBucket(std::min(longest + options.max_new_tokens, context));

  // The batch loop run to completion: every prompt in one prefill step (a prompt's other choices
  // take its KV blocks), then decode steps over the rows not yet finished (finished ones leave
  // their slots idle).
  Engine& engine = *engine_;
  const double c0 = engine.compile_seconds();
  double t0 = Now();
  BatchLoopOptions loop_options;
  loop_options.max_batch = static_cast<int64_t>(bsz);
  loop_options.max_context = max_len;
  loop_options.prefill_prompts = 0;
  TL_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoop> loop, BatchLoop::Create(engine, loop_options));
  for (size_t p = 0; p < prompts.size(); ++p) {
    SequenceGroup group;
    for (size_t i = 0; i < choices; ++i) {
      const size_t r = p * choices + i;
      SequenceSpec spec;
      spec.prompt = prompts[p];
      spec.sampling = sampling[r];
      spec.max_new_tokens = options.max_new_tokens;
      spec.context = std::min(max_len, context);
      spec.eos_token_ids = options.eos_token_ids;
      group.push_back(
          std::make_unique<RowSequence>(std::move(spec), r, results[r], on_token, options));
    }
    if (!loop->TryAdmit(group))
      return Internal("Generate: prompt " + std::to_string(p) + " does not fit its KV slots");
  }
  while (loop->has_prefill()) TL_RETURN_IF_ERROR(loop->PrefillStep());
  const double c1 = engine.compile_seconds();
  // Compilation happens inside the timed spans; it is reported separately.
  tm.prefill_seconds = Now() - t0 - (c1 - c0);
  tm.prefill_tokens = total_prompt;
  double d0 = Now();
  while (loop->has_decode()) TL_RETURN_IF_ERROR(loop->DecodeStep());
  tm.decode_tokens = loop->counters().decode_rows;
  tm.decode_seconds = Now() - d0 - (engine.compile_seconds() - c1);
  tm.compile_seconds = engine.compile_seconds() - c0;
  return results;
}

}  // namespace tlaloc::generate
