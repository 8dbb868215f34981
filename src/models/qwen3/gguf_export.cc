// Qwen3 as llama.cpp's `qwen3` architecture and Qwen3-MoE as its `qwen3moe`, through the shared
// decoder export (models/decoder/gguf.h); Qwen3-MoE's keys, routers and experts:
// gguf_export_moe.cc.
#include "models/decoder/gguf.h"
#include "models/qwen3/qwen3_family.h"

namespace tlaloc::models::qwen3 {

namespace {

// "model.layers.<n>.mlp.gate.weight" -> n, or nullopt for any other name.
std::optional<int64_t> RouterLayer(const std::string& name) {
  const std::string prefix = "model.layers.", suffix = ".mlp.gate.weight";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string layer = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(layer);
}

}  // namespace

StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options) {
  const std::string where = "GGUF export of " + dir.string();
  if (options.dtype && !io::GgmlTypeFor(*options.dtype).ok())
    return InvalidArgument(where + ": dtype " + std::string(ShortName(*options.dtype)) +
                           " (expected f32, f16 or bf16)");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return NotFound(where +
                    ": no such checkpoint folder (expected config.json, safetensors "
                    "and tokenizer.json in a folder)");
  TL_ASSIGN_OR_RETURN(ModelConfig config, LoadConfig(dir));
  const bool moe = config.is_moe();
  if (SlidingWindow(config).use_sliding_window)
    return Unimplemented(where + ": sliding-window attention is not exported");
  decoder::GgufExportHooks hooks;
  hooks.arch = moe ? "qwen3moe" : "qwen3";
  if (moe) {
    TL_RETURN_IF_ERROR(CheckQwen3MoeExportable(config, where));
    hooks.keys = Qwen3MoeKeys(config);
    // An MoE layer's router and experts (int8 or not), written where the router comes.
    hooks.own_tensor = [&config, where](const io::Checkpoint& checkpoint, const ExpectedTensor& t)
        -> StatusOr<std::optional<std::vector<io::GgufTensorToWrite>>> {
      if (t.name.find(".mlp.experts.") != std::string::npos)
        return std::optional<std::vector<io::GgufTensorToWrite>>(
            std::vector<io::GgufTensorToWrite>{});
      const std::optional<int64_t> layer = RouterLayer(t.name);
      if (!layer) return std::optional<std::vector<io::GgufTensorToWrite>>();
      TL_ASSIGN_OR_RETURN(auto tensors, Qwen3MoeLayerTensors(checkpoint, config, *layer, where));
      return std::optional<std::vector<io::GgufTensorToWrite>>(std::move(tensors));
    };
  }
  return decoder::ExportDecoderGguf(dir, out, options, config, std::move(hooks));
}

}  // namespace tlaloc::models::qwen3
