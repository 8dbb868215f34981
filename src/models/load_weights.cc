// Loading a checkpoint's weights (see load_weights.h).
#include "tlaloc/models/load_weights.h"

#include <cstring>
#include <map>
#include <optional>

#include "tlaloc/models/family.h"

namespace tlaloc::models {

namespace {
std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}
}  // namespace

StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype) {
  // One checkpoint tensor, checked against the shape the config implies, in `dtype`.
  auto load = [&](const std::string& name, const std::vector<int64_t>& shape,
                  std::optional<ElementType> fixed = std::nullopt) -> StatusOr<Literal> {
    const io::SafetensorsTensorInfo* info = checkpoint.Find(name);
    if (!info)
      return NotFound("checkpoint is missing tensor \"" + name + "\" (expected shape " +
                      ShapeString(shape) + ")");
    if (info->shape != shape)
      return InvalidArgument("checkpoint tensor \"" + name + "\" has shape " +
                             ShapeString(info->shape) + ", expected " + ShapeString(shape) +
                             " for this config.json");
    if (fixed) {  // an int8 checkpoint's s8 matrix or f16 block scales, used as stored
      if (info->dtype != *fixed)
        return InvalidArgument("checkpoint tensor \"" + name + "\" has dtype " +
                               std::string(MlirName(info->dtype)) + ", expected " +
                               std::string(MlirName(*fixed)) +
                               " (an int8 checkpoint, config.json quantization_config)");
      return checkpoint.Get(name);
    }
    if (!IsFloat(info->dtype))
      return InvalidArgument("checkpoint tensor \"" + name + "\" has dtype " +
                             std::string(MlirName(info->dtype)) + ", expected a float type");
    TL_ASSIGN_OR_RETURN(Literal value, checkpoint.Get(name));
    if (value.element_type() == dtype) return value;
    // Converted: the file pages it was read from leave the resident set (a bf16 checkpoint run
    // in f32 kept all 1.19 GB of Qwen3-0.6B's mapped beside its f32 copy).
    Literal converted = ConvertElementType(value, dtype);
    checkpoint.ReleasePages(name);
    return converted;
  };
  std::vector<Literal> out;
  const std::vector<WeightSpec> specs = WeightSpecs(config);
  for (const auto& spec : specs) {
    if (spec.stacked.empty()) {
      TL_ASSIGN_OR_RETURN(Literal value, load(spec.name, spec.shape, spec.fixed_type));
      out.push_back(std::move(value));
      continue;
    }
    // Stacked experts: a view when the checkpoint holds them one after another in expert order
    // and in `dtype` (as init-model and quantize write them), after checking each expert's
    // name and shape; otherwise one copy at load time, so that every step reads them in place.
    // Each expert's mapped pages leave the resident set once copied, so the checkpoint's experts
    // and their stacked copy are never resident together (peak RSS: one copy, not two).
    const std::vector<int64_t> part_shape(spec.shape.begin() + 1, spec.shape.end());
    bool parts_found = true;
    for (const std::string& name : spec.stacked) {
      const io::SafetensorsTensorInfo* info = checkpoint.Find(name);
      parts_found = parts_found && info && info->shape == part_shape;
    }
    // int8 experts (fixed_type) are viewed or stacked in their stored type.
    const ElementType type = spec.TypeFor(dtype);
    if (parts_found) {
      if (auto view = checkpoint.ViewOfRun(spec.stacked, TensorType(type, spec.shape))) {
        out.push_back(std::move(*view));
        continue;
      }
    }
    Literal stacked = Literal::Uninitialized(TensorType(type, spec.shape));
    const int64_t part_bytes = NumElements(part_shape) * (BitWidth(type) / 8);
    for (size_t e = 0; e < spec.stacked.size(); ++e) {
      TL_ASSIGN_OR_RETURN(Literal part, load(spec.stacked[e], part_shape, spec.fixed_type));
      std::memcpy(stacked.data() + static_cast<int64_t>(e) * part_bytes, part.data(), part_bytes);
      checkpoint.ReleasePages(spec.stacked[e]);
    }
    out.push_back(std::move(stacked));
  }
  // Weights read whole go onto 2 MiB pages (decode streams them every token; see
  // Checkpoint::CopyOntoHugePages), or, where that is not done, are mapped now rather than page by
  // page in the first prefill. Not for an int8 checkpoint: its matrices are repacked for the q8_0
  // kernels, which give back the pages of the originals (MADV_PAGEOUT keeps file pages out of the
  // resident set, not anonymous ones).
  std::vector<size_t> read_whole_at;
  std::vector<Literal> read_whole;
  bool quantized = false;
  for (size_t i = 0; i < out.size(); ++i) {
    quantized = quantized || specs[i].fixed_type.has_value();
    if (!specs[i].read_by_rows) {
      read_whole_at.push_back(i);
      read_whole.push_back(std::move(out[i]));
    } else {
      // Weights read by rows stay file-mapped (mapping a 622 MB embedding table would count it
      // all in the resident set for the few rows a prompt reads); their pages are read into the
      // page cache in the background, first, so that the reads overlap the copy below and the
      // first prompt does not wait on the disk row by row.
      checkpoint.ReadAheadViews(std::span<const Literal>(&out[i], 1));
    }
  }
  if (quantized || checkpoint.CopyOntoHugePages(read_whole) == 0)
    checkpoint.PrefaultViews(read_whole);
  for (size_t j = 0; j < read_whole_at.size(); ++j)
    out[read_whole_at[j]] = std::move(read_whole[j]);
  return out;
}

std::vector<io::NamedTensor> CheckpointTensors(const io::ModelConfig& config,
                                               std::span<const io::NamedTensor> weights) {
  std::map<std::string, const WeightSpec*> stacked;
  const auto specs = WeightSpecs(config);
  for (const auto& spec : specs)
    if (!spec.stacked.empty()) stacked[spec.name] = &spec;
  std::vector<io::NamedTensor> out;
  for (const auto& t : weights) {
    auto it = stacked.find(t.name);
    if (it == stacked.end() || t.value.dims() != it->second->shape) {
      out.push_back({t.name, t.value});
      continue;
    }
    const std::vector<int64_t> part_shape(t.value.dims().begin() + 1, t.value.dims().end());
    const int64_t part_bytes = NumElements(part_shape) * (BitWidth(t.value.element_type()) / 8);
    for (size_t e = 0; e < it->second->stacked.size(); ++e) {
      Literal part = Literal::Uninitialized(TensorType(t.value.element_type(), part_shape));
      std::memcpy(part.data(), t.value.data() + static_cast<int64_t>(e) * part_bytes, part_bytes);
      out.push_back({it->second->stacked[e], std::move(part)});
    }
  }
  return out;
}

}  // namespace tlaloc::models
