#include "tlaloc/ir/attribute.h"

#include <cmath>
#include <cstring>

namespace tlaloc {

Attribute Attribute::Unit() { return Attribute(); }
Attribute Attribute::Bool(bool v) {
  Attribute a;
  a.kind_ = Kind::kBool;
  a.int_ = v ? 1 : 0;
  a.scalar_type_ = ElementType::kPred;
  return a;
}
Attribute Attribute::Int(int64_t v, ElementType type) {
  Attribute a;
  a.kind_ = Kind::kInt;
  a.int_ = v;
  a.scalar_type_ = type;
  return a;
}
Attribute Attribute::Float(double v, ElementType type) {
  Attribute a;
  a.kind_ = Kind::kFloat;
  a.float_ = v;
  a.scalar_type_ = type;
  return a;
}
Attribute Attribute::String(std::string v) {
  Attribute a;
  a.kind_ = Kind::kString;
  a.str_ = std::move(v);
  return a;
}
Attribute Attribute::IntArray(std::vector<int64_t> v) {
  Attribute a;
  a.kind_ = Kind::kIntArray;
  a.ints_ = std::move(v);
  return a;
}
Attribute Attribute::Array(std::vector<Attribute> v) {
  Attribute a;
  a.kind_ = Kind::kArray;
  a.array_ = std::make_shared<const std::vector<Attribute>>(std::move(v));
  return a;
}
Attribute Attribute::Dict(AttrDict v) {
  Attribute a;
  a.kind_ = Kind::kDict;
  a.dict_ = std::make_shared<const AttrDict>(std::move(v));
  return a;
}
Attribute Attribute::Elements(Literal v) {
  Attribute a;
  a.kind_ = Kind::kElements;
  a.elements_ = std::make_shared<const Literal>(std::move(v));
  return a;
}
Attribute Attribute::Enum(std::string v, std::string kind) {
  Attribute a;
  a.kind_ = Kind::kEnum;
  a.str_ = std::move(v);
  a.kind_name_ = std::move(kind);
  return a;
}
Attribute Attribute::Struct(std::string kind, AttrDict fields) {
  Attribute a;
  a.kind_ = Kind::kStruct;
  a.kind_name_ = std::move(kind);
  a.dict_ = std::make_shared<const AttrDict>(std::move(fields));
  return a;
}
Attribute Attribute::TypeAttr(Type v) {
  Attribute a;
  a.kind_ = Kind::kType;
  a.type_ = std::make_shared<const Type>(std::move(v));
  return a;
}
Attribute Attribute::Symbol(std::string v) {
  Attribute a;
  a.kind_ = Kind::kSymbol;
  a.str_ = std::move(v);
  return a;
}
Attribute Attribute::Opaque(std::string v) {
  Attribute a;
  a.kind_ = Kind::kOpaque;
  a.str_ = std::move(v);
  return a;
}

bool Attribute::operator==(const Attribute& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUnit: return true;
    case Kind::kBool: return int_ == o.int_;
    case Kind::kInt: return int_ == o.int_ && scalar_type_ == o.scalar_type_;
    case Kind::kFloat:
      return scalar_type_ == o.scalar_type_ &&
             (std::memcmp(&float_, &o.float_, sizeof(double)) == 0 || float_ == o.float_);
    case Kind::kString:
    case Kind::kSymbol:
    case Kind::kOpaque: return str_ == o.str_;
    case Kind::kEnum: return str_ == o.str_ && kind_name_ == o.kind_name_;
    case Kind::kStruct: return kind_name_ == o.kind_name_ && *dict_ == *o.dict_;
    case Kind::kIntArray: return ints_ == o.ints_;
    case Kind::kArray: return *array_ == *o.array_;
    case Kind::kDict: return *dict_ == *o.dict_;
    case Kind::kElements: return elements_->BitwiseEquals(*o.elements_);
    case Kind::kType: return *type_ == *o.type_;
  }
  return false;
}

std::string Attribute::DebugString() const {
  switch (kind_) {
    case Kind::kUnit: return "unit";
    case Kind::kBool: return int_ ? "true" : "false";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return std::to_string(float_);
    case Kind::kString: return "\"" + str_ + "\"";
    case Kind::kEnum: return str_;
    case Kind::kSymbol: return "@" + str_;
    case Kind::kOpaque: return str_;
    case Kind::kIntArray: {
      std::string s = "[";
      for (size_t i = 0; i < ints_.size(); ++i) s += (i ? ", " : "") + std::to_string(ints_[i]);
      return s + "]";
    }
    case Kind::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < array_->size(); ++i) s += (i ? ", " : "") + (*array_)[i].DebugString();
      return s + "]";
    }
    case Kind::kStruct:
    case Kind::kDict: {
      std::string s = kind_ == Kind::kStruct ? "#" + kind_name_ + "<" : "{";
      bool first = true;
      for (const auto& [k, v] : *dict_) {
        s += (first ? "" : ", ") + k + " = " + v.DebugString();
        first = false;
      }
      return s + (kind_ == Kind::kStruct ? ">" : "}");
    }
    case Kind::kElements: return elements_->ToString(16);
    case Kind::kType: return type_->ToString();
  }
  return "?";
}

const Attribute* FindAttr(const AttrDict& attrs, const std::string& name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}
int64_t GetIntAttr(const AttrDict& attrs, const std::string& name, int64_t fallback) {
  const Attribute* a = FindAttr(attrs, name);
  return a && (a->kind() == Attribute::Kind::kInt || a->kind() == Attribute::Kind::kBool)
             ? a->as_int()
             : fallback;
}
std::vector<int64_t> GetIntArrayAttr(const AttrDict& attrs, const std::string& name) {
  const Attribute* a = FindAttr(attrs, name);
  return a && a->kind() == Attribute::Kind::kIntArray ? a->as_int_array() : std::vector<int64_t>{};
}
std::string GetStringAttr(const AttrDict& attrs, const std::string& name,
                          const std::string& fallback) {
  const Attribute* a = FindAttr(attrs, name);
  if (!a) return fallback;
  switch (a->kind()) {
    case Attribute::Kind::kString:
    case Attribute::Kind::kEnum:
    case Attribute::Kind::kSymbol:
    case Attribute::Kind::kOpaque: return a->as_string();
    default: return fallback;
  }
}
bool GetBoolAttr(const AttrDict& attrs, const std::string& name, bool fallback) {
  const Attribute* a = FindAttr(attrs, name);
  if (!a) return fallback;
  if (a->kind() == Attribute::Kind::kUnit) return true;
  if (a->kind() == Attribute::Kind::kBool || a->kind() == Attribute::Kind::kInt)
    return a->as_int() != 0;
  return fallback;
}

}  // namespace tlaloc
