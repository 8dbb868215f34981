// io's registry of the model families' config parts (io/model_config.h): filled by
// models::RegisterModelFamilies() at start-up, read by config parsing and writing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "tlaloc/io/model_config.h"

namespace tlaloc::io {

namespace {

struct ConfigRegistry {
  std::mutex mu;
  std::deque<ConfigFamily> families;  // a deque: FindConfigFamily's pointers stay valid
};

ConfigRegistry& Configs() {
  static ConfigRegistry registry;
  return registry;
}

}  // namespace

void RegisterConfigFamily(const ConfigFamily& family) {
  ConfigRegistry& r = Configs();
  std::lock_guard<std::mutex> lock(r.mu);
  for (ConfigFamily& f : r.families) {
    if (f.architecture.model_type == family.architecture.model_type) {
      f = family;
      return;
    }
  }
  r.families.push_back(family);
}

const ConfigFamily* FindConfigFamily(std::string_view model_type, std::string_view class_name) {
  ConfigRegistry& r = Configs();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.families.empty()) {
    // A program that parses or writes configs without registering the families is a bug of
    // that program (not of its input): say how to fix it rather than refusing every model.
    std::fputs(
        "tlaloc: no model family is registered with io; call "
        "tlaloc::models::RegisterModelFamilies() (tlaloc/models/family.h) at start-up\n",
        stderr);
    std::abort();
  }
  for (const ConfigFamily& f : r.families)
    if (model_type.empty() ? f.architecture.class_name == class_name
                           : f.architecture.model_type == model_type)
      return &f;
  return nullptr;
}

std::string KnownConfigFamilies() {
  ConfigRegistry& r = Configs();
  std::vector<std::string> types;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const ConfigFamily& f : r.families) types.push_back(f.architecture.model_type);
  }
  std::sort(types.begin(), types.end());
  std::string known;
  for (const std::string& t : types) known += (known.empty() ? "" : ", ") + t;
  return known;
}

}  // namespace tlaloc::io
