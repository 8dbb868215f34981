// Model families, one registry entry each (as ops have OpDefs): what Tlaloc needs to run a
// checkpoint of a given config.json `model_type` — the config checks, the weight names and
// shapes, the step programs for generation with their typed signatures, the training forward,
// and the chat format. A new family lives in its own folder under src/models/ and adds one line
// to src/models/families.cc. Programs call RegisterModelFamilies() at start-up.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/models/gguf_export.h"
#include "tlaloc/models/signature.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/sampling.h"
#include "tlaloc/tokenizer/chat.h"

namespace tlaloc::io {
struct GgufContents;  // io/gguf.h
}  // namespace tlaloc::io

namespace tlaloc::models {

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  // Checkpoint tensors stacked along a new leading axis to make this program weight (an MoE
  // layer's experts); empty when `name` is itself the checkpoint tensor.
  std::vector<std::string> stacked;
  // The stored type the programs take this weight in whatever their compute type (an int8
  // checkpoint's s8 matrices and f16 block scales); nullopt: the program's dtype.
  std::optional<ElementType> fixed_type = std::nullopt;
  // Read a row per token id (an untied embedding table), not whole: loading does not prefault
  // it (io::Checkpoint::PrefaultViews), since most of its rows are never read.
  bool read_by_rows = false;
  // The dimension tensor parallelism splits (shard/plan.cc): column-parallel projections their
  // output rows (0), row-parallel ones their input columns (1), stacked experts [E, out, in]
  // their experts (0: expert parallelism); -1: replicated. An int8 matrix's block scales
  // [rows, cols / 32] (ir/quant_format.h) follow it. Row-parallel products are what
  // ParallelHooks::Reduce sums.
  int64_t tensor_parallel_dim = -1;

  ElementType TypeFor(ElementType dtype) const { return fixed_type.value_or(dtype); }
};

// The checkpoint name of the block scales of quantised matrix `weight_name` ("X.weight" ->
// "X.weight_scale"; ir/quant_format.h).
inline std::string Int8ScaleName(const std::string& weight_name) {
  return QuantScaleName(weight_name);
}

// One tensor a checkpoint of a config holds, in the ecosystem's (transformers') naming.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool optional = false;  // e.g. lm_head.weight when the head is tied to the embedding
  // The stored type this tensor must have (an int8 checkpoint's s8 matrices and f16 scales);
  // nullopt: any float type.
  std::optional<ElementType> fixed_type = std::nullopt;
};

// Weight tensors by checkpoint name (WeightSpec names).
using WeightTensors = std::map<std::string, Tensor>;

enum class StepKind { kPrefill, kDecode };

// The static shape of one generation step program. Sampling settings are inputs, not part of
// the shape, so one program serves every mix of requests.
struct StepShape {
  StepKind kind = StepKind::kDecode;
  // Rows of the step. Decode: one per KV-cache slot (row r is slot r). Prefill: the prompts
  // being started, each writing the slot its `slots` input names.
  int64_t batch = 1;
  int64_t prompt_len = 0;  // T: tokens per prefill row (prefill only)
  int64_t num_slots = 0;   // KV-cache rows (0: the batch)
  int64_t max_len = 0;     // positions each slot holds
  ElementType dtype = ElementType::kF32;
  // The KV cache's type (unset: dtype). An f32 program may keep a bf16 cache, as llama.cpp keeps
  // an f16 one: half the cache's bytes to hold and to read at every decode step; keys and values
  // are rounded as they are written and queries are rounded to it for the QK product.
  std::optional<ElementType> kv_dtype;
  // Ids at or past this are never sampled (0: every row of the LM head). Qwen3's embedding has
  // rows past its tokenizer's ids (151,936 vs 151,669): no text exists for them.
  int64_t sample_vocab = 0;
  // A sampled row draws among at most this many of its most likely ids.
  int64_t max_candidates = nn::kDefaultMaxCandidates;
  // Whether the program takes the dense [B, V] penalty inputs (logit_bias, repetition, presence
  // and frequency penalties). Only steps with a penalised row use it, so the others move no
  // [B, V] tensors.
  bool penalties = false;
  // Paged KV cache (page_size > 0): each cache is a pool of `num_blocks` blocks of `page_size`
  // positions, and every row names its sequence's blocks in a block table of `table_blocks`
  // entries. Rows (prefill chunks and decode rows alike) continue their sequences from any
  // position; `num_slots` and `max_len` are unused. 0: the slot form above.
  int64_t page_size = 0;
  int64_t num_blocks = 0;
  int64_t table_blocks = 0;

  int64_t slots() const { return num_slots > 0 ? num_slots : batch; }
  ElementType cache_dtype() const { return kv_dtype.value_or(dtype); }
  bool paged() const { return page_size > 0; }
  // Tokens per row: the prompt chunk for prefill, one for decode.
  int64_t tokens_per_row() const { return kind == StepKind::kPrefill ? prompt_len : 1; }
  // Blocks a paged row's chunk can touch: the chunk of tokens_per_row() positions may start
  // anywhere in a block.
  int64_t write_blocks() const { return (2 * page_size - 2 + tokens_per_row()) / page_size; }
};

// How a training forward runs when its program is one device's part of a sharded step, or a
// global program annotated for XLA's partitioner (shard/ fills it in; default: neither).
// Tensor-parallel weights arrive already split, so layers read their local head and
// intermediate sizes from the weights' shapes.
struct ParallelHooks {
  // Sums a row-parallel product's partial result (attention's o_proj, the MLP's down_proj)
  // over the devices that split its input: the block's one all_reduce.
  std::function<Tensor(const Tensor&)> reduce_partial;
  // Marks a key intermediate for the partitioner: "heads" for q/k/v [B, T, heads, D],
  // "hidden" for the residual stream [B, T, H] (sdy.sharding_constraint).
  std::function<Tensor(std::string_view what, const Tensor&)> annotate;
  // A layer's weight as the layer uses it, from what the program holds (FSDP: gathered over
  // `data`, then converted to the compute dtype). The forward calls it inside the layer's remat
  // region, so the backward pass gathers each layer's weights again when it recomputes the
  // layer instead of keeping every gathered weight alive. Unset: the weights arrive ready.
  std::function<Tensor(const std::string& name, const Tensor& held)> use_layer_weight;
  // Expert parallelism: the global id (s32 scalar) of the first of the `local_experts`
  // consecutive experts this device holds, when a MoE layer's stacked experts arrive split on
  // their expert dimension. Its partial result is summed by reduce_partial like down_proj's.
  std::function<Tensor(OpBuilder& b, int64_t local_experts)> first_expert;
  // The shape of each weight the step programs take, in WeightSpecs order, when a device holds
  // parts that its config's sizes do not give (experts split over devices); empty: the specs'.
  std::vector<std::vector<int64_t>> weight_shapes;

  Tensor Reduce(const Tensor& x) const { return reduce_partial ? reduce_partial(x) : x; }
  Tensor Annotate(std::string_view what, const Tensor& x) const {
    return annotate ? annotate(what, x) : x;
  }
};

// The training forward's output: final-normed hidden states [B, T, H] and the LM head's weight.
struct TrainForward {
  Tensor hidden;
  std::string head_weight;  // checkpoint name of the [V, H] head matrix
};

struct ModelFamily {
  std::string_view model_type;    // config.json "model_type", e.g. "qwen3"
  std::string_view architecture;  // config.json "architectures" entry, e.g. "Qwen3ForCausalLM"
  // Its share of config.json: the config class's defaults and the family's own fields
  // (io::ParseModelConfig asks the registry for it by model_type or class).
  io::ConfigFamily config;
  // The token embedding table's checkpoint name.
  std::string_view embedding_weight;
  // Whether Tlaloc's code implements this config (activation, rope type, ...).
  Status (*check_supported)(const io::ModelConfig& config) = nullptr;
  // Every tensor a checkpoint of this config holds, in model order.
  std::vector<ExpectedTensor> (*checkpoint_tensors)(const io::ModelConfig& config) = nullptr;
  // The weight parameters of every program, in argument order.
  std::vector<WeightSpec> (*weight_specs)(const io::ModelConfig& config) = nullptr;
  // A generation step program (prefill or decode) and its signature; `trace` (may be null)
  // records each layer's op range for kernelize. `parallel` (may be null): one device's part
  // of a tensor-parallel step, whose `config` then has that device's heads, KV heads and
  // intermediate size (the engine's TensorParallelConfig) and whose blocks all-reduce.
  StatusOr<ModelProgram> (*build_step)(const io::ModelConfig& config, const StepShape& shape,
                                       nn::LayerTrace* trace,
                                       const ParallelHooks* parallel) = nullptr;
  // The causal forward over input_ids s32 [B, T] for training; each decoder layer becomes a
  // remat region when `remat` is given; `parallel` (may be null) for sharded steps.
  // `positions` s32 [B, T] (may be null: 0..T-1 in every row) are the rotary positions of rows
  // packing several documents: they restart at 0 where a document starts and count up by one
  // within it, and a token attends only to the tokens at or before it in its own document
  // (the positions [t - positions[t], t]), as each document alone would.
  StatusOr<TrainForward> (*train_forward)(const io::ModelConfig& config, const WeightTensors& w,
                                          const Tensor& input_ids, const Tensor* positions,
                                          autodiff::Marks* remat,
                                          const ParallelHooks* parallel) = nullptr;
  // The token training puts after each packed document (the family's pretraining convention).
  std::string_view document_end_token;
  // The chat template as Jinja, for tokenizer_config.json of folders Tlaloc writes.
  std::string (*chat_template_jinja)() = nullptr;
  // tokenizer_config.json for the random checkpoints Tlaloc writes (init-model): the special
  // tokens, the BOS rule and the chat template; null: none is written.
  std::string (*tokenizer_config_json)(const io::ModelConfig& config) = nullptr;
  // A tokenizer.json for a random checkpoint when none is given; null: one must be given (Qwen3's
  // is the repository's data/qwen3/tokenizer.json, which init-model finds by itself).
  std::string (*builtin_tokenizer_json)() = nullptr;
  // What those two write, for init-model's messages.
  std::string_view tokenizer_note;
  // Where init-model looks for a tokenizer.json when none is given and the family has no
  // built-in one (apps/tlaloc/init_model_command.cc): the environment variable naming the file,
  // its path in a repository checkout and its path in the installed data folder
  // (<prefix>/share). Qwen3: $TLALOC_QWEN3_TOKENIZER, data/qwen3/tokenizer.json,
  // tlaloc/qwen3-tokenizer.json. Empty: none is looked for.
  struct TokenizerSearch {
    std::string_view env_var;
    std::string_view checkout_path;
    std::string_view installed_path;
    std::string_view what;  // "the Qwen3 tokenizer.json", for messages
  };
  TokenizerSearch tokenizer_search;
  // Writes a checkpoint folder as GGUF for llama.cpp (models/gguf_export.h); null when the
  // family has no exporter.
  StatusOr<GgufExportSummary> (*export_gguf)(const std::filesystem::path& dir,
                                             const std::filesystem::path& out,
                                             const GgufExportOptions& options) = nullptr;
  // llama.cpp's GGUF architecture of the family ("qwen3", "qwen3moe", "llama"): what its export
  // writes as general.architecture, and how models::ImportGguf finds the family of a file.
  // Empty: no GGUF form.
  std::string_view gguf_architecture;
  // GGUF import: the family's own config.json fields from the file's `<arch>.*` keys (beyond
  // the shared hyperparameters the importer reads), or a refusal naming what the family cannot
  // express; null: none.
  Status (*gguf_import_config)(const io::GgufContents& gguf, const std::string& src,
                               nlohmann::ordered_json& config) = nullptr;
  // How llama.cpp orders the rows of checkpoint tensor `name` (transformers' name): row r of
  // the GGUF tensor is row order[r] of the checkpoint's. Export and import both apply it
  // (Llama's q and k: llama.cpp rotates interleaved pairs where transformers rotates halves).
  // Empty, or null: the same order.
  std::vector<int64_t> (*gguf_row_order)(const io::ModelConfig& config,
                                         const std::string& name) = nullptr;
};

// Fills the registry (once; later calls do nothing) and registers each family's config part with
// io (io::RegisterConfigFamily). Programs call it at start-up, before parsing any config.json:
// io cannot call it (models sits above io), and a static initialiser in a static library may be
// dropped by the linker. Every function below calls it too.
void RegisterModelFamilies();

// io::LoadModelConfig and io::ParseModelConfig with the families registered first: what the
// library's own loaders (generate, train, models) call, so a C++ program that never called
// RegisterModelFamilies() still reads every family's config.
StatusOr<io::ModelConfig> LoadConfig(const std::filesystem::path& path);
StatusOr<io::ModelConfig> ParseConfig(std::string_view json_text,
                                      std::string_view source = "config.json");

// The family registered for `model_type`; an unknown type is refused naming the known ones.
StatusOr<const ModelFamily*> FindFamily(std::string_view model_type);
// The family of a parsed config.
StatusOr<const ModelFamily*> FamilyOf(const io::ModelConfig& config);
// Every registered model_type, sorted.
std::vector<std::string_view> KnownModelTypes();
// The llama.cpp architectures the families export and import GGUF files of, in model_type order.
std::vector<std::string_view> GgufArchitectures();

// Shorthands through FamilyOf(config).
Status CheckSupported(const io::ModelConfig& config);
std::vector<ExpectedTensor> ExpectedTensors(const io::ModelConfig& config);
std::vector<WeightSpec> WeightSpecs(const io::ModelConfig& config);
// Number of distinct parameters (a tied head counted once).
int64_t ParameterCount(const io::ModelConfig& config);
StatusOr<ModelProgram> BuildStep(const io::ModelConfig& config, const StepShape& shape,
                                 nn::LayerTrace* trace = nullptr,
                                 const ParallelHooks* parallel = nullptr);
// The type of each KV cache argument, in shape.cache_dtype(): [slots, kv_heads, max_len,
// head_dim], or paged: [num_blocks, kv_heads, page_size, head_dim].
TensorType KvCacheType(const io::ModelConfig& config, const StepShape& shape);
// Whether activations of `dtype` may keep a KV cache of `kv_dtype`: their own type, or bf16 under
// f32 (InvalidArgument naming both otherwise).
Status CheckKvCacheType(ElementType dtype, ElementType kv_dtype);

}  // namespace tlaloc::models
