// The Backend interface over a PjrtSession: a module is printed as StableHLO text and compiled
// by the plugin, so every program that runs on the interpreter runs through a plugin unchanged.
#pragma once

#include <memory>

#include "tlaloc/pjrt/session.h"
#include "tlaloc/runtime/backend.h"

namespace tlaloc::pjrt {

// Opens a session (resolving the plugin from the target when no path is given).
StatusOr<std::unique_ptr<Backend>> MakePjrtBackend(const SessionOptions& options,
                                                   const CompileOptions& compile_options = {});
// Over an open session.
std::unique_ptr<Backend> MakePjrtBackend(std::unique_ptr<PjrtSession> session,
                                         const CompileOptions& compile_options = {});

// Registers the PJRT client as runtime::OpenBackend's way to a plugin (runtime/open_backend.h).
// Programs that open PJRT targets through OpenBackend call it once at start-up.
void RegisterBackendOpener();

}  // namespace tlaloc::pjrt

namespace tlaloc {
// The backend a BackendChoice names: the interpreter or a PJRT session on the target
// (runtime::OpenLocalBackend; runtime/open_backend.h opens a run's backend over a mesh and world).
StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendChoice& choice);
// The same for a run over `devices` devices (a --mesh): the interpreter gets that many, and so
// does a CPU-family plugin (its cpu_device_count create option, which Tlaloc's plugin and
// XLA:CPU take); a GPU or TPU plugin has the devices it finds. TLALOC_CPU_DEVICES, when set,
// decides instead.
StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendChoice& choice, int devices);
}  // namespace tlaloc
