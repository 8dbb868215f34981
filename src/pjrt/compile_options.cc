#include "tlaloc/pjrt/compile_options.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "compile_options.pb.h"

namespace tlaloc::pjrt {

namespace proto = ::tlaloc::xla_compat;

StatusOr<std::string> CompileOptions::Serialize() const {
  if (num_replicas < 1 || num_partitions < 1) {
    return InvalidArgument("compile options: num_replicas and num_partitions must be >= 1, got " +
                           std::to_string(num_replicas) + " and " + std::to_string(num_partitions));
  }
  proto::CompileOptionsProto options;
  proto::ExecutableBuildOptionsProto* build = options.mutable_executable_build_options();
  build->set_num_replicas(num_replicas);
  build->set_num_partitions(num_partitions);
  build->set_use_spmd_partitioning(use_spmd_partitioning);
  build->set_use_shardy_partitioner(use_shardy_partitioner);
  if (!device_assignment.empty()) {
    if (static_cast<int64_t>(device_assignment.size()) != num_replicas) {
      return InvalidArgument(
          "compile options: device_assignment has " + std::to_string(device_assignment.size()) +
          " replica rows, expected num_replicas = " + std::to_string(num_replicas));
    }
    // DeviceAssignmentProto is stored per computation (partition), then per replica.
    proto::DeviceAssignmentProto* da = build->mutable_device_assignment();
    da->set_replica_count(static_cast<int32_t>(num_replicas));
    da->set_computation_count(static_cast<int32_t>(num_partitions));
    for (int64_t p = 0; p < num_partitions; ++p) {
      auto* computation = da->add_computation_devices();
      for (int64_t r = 0; r < num_replicas; ++r) {
        if (static_cast<int64_t>(device_assignment[r].size()) != num_partitions) {
          return InvalidArgument(
              "compile options: device_assignment row " + std::to_string(r) + " has " +
              std::to_string(device_assignment[r].size()) +
              " entries, expected num_partitions = " + std::to_string(num_partitions));
        }
        computation->add_replica_device_ids(device_assignment[r][p]);
      }
    }
  }
  // Overrides by debug-option name. OptionOverrideProto's value is a oneof, so a false bool is
  // still on the wire (XLA's own default for xla_allow_excess_precision is true).
  auto& overrides = *options.mutable_env_option_overrides();
  if (strict_precision) overrides["xla_allow_excess_precision"].set_bool_field(false);
  if (dump_to) overrides["xla_dump_to"].set_string_field(*dump_to);
  if (host_device_count) {
    overrides["xla_force_host_platform_device_count"].set_int_field(*host_device_count);
  }
  std::string bytes;
  // Deterministic: map entries in key order, so the same options are the same bytes.
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!options.SerializeToCodedStream(&coded)) {
      return Internal("cannot serialize CompileOptionsProto");
    }
  }
  return bytes;
}

StatusOr<CompileOptions> CompileOptions::Parse(const std::string& bytes) {
  proto::CompileOptionsProto options;
  if (!options.ParseFromString(bytes)) {
    return DataLoss("compile options: " + std::to_string(bytes.size()) +
                    " bytes are not a CompileOptionsProto");
  }
  CompileOptions out;
  const auto& build = options.executable_build_options();
  // Unset counts (0) mean one, as in XLA.
  out.num_replicas = build.num_replicas() > 0 ? build.num_replicas() : 1;
  out.num_partitions = build.num_partitions() > 0 ? build.num_partitions() : 1;
  out.use_spmd_partitioning = build.use_spmd_partitioning();
  out.use_shardy_partitioner = build.use_shardy_partitioner();
  if (build.has_device_assignment()) {
    const auto& da = build.device_assignment();
    out.device_assignment.assign(da.replica_count(),
                                 std::vector<int64_t>(da.computation_count(), 0));
    for (int p = 0; p < da.computation_devices_size() && p < da.computation_count(); ++p) {
      const auto& ids = da.computation_devices(p).replica_device_ids();
      for (int r = 0; r < ids.size() && r < da.replica_count(); ++r) {
        out.device_assignment[r][p] = ids[r];
      }
    }
  }
  for (const auto& [name, value] : options.env_option_overrides()) {
    if (name == "xla_allow_excess_precision" &&
        value.value_case() == proto::OptionOverrideProto::kBoolField) {
      out.strict_precision = !value.bool_field();
    } else if (name == "xla_dump_to" &&
               value.value_case() == proto::OptionOverrideProto::kStringField) {
      out.dump_to = value.string_field();
    } else if (name == "xla_force_host_platform_device_count" &&
               value.value_case() == proto::OptionOverrideProto::kIntField) {
      out.host_device_count = value.int_field();
    }
  }
  // The older form: a debug_options message.
  if (build.has_debug_options()) {
    const auto& debug = build.debug_options();
    out.strict_precision = !debug.xla_allow_excess_precision();
    if (!debug.xla_dump_to().empty()) out.dump_to = debug.xla_dump_to();
    if (debug.xla_force_host_platform_device_count() != 0) {
      out.host_device_count = debug.xla_force_host_platform_device_count();
    }
  }
  return out;
}

}  // namespace tlaloc::pjrt
