// `tlaloc generate --mesh model=N` (see generate_mesh.h).
#include "generate_mesh.h"

#include <cstdlib>

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc::cli {

StatusOr<MeshSetup> PrepareMeshGenerate(
    ProcessWorld& world, const std::string& mesh_text, const BackendChoice& choice,
    const std::vector<std::pair<std::string, std::string>>& agreed) {
  auto mesh = Mesh::Parse(mesh_text);
  if (!mesh.ok()) return InvalidArgument("--mesh: " + mesh.status().message());
  MeshSetup setup{*mesh, nullptr};
  const char* env = std::getenv("TLALOC_CPU_DEVICES");
  if (world.size() > 1) {
    if (!choice.interpreter)
      return InvalidArgument(
          "--target " + choice.ToString() + " across " + std::to_string(world.size()) +
          " processes: multi-process runs use the interpreter (--target interp)");
    auto local = CpuDevicesFromEnvironment();
    if (!local.ok()) return InvalidArgument(local.status().message());
    if (!(env && *env) && mesh->num_devices() % world.size() != 0)
      return InvalidArgument("--mesh " + mesh_text + " does not split evenly over " +
                             std::to_string(world.size()) + " processes");
    const int per_rank =
        env && *env ? *local : static_cast<int>(mesh->num_devices() / world.size());
    setup.backend = MakeInterpreterBackend({}, per_rank, world);
    // Every rank must generate from the same model, mesh, prompt and settings.
    TL_RETURN_IF_ERROR(CheckSameOnAllRanks(world, agreed, CollectiveTimeout()));
    return setup;
  }
  auto made = MakeBackend(choice, static_cast<int>(mesh->num_devices()));
  if (!made.ok())
    return Status(made.status().code(),
                  "target " + choice.ToString() + ": " + made.status().message());
  setup.backend = std::move(*made);
  return setup;
}

}  // namespace tlaloc::cli
