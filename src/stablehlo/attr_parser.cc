// Attribute and dense-literal parsing of the StableHLO text parser.
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "parser_internal.h"

namespace tlaloc::shlo {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One leaf of a dense literal: its token, kept for conversion once the type is known.
struct Leaf {
  Tok kind;
  std::string text;
  size_t pos;
};

// Parses "[-]digits" or "[-]0xHEX" into magnitude and sign.
bool ParseMagnitude(const std::string& s, bool& neg, uint64_t& mag, bool& hex) {
  neg = !s.empty() && s[0] == '-';
  size_t start = neg ? 1 : 0;
  hex = s.size() > start + 1 && s[start] == '0' && s[start + 1] == 'x';
  const char* b = s.data() + start + (hex ? 2 : 0);
  const char* e = s.data() + s.size();
  if (b == e) return false;
  auto r = std::from_chars(b, e, mag, hex ? 16 : 10);
  return r.ec == std::errc() && r.ptr == e;
}

}  // namespace

Status Parser::ParseOptionalAttrDict(AttrDict& attrs) {
  if (!Peek("{")) return OkStatus();
  // A region also starts with '{'; a dictionary's first token is a name followed by '=', ','
  // or '}', or the closing '}' itself.
  size_t p = next_;
  Token first = Lex(p);
  if (!(first.kind == Tok::kPunct && first.text == "}")) {
    if (first.kind != Tok::kIdent && first.kind != Tok::kString) return OkStatus();
    Token second = Lex(p);
    if (!(second.kind == Tok::kPunct &&
          (second.text == "=" || second.text == "," || second.text == "}")))
      return OkStatus();
  }
  Advance();
  TL_ASSIGN_OR_RETURN(AttrDict d, ParseDictBody());
  for (auto& [k, v] : d) attrs[k] = std::move(v);
  return OkStatus();
}

StatusOr<Attribute> Parser::ParseAttribute() {
  DepthGuard guard(*this);
  if (guard.too_deep()) return Error("attributes nested too deeply");
  const Token t = cur_;
  switch (t.kind) {
    case Tok::kIdent: {
      if (t.text == "true" || t.text == "false") {
        Advance();
        return Attribute::Bool(t.text == "true");
      }
      if (t.text == "unit") {
        Advance();
        return Attribute::Unit();
      }
      if (t.text == "dense") return ParseDense();
      if (t.text == "array") {
        Advance();
        TL_RETURN_IF_ERROR(ParsePunct("<"));
        if (cur_.kind != Tok::kIdent) return Expected("an element type in array<...>");
        std::string et = cur_.text;
        Advance();
        bool is_bool = et == "i1";
        std::vector<int64_t> ints;
        std::vector<Attribute> bools;
        if (ParseOptionalPunct(":")) {
          do {
            if (is_bool) {
              TL_ASSIGN_OR_RETURN(Attribute b, ParseAttribute());
              if (b.kind() != Attribute::Kind::kBool) return ErrorAt(t.pos, "expected true/false");
              bools.push_back(b);
            } else {
              TL_ASSIGN_OR_RETURN(int64_t v, ParseInteger());
              ints.push_back(v);
            }
          } while (ParseOptionalPunct(","));
        }
        TL_RETURN_IF_ERROR(ParsePunct(">"));
        if (is_bool) return Attribute::Array(std::move(bools));
        return Attribute::IntArray(std::move(ints));
      }
      if (t.text == "tensor" || t.text == "tuple") {
        TL_ASSIGN_OR_RETURN(Type ty, ParseType());
        return Attribute::TypeAttr(std::move(ty));
      }
      if (ElementTypeFromMlirName(t.text) || t.text == "index" || t.text == "none") {
        Advance();
        return Attribute::Opaque(t.text);
      }
      if (next_ < text_.size() && text_[next_] == '<') {
        // affine_map<...>, strided<...>, other builtin attributes: carried verbatim.
        Advance();
        std::string text = t.text;
        TL_RETURN_IF_ERROR(SkipBalanced('<', '>', &text));
        return Attribute::Opaque(std::move(text));
      }
      Advance();
      return Attribute::Enum(t.text, "");
    }
    case Tok::kInt:
    case Tok::kFloat: {
      ElementType et = t.kind == Tok::kInt ? ElementType::kS64 : ElementType::kF64;
      Advance();
      if (ParseOptionalPunct(":")) {
        if (cur_.kind != Tok::kIdent || !ElementTypeFromMlirName(cur_.text))
          return Expected("an integer or float type");
        et = *ElementTypeFromMlirName(cur_.text);
        Advance();
      }
      bool neg = false, hex = false;
      uint64_t mag = 0;
      if (IsFloat(et)) {
        if (t.kind == Tok::kInt) {
          if (!ParseMagnitude(t.text, neg, mag, hex)) return ErrorAt(t.pos, "invalid number");
          if (hex) {
            double d;
            if (et == ElementType::kF64)
              d = std::bit_cast<double>(mag);
            else if (et == ElementType::kF32)
              d = std::bit_cast<float>(static_cast<uint32_t>(mag));
            else if (et == ElementType::kF16)
              d = HalfBitsToFloat(static_cast<uint16_t>(mag));
            else
              d = Bf16BitsToFloat(static_cast<uint16_t>(mag));
            return Attribute::Float(d, et);
          }
        }
        double d = 0;
        auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), d);
        if (r.ec != std::errc()) return ErrorAt(t.pos, "invalid floating-point number");
        return Attribute::Float(d, et);
      }
      if (t.kind == Tok::kFloat) return ErrorAt(t.pos, "expected an integer for an integer type");
      if (et == ElementType::kPred) {
        if (t.text != "0" && t.text != "1") return ErrorAt(t.pos, "expected 0 or 1 for i1");
        return Attribute::Bool(t.text == "1");
      }
      if (!ParseMagnitude(t.text, neg, mag, hex)) return ErrorAt(t.pos, "invalid integer");
      if (!neg && mag > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
          et != ElementType::kU64)
        return ErrorAt(t.pos, "integer does not fit in 64 bits");
      if (neg && mag > (uint64_t{1} << 63))
        return ErrorAt(t.pos, "integer does not fit in 64 bits");
      return Attribute::Int(neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag), et);
    }
    case Tok::kString: {
      Advance();
      return Attribute::String(t.text);
    }
    case Tok::kAt: {
      Advance();
      return Attribute::Symbol(t.text);
    }
    case Tok::kBang: {
      if (t.text == "stablehlo.token") {
        TL_ASSIGN_OR_RETURN(Type ty, ParseType());
        return Attribute::TypeAttr(std::move(ty));
      }
      Advance();
      std::string text(t.raw);
      if (Peek("<")) TL_RETURN_IF_ERROR(SkipBalanced('<', '>', &text));
      return Attribute::Opaque(std::move(text));
    }
    case Tok::kHash: {
      bool has_body = next_ < text_.size() && text_[next_] == '<';
      if (!has_body) {
        auto it = attr_aliases_.find(t.text);
        if (it == attr_aliases_.end()) return Error("unknown attribute alias #" + t.text);
        Advance();
        return it->second;
      }
      // Remember where we are: anything the structured reading below cannot take is carried
      // verbatim as an opaque attribute.
      size_t saved_next = next_;
      Token saved_cur = cur_;
      Advance();  // '#...'
      Advance();  // '<'
      if (t.text == "stablehlo" && cur_.kind == Tok::kIdent) {
        std::string kind = cur_.text;
        Advance();
        if (cur_.kind == Tok::kIdent) {
          std::string value = cur_.text;
          Advance();
          if (ParseOptionalPunct(">")) return Attribute::Enum(value, kind);
        }
      } else if (t.text.rfind("stablehlo.", 0) == 0 || t.text.rfind("chlo.", 0) == 0) {
        AttrDict fields;
        bool ok = true;
        if (!ParseOptionalPunct(">")) {
          do {
            if (cur_.kind != Tok::kIdent) {
              ok = false;
              break;
            }
            std::string key = cur_.text;
            Advance();
            if (!ParseOptionalPunct("=")) {
              ok = false;
              break;
            }
            if (Peek("[")) {
              auto ints = ParseIntList();
              if (!ints.ok()) {
                ok = false;
                break;
              }
              fields[key] = Attribute::IntArray(std::move(*ints));
            } else {
              auto a = ParseAttribute();
              if (!a.ok()) {
                ok = false;
                break;
              }
              fields[key] = std::move(*a);
            }
          } while (ParseOptionalPunct(","));
          ok = ok && ParseOptionalPunct(">");
        }
        if (ok) return Attribute::Struct(t.text, std::move(fields));
      }
      next_ = saved_next;
      cur_ = saved_cur;
      std::string text(t.raw);
      Advance();
      TL_RETURN_IF_ERROR(SkipBalanced('<', '>', &text));
      return Attribute::Opaque(std::move(text));
    }
    case Tok::kPunct: {
      if (t.text == "[") {
        Advance();
        std::vector<Attribute> elems;
        if (!ParseOptionalPunct("]")) {
          do {
            TL_ASSIGN_OR_RETURN(Attribute a, ParseAttribute());
            elems.push_back(std::move(a));
          } while (ParseOptionalPunct(","));
          TL_RETURN_IF_ERROR(ParsePunct("]"));
        }
        return Attribute::Array(std::move(elems));
      }
      if (t.text == "{") {
        Advance();
        TL_ASSIGN_OR_RETURN(AttrDict d, ParseDictBody());
        return Attribute::Dict(std::move(d));
      }
      break;
    }
    default:
      break;
  }
  return Expected("an attribute");
}

StatusOr<Attribute> Parser::ParseDense() {
  const size_t start = cur_.pos;
  Advance();  // dense
  TL_RETURN_IF_ERROR(ParsePunct("<"));
  std::vector<Leaf> leaves;
  std::vector<int64_t> shape;  // of the nested bracket form
  std::string hex;
  bool is_hex = false, splat = false, nested = false;
  if (cur_.kind == Tok::kString) {
    is_hex = true;
    hex = cur_.text;
    if (hex.size() < 2 || hex[0] != '0' || hex[1] != 'x' || hex.size() % 2 != 0)
      return Expected("a hex string \"0x...\" with whole bytes");
    Advance();
  } else if (Peek("[")) {
    nested = true;
    // Reads a nested list, recording the length at each depth; ragged lists are errors.
    std::vector<int64_t> lengths;
    std::vector<bool> known;
    std::function<Status(size_t)> read = [&](size_t depth) -> Status {
      if (static_cast<int>(depth) > options_.max_nesting_depth)
        return Error("dense literal nested too deeply");
      TL_RETURN_IF_ERROR(ParsePunct("["));
      int64_t count = 0;
      bool leaf_level = !Peek("[");
      if (!Peek("]")) {
        do {
          if (leaf_level) {
            if (cur_.kind != Tok::kInt && cur_.kind != Tok::kFloat && cur_.kind != Tok::kIdent)
              return Expected("a dense element");
            leaves.push_back({cur_.kind, cur_.text, cur_.pos});
            Advance();
          } else {
            TL_RETURN_IF_ERROR(read(depth + 1));
          }
          ++count;
        } while (ParseOptionalPunct(","));
      }
      TL_RETURN_IF_ERROR(ParsePunct("]"));
      if (lengths.size() <= depth) {
        lengths.resize(depth + 1, 0);
        known.resize(depth + 1, false);
      }
      if (known[depth] && lengths[depth] != count)
        return Error("dense literal has lists of different lengths at depth " +
                     std::to_string(depth));
      lengths[depth] = count;
      known[depth] = true;
      if (leaf_level && lengths.size() > depth + 1)
        return Error("dense literal mixes elements and lists at one depth");
      return OkStatus();
    };
    TL_RETURN_IF_ERROR(read(0));
    shape = lengths;
    if (shape.size() == 1 && shape[0] == 0 && leaves.empty()) shape = {0};
  } else if (!Peek(">")) {
    splat = true;
    if (cur_.kind != Tok::kInt && cur_.kind != Tok::kFloat && cur_.kind != Tok::kIdent)
      return Expected("a dense element, a list or a hex string");
    leaves.push_back({cur_.kind, cur_.text, cur_.pos});
    Advance();
  }
  TL_RETURN_IF_ERROR(ParsePunct(">"));
  TL_RETURN_IF_ERROR(ParsePunct(":"));
  size_t type_pos = cur_.pos;
  // A tensor of `index` (a custom call's operand_layouts / result_layouts, as jax writes for a
  // tpu_custom_call): no element type of Tlaloc's, so the attribute is carried verbatim.
  if (cur_.kind == Tok::kIdent && cur_.text == "tensor") {
    const size_t close = text_.find('>', cur_.pos);
    if (close != std::string_view::npos && close >= 5 && text_.substr(close - 5, 5) == "index") {
      std::string verbatim(text_.substr(start, close + 1 - start));
      next_ = close + 1;
      Advance();
      return Attribute::Opaque(std::move(verbatim));
    }
  }
  TL_ASSIGN_OR_RETURN(Type type, ParseType());
  if (!type.is_tensor()) return ErrorAt(type_pos, "expected a tensor type for dense elements");
  const TensorType& tt = type.tensor;
  const int64_t n = tt.num_elements();
  const int64_t esize = ElementSize(tt.element_type);
  if (n > options_.max_literal_bytes / std::max<int64_t>(esize, 1))
    return ErrorAt(type_pos, "dense literal of " + tt.ToString() + " exceeds the size limit");
  if (nested && !(shape == tt.dims) && !(n == 0 && leaves.empty()))
    return ErrorAt(start, "dense literal shape [" + DimsToString(shape) +
                              "] does not match the type " + tt.ToString());
  if (!nested && !splat && !is_hex && n != 0)
    return ErrorAt(start, "empty dense literal for the non-empty type " + tt.ToString());
  Literal lit(tt);
  if (is_hex) {
    size_t bytes = (hex.size() - 2) / 2;
    std::vector<std::byte> raw(bytes);
    for (size_t i = 0; i < bytes; ++i) {
      int hi = HexDigit(hex[2 + 2 * i]), lo = HexDigit(hex[3 + 2 * i]);
      if (hi < 0 || lo < 0) return ErrorAt(start, "invalid hex digit in a dense literal");
      raw[i] = static_cast<std::byte>(hi * 16 + lo);
    }
    if (static_cast<int64_t>(bytes) == n * esize) {
      if (bytes) std::memcpy(lit.data(), raw.data(), bytes);
    } else if (static_cast<int64_t>(bytes) == esize) {
      for (int64_t i = 0; i < n; ++i) std::memcpy(lit.data() + i * esize, raw.data(), esize);
    } else {
      return ErrorAt(start, "hex dense literal has " + std::to_string(bytes) + " bytes; " +
                                tt.ToString() + " needs " + std::to_string(n * esize));
    }
    if (tt.element_type == ElementType::kPred)
      for (int64_t i = 0; i < n; ++i)
        lit.data()[i] = static_cast<std::byte>(lit.data()[i] != std::byte{0} ? 1 : 0);
    return Attribute::Elements(std::move(lit));
  }
  // Converts each leaf to the element type, then fills (or splats) the literal.
  Status st = OkStatus();
  DispatchElementType(tt.element_type, [&]<typename T>() {
    std::vector<T> values;
    values.reserve(leaves.size());
    for (const Leaf& leaf : leaves) {
      auto bad = [&](std::string what) {
        st = ErrorAt(leaf.pos, "expected " + what + " for " +
                                   std::string(MlirName(tt.element_type)) + ", found '" +
                                   leaf.text + "'");
      };
      T v{};
      if constexpr (std::is_same_v<T, bool>) {
        if (leaf.text == "true" || leaf.text == "1")
          v = true;
        else if (leaf.text == "false" || leaf.text == "0")
          v = false;
        else
          return bad("true or false");
      } else if constexpr (std::is_integral_v<T>) {
        bool neg, hexnum;
        uint64_t mag;
        if (leaf.kind != Tok::kInt || !ParseMagnitude(leaf.text, neg, mag, hexnum))
          return bad("an integer");
        constexpr int bits = sizeof(T) * 8;
        const uint64_t umax = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
        if (std::is_signed_v<T>) {
          // Signless integers accept either range, as MLIR does.
          if (neg ? mag > (uint64_t{1} << (bits - 1)) : mag > umax)
            return bad("an integer in range");
        } else if (neg ? mag != 0 : mag > umax) {
          return bad("an integer in range");
        }
        v = static_cast<T>(neg ? 0 - mag : mag);
      } else {
        bool neg, hexnum;
        uint64_t mag;
        if (leaf.kind == Tok::kInt && ParseMagnitude(leaf.text, neg, mag, hexnum) && hexnum) {
          constexpr int kBits = sizeof(T) * 8;
          if (neg || (kBits < 64 && (mag >> (kBits % 64)) != 0)) return bad("a bit pattern");
          if constexpr (kIsHalfLike<T>)
            v = T::FromBits(static_cast<uint16_t>(mag));
          else if constexpr (sizeof(T) == 4)
            v = std::bit_cast<float>(static_cast<uint32_t>(mag));
          else
            v = std::bit_cast<double>(mag);
        } else if (leaf.kind == Tok::kInt || leaf.kind == Tok::kFloat) {
          const char* b = leaf.text.data();
          const char* e = b + leaf.text.size();
          if constexpr (std::is_same_v<T, double>) {
            auto r = std::from_chars(b, e, v);
            if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)
              return bad("a number");
          } else {
            float f = 0;
            auto r = std::from_chars(b, e, f);
            if (r.ec == std::errc::result_out_of_range) {
              double d = 0;
              std::from_chars(b, e, d);
              f = static_cast<float>(d);
            } else if (r.ec != std::errc()) {
              return bad("a number");
            }
            if constexpr (std::is_same_v<T, float>)
              v = f;
            else
              v = T(f);
          }
        } else if (leaf.text == "inf" || leaf.text == "nan") {
          double d = leaf.text == "inf" ? HUGE_VAL : NAN;
          if constexpr (kIsHalfLike<T>)
            v = T(static_cast<float>(d));
          else
            v = static_cast<T>(d);
        } else {
          return bad("a number");
        }
      }
      values.push_back(v);
    }
    if (!st.ok()) return;
    std::span<T> out = lit.span<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = splat ? values[0] : values[i];
  });
  TL_RETURN_IF_ERROR(st);
  return Attribute::Elements(std::move(lit));
}

}  // namespace tlaloc::shlo
