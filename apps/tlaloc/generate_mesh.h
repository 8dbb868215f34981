// `tlaloc generate --mesh model=N`: the devices of a tensor-parallel run through the engine
// (generate/engine.h splits the weights and the KV cache over them): N devices of the
// interpreter or of a PJRT target, or under mpirun this rank's share of the interpreter's.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/interp/process_world.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::cli {

struct MeshSetup {
  Mesh mesh;
  std::unique_ptr<Backend> backend;
};

// Parses `mesh_text` and opens `choice`'s backend with the mesh's devices
// (runtime::OpenBackend: the interpreter, or a CPU-family plugin, gets them unless
// TLALOC_CPU_DEVICES says otherwise; under mpirun each rank its share of the interpreter's).
// Under mpirun every rank must have the same `agreed` (name, value) pairs. InvalidArgument: a
// usage error (bad mesh, a plugin across processes, a mesh that does not split over the ranks).
StatusOr<MeshSetup> PrepareMeshGenerate(
    ProcessWorld& world, const std::string& mesh_text, const BackendChoice& choice,
    const std::vector<std::pair<std::string, std::string>>& agreed);

}  // namespace tlaloc::cli
