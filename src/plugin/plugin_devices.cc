// Several devices in Tlaloc's plugin: how the argument lists of one PJRT_LoadedExecutable_Execute
// call run, and how many devices a client has.
#include "plugin/plugin_internal.h"
#include "tlaloc/interp/multi_device.h"

namespace tlaloc::plugin {

StatusOr<std::vector<std::vector<Literal>>> ExecuteLists(const Compiled& c,
                                                         std::vector<std::vector<Literal>> inputs) {
  const ProcessGrid grid{c.num_replicas, c.num_partitions};
  if (grid.num_processes() == 1) {
    // The same one-device program on each list, one after another (no collectives to meet).
    std::vector<std::vector<Literal>> outs;
    for (auto& in : inputs) {
      TL_ASSIGN_OR_RETURN(auto o, c.executable->Execute(std::move(in)));
      outs.push_back(std::move(o));
    }
    return outs;
  }
  if (static_cast<int64_t>(inputs.size()) != grid.num_processes())
    return InvalidArgument("the program was compiled for " + std::to_string(grid.num_replicas) +
                           " replica(s) x " + std::to_string(grid.num_partitions) +
                           " partition(s), got " + std::to_string(inputs.size()) +
                           " argument list(s)");
  return ExecuteOnDevices(*c.executable, std::move(inputs), grid);
}

StatusOr<int64_t> DefaultDeviceCount() {
  TL_ASSIGN_OR_RETURN(int n, CpuDevicesFromEnvironment());
  return static_cast<int64_t>(n);
}

}  // namespace tlaloc::plugin
