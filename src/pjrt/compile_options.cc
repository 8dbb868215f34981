#include "tlaloc/pjrt/compile_options.h"

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
  if (strict_precision || dump_to || host_device_count) {
    proto::DebugOptions* debug = build->mutable_debug_options();
    // proto3 omits a false bool, so strictness is carried by the presence of debug_options
    // with the field at its false value: XLA's own default for it is true.
    debug->set_xla_allow_excess_precision(!strict_precision);
    if (dump_to) debug->set_xla_dump_to(*dump_to);
    if (host_device_count)
      debug->set_xla_force_host_platform_device_count(static_cast<int32_t>(*host_device_count));
  }
  std::string bytes;
  if (!options.SerializeToString(&bytes)) return Internal("cannot serialize CompileOptionsProto");
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
