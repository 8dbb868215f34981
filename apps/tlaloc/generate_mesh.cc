// `tlaloc generate --mesh model=N` (see generate_mesh.h).
#include "generate_mesh.h"

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/runtime/open_backend.h"

namespace tlaloc::cli {

StatusOr<MeshSetup> PrepareMeshGenerate(
    ProcessWorld& world, const std::string& mesh_text, const BackendChoice& choice,
    const std::vector<std::pair<std::string, std::string>>& agreed) {
  auto mesh = Mesh::Parse(mesh_text);
  if (!mesh.ok()) return InvalidArgument("--mesh: " + mesh.status().message());
  MeshSetup setup{*mesh, nullptr};
  TL_ASSIGN_OR_RETURN(setup.backend, runtime::OpenBackend(choice, *mesh, world));
  // Every rank must generate from the same model, mesh, prompt and settings.
  if (world.size() > 1) TL_RETURN_IF_ERROR(CheckSameOnAllRanks(world, agreed, CollectiveTimeout()));
  return setup;
}

}  // namespace tlaloc::cli
