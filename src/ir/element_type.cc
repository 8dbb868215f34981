#include "tlaloc/ir/element_type.h"

namespace tlaloc {

namespace {
struct Names {
  ElementType type;
  std::string_view mlir;
  std::string_view short_name;
  int size;
  int bits;
};
constexpr Names kNames[] = {
    {ElementType::kPred, "i1", "pred", 1, 1},    {ElementType::kS8, "i8", "s8", 1, 8},
    {ElementType::kS16, "i16", "s16", 2, 16},    {ElementType::kS32, "i32", "s32", 4, 32},
    {ElementType::kS64, "i64", "s64", 8, 64},    {ElementType::kU8, "ui8", "u8", 1, 8},
    {ElementType::kU16, "ui16", "u16", 2, 16},   {ElementType::kU32, "ui32", "u32", 4, 32},
    {ElementType::kU64, "ui64", "u64", 8, 64},   {ElementType::kF16, "f16", "f16", 2, 16},
    {ElementType::kBF16, "bf16", "bf16", 2, 16}, {ElementType::kF32, "f32", "f32", 4, 32},
    {ElementType::kF64, "f64", "f64", 8, 64},
};
const Names& Lookup(ElementType t) { return kNames[static_cast<int>(t)]; }
}  // namespace

int ElementSize(ElementType t) { return Lookup(t).size; }
int BitWidth(ElementType t) { return Lookup(t).bits; }
bool IsFloat(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 || t == ElementType::kF32 ||
         t == ElementType::kF64;
}
bool IsSignedInt(ElementType t) {
  return t == ElementType::kS8 || t == ElementType::kS16 || t == ElementType::kS32 ||
         t == ElementType::kS64;
}
bool IsUnsignedInt(ElementType t) {
  return t == ElementType::kU8 || t == ElementType::kU16 || t == ElementType::kU32 ||
         t == ElementType::kU64;
}
std::string_view MlirName(ElementType t) { return Lookup(t).mlir; }
std::string_view ShortName(ElementType t) { return Lookup(t).short_name; }
std::optional<ElementType> ElementTypeFromMlirName(std::string_view name) {
  for (const auto& n : kNames)
    if (n.mlir == name) return n.type;
  // MLIR also spells signless/signed integers this way.
  if (name == "si8") return ElementType::kS8;
  if (name == "si16") return ElementType::kS16;
  if (name == "si32") return ElementType::kS32;
  if (name == "si64") return ElementType::kS64;
  return std::nullopt;
}
std::optional<ElementType> ElementTypeFromShortName(std::string_view name) {
  for (const auto& n : kNames)
    if (n.short_name == name) return n.type;
  return std::nullopt;
}

}  // namespace tlaloc
