// dlopen'd cpu kernels behind the C ABI of kernel_abi.h.
#include "tlaloc/kernels/native.h"

#include <dlfcn.h>

#include <vector>

namespace tlaloc::kernels {
namespace {

int32_t DtypeCode(ElementType et) {
  switch (et) {
    case ElementType::kF32:
      return TLALOC_KERNEL_F32;
    case ElementType::kBF16:
      return TLALOC_KERNEL_BF16;
    case ElementType::kF16:
      return TLALOC_KERNEL_F16;
    case ElementType::kF64:
      return TLALOC_KERNEL_F64;
    case ElementType::kS32:
      return TLALOC_KERNEL_S32;
    case ElementType::kS64:
      return TLALOC_KERNEL_S64;
    default:
      return TLALOC_KERNEL_OTHER;
  }
}

TlalocKernelBuffer Describe(const Literal& l, void* data) {
  return TlalocKernelBuffer{DtypeCode(l.type().element_type), static_cast<int32_t>(l.type().rank()),
                            l.type().dims.data(), data};
}

}  // namespace

NativeLibrary::~NativeLibrary() {
  if (handle_) dlclose(handle_);
}

StatusOr<std::shared_ptr<NativeLibrary>> NativeLibrary::Open(const std::filesystem::path& path,
                                                             bool global) {
  void* h = dlopen(path.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!h)
    return FailedPrecondition("cannot load kernel library " + path.string() + ": " + dlerror());
  std::shared_ptr<NativeLibrary> lib(new NativeLibrary());
  lib->handle_ = h;
  lib->path_ = path;
  auto version = reinterpret_cast<TlalocKernelAbiVersionFn>(dlsym(h, "tlaloc_kernel_abi_version"));
  if (!version)
    return FailedPrecondition("kernel library " + path.string() +
                              " does not export tlaloc_kernel_abi_version()");
  if (int v = version(); v != TLALOC_KERNEL_ABI_VERSION)
    return FailedPrecondition("kernel library " + path.string() + " was built for kernel ABI " +
                              std::to_string(v) + ", this Tlaloc speaks ABI " +
                              std::to_string(TLALOC_KERNEL_ABI_VERSION));
  return lib;
}

StatusOr<TlalocKernelFn> NativeLibrary::Symbol(const std::string& name) const {
  void* s = dlsym(handle_, name.c_str());
  if (!s) return NotFound("kernel library " + path_.string() + " does not export " + name);
  return reinterpret_cast<TlalocKernelFn>(s);
}

CustomCallHandler MakeNativeHandler(std::shared_ptr<NativeLibrary> library, TlalocKernelFn fn,
                                    std::string symbol, std::map<std::string, double> attributes) {
  return [library, fn, symbol, attributes](std::span<const Literal> operands,
                                           std::vector<Literal>& results) -> Status {
    std::vector<TlalocKernelBuffer> in, out;
    for (const Literal& l : operands)
      in.push_back(Describe(l, const_cast<std::byte*>(l.data())));  // read-only by contract
    for (Literal& l : results) out.push_back(Describe(l, l.data()));
    std::vector<TlalocKernelAttr> attrs;
    for (const auto& [name, value] : attributes) attrs.push_back({name.c_str(), value});
    char error[512] = {0};
    int32_t rc =
        fn(in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()),
           attrs.data(), static_cast<int32_t>(attrs.size()), error, sizeof(error));
    if (rc != 0)
      return Internal("kernel " + symbol + " (" + library->path().filename().string() +
                      ") failed: " + (error[0] ? std::string(error) : "no message"));
    return OkStatus();
  };
}

}  // namespace tlaloc::kernels
