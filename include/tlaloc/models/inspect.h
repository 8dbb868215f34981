// `tlaloc inspect`: what a checkpoint folder holds, checked against what its config.json says
// the architecture needs. Kept in the library so the report is testable without the CLI.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/io/model_config.h"

namespace tlaloc::models {

struct InspectReport {
  struct DtypeSummary {
    int64_t tensors = 0;
    int64_t elements = 0;
    uint64_t bytes = 0;
  };
  struct ShapeMismatch {
    std::string name;
    std::vector<int64_t> expected;
    std::vector<int64_t> actual;
  };

  std::string path;
  std::optional<io::ModelConfig> config;            // absent when the folder has no config.json
  std::optional<io::GenerationConfig> generation;   // from generation_config.json when present
  std::vector<std::string> shard_files;         // file names, in load order
  std::optional<std::string> index_file;        // set for sharded checkpoints
  std::map<std::string, std::string> metadata;  // the first shard's __metadata__

  int64_t num_tensors = 0;
  int64_t stored_elements = 0;  // every stored tensor, a stored tied head included
  uint64_t stored_bytes = 0;
  std::optional<int64_t> parameter_count;  // distinct parameters by the config
  std::map<ElementType, DtypeSummary> by_dtype;

  // Against the config's expected tensors (empty without a config).
  std::vector<std::string> missing;
  std::vector<ShapeMismatch> wrong_shape;
  std::vector<std::string> unexpected;
  bool tied_head_stored = false;  // lm_head.weight present although tied (allowed)

  bool matches() const { return missing.empty() && wrong_shape.empty() && unexpected.empty(); }
};

// `path` is a checkpoint folder (or a single .safetensors / index file, then without config).
// Unreadable or invalid files are errors; a checkpoint that does not match its config is not
// (the report lists the differences).
StatusOr<InspectReport> InspectCheckpoint(const std::filesystem::path& path);

// Human-readable summary; long name lists are cut after `max_listed` entries.
std::string FormatInspectText(const InspectReport& report, size_t max_listed = 20);
// Machine-readable form with complete lists.
std::string FormatInspectJson(const InspectReport& report);

}  // namespace tlaloc::models
