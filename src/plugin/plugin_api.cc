// GetPjrtApi: Tlaloc's interpreter behind the PJRT C API. Every slot of the 0.60 table is
// filled; slots Tlaloc does not implement return UNIMPLEMENTED naming the function, never a
// null pointer a client would jump through.
#include <cstring>

#include "plugin/plugin_internal.h"
#include "tlaloc/pjrt/api.h"

namespace tlaloc::plugin {

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message) {
  return new PJRT_Error{code, "Tlaloc PJRT plugin: " + std::move(message)};
}

PJRT_Error* FromStatus(const Status& status) {
  if (status.ok()) return nullptr;
  return MakeError(pjrt::PjrtCodeFromStatus(status.code()), status.message());
}

PJRT_Event* ReadyEvent(Status status) {
  auto* e = new PJRT_Event();
  if (!status.ok()) {
    e->ok = false;
    e->code = pjrt::PjrtCodeFromStatus(status.code());
    e->message = status.message();
  }
  return e;
}

PJRT_Error* CheckArgs(const void* args, size_t struct_size, size_t needed, const char* fn) {
  if (args == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, std::string(fn) + ": args is null");
  }
  if (struct_size < needed) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     std::string(fn) + ": args struct_size " + std::to_string(struct_size) +
                         " is smaller than the " + std::to_string(needed) +
                         " bytes this plugin (PJRT API 0." + std::to_string(TL_PJRT_API_MINOR) +
                         ") reads; the caller's header is too old or the field is unset");
  }
  return nullptr;
}

namespace {

// --------------------------------------------------------------------------------- errors
void ErrorDestroy(PJRT_Error_Destroy_Args* args) {
  if (args == nullptr || args->struct_size < PJRT_Error_Destroy_Args_STRUCT_SIZE) return;
  delete args->error;
}

void ErrorMessage(PJRT_Error_Message_Args* args) {
  if (args == nullptr || args->struct_size < PJRT_Error_Message_Args_STRUCT_SIZE) return;
  if (args->error == nullptr) {
    args->message = "";
    args->message_size = 0;
    return;
  }
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* ErrorGetCode(PJRT_Error_GetCode_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Error_GetCode_Args, "PJRT_Error_GetCode");
  TL_PLUGIN_REQUIRE(args->error != nullptr, INVALID_ARGUMENT, "PJRT_Error_GetCode: null error");
  args->code = args->error->code;
  return nullptr;
}

// --------------------------------------------------------------------------------- plugin
PJRT_Error* PluginInitialize(PJRT_Plugin_Initialize_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Plugin_Initialize_Args, "PJRT_Plugin_Initialize");
  return nullptr;
}

PJRT_Error* PluginAttributes(PJRT_Plugin_Attributes_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Plugin_Attributes_Args, "PJRT_Plugin_Attributes");
  static const char kVersion[] = "0.1.0";
  static const PJRT_NamedValue kAttributes[] = {
      [] {
        PJRT_NamedValue v{};
        v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
        v.name = "tlaloc_version";
        v.name_size = std::strlen(v.name);
        v.type = PJRT_NamedValue_kString;
        v.string_value = kVersion;
        v.value_size = sizeof(kVersion) - 1;
        return v;
      }(),
  };
  args->attributes = kAttributes;
  // The published struct size stops at `attributes`, yet clients read num_attributes (the
  // next field of the struct they own), so it is always written.
  args->num_attributes = sizeof(kAttributes) / sizeof(kAttributes[0]);
  return nullptr;
}

// --------------------------------------------------------------------------------- events
PJRT_Error* EventDestroy(PJRT_Event_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Event_Destroy_Args, "PJRT_Event_Destroy");
  delete args->event;
  return nullptr;
}

PJRT_Error* EventIsReady(PJRT_Event_IsReady_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Event_IsReady_Args, "PJRT_Event_IsReady");
  TL_PLUGIN_REQUIRE(args->event != nullptr, INVALID_ARGUMENT, "PJRT_Event_IsReady: null event");
  args->is_ready = true;
  return nullptr;
}

PJRT_Error* EventStatus(PJRT_Event* event, const char* fn) {
  TL_PLUGIN_REQUIRE(event != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null event");
  if (event->ok) return nullptr;
  return new PJRT_Error{event->code, event->message};
}

PJRT_Error* EventError(PJRT_Event_Error_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Event_Error_Args, "PJRT_Event_Error");
  return EventStatus(args->event, "PJRT_Event_Error");
}

PJRT_Error* EventAwait(PJRT_Event_Await_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Event_Await_Args, "PJRT_Event_Await");
  return EventStatus(args->event, "PJRT_Event_Await");
}

PJRT_Error* EventOnReady(PJRT_Event_OnReady_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Event_OnReady_Args, "PJRT_Event_OnReady");
  TL_PLUGIN_REQUIRE(args->event != nullptr && args->callback != nullptr, INVALID_ARGUMENT,
                    "PJRT_Event_OnReady: null event or callback");
  // Already ready: the callback runs now and owns the error it receives.
  PJRT_Error* status =
      args->event->ok ? nullptr : new PJRT_Error{args->event->code, args->event->message};
  args->callback(status, args->user_arg);
  return nullptr;
}

// Checks the common header of an argument struct this plugin does not implement.
PJRT_Error* NotImplemented(const char* fn, const void* args) {
  if (args == nullptr) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, std::string(fn) + ": args is null");
  }
  size_t size = *static_cast<const size_t*>(args);
  if (size < sizeof(size_t) + sizeof(void*)) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, std::string(fn) + ": args struct_size " +
                                                           std::to_string(size) +
                                                           " is smaller than the common header");
  }
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                   std::string(fn) + " is not implemented by Tlaloc's interpreter plugin");
}

}  // namespace

// One UNIMPLEMENTED stub per slot; the table overwrites the implemented ones.
#define TL_STUB_(name) \
  PJRT_Error* Stub_##name(PJRT_##name##_Args* args) { return NotImplemented("PJRT_" #name, args); }
#define TL_STUB_VOID_(name) \
  void Stub_##name(PJRT_##name##_Args*) {}
TL_PJRT_API_SLOTS(TL_STUB_, TL_STUB_VOID_)
#undef TL_STUB_
#undef TL_STUB_VOID_

namespace {

PJRT_Api BuildApi() {
  PJRT_Api api{};
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.extension_start = nullptr;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = TL_PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = TL_PJRT_API_MINOR;
#define TL_FILL_(name) api.PJRT_##name = Stub_##name;
  TL_PJRT_API_SLOTS(TL_FILL_, TL_FILL_)
#undef TL_FILL_
  api.PJRT_Error_Destroy = ErrorDestroy;
  api.PJRT_Error_Message = ErrorMessage;
  api.PJRT_Error_GetCode = ErrorGetCode;
  api.PJRT_Plugin_Initialize = PluginInitialize;
  api.PJRT_Plugin_Attributes = PluginAttributes;
  api.PJRT_Event_Destroy = EventDestroy;
  api.PJRT_Event_IsReady = EventIsReady;
  api.PJRT_Event_Error = EventError;
  api.PJRT_Event_Await = EventAwait;
  api.PJRT_Event_OnReady = EventOnReady;
  // Ahead-of-time compilation for a "cpu:N" topology (plugin_topology.cc).
  api.PJRT_TopologyDescription_Create = Plugin_TopologyDescription_Create;
  api.PJRT_TopologyDescription_Destroy = Plugin_TopologyDescription_Destroy;
  api.PJRT_TopologyDescription_PlatformName = Plugin_TopologyDescription_PlatformName;
  api.PJRT_TopologyDescription_PlatformVersion = Plugin_TopologyDescription_PlatformVersion;
  api.PJRT_TopologyDescription_GetDeviceDescriptions =
      Plugin_TopologyDescription_GetDeviceDescriptions;
  api.PJRT_Compile = Plugin_Compile;
#define TL_IMPL_(name) api.PJRT_##name = Plugin_##name;
  TL_IMPL_(Client_Create)
  TL_IMPL_(Client_Destroy)
  TL_IMPL_(Client_PlatformName)
  TL_IMPL_(Client_ProcessIndex)
  TL_IMPL_(Client_PlatformVersion) TL_IMPL_(Client_Devices) TL_IMPL_(
      Client_AddressableDevices) TL_IMPL_(Client_LookupDevice) TL_IMPL_(Client_LookupAddressableDevice)
      TL_IMPL_(Client_AddressableMemories) TL_IMPL_(Client_DefaultDeviceAssignment) TL_IMPL_(
          Client_BufferFromHostBuffer) TL_IMPL_(DeviceDescription_Id)
          TL_IMPL_(DeviceDescription_ProcessIndex) TL_IMPL_(DeviceDescription_Attributes) TL_IMPL_(
              DeviceDescription_Kind) TL_IMPL_(DeviceDescription_DebugString)
              TL_IMPL_(DeviceDescription_ToString) TL_IMPL_(Device_GetDescription) TL_IMPL_(
                  Device_IsAddressable) TL_IMPL_(Device_LocalHardwareId)
                  TL_IMPL_(Device_AddressableMemories) TL_IMPL_(Device_DefaultMemory) TL_IMPL_(
                      Device_MemoryStats) TL_IMPL_(Memory_Id) TL_IMPL_(Memory_Kind)
                      TL_IMPL_(Memory_Kind_Id) TL_IMPL_(Memory_DebugString) TL_IMPL_(
                          Memory_ToString) TL_IMPL_(Memory_AddressableByDevices) TL_IMPL_(Buffer_Destroy)
                          TL_IMPL_(Buffer_ElementType) TL_IMPL_(Buffer_Dimensions) TL_IMPL_(
                              Buffer_UnpaddedDimensions) TL_IMPL_(Buffer_DynamicDimensionIndices)
                              TL_IMPL_(Buffer_OnDeviceSizeInBytes) TL_IMPL_(Buffer_Device) TL_IMPL_(
                                  Buffer_Memory) TL_IMPL_(Buffer_Delete) TL_IMPL_(Buffer_IsDeleted)
                                  TL_IMPL_(Buffer_CopyToDevice) TL_IMPL_(Buffer_CopyToMemory) TL_IMPL_(
                                      Buffer_ToHostBuffer) TL_IMPL_(Buffer_IsOnCpu)
                                      TL_IMPL_(Buffer_ReadyEvent) TL_IMPL_(Client_Compile) TL_IMPL_(
                                          Executable_Destroy) TL_IMPL_(Executable_Name)
                                          TL_IMPL_(Executable_NumReplicas) TL_IMPL_(
                                              Executable_NumPartitions)
                                              TL_IMPL_(Executable_NumOutputs) TL_IMPL_(
                                                  Executable_SizeOfGeneratedCodeInBytes)
                                                  TL_IMPL_(Executable_Fingerprint) TL_IMPL_(
                                                      Executable_GetCompiledMemoryStats)
                                                      TL_IMPL_(Executable_OutputElementTypes) TL_IMPL_(
                                                          Executable_OutputDimensions)
                                                          TL_IMPL_(LoadedExecutable_Destroy) TL_IMPL_(
                                                              LoadedExecutable_GetExecutable)
                                                              TL_IMPL_(
                                                                  LoadedExecutable_AddressableDevices)
                                                                  TL_IMPL_(LoadedExecutable_Delete)
                                                                      TL_IMPL_(
                                                                          LoadedExecutable_IsDeleted)
                                                                          TL_IMPL_(
                                                                              LoadedExecutable_Execute)
#undef TL_IMPL_
                                                                              return api;
}

}  // namespace
}  // namespace tlaloc::plugin

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static const PJRT_Api api = tlaloc::plugin::BuildApi();
  return &api;
}
