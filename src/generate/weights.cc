// Loading a checkpoint's weights for the Qwen3 programs: names and shapes checked against the
// config, dtype converted on the host when the stored one differs from the one asked for.
#include <cstring>
#include <set>

#include "tlaloc/generate/generator.h"
#include "tlaloc/support/half.h"

namespace tlaloc::generate {

namespace {
std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}
}  // namespace

Literal ConvertLiteral(const Literal& x, ElementType to) {
  if (x.element_type() == to) return x;
  Literal out(TensorType(to, x.dims()));
  const int64_t n = x.num_elements();
  const ElementType from = x.element_type();
  if (from == ElementType::kF32 && to == ElementType::kBF16) {
    auto src = x.span<float>();
    auto dst = out.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16Bits(src[i]);
  } else if (from == ElementType::kBF16 && to == ElementType::kF32) {
    auto src = x.span<uint16_t>();
    auto dst = out.span<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = Bf16BitsToFloat(src[i]);
  } else if (from == ElementType::kF32 && to == ElementType::kF16) {
    auto src = x.span<float>();
    auto dst = out.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalfBits(src[i]);
  } else if (from == ElementType::kF16 && to == ElementType::kF32) {
    auto src = x.span<uint16_t>();
    auto dst = out.span<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out.SetFromDouble(i, x.GetAsDouble(i));
  }
  return out;
}

StatusOr<std::vector<Literal>> LoadWeights(const io::ModelConfig& config,
                                           const io::Checkpoint& checkpoint, ElementType dtype) {
  std::vector<Literal> out;
  for (const auto& spec : models::WeightSpecs(config)) {
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
    out.push_back(ConvertLiteral(value, dtype));
  }
  return out;
}

}  // namespace tlaloc::generate
