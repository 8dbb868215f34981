// Attributes of operations, functions and modules, stored as StableHLO's generic attribute
// dictionary has them: dialect enums keep their kind (#stablehlo<comparison_direction LT>) and
// structured attributes (#stablehlo.dot<...>) are a kStruct with named fields.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/type.h"

namespace tlaloc {

class Attribute;
using AttrDict = std::map<std::string, Attribute>;

class Attribute {
 public:
  enum class Kind : uint8_t {
    kUnit,      // present without a value
    kBool,      // true / false
    kInt,       // 3 : i64
    kFloat,     // 1.0 : f32
    kString,    // "text"
    kIntArray,  // array<i64: 1, 2> or [1, 2] (the op's syntax decides)
    kArray,     // [attr, attr]
    kDict,      // {name = attr}
    kElements,  // dense<...> : tensor<...>
    kEnum,      // #stablehlo<comparison_direction LT>: value "LT", enum_kind "comparison_direction"
    kStruct,    // #stablehlo.dot<lhs_batching_dimensions = [0], ...>: struct_kind + fields
    kType,      // a type used as an attribute
    kSymbol,    // @name
    kOpaque,    // any other attribute text, carried verbatim
  };

  Attribute() = default;
  static Attribute Unit();
  static Attribute Bool(bool v);
  static Attribute Int(int64_t v, ElementType type = ElementType::kS64);
  static Attribute Float(double v, ElementType type = ElementType::kF32);
  static Attribute String(std::string v);
  static Attribute IntArray(std::vector<int64_t> v);
  static Attribute Array(std::vector<Attribute> v);
  static Attribute Dict(AttrDict v);
  static Attribute Elements(Literal v);
  // `kind` is the enum's name in #stablehlo<kind VALUE>; empty for a bare keyword.
  static Attribute Enum(std::string v, std::string kind = "");
  // A structured dialect attribute, e.g. kind "stablehlo.dot" with its fields.
  static Attribute Struct(std::string kind, AttrDict fields);
  static Attribute TypeAttr(Type v);
  static Attribute Symbol(std::string v);
  static Attribute Opaque(std::string v);

  Kind kind() const { return kind_; }
  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_float() const { return float_; }
  // The text of a string, enum, symbol or opaque attribute.
  const std::string& as_string() const { return str_; }
  const std::vector<int64_t>& as_int_array() const { return ints_; }
  const std::vector<Attribute>& as_array() const { return *array_; }
  // Fields of a dict or struct attribute.
  const AttrDict& as_dict() const { return *dict_; }
  const std::string& enum_kind() const { return kind_name_; }
  const std::string& struct_kind() const { return kind_name_; }
  const Literal& as_elements() const { return *elements_; }
  const Type& as_type() const { return *type_; }
  // Element type an int or float attribute is printed with.
  ElementType scalar_type() const { return scalar_type_; }

  bool operator==(const Attribute& other) const;
  // A readable form for messages and tests (not necessarily MLIR syntax).
  std::string DebugString() const;

 private:
  Kind kind_ = Kind::kUnit;
  ElementType scalar_type_ = ElementType::kS64;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::string kind_name_;
  std::vector<int64_t> ints_;
  std::shared_ptr<const std::vector<Attribute>> array_;
  std::shared_ptr<const AttrDict> dict_;
  std::shared_ptr<const Literal> elements_;
  std::shared_ptr<const Type> type_;
};

// Lookups with defaults, for op definitions.
const Attribute* FindAttr(const AttrDict& attrs, const std::string& name);
int64_t GetIntAttr(const AttrDict& attrs, const std::string& name, int64_t fallback);
std::vector<int64_t> GetIntArrayAttr(const AttrDict& attrs, const std::string& name);
std::string GetStringAttr(const AttrDict& attrs, const std::string& name,
                          const std::string& fallback = "");
bool GetBoolAttr(const AttrDict& attrs, const std::string& name, bool fallback);

}  // namespace tlaloc
