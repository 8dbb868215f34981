#include "io/json_fields.h"

#include <cmath>

namespace tlaloc::io {

using nlohmann::json;

std::string DescribeJson(const json& j) {
  std::string text = j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  if (j.is_number_integer()) return "integer " + text;
  if (j.is_number_float()) return "number " + text;
  if (j.is_string()) return "string " + text;
  if (j.is_boolean()) return "boolean " + text;
  if (j.is_null()) return "null";
  return std::string(j.type_name()) + " " + text;
}

Status JsonFields::WrongType(const std::string& key, const std::string& expected) const {
  return Error(key + " must be " + expected + ", got " + DescribeJson(object_.at(key)));
}

namespace {
bool ToInt(const json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (j.is_number_integer()) {
    *out = j.get<int64_t>();
    return true;
  }
  return false;
}
}  // namespace

Status JsonFields::Int(const std::string& key, int64_t* out) {
  if (!Has(key)) return OkStatus();
  if (!ToInt(Raw(key), out)) return WrongType(key, "an integer");
  return OkStatus();
}

Status JsonFields::OptionalInt(const std::string& key, std::optional<int64_t>* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  if (j.is_null()) {
    out->reset();
    return OkStatus();
  }
  int64_t v = 0;
  if (!ToInt(j, &v)) return WrongType(key, "an integer or null");
  *out = v;
  return OkStatus();
}

Status JsonFields::Double(const std::string& key, double* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  if (!j.is_number()) return WrongType(key, "a number");
  *out = j.get<double>();
  if (!std::isfinite(*out)) return WrongType(key, "a finite number");
  return OkStatus();
}

Status JsonFields::OptionalDouble(const std::string& key, std::optional<double>* out) {
  if (!Has(key)) return OkStatus();
  if (Raw(key).is_null()) {
    out->reset();
    return OkStatus();
  }
  double v = 0;
  TL_RETURN_IF_ERROR(Double(key, &v));
  *out = v;
  return OkStatus();
}

Status JsonFields::Bool(const std::string& key, bool* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  if (!j.is_boolean()) return WrongType(key, "true or false");
  *out = j.get<bool>();
  return OkStatus();
}

Status JsonFields::String(const std::string& key, std::string* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  if (!j.is_string()) return WrongType(key, "a string");
  *out = j.get<std::string>();
  return OkStatus();
}

Status JsonFields::IntOrIntList(const std::string& key, std::vector<int64_t>* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  int64_t v = 0;
  if (ToInt(j, &v)) {
    *out = {v};
    return OkStatus();
  }
  return IntList(key, out);
}

Status JsonFields::IntList(const std::string& key, std::vector<int64_t>* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  out->clear();
  if (j.is_null()) return OkStatus();
  if (!j.is_array()) return WrongType(key, "an integer list");
  for (size_t i = 0; i < j.size(); ++i) {
    int64_t v = 0;
    if (!ToInt(j[i], &v))
      return Error(key + "[" + std::to_string(i) + "] must be an integer, got " +
                   DescribeJson(j[i]));
    out->push_back(v);
  }
  return OkStatus();
}

Status JsonFields::StringList(const std::string& key, std::vector<std::string>* out) {
  if (!Has(key)) return OkStatus();
  const json& j = Raw(key);
  out->clear();
  if (j.is_null()) return OkStatus();
  if (!j.is_array()) return WrongType(key, "a list of strings");
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string())
      return Error(key + "[" + std::to_string(i) + "] must be a string, got " + DescribeJson(j[i]));
    out->push_back(j[i].get<std::string>());
  }
  return OkStatus();
}

json JsonFields::Unused() const {
  json out = json::object();
  for (auto it = object_.begin(); it != object_.end(); ++it)
    if (!used_.count(it.key())) out[it.key()] = *it;
  return out;
}

}  // namespace tlaloc::io
