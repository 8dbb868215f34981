// The `cpu` variant's shared library, loaded with dlopen, as interpreter custom_call handlers.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/kernels/kernel_abi.h"

namespace tlaloc::kernels {

class NativeLibrary {
 public:
  ~NativeLibrary();
  // Opens the library and checks tlaloc_kernel_abi_version() against this build's ABI.
  // `global`: its symbols resolve later libraries' references (a kernel dependency).
  static StatusOr<std::shared_ptr<NativeLibrary>> Open(const std::filesystem::path& path,
                                                       bool global = false);
  StatusOr<TlalocKernelFn> Symbol(const std::string& name) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  NativeLibrary() = default;
  void* handle_ = nullptr;
  std::filesystem::path path_;
};

// A handler calling `fn` with the operands, the given scalar attributes, and the
// interpreter-allocated results. The handler keeps the library loaded.
CustomCallHandler MakeNativeHandler(std::shared_ptr<NativeLibrary> library, TlalocKernelFn fn,
                                    std::string symbol, std::map<std::string, double> attributes);

}  // namespace tlaloc::kernels
