// Kernel mappings written as JSON (see ParseKernelMapping in kernelize.h).
#include <nlohmann/json.hpp>

#include "tlaloc/kernels/kernelize.h"

namespace tlaloc::kernels {
namespace {
using nlohmann::json;

StatusOr<LayerRepository> ParseEntry(const json& e, const std::string& where) {
  LayerRepository r;
  std::string repo;
  if (e.is_string()) {
    repo = e.get<std::string>();
  } else if (e.is_object() && e.contains("repo") && e["repo"].is_string()) {
    repo = e["repo"].get<std::string>();
    if (e.contains("layer")) {
      if (!e["layer"].is_string()) return InvalidArgument(where + ": \"layer\" must be a string");
      r.layer = e["layer"].get<std::string>();
    }
    if (e.contains("capability")) {
      const json& c = e["capability"];
      if (!c.is_array() || c.size() != 2 || !c[0].is_number_integer() ||
          !c[1].is_number_integer() || c[0].get<int>() > c[1].get<int>())
        return InvalidArgument(where + ": \"capability\" must be [min, max], e.g. [80, 90]");
      r.capability = CapabilityRange{c[0].get<int>(), c[1].get<int>()};
    }
  } else {
    return InvalidArgument(where + ": expected a repository string or {\"repo\": ...}");
  }
  TL_ASSIGN_OR_RETURN(r.source, KernelSource::Parse(repo));
  return r;
}

}  // namespace

StatusOr<KernelMapping> ParseKernelMapping(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("kernel mapping: expected a JSON object {layer: {backend: repo}}");
  KernelMapping mapping;
  for (const auto& [layer, backends] : j.items()) {
    if (!FindLayerSignature(layer))
      return InvalidArgument("kernel mapping: '" + layer + "' is not a Tlaloc kernel layer");
    if (!backends.is_object())
      return InvalidArgument("kernel mapping: " + layer + " must map backends to repositories");
    for (const auto& [backend_name, spec] : backends.items()) {
      std::string where = "kernel mapping " + layer + "." + backend_name;
      auto backend = ParseBackend(backend_name);
      if (!backend.ok()) return InvalidArgument(where + ": " + backend.status().message());
      // Clang 14 cannot capture structured bindings: copy the key into the closure instead.
      auto add = [&mapping, &backend, layer = std::string(layer)](const json& e, Mode mode,
                                                                  const std::string& at) -> Status {
        if (e.is_array()) {
          for (const auto& item : e) {
            TL_ASSIGN_OR_RETURN(LayerRepository r, ParseEntry(item, at));
            mapping.Add(layer, *backend, mode, r);
          }
          return OkStatus();
        }
        TL_ASSIGN_OR_RETURN(LayerRepository r, ParseEntry(e, at));
        mapping.Add(layer, *backend, mode, r);
        return OkStatus();
      };
      if (spec.is_object() && (spec.contains("inference") || spec.contains("training"))) {
        for (const auto& [mode_name, e] : spec.items()) {
          if (mode_name != "inference" && mode_name != "training")
            return InvalidArgument(where + ": unknown mode '" + mode_name +
                                   "' (expected inference or training)");
          TL_RETURN_IF_ERROR(add(e, mode_name == "training" ? Mode::kTraining : Mode::kInference,
                                 where + "." + mode_name));
        }
      } else {
        TL_RETURN_IF_ERROR(add(spec, Mode::kInference, where));
      }
    }
  }
  return mapping;
}

}  // namespace tlaloc::kernels
