// Typed, checked access to the fields of a JSON object (config files), with error messages that
// name the file and the field. Private to the io layer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::io {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string source)
      : object_(object), source_(std::move(source)) {}

  bool Has(const std::string& key) const { return object_.contains(key); }
  bool IsNull(const std::string& key) const { return Has(key) && object_.at(key).is_null(); }
  const nlohmann::json& Raw(const std::string& key) {
    used_.insert(key);
    return object_.at(key);
  }
  void MarkUsed(const std::string& key) { used_.insert(key); }

  // Each reader leaves *out unchanged when the key is absent. `nullable` readers also accept
  // null (giving nullopt); the others refuse null as a wrong type.
  Status Int(const std::string& key, int64_t* out);
  Status OptionalInt(const std::string& key, std::optional<int64_t>* out);
  Status Double(const std::string& key, double* out);
  Status OptionalDouble(const std::string& key, std::optional<double>* out);
  Status Bool(const std::string& key, bool* out);
  Status String(const std::string& key, std::string* out);
  // An int or a list of ints (token ids); null gives an empty list.
  Status IntOrIntList(const std::string& key, std::vector<int64_t>* out);
  Status IntList(const std::string& key, std::vector<int64_t>* out);  // null: empty
  Status StringList(const std::string& key, std::vector<std::string>* out);

  // "<source>: <key> must be <expected>, got <what>".
  Status WrongType(const std::string& key, const std::string& expected) const;
  Status Error(const std::string& message) const {
    return InvalidArgument(source_ + ": " + message);
  }
  const std::string& source() const { return source_; }
  // The fields no reader consumed, as an object.
  nlohmann::json Unused() const;

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::set<std::string> used_;
};

// "integer 3", "string \"x\"", "null", ... for messages.
std::string DescribeJson(const nlohmann::json& j);

}  // namespace tlaloc::io
