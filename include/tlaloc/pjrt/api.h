// Loading a PJRT plugin and calling through its function table safely: version checks, slot
// checks against the plugin's struct_size, and PJRT_Error -> Status.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/pjrt/c_api.h"
#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

// The oldest minor Tlaloc accepts: API 0.57 rearranged the PJRT_Api table, so an older
// plugin's slots are not where these declarations put them.
inline constexpr int kMinimumApiMinor = 57;

// Maps PJRT codes onto Tlaloc's (codes Tlaloc lacks fold to the nearest) and back.
StatusCode StatusCodeFromPjrt(PJRT_Error_Code code);
PJRT_Error_Code PjrtCodeFromStatus(StatusCode code);
const char* PjrtErrorCodeName(PJRT_Error_Code code);

// PJRT buffer types for Tlaloc's element types, and back.
PJRT_Buffer_Type ToPjrtBufferType(ElementType et);
StatusOr<ElementType> FromPjrtBufferType(PJRT_Buffer_Type t);

class PjrtApi {
 public:
  ~PjrtApi();
  PjrtApi(const PjrtApi&) = delete;
  PjrtApi& operator=(const PjrtApi&) = delete;

  // dlopens `path`, calls its GetPjrtApi and checks the version. The library stays loaded
  // while the returned object (or anything holding it) lives.
  static StatusOr<std::shared_ptr<PjrtApi>> Load(const std::string& path);
  // Wraps a table already in memory (tests, statically linked plugins). `origin` names it in
  // messages.
  static StatusOr<std::shared_ptr<PjrtApi>> FromTable(const PJRT_Api* api, std::string origin);

  const PJRT_Api* raw() const { return api_; }
  const std::string& origin() const { return origin_; }
  int major_version() const { return major_; }
  int minor_version() const { return minor_; }

  // OK when the plugin's table has slot `name` at `offset` and fills it; otherwise an error
  // naming the function and the plugin's version.
  Status CheckSlot(size_t offset, std::string_view name) const;

  // Converts and destroys `error`; OK when null. The message names `call`, the plugin's
  // code and its message.
  Status ToStatus(PJRT_Error* error, std::string_view call) const;

  // Calls a slot after checking it: Call(&PJRT_Api::PJRT_Client_Create, "PJRT_Client_Create",
  // &args). Prefer the TL_PJRT_CALL macro.
  template <typename Fn, typename Args>
  Status Call(Fn* PJRT_Api::*slot, std::string_view name, Args* args) const {
    size_t offset =
        reinterpret_cast<const char*>(&(api_->*slot)) - reinterpret_cast<const char*>(api_);
    TL_RETURN_IF_ERROR(CheckSlot(offset, name));
    return ToStatus((api_->*slot)(args), name);
  }

  // Destroys an event after awaiting it; returns the event's status.
  Status AwaitAndDestroy(PJRT_Event* event, std::string_view what) const;

 private:
  PjrtApi() = default;
  Status CheckVersion() const;
  const PJRT_Api* api_ = nullptr;
  void* handle_ = nullptr;
  std::string origin_;
  int major_ = 0;
  int minor_ = 0;
};

// Declares `var` of type T with struct_size set and every other field zeroed.
#define TL_PJRT_ARGS(T, var) \
  T var{};                   \
  var.struct_size = T##_STRUCT_SIZE

// A PJRT_Program over StableHLO text in `mlir` (format "mlir"), which must outlive it.
PJRT_Program MlirProgram(const std::string& mlir);

// api.Call for slot PJRT_<name>.
#define TL_PJRT_CALL(api, name, args) (api).Call(&PJRT_Api::PJRT_##name, "PJRT_" #name, (args))

}  // namespace tlaloc::pjrt
