// Loading a checkpoint's weights (see load_weights.h).
#include "tlaloc/models/load_weights.h"

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
  std::vector<Literal> out;
  for (const auto& spec : WeightSpecs(config)) {
    const io::SafetensorsTensorInfo* info = checkpoint.Find(spec.name);
    if (!info)
      return NotFound("checkpoint is missing tensor \"" + spec.name + "\" (expected shape " +
                      ShapeString(spec.shape) + ")");
    if (info->shape != spec.shape)
      return InvalidArgument("checkpoint tensor \"" + spec.name + "\" has shape " +
                             ShapeString(info->shape) + ", expected " + ShapeString(spec.shape) +
                             " for this config.json");
    if (!IsFloat(info->dtype))
      return InvalidArgument("checkpoint tensor \"" + spec.name + "\" has dtype " +
                             std::string(MlirName(info->dtype)) + ", expected a float type");
    TL_ASSIGN_OR_RETURN(Literal value, checkpoint.Get(spec.name));
    out.push_back(ConvertElementType(value, dtype));
  }
  return out;
}

}  // namespace tlaloc::models
