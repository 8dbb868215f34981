// Attribute, type and dense-literal text of the StableHLO printer.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {

namespace {

constexpr int64_t kMaxListedElements = 64;

bool IsBareId(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'))
      return false;
  return true;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "\\%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string HexBits(uint64_t bits, int bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*llX", bytes * 2, static_cast<unsigned long long>(bits));
  return buf;
}

// Shortest decimal that reads back to the same value; always has a '.' so MLIR lexes a float.
template <typename F>
std::string ShortestFloat(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    if (e == std::string::npos)
      s += ".0";
    else
      s.insert(e, ".0");
  }
  return s;
}

std::string FormatFloatValue(double v, ElementType et) {
  switch (et) {
    case ElementType::kF64:
      if (!std::isfinite(v)) return HexBits(std::bit_cast<uint64_t>(v), 8);
      return ShortestFloat(v);
    case ElementType::kF32: {
      float f = static_cast<float>(v);
      if (!std::isfinite(f)) return HexBits(std::bit_cast<uint32_t>(f), 4);
      return ShortestFloat(f);
    }
    case ElementType::kF16: {
      uint16_t b = DoubleToHalfBits(v);
      float f = HalfBitsToFloat(b);
      if (!std::isfinite(f)) return HexBits(b, 2);
      return ShortestFloat(f);
    }
    case ElementType::kBF16: {
      uint16_t b = DoubleToBf16Bits(v);
      float f = Bf16BitsToFloat(b);
      if (!std::isfinite(f)) return HexBits(b, 2);
      return ShortestFloat(f);
    }
    default:
      return ShortestFloat(v);
  }
}

const std::vector<std::string>* StructFieldOrder(const std::string& kind) {
  static const std::vector<std::string> dot = {"lhs_batching_dimensions", "rhs_batching_dimensions",
                                               "lhs_contracting_dimensions",
                                               "rhs_contracting_dimensions"};
  static const std::vector<std::string> gather = {
      "offset_dims",           "collapsed_slice_dims",
      "operand_batching_dims", "start_indices_batching_dims",
      "start_index_map",       "index_vector_dim"};
  static const std::vector<std::string> scatter = {
      "update_window_dims",           "inserted_window_dims",
      "input_batching_dims",          "scatter_indices_batching_dims",
      "scatter_dims_to_operand_dims", "index_vector_dim"};
  static const std::vector<std::string> ragged_dot = {
      "lhs_batching_dimensions",    "rhs_batching_dimensions", "lhs_contracting_dimensions",
      "rhs_contracting_dimensions", "lhs_ragged_dimensions",   "rhs_group_dimensions"};
  if (kind == "stablehlo.dot") return &dot;
  if (kind == "chlo.ragged_dot") return &ragged_dot;
  if (kind == "stablehlo.gather") return &gather;
  if (kind == "stablehlo.scatter") return &scatter;
  return nullptr;
}

std::string IntList(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string PrintAttr(const Attribute& a, bool in_struct);

std::string PrintDict(const AttrDict& d) {
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : d) {
    if (!first) s += ", ";
    first = false;
    s += IsBareId(k) ? k : Quote(k);
    if (v.kind() != Attribute::Kind::kUnit) s += " = " + PrintAttr(v, false);
  }
  return s + "}";
}

std::string PrintAttr(const Attribute& a, bool in_struct) {
  using K = Attribute::Kind;
  switch (a.kind()) {
    case K::kUnit:
      return "unit";
    case K::kBool:
      return a.as_bool() ? "true" : "false";
    case K::kInt: {
      if (a.scalar_type() == ElementType::kPred) return a.as_int() ? "true" : "false";
      std::string v = a.scalar_type() == ElementType::kU64
                          ? std::to_string(static_cast<uint64_t>(a.as_int()))
                          : std::to_string(a.as_int());
      if (in_struct) return v;
      return v + " : " + std::string(MlirName(a.scalar_type()));
    }
    case K::kFloat:
      return FormatFloatValue(a.as_float(), a.scalar_type()) + " : " +
             std::string(MlirName(a.scalar_type()));
    case K::kString:
      return Quote(a.as_string());
    case K::kIntArray: {
      if (in_struct) return IntList(a.as_int_array());
      std::string s = "array<i64";
      for (size_t i = 0; i < a.as_int_array().size(); ++i)
        s += (i ? ", " : ": ") + std::to_string(a.as_int_array()[i]);
      return s + ">";
    }
    case K::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < a.as_array().size(); ++i)
        s += (i ? ", " : "") + PrintAttr(a.as_array()[i], false);
      return s + "]";
    }
    case K::kDict:
      return PrintDict(a.as_dict());
    case K::kElements:
      return PrintDenseElements(a.as_elements());
    case K::kEnum:
      if (a.enum_kind().empty()) return a.as_string();
      return "#stablehlo<" + a.enum_kind() + " " + a.as_string() + ">";
    case K::kStruct: {
      std::string s = "#" + a.struct_kind() + "<";
      bool first = true;
      auto field = [&](const std::string& k, const Attribute& v) {
        if (!first) s += ", ";
        first = false;
        s += k + " = " + PrintAttr(v, true);
      };
      const auto* order = StructFieldOrder(a.struct_kind());
      if (order)
        for (const auto& k : *order)
          if (auto it = a.as_dict().find(k); it != a.as_dict().end()) field(k, it->second);
      for (const auto& [k, v] : a.as_dict())
        if (!order || std::find(order->begin(), order->end(), k) == order->end()) field(k, v);
      return s + ">";
    }
    case K::kType:
      return a.as_type().ToString();
    case K::kSymbol:
      return "@" + (IsBareId(a.as_string()) ? a.as_string() : Quote(a.as_string()));
    case K::kOpaque:
      return a.as_string();
  }
  return "unit";
}

}  // namespace

std::string FormatDenseElement(const Literal& l, int64_t i) {
  return DispatchElementType(l.element_type(), [&]<typename T>() -> std::string {
    T v = l.span<T>()[i];
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
      return std::to_string(v);
    } else if constexpr (kIsHalfLike<T>) {
      float f = v.f();
      if (!std::isfinite(f)) return HexBits(v.bits, 2);
      return ShortestFloat(f);
    } else {
      if (!std::isfinite(v)) {
        if constexpr (sizeof(T) == 4)
          return HexBits(std::bit_cast<uint32_t>(v), 4);
        else
          return HexBits(std::bit_cast<uint64_t>(v), 8);
      }
      return ShortestFloat(v);
    }
  });
}

std::string PrintDenseElements(const Literal& l) {
  const int64_t n = l.num_elements();
  const int64_t es = ElementSize(l.element_type());
  const std::string type = l.type().ToString();
  if (n == 0) return "dense<> : " + type;
  bool splat = true;
  for (int64_t i = 1; i < n && splat; ++i)
    splat = std::memcmp(l.data(), l.data() + i * es, es) == 0;
  if (splat) return "dense<" + FormatDenseElement(l, 0) + "> : " + type;
  if (n > kMaxListedElements) {
    static const char* kHex = "0123456789ABCDEF";
    std::string s = "dense<\"0x";
    s.reserve(s.size() + n * es * 2 + 32);
    const auto* bytes = reinterpret_cast<const unsigned char*>(l.data());
    for (int64_t i = 0; i < n * es; ++i) {
      s += kHex[bytes[i] >> 4];
      s += kHex[bytes[i] & 15];
    }
    return s + "\"> : " + type;
  }
  // Nested lists, row-major.
  const auto& dims = l.dims();
  std::string s = "dense<";
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    // Open brackets for every dimension whose index just wrapped to 0.
    size_t opens = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      if (idx[d] != 0) break;
      ++opens;
    }
    if (i != 0) s += ", ";
    s.append(opens, '[');
    s += FormatDenseElement(l, i);
    size_t d = dims.size();
    while (d-- > 0) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
      s += ']';
    }
  }
  return s + "> : " + type;
}

std::string PrintAttribute(const Attribute& attr) { return PrintAttr(attr, false); }
std::string PrintType(const Type& type) { return type.ToString(); }

namespace shlo {
std::string PrintAttrDictText(const AttrDict& d) { return PrintDict(d); }
std::string QuoteString(const std::string& s) { return Quote(s); }
bool IsBareIdentifier(const std::string& s) { return IsBareId(s); }
}  // namespace shlo

}  // namespace tlaloc
