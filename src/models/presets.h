// The model presets of `tlaloc init-model --preset` as data: one config.json-shaped file each
// under src/models/presets/, compiled in by the build (cmake/embed_presets.cmake), so the
// binary carries them wherever it runs from.
#pragma once

#include <span>
#include <string_view>

namespace tlaloc::models {

struct EmbeddedPreset {
  std::string_view name;  // the file's stem: "tiny", "qwen3-0.6b", ...
  std::string_view json;  // its config.json text
};

// Every preset file, in the order the build listed them.
std::span<const EmbeddedPreset> EmbeddedPresets();

}  // namespace tlaloc::models
