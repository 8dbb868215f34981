// Opening a run's backend (see open_backend.h).
#include "tlaloc/runtime/open_backend.h"

#include <cstdlib>
#include <string>

#include "tlaloc/interp/multi_device.h"

namespace tlaloc::runtime {

namespace {

PjrtOpener& Opener() {
  static PjrtOpener opener = nullptr;
  return opener;
}

bool CpuDevicesSet() {
  const char* env = std::getenv("TLALOC_CPU_DEVICES");
  return env != nullptr && *env != '\0';
}

}  // namespace

void RegisterPjrtOpener(PjrtOpener opener) { Opener() = opener; }

StatusOr<std::unique_ptr<Backend>> OpenLocalBackend(const BackendChoice& target, int devices) {
  if (CpuDevicesSet()) devices = 0;  // the variable decides (the interpreter reads it itself)
  if (target.interpreter) {
    if (devices < 1) return MakeInterpreterBackend();
    return MakeInterpreterBackend({}, devices);
  }
  if (Opener() == nullptr)
    return Unimplemented("PJRT target " + target.target.ToString() +
                         ": this binary has no PJRT client (link tlaloc_pjrt and call "
                         "pjrt::RegisterBackendOpener() at start-up)");
  return Opener()(target.target, devices < 1 ? 0 : devices);
}

StatusOr<std::unique_ptr<Backend>> OpenBackend(const BackendChoice& target,
                                               const std::optional<Mesh>& mesh,
                                               ProcessWorld& world) {
  if (world.size() > 1) {
    const std::string ranks = std::to_string(world.size()) + " processes (mpirun -np " +
                              std::to_string(world.size()) + ")";
    if (!target.interpreter)
      return InvalidArgument("--target " + target.ToString() + " across " + ranks +
                             ": multi-process runs use the interpreter (--target interp)");
    if (!mesh)
      return InvalidArgument("a run across " + ranks + " needs a mesh (e.g. --mesh data=" +
                             std::to_string(world.size()) + ")");
    auto local = CpuDevicesFromEnvironment();
    if (!local.ok()) return InvalidArgument(local.status().message());
    int per_rank = *local;
    if (!CpuDevicesSet()) {
      if (mesh->num_devices() % world.size() != 0)
        return InvalidArgument("--mesh " + mesh->ToString() + " has " +
                               std::to_string(mesh->num_devices()) +
                               " devices, which do not split evenly over " + ranks);
      per_rank = static_cast<int>(mesh->num_devices() / world.size());
    }
    return MakeInterpreterBackend({}, per_rank, world);
  }
  auto backend = OpenLocalBackend(target, mesh ? static_cast<int>(mesh->num_devices()) : 0);
  if (!backend.ok()) return backend.status().WithContext("target " + target.ToString());
  return backend;
}

}  // namespace tlaloc::runtime
