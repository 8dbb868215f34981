// The backend a run asks for, assembled in one place: the interpreter or a PJRT plugin (the
// target), with a mesh's devices, across the processes of an mpirun world. `tlaloc finetune`,
// `generate --mesh` and `serve` open their backends here.
//
// runtime/ sits below pjrt/ (the PJRT client implements runtime's Backend), so runtime cannot
// call the PJRT client directly: a program that links pjrt registers its opener at start-up
// with pjrt::RegisterBackendOpener() (pjrt/pjrt_backend.h; an explicit call, since a static
// initialiser in a static library may be dropped by the linker). Without one, a PJRT target is
// an error saying the binary has no PJRT client.
#pragma once

#include <memory>
#include <optional>

#include "tlaloc/interp/process_world.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::runtime {

// Opens a PJRT plugin for `target`; `cpu_devices` > 0 asks a CPU-family plugin for that many
// devices (its cpu_device_count create option), 0 leaves the plugin's default.
using PjrtOpener = StatusOr<std::unique_ptr<Backend>> (*)(const PjrtTarget& target,
                                                          int cpu_devices);
// Called by pjrt::RegisterBackendOpener(), before any backend is opened.
void RegisterPjrtOpener(PjrtOpener opener);

// `target`'s backend in this process with `devices` devices (< 1: its default): the
// interpreter gets that many, and so does a CPU-family plugin; a GPU or TPU plugin has the
// devices it finds. TLALOC_CPU_DEVICES, when set, decides instead. Errors are the opener's.
StatusOr<std::unique_ptr<Backend>> OpenLocalBackend(const BackendChoice& target, int devices = 0);

// The backend of a run:
//  - a world of one: OpenLocalBackend with the mesh's device count (no mesh: the default);
//  - a world of several ranks (mpirun): the interpreter over every rank, each holding
//    mesh devices / ranks of them (TLALOC_CPU_DEVICES, when set: that many each). A PJRT target,
//    a missing mesh or a mesh that does not split over the ranks is InvalidArgument.
// A backend that fails to open is its error prefixed "target <target>: ".
StatusOr<std::unique_ptr<Backend>> OpenBackend(const BackendChoice& target,
                                               const std::optional<Mesh>& mesh,
                                               ProcessWorld& world);

}  // namespace tlaloc::runtime
