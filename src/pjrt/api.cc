#include "tlaloc/pjrt/api.h"

#include <dlfcn.h>

namespace tlaloc::pjrt {

StatusCode StatusCodeFromPjrt(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_CANCELLED:
      return StatusCode::kAborted;
    case PJRT_Error_Code_UNKNOWN:
      return StatusCode::kInternal;
    case PJRT_Error_Code_INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
      return StatusCode::kDeadlineExceeded;
    case PJRT_Error_Code_NOT_FOUND:
      return StatusCode::kNotFound;
    case PJRT_Error_Code_ALREADY_EXISTS:
      return StatusCode::kFailedPrecondition;
    case PJRT_Error_Code_PERMISSION_DENIED:
      return StatusCode::kPermissionDenied;
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return StatusCode::kResourceExhausted;
    case PJRT_Error_Code_FAILED_PRECONDITION:
      return StatusCode::kFailedPrecondition;
    case PJRT_Error_Code_ABORTED:
      return StatusCode::kAborted;
    case PJRT_Error_Code_OUT_OF_RANGE:
      return StatusCode::kOutOfRange;
    case PJRT_Error_Code_UNIMPLEMENTED:
      return StatusCode::kUnimplemented;
    case PJRT_Error_Code_INTERNAL:
      return StatusCode::kInternal;
    case PJRT_Error_Code_UNAVAILABLE:
      return StatusCode::kUnavailable;
    case PJRT_Error_Code_DATA_LOSS:
      return StatusCode::kDataLoss;
    case PJRT_Error_Code_UNAUTHENTICATED:
      return StatusCode::kPermissionDenied;
  }
  return StatusCode::kInternal;
}

PJRT_Error_Code PjrtCodeFromStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return PJRT_Error_Code_UNKNOWN;
    case StatusCode::kInvalidArgument:
      return PJRT_Error_Code_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return PJRT_Error_Code_NOT_FOUND;
    case StatusCode::kUnimplemented:
      return PJRT_Error_Code_UNIMPLEMENTED;
    case StatusCode::kFailedPrecondition:
      return PJRT_Error_Code_FAILED_PRECONDITION;
    case StatusCode::kOutOfRange:
      return PJRT_Error_Code_OUT_OF_RANGE;
    case StatusCode::kInternal:
      return PJRT_Error_Code_INTERNAL;
    case StatusCode::kResourceExhausted:
      return PJRT_Error_Code_RESOURCE_EXHAUSTED;
    case StatusCode::kDataLoss:
      return PJRT_Error_Code_DATA_LOSS;
    case StatusCode::kUnavailable:
      return PJRT_Error_Code_UNAVAILABLE;
    case StatusCode::kPermissionDenied:
      return PJRT_Error_Code_PERMISSION_DENIED;
    case StatusCode::kAborted:
      return PJRT_Error_Code_ABORTED;
    case StatusCode::kDeadlineExceeded:
      return PJRT_Error_Code_DEADLINE_EXCEEDED;
  }
  return PJRT_Error_Code_UNKNOWN;
}

const char* PjrtErrorCodeName(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_CANCELLED:
      return "CANCELLED";
    case PJRT_Error_Code_UNKNOWN:
      return "UNKNOWN";
    case PJRT_Error_Code_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case PJRT_Error_Code_NOT_FOUND:
      return "NOT_FOUND";
    case PJRT_Error_Code_ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case PJRT_Error_Code_PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case PJRT_Error_Code_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case PJRT_Error_Code_ABORTED:
      return "ABORTED";
    case PJRT_Error_Code_OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case PJRT_Error_Code_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case PJRT_Error_Code_INTERNAL:
      return "INTERNAL";
    case PJRT_Error_Code_UNAVAILABLE:
      return "UNAVAILABLE";
    case PJRT_Error_Code_DATA_LOSS:
      return "DATA_LOSS";
    case PJRT_Error_Code_UNAUTHENTICATED:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

PJRT_Buffer_Type ToPjrtBufferType(ElementType et) {
  switch (et) {
    case ElementType::kPred:
      return PJRT_Buffer_Type_PRED;
    case ElementType::kS8:
      return PJRT_Buffer_Type_S8;
    case ElementType::kS16:
      return PJRT_Buffer_Type_S16;
    case ElementType::kS32:
      return PJRT_Buffer_Type_S32;
    case ElementType::kS64:
      return PJRT_Buffer_Type_S64;
    case ElementType::kU8:
      return PJRT_Buffer_Type_U8;
    case ElementType::kU16:
      return PJRT_Buffer_Type_U16;
    case ElementType::kU32:
      return PJRT_Buffer_Type_U32;
    case ElementType::kU64:
      return PJRT_Buffer_Type_U64;
    case ElementType::kF16:
      return PJRT_Buffer_Type_F16;
    case ElementType::kBF16:
      return PJRT_Buffer_Type_BF16;
    case ElementType::kF32:
      return PJRT_Buffer_Type_F32;
    case ElementType::kF64:
      return PJRT_Buffer_Type_F64;
  }
  return PJRT_Buffer_Type_INVALID;
}

StatusOr<ElementType> FromPjrtBufferType(PJRT_Buffer_Type t) {
  for (ElementType et : kAllElementTypes) {
    if (ToPjrtBufferType(et) == t) return et;
  }
  return Unimplemented("PJRT buffer type " + std::to_string(static_cast<int>(t)) +
                       " has no Tlaloc element type");
}

PjrtApi::~PjrtApi() {
  // Plugins (libtpu, XLA:CUDA) keep threads and static state that outlive their clients;
  // unloading them at exit crashes more often than it frees, so the handle stays open.
  (void)handle_;
}

StatusOr<std::shared_ptr<PjrtApi>> PjrtApi::Load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return NotFound("cannot load PJRT plugin " + path + ": " + (why ? why : "dlopen failed"));
  }
  auto get_api = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    dlclose(handle);
    return InvalidArgument("PJRT plugin " + path +
                           " does not export GetPjrtApi: not a PJRT plugin");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    dlclose(handle);
    return Internal("PJRT plugin " + path + ": GetPjrtApi returned null");
  }
  auto result = FromTable(api, path);
  if (!result.ok()) {
    dlclose(handle);
    return result.status();
  }
  (*result)->handle_ = handle;
  return result;
}

StatusOr<std::shared_ptr<PjrtApi>> PjrtApi::FromTable(const PJRT_Api* api, std::string origin) {
  if (api == nullptr) return InvalidArgument("PJRT plugin " + origin + ": null PJRT_Api table");
  std::shared_ptr<PjrtApi> p(new PjrtApi());
  p->api_ = api;
  p->origin_ = std::move(origin);
  TL_RETURN_IF_ERROR(p->CheckVersion());
  return p;
}

Status PjrtApi::CheckVersion() const {
  size_t version_end = offsetof(PJRT_Api, pjrt_api_version) + PJRT_Api_Version_STRUCT_SIZE;
  if (api_->struct_size < version_end) {
    return FailedPrecondition("PJRT plugin " + origin_ + ": PJRT_Api struct_size " +
                              std::to_string(api_->struct_size) +
                              " is too small to hold the API version");
  }
  int major = api_->pjrt_api_version.major_version;
  int minor = api_->pjrt_api_version.minor_version;
  const_cast<PjrtApi*>(this)->major_ = major;
  const_cast<PjrtApi*>(this)->minor_ = minor;
  std::string version = std::to_string(major) + "." + std::to_string(minor);
  if (major != TL_PJRT_API_MAJOR) {
    return FailedPrecondition("PJRT plugin " + origin_ + " speaks PJRT C API " + version +
                              "; Tlaloc speaks major version " + std::to_string(TL_PJRT_API_MAJOR) +
                              " and cannot call a different major");
  }
  if (minor < kMinimumApiMinor) {
    return FailedPrecondition(
        "PJRT plugin " + origin_ + " speaks PJRT C API " + version +
        ", too old: PJRT_Client_Compile and every other slot Tlaloc calls sit where API 0." +
        std::to_string(kMinimumApiMinor) + " put them (the table was rearranged then)");
  }
  return OkStatus();
}

Status PjrtApi::CheckSlot(size_t offset, std::string_view name) const {
  std::string version = std::to_string(major_) + "." + std::to_string(minor_);
  if (offset + sizeof(void*) > api_->struct_size) {
    return FailedPrecondition("PJRT plugin " + origin_ + " (API " + version + ", PJRT_Api of " +
                              std::to_string(api_->struct_size) + " bytes) is too old for " +
                              std::string(name) + ", which Tlaloc calls (slot at byte " +
                              std::to_string(offset) + ")");
  }
  const void* fn = *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(api_) + offset);
  if (fn == nullptr) {
    return Unimplemented("PJRT plugin " + origin_ + " (API " + version + ") leaves " +
                         std::string(name) + " empty");
  }
  return OkStatus();
}

Status PjrtApi::ToStatus(PJRT_Error* error, std::string_view call) const {
  if (error == nullptr) return OkStatus();
  std::string message = "(no message)";
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  if (CheckSlot(offsetof(PJRT_Api, PJRT_Error_Message), "PJRT_Error_Message").ok()) {
    TL_PJRT_ARGS(PJRT_Error_Message_Args, m);
    m.error = error;
    api_->PJRT_Error_Message(&m);
    if (m.message != nullptr) message.assign(m.message, m.message_size);
  }
  if (CheckSlot(offsetof(PJRT_Api, PJRT_Error_GetCode), "PJRT_Error_GetCode").ok()) {
    TL_PJRT_ARGS(PJRT_Error_GetCode_Args, c);
    c.error = error;
    PJRT_Error* code_error = api_->PJRT_Error_GetCode(&c);
    if (code_error == nullptr) {
      code = c.code;
    } else {
      TL_PJRT_ARGS(PJRT_Error_Destroy_Args, d);
      d.error = code_error;
      api_->PJRT_Error_Destroy(&d);
    }
  }
  if (CheckSlot(offsetof(PJRT_Api, PJRT_Error_Destroy), "PJRT_Error_Destroy").ok()) {
    TL_PJRT_ARGS(PJRT_Error_Destroy_Args, d);
    d.error = error;
    api_->PJRT_Error_Destroy(&d);
  }
  return Status(StatusCodeFromPjrt(code), std::string(call) + " failed in PJRT plugin " + origin_ +
                                              " (" + PjrtErrorCodeName(code) + "): " + message);
}

Status PjrtApi::AwaitAndDestroy(PJRT_Event* event, std::string_view what) const {
  if (event == nullptr) return OkStatus();
  TL_PJRT_ARGS(PJRT_Event_Await_Args, a);
  a.event = event;
  Status status = TL_PJRT_CALL(*this, Event_Await, &a);
  TL_PJRT_ARGS(PJRT_Event_Destroy_Args, d);
  d.event = event;
  Status destroyed = TL_PJRT_CALL(*this, Event_Destroy, &d);
  if (!status.ok()) return status.WithContext(std::string(what));
  return destroyed;
}

PJRT_Program MlirProgram(const std::string& mlir) {
  static const char kFormat[] = "mlir";
  TL_PJRT_ARGS(PJRT_Program, program);
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  return program;
}

}  // namespace tlaloc::pjrt
