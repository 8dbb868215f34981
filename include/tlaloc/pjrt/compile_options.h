// The compile options a PJRT client sends with every program: a serialized
// xla.CompileOptionsProto, built with protobuf from proto/compile_options.proto (the project's
// own minimal mirror of XLA's field numbers). Protobuf wire format is backend-agnostic: the
// same bytes are parsed by XLA:CPU, XLA:CUDA, libtpu and Tlaloc's plugin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  bool use_spmd_partitioning = false;
  bool use_shardy_partitioner = false;
  // Device ids, [replica][partition]; empty lets the plugin choose.
  std::vector<std::vector<int64_t>> device_assignment;
  // Strict precision: xla_allow_excess_precision = false, so a backend keeps f32->bf16->f32
  // convert pairs instead of folding them. Debug options travel as env_option_overrides (field
  // 7), which XLA applies on top of its own defaults: a debug_options message (field 3) would
  // replace every default with proto zeros.
  bool strict_precision = false;
  std::optional<std::string> dump_to;  // xla_dump_to
  // Strictly XLA:CPU: xla_force_host_platform_device_count.
  std::optional<int64_t> host_device_count;

  // The runbook's CompileOptions.STRICT_PRECISION: one replica, one partition, strict.
  static CompileOptions StrictPrecision() {
    CompileOptions o;
    o.strict_precision = true;
    return o;
  }

  // Serialized CompileOptionsProto.
  StatusOr<std::string> Serialize() const;
  // Reads back the fields above from serialized bytes (DataLoss on malformed bytes).
  static StatusOr<CompileOptions> Parse(const std::string& bytes);
};

}  // namespace tlaloc::pjrt
