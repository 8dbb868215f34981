// Jinja values: conversion from JSON, Python's truthiness, str(), repr(), equality, ordering and
// json.dumps (as transformers' tojson calls it), and the UTF-8 helpers strings need.
#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja_internal.h"
#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::jinja {

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Float(static_cast<double>(u))
                                                  : Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict items;
      items.reserve(j.size());
      for (const auto& [k, v] : j.items()) items.emplace_back(k, FromJson(v));
      return MakeDict(std::move(items));
    }
    default:
      return None();  // binary and discarded values do not come from JSON text
  }
}

const Value* Value::Find(std::string_view key) const {
  if (kind_ != kDict) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Value::Truthy() const {
  switch (kind_) {
    case kUndefined:
    case kNone:
      return false;
    case kBool:
    case kInt:
      return int_ != 0;
    case kFloat:
      return float_ != 0;
    case kString:
      return !str_.empty();
    case kList:
      return !list_->empty();
    case kDict:
      return namespace_ || !dict_->empty();
    case kCallable:
      return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // -d.ddde+XX, shortest round-trip digits
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out;
  if (exp >= -4 && exp < 16) {  // Python's repr switches to exponents outside [1e-4, 1e16)
    if (exp < 0) {
      out = "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string StrRepr(const std::string& s) {
  // Python picks single quotes unless the text has ' and no ".
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

std::string Value::ToString(size_t limit) const {
  switch (kind_) {
    case kUndefined:
      return "";
    case kString:
      return str_;
    default:
      return Repr(limit);
  }
}

std::string Value::Repr(size_t limit) const {
  std::string out;
  AppendRepr(&out, limit);
  return out;
}

void Value::AppendRepr(std::string* out, size_t limit) const {
  if (out->size() > limit) return;  // the caller reports the size; shared lists can be huge
  switch (kind_) {
    case kUndefined:
      return;
    case kNone:
      *out += "None";
      return;
    case kBool:
      *out += int_ ? "True" : "False";
      return;
    case kInt:
      *out += std::to_string(int_);
      return;
    case kFloat:
      *out += FloatRepr(float_);
      return;
    case kString:
      *out += StrRepr(str_);
      return;
    case kList: {
      *out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size() && out->size() <= limit; ++i) {
        if (i) *out += ", ";
        (*list_)[i].AppendRepr(out, limit);
      }
      *out += tuple_ ? (list_->size() == 1 ? ",)" : ")") : "]";
      return;
    }
    case kDict: {
      if (namespace_) {
        *out += "<Namespace>";
        return;
      }
      *out += "{";
      for (size_t i = 0; i < dict_->size() && out->size() <= limit; ++i) {
        if (i) *out += ", ";
        *out += StrRepr((*dict_)[i].first) + ": ";
        (*dict_)[i].second.AppendRepr(out, limit);
      }
      *out += "}";
      return;
    }
    case kCallable:
      *out += "<function " + fn_->name + ">";
      return;
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case kUndefined:
      return "undefined";
    case kNone:
      return "NoneType";
    case kBool:
      return "bool";
    case kInt:
      return "int";
    case kFloat:
      return "float";
    case kString:
      return "str";
    case kList:
      return "list";
    case kDict:
      return namespace_ ? "Namespace" : "dict";
    case kCallable:
      return "function";
  }
  return "?";
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::kFloat || b.kind() == Value::kFloat)
      return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::kUndefined:
    case Value::kNone:
      return true;
    case Value::kString:
      return a.str() == b.str();
    case Value::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      if (&a.list() == &b.list()) return true;
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict()) {
        const Value* o = b.Find(k);
        if (o == nullptr || !Equal(v, *o)) return false;
      }
      return true;
    }
    case Value::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::kFloat || b.kind() == Value::kFloat)
      return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 orders as code points
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument("'<' not supported between instances of '" + a.TypeName() + "' and '" +
                         b.TypeName() + "'");
}

namespace {

void JsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

Status JsonValue(const Value& v, int indent, int level, bool sort_keys, const std::string& item_sep,
                 const std::string& key_sep, std::string* out, size_t limit) {
  if (level > 500) return InvalidArgument("tojson: value nested too deeply");
  if (out->size() > limit)
    return ResourceExhausted("tojson: the text exceeds " + std::to_string(limit) + " bytes");
  auto newline = [&](int lvl) {
    if (indent >= 0) *out += "\n" + std::string(static_cast<size_t>(indent) * lvl, ' ');
  };
  switch (v.kind()) {
    case Value::kNone:
      *out += "null";
      return OkStatus();
    case Value::kBool:
      *out += v.as_bool() ? "true" : "false";
      return OkStatus();
    case Value::kInt:
      *out += std::to_string(v.as_int());
      return OkStatus();
    case Value::kFloat: {
      double d = v.as_double();
      *out += std::isnan(d)   ? "NaN"
              : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                              : FloatRepr(d);
      return OkStatus();
    }
    case Value::kString:
      JsonString(v.str(), out);
      return OkStatus();
    case Value::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return OkStatus();
      }
      *out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        TL_RETURN_IF_ERROR(
            JsonValue(v.list()[i], indent, level + 1, sort_keys, item_sep, key_sep, out, limit));
      }
      newline(level);
      *out += ']';
      return OkStatus();
    }
    case Value::kDict: {
      if (v.is_namespace()) break;
      if (v.dict().empty()) {
        *out += "{}";
        return OkStatus();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict()) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        JsonString(items[i]->first, out);
        *out += key_sep;
        TL_RETURN_IF_ERROR(JsonValue(items[i]->second, indent, level + 1, sort_keys, item_sep,
                                     key_sep, out, limit));
      }
      newline(level);
      *out += '}';
      return OkStatus();
    }
    default:
      break;
  }
  return InvalidArgument("Object of type " + v.TypeName() + " is not JSON serializable");
}

}  // namespace

StatusOr<std::string> ToJson(const Value& v, int indent, bool sort_keys,
                             const std::string& item_sep, const std::string& key_sep,
                             size_t limit) {
  std::string out;
  TL_RETURN_IF_ERROR(JsonValue(v, indent, 0, sort_keys, item_sep, key_sep, &out, limit));
  return out;
}

std::vector<std::string_view> CodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    utf8::Next(s, &i);
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {
std::string MapCase(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(upper ? std::toupper(c) : std::tolower(c));
      ++i;
      continue;
    }
    char32_t cp = utf8::Next(s, &i);
    if (upper && cp == 0xDF) {  // Python upper-cases ß to SS (a special casing utf8proc lacks)
      out += "SS";
      continue;
    }
    utf8proc_int32_t m = upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))
                               : utf8proc_tolower(static_cast<utf8proc_int32_t>(cp));
    out += utf8::Encode(static_cast<char32_t>(m));
  }
  return out;
}
}  // namespace

std::string ToUpper(std::string_view s) { return MapCase(s, true); }
std::string ToLower(std::string_view s) { return MapCase(s, false); }

bool IsPySpace(char32_t c) { return (c >= 0x1C && c <= 0x1F) || utf8::IsWhiteSpace(c); }

}  // namespace tlaloc::jinja
