// PJRT's FFI extension (declarations written for Tlaloc from the extension's documented layout,
// version 2+): lets a client register XLA typed-FFI handlers (custom_call targets with
// api_version 4) with a plugin, e.g. a kernel repository's cuda variant with the XLA CUDA plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "tlaloc/pjrt/api.h"

extern "C" {

struct PJRT_FFI_Register_Handler_Args {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // XLA_FFI_Handler*
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;  // bit 0: command-buffer compatible
};
TL_PJRT_STRUCT_SIZE(PJRT_FFI_Register_Handler_Args, traits);

typedef PJRT_Error* PJRT_FFI_Register_Handler(PJRT_FFI_Register_Handler_Args* args);

struct PJRT_FFI_Extension {
  PJRT_Extension_Base base;
  void* type_id_register;  // not used by Tlaloc
  void* user_data_add;     // not used by Tlaloc
  PJRT_FFI_Register_Handler* register_handler;
};
TL_PJRT_STRUCT_SIZE(PJRT_FFI_Extension, register_handler);

}  // extern "C"

namespace tlaloc::pjrt {

// The plugin's FFI extension, or an error saying the plugin lacks it (or an older version
// without handler registration).
StatusOr<const PJRT_FFI_Extension*> FindFfiExtension(const PjrtApi& api);

// Registers `handler` (an XLA_FFI_Handler*) for custom_call target `target` on `platform`
// ("CUDA", "ROCM", "Host").
Status RegisterFfiHandler(const PjrtApi& api, const std::string& target, void* handler,
                          const std::string& platform);

// dlopens a kernel library and registers its exported handler `symbol` under the same name.
// The library stays loaded for the life of the process (the plugin keeps the pointer).
Status RegisterFfiHandlerFromLibrary(const PjrtApi& api, const std::filesystem::path& library,
                                     const std::string& symbol, const std::string& platform);

}  // namespace tlaloc::pjrt
