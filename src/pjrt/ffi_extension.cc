// Registering XLA FFI handlers with a plugin through PJRT's FFI extension.
#include <dlfcn.h>

#include "tlaloc/pjrt/ffi.h"

namespace tlaloc::pjrt {

StatusOr<const PJRT_FFI_Extension*> FindFfiExtension(const PjrtApi& api) {
  for (const PJRT_Extension_Base* e = api.raw()->extension_start; e; e = e->next) {
    if (e->type != PJRT_Extension_Type_FFI) continue;
    if (e->struct_size < PJRT_FFI_Extension_STRUCT_SIZE)
      return Unimplemented("PJRT plugin " + api.origin() +
                           " has an FFI extension without handler registration (struct size " +
                           std::to_string(e->struct_size) + ", need " +
                           std::to_string(PJRT_FFI_Extension_STRUCT_SIZE) + ")");
    return reinterpret_cast<const PJRT_FFI_Extension*>(e);
  }
  return Unimplemented("PJRT plugin " + api.origin() +
                       " has no FFI extension, so it cannot run typed-FFI kernels");
}

Status RegisterFfiHandler(const PjrtApi& api, const std::string& target, void* handler,
                          const std::string& platform) {
  TL_ASSIGN_OR_RETURN(const PJRT_FFI_Extension* ext, FindFfiExtension(api));
  if (!ext->register_handler)
    return Unimplemented("PJRT plugin " + api.origin() + " leaves FFI register_handler empty");
  PJRT_FFI_Register_Handler_Args args{};
  args.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  args.target_name = target.data();
  args.target_name_size = target.size();
  args.handler = handler;
  args.platform_name = platform.data();
  args.platform_name_size = platform.size();
  return api.ToStatus(ext->register_handler(&args), "PJRT_FFI_Register_Handler(" + target + ")");
}

Status RegisterFfiHandlerFromLibrary(const PjrtApi& api, const std::filesystem::path& library,
                                     const std::string& symbol, const std::string& platform) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return FailedPrecondition("cannot load FFI kernel library " + library.string() + ": " +
                              dlerror());
  void* handler = dlsym(h, symbol.c_str());
  if (!handler)
    return NotFound("FFI kernel library " + library.string() + " does not export " + symbol);
  return RegisterFfiHandler(api, symbol, handler, platform);
}

}  // namespace tlaloc::pjrt
