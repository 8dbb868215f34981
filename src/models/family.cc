// The model family registry: filled once from families.cc (which also registers each family's
// config part with io), then read-only.
#include "tlaloc/models/family.h"

#include <algorithm>

#include "models/families.h"

namespace tlaloc::models {

const std::vector<ModelFamily>& Registry() {
  static const std::vector<ModelFamily> families = [] {
    std::vector<ModelFamily> all;
    RegisterFamilies(all);
    std::sort(all.begin(), all.end(), [](const ModelFamily& a, const ModelFamily& b) {
      return a.model_type < b.model_type;
    });
    // io's side of the seam (io/model_config.h): the families' config parts.
    for (const ModelFamily& f : all) io::RegisterConfigFamily(f.config);
    return all;
  }();
  return families;
}

void RegisterModelFamilies() { (void)Registry(); }

StatusOr<io::ModelConfig> LoadConfig(const std::filesystem::path& path) {
  RegisterModelFamilies();
  return io::LoadModelConfig(path);
}

StatusOr<io::ModelConfig> ParseConfig(std::string_view json_text, std::string_view source) {
  RegisterModelFamilies();
  return io::ParseModelConfig(json_text, source);
}

std::vector<std::string_view> KnownModelTypes() {
  std::vector<std::string_view> out;
  for (const ModelFamily& f : Registry()) out.push_back(f.model_type);
  return out;
}

std::vector<std::string_view> GgufArchitectures() {
  std::vector<std::string_view> out;
  for (const ModelFamily& f : Registry())
    if (!f.gguf_architecture.empty()) out.push_back(f.gguf_architecture);
  return out;
}

namespace {

std::string KnownTypesText() {
  std::string known;
  for (std::string_view t : KnownModelTypes())
    known += (known.empty() ? "" : ", ") + std::string(t);
  return known;
}

}  // namespace

StatusOr<const ModelFamily*> FindFamily(std::string_view model_type) {
  for (const ModelFamily& f : Registry())
    if (f.model_type == model_type) return &f;
  return InvalidArgument("model_type \"" + std::string(model_type) +
                         "\" is not a model family Tlaloc runs (known: " + KnownTypesText() + ")");
}

StatusOr<const ModelFamily*> FamilyOf(const io::ModelConfig& config) {
  return FindFamily(io::ArchitectureModelType(config.architecture));
}

Status CheckSupported(const io::ModelConfig& config) {
  TL_ASSIGN_OR_RETURN(const ModelFamily* f, FamilyOf(config));
  return f->check_supported(config);
}

std::vector<ExpectedTensor> ExpectedTensors(const io::ModelConfig& config) {
  auto f = FamilyOf(config);
  return f.ok() ? (*f)->checkpoint_tensors(config) : std::vector<ExpectedTensor>{};
}

int64_t ParameterCount(const io::ModelConfig& config) {
  // An int8 checkpoint has the parameters of its float form (the block scales are not counted).
  io::ModelConfig plain = config;
  plain.quantization.reset();
  int64_t total = 0;
  for (const auto& t : ExpectedTensors(plain))
    if (!t.optional) total += NumElements(t.shape);
  return total;
}

StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options) {
  const std::string where = "GGUF export of " + dir.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return NotFound(where +
                    ": no such checkpoint folder (expected config.json, safetensors "
                    "and tokenizer.json in a folder)");
  auto config = LoadConfig(dir);
  if (!config.ok())
    return Status(config.status().code(), where + ": " + std::string(config.status().message()));
  TL_ASSIGN_OR_RETURN(const ModelFamily* f, FamilyOf(*config));
  if (!f->export_gguf) {
    std::string exported;
    for (const ModelFamily& other : Registry())
      if (other.export_gguf)
        exported += (exported.empty() ? "" : ", ") + std::string(other.architecture);
    return Unimplemented(where + ": architecture " + std::string(f->architecture) +
                         " is not exported to GGUF yet (exported: " + exported + ")");
  }
  return f->export_gguf(dir, out, options);
}

std::vector<WeightSpec> WeightSpecs(const io::ModelConfig& config) {
  auto f = FamilyOf(config);
  return f.ok() ? (*f)->weight_specs(config) : std::vector<WeightSpec>{};
}

StatusOr<ModelProgram> BuildStep(const io::ModelConfig& config, const StepShape& shape,
                                 nn::LayerTrace* trace, const ParallelHooks* parallel) {
  TL_ASSIGN_OR_RETURN(const ModelFamily* f, FamilyOf(config));
  return f->build_step(config, shape, trace, parallel);
}

TensorType KvCacheType(const io::ModelConfig& c, const StepShape& shape) {
  if (shape.paged())
    return TensorType(shape.cache_dtype(),
                      {shape.num_blocks, c.num_key_value_heads, shape.page_size, c.head_dim});
  return TensorType(shape.cache_dtype(),
                    {shape.slots(), c.num_key_value_heads, shape.max_len, c.head_dim});
}

Status CheckKvCacheType(ElementType dtype, ElementType kv_dtype) {
  if (kv_dtype == dtype || (dtype == ElementType::kF32 && kv_dtype == ElementType::kBF16))
    return OkStatus();
  return InvalidArgument("KV cache type " + std::string(MlirName(kv_dtype)) + " with " +
                         std::string(MlirName(dtype)) +
                         " activations: expected the activations' type, or bf16 for f32");
}

}  // namespace tlaloc::models
