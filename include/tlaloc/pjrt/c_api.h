// Tlaloc's own declarations of the PJRT C API (the ABI between a PJRT client and a plugin such
// as xla_cuda_plugin.so, libtpu.so or Tlaloc's libtlaloc_pjrt_cpu.so). Written from the
// published header's facts (openxla/xla xla/pjrt/c/pjrt_c_api.h and its CHANGELOG):
//  - every argument struct starts with `size_t struct_size; PJRT_Extension_Base*
//    extension_start;`, and its size is the offset of its last field plus that field's size;
//    the caller sets it, the callee reads only the fields that size covers;
//  - PJRT_Api is a table of function pointers whose ORDER IS THE ABI: slots are only appended.
//    TL_PJRT_API_SLOTS below lists them in table order, up to API version 0.60;
//  - every call returns PJRT_Error* (null on success), owned by the caller.
// Argument structs are declared in full for the calls Tlaloc's client makes or its plugin
// implements; the others are declared only by name (their slots stay typed and in place).
#pragma once

#include <cstddef>
#include <cstdint>

#define TL_PJRT_STRUCT_SIZE(T, last) \
  inline constexpr size_t T##_STRUCT_SIZE = offsetof(T, last) + sizeof(T::last)

// Every slot of PJRT_Api in table order (API 0.60). X(name) names PJRT_<name>; V(name) marks
// the two slots whose functions return void instead of PJRT_Error*.
// clang-format off
#define TL_PJRT_API_SLOTS(X, V) \
  V(Error_Destroy) V(Error_Message) X(Error_GetCode) X(Plugin_Initialize) X(Plugin_Attributes) \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await) X(Event_OnReady) \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName) X(Client_ProcessIndex) \
  X(Client_PlatformVersion) X(Client_Devices) X(Client_AddressableDevices) \
  X(Client_LookupDevice) X(Client_LookupAddressableDevice) X(Client_AddressableMemories) \
  X(Client_Compile) X(Client_DefaultDeviceAssignment) X(Client_BufferFromHostBuffer) \
  X(DeviceDescription_Id) X(DeviceDescription_ProcessIndex) X(DeviceDescription_Attributes) \
  X(DeviceDescription_Kind) X(DeviceDescription_DebugString) X(DeviceDescription_ToString) \
  X(Device_GetDescription) X(Device_IsAddressable) X(Device_LocalHardwareId) \
  X(Device_AddressableMemories) X(Device_DefaultMemory) X(Device_MemoryStats) X(Memory_Id) \
  X(Memory_Kind) X(Memory_DebugString) X(Memory_ToString) X(Memory_AddressableByDevices) \
  X(Executable_Destroy) X(Executable_Name) X(Executable_NumReplicas) \
  X(Executable_NumPartitions) X(Executable_NumOutputs) X(Executable_SizeOfGeneratedCodeInBytes) \
  X(Executable_GetCostAnalysis) X(Executable_OutputMemoryKinds) X(Executable_OptimizedProgram) \
  X(Executable_Serialize) X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable) \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete) \
  X(LoadedExecutable_IsDeleted) X(LoadedExecutable_Execute) X(Executable_DeserializeAndLoad) \
  X(LoadedExecutable_Fingerprint) X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions) \
  X(Buffer_UnpaddedDimensions) X(Buffer_DynamicDimensionIndices) X(Buffer_GetMemoryLayout) \
  X(Buffer_OnDeviceSizeInBytes) X(Buffer_Device) X(Buffer_Memory) X(Buffer_Delete) \
  X(Buffer_IsDeleted) X(Buffer_CopyToDevice) X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu) \
  X(Buffer_ReadyEvent) X(Buffer_UnsafePointer) X(Buffer_IncreaseExternalReferenceCount) \
  X(Buffer_DecreaseExternalReferenceCount) X(Buffer_OpaqueDeviceMemoryDataPointer) \
  X(CopyToDeviceStream_Destroy) X(CopyToDeviceStream_AddChunk) X(CopyToDeviceStream_TotalBytes) \
  X(CopyToDeviceStream_GranuleSize) X(CopyToDeviceStream_CurrentBytes) \
  X(TopologyDescription_Create) X(TopologyDescription_Destroy) \
  X(TopologyDescription_PlatformName) X(TopologyDescription_PlatformVersion) \
  X(TopologyDescription_GetDeviceDescriptions) X(TopologyDescription_Serialize) \
  X(TopologyDescription_Attributes) X(Compile) X(Executable_OutputElementTypes) \
  X(Executable_OutputDimensions) X(Buffer_CopyToMemory) X(Client_CreateViewOfDeviceBuffer) \
  X(Executable_Fingerprint) X(Client_TopologyDescription) X(Executable_GetCompiledMemoryStats) \
  X(Memory_Kind_Id) X(ExecuteContext_Create) X(ExecuteContext_Destroy) X(Buffer_CopyRawToHost) \
  X(AsyncHostToDeviceTransferManager_Destroy) X(AsyncHostToDeviceTransferManager_TransferData) \
  X(Client_CreateBuffersForAsyncHostToDevice)
// clang-format on

extern "C" {

// The API version these declarations describe.
#define TL_PJRT_API_MAJOR 0
#define TL_PJRT_API_MINOR 60

typedef enum {
  PJRT_Extension_Type_Gpu_Custom_Call = 0,
  PJRT_Extension_Type_Profiler,
  PJRT_Extension_Type_Custom_Partitioner,
  PJRT_Extension_Type_Stream,
  PJRT_Extension_Type_Layouts,
  PJRT_Extension_Type_FFI,
  PJRT_Extension_Type_MemoryDescriptions,
} PJRT_Extension_Type;

// One link of the extension chain hanging off `extension_start`.
struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  PJRT_Extension_Base* next;
};
TL_PJRT_STRUCT_SIZE(PJRT_Extension_Base, next);

struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
};
TL_PJRT_STRUCT_SIZE(PJRT_Api_Version, minor_version);

// Opaque handles, defined by each plugin.
struct PJRT_Error;
struct PJRT_Event;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Memory;
struct PJRT_DeviceDescription;
struct PJRT_TopologyDescription;
struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_Buffer;
struct PJRT_ExecuteContext;
struct PJRT_Buffer_MemoryLayout;
struct PJRT_SendCallbackInfo;
struct PJRT_RecvCallbackInfo;
struct PJRT_MultiSlice_Config;

// absl-style status codes.
typedef enum {
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64,
  PJRT_NamedValue_kInt64List,
  PJRT_NamedValue_kFloat,
  PJRT_NamedValue_kBool,
} PJRT_NamedValue_Type;

struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // elements of a string or list; 1 for a scalar
};
TL_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size);

typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED,
  PJRT_Buffer_Type_S8,
  PJRT_Buffer_Type_S16,
  PJRT_Buffer_Type_S32,
  PJRT_Buffer_Type_S64,
  PJRT_Buffer_Type_U8,
  PJRT_Buffer_Type_U16,
  PJRT_Buffer_Type_U32,
  PJRT_Buffer_Type_U64,
  PJRT_Buffer_Type_F16,
  PJRT_Buffer_Type_F32,
  PJRT_Buffer_Type_F64,
  PJRT_Buffer_Type_BF16,
  PJRT_Buffer_Type_C64,
  PJRT_Buffer_Type_C128,
  PJRT_Buffer_Type_F8E5M2,
  PJRT_Buffer_Type_F8E4M3FN,
  PJRT_Buffer_Type_F8E4M3B11FNUZ,
  PJRT_Buffer_Type_F8E5M2FNUZ,
  PJRT_Buffer_Type_F8E4M3FNUZ,
  PJRT_Buffer_Type_S4,
  PJRT_Buffer_Type_U4,
  PJRT_Buffer_Type_TOKEN,
  PJRT_Buffer_Type_S2,
  PJRT_Buffer_Type_U2,
  PJRT_Buffer_Type_F8E4M3,
  PJRT_Buffer_Type_F8E3M4,
} PJRT_Buffer_Type;

typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
  PJRT_HostBufferSemantics_kImmutableZeroCopy,
  PJRT_HostBufferSemantics_kMutableZeroCopy,
} PJRT_HostBufferSemantics;

// Every argument struct starts with these two fields.
#define TL_PJRT_ARGS_HEADER \
  size_t struct_size;       \
  PJRT_Extension_Base* extension_start

// ----------------------------------------------------------------------------- errors
struct PJRT_Error_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Error* error;
};
TL_PJRT_STRUCT_SIZE(PJRT_Error_Destroy_Args, error);

struct PJRT_Error_Message_Args {
  TL_PJRT_ARGS_HEADER;
  const PJRT_Error* error;
  const char* message;  // out, lives as long as `error`
  size_t message_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Error_Message_Args, message_size);

struct PJRT_Error_GetCode_Args {
  TL_PJRT_ARGS_HEADER;
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Error_GetCode_Args, code);

// Lets a plugin build an error to return from a caller's callback.
typedef PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code, const char* message,
                                          size_t message_size);

// ----------------------------------------------------------------------------- plugin
struct PJRT_Plugin_Initialize_Args {
  TL_PJRT_ARGS_HEADER;
};
TL_PJRT_STRUCT_SIZE(PJRT_Plugin_Initialize_Args, extension_start);

struct PJRT_Plugin_Attributes_Args {
  TL_PJRT_ARGS_HEADER;
  const PJRT_NamedValue* attributes;  // out, lives as long as the process
  size_t num_attributes;              // out
};
// The published header ends this struct's size at `attributes` (kept for compatibility).
TL_PJRT_STRUCT_SIZE(PJRT_Plugin_Attributes_Args, attributes);

// ----------------------------------------------------------------------------- events
struct PJRT_Event_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Event* event;
};
TL_PJRT_STRUCT_SIZE(PJRT_Event_Destroy_Args, event);

struct PJRT_Event_IsReady_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Event* event;
  bool is_ready;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Event_IsReady_Args, is_ready);

struct PJRT_Event_Error_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Event* event;
};
TL_PJRT_STRUCT_SIZE(PJRT_Event_Error_Args, event);

struct PJRT_Event_Await_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Event* event;
};
TL_PJRT_STRUCT_SIZE(PJRT_Event_Await_Args, event);

// Receives ownership of `error` (may be null).
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

struct PJRT_Event_OnReady_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
};
TL_PJRT_STRUCT_SIZE(PJRT_Event_OnReady_Args, user_arg);

// ----------------------------------------------------------------------------- client
// The key-value store a multi-process client lends its plugin (node_id / num_nodes): processes
// publish what they hold and read the others'. Get blocks up to timeout_in_ms; TryGet does not
// wait (NOT_FOUND when absent). A value returned is freed with value_deleter_callback.
typedef void (*PJRT_KeyValueGetCallback_ValueDeleter)(char* value);
struct PJRT_KeyValueGetCallback_Args {
  TL_PJRT_ARGS_HEADER;
  const char* key;
  size_t key_size;
  int timeout_in_ms;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                   // out
  size_t value_size;                                             // out
  PJRT_KeyValueGetCallback_ValueDeleter value_deleter_callback;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_KeyValueGetCallback_Args, value_deleter_callback);
typedef PJRT_Error* (*PJRT_KeyValueGetCallback)(PJRT_KeyValueGetCallback_Args* args);

typedef void (*PJRT_KeyValueTryGetCallback_ValueDeleter)(char* value);
struct PJRT_KeyValueTryGetCallback_Args {
  TL_PJRT_ARGS_HEADER;
  const char* key;
  size_t key_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                      // out
  size_t value_size;                                                // out
  PJRT_KeyValueTryGetCallback_ValueDeleter value_deleter_callback;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback);
typedef PJRT_Error* (*PJRT_KeyValueTryGetCallback)(PJRT_KeyValueTryGetCallback_Args* args);

struct PJRT_KeyValuePutCallback_Args {
  TL_PJRT_ARGS_HEADER;
  const char* key;
  size_t key_size;
  const char* value;  // alive for the call only
  size_t value_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
};
TL_PJRT_STRUCT_SIZE(PJRT_KeyValuePutCallback_Args, user_arg);
typedef PJRT_Error* (*PJRT_KeyValuePutCallback)(PJRT_KeyValuePutCallback_Args* args);

struct PJRT_Client_Create_Args {
  TL_PJRT_ARGS_HEADER;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;  // multi-process only
  void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  // Later in the API: read only when struct_size covers them (the size below stays the older
  // one, so that clients built before them still pass the plugin's check).
  PJRT_KeyValueTryGetCallback kv_try_get_callback;
  void* kv_try_get_user_arg;
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_Create_Args, client);

struct PJRT_Client_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_Destroy_Args, client);

struct PJRT_Client_PlatformName_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const char* platform_name;  // out, owned by the client
  size_t platform_name_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_PlatformName_Args, platform_name_size);

struct PJRT_Client_ProcessIndex_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  int process_index;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_ProcessIndex_Args, process_index);

struct PJRT_Client_PlatformVersion_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const char* platform_version;  // out
  size_t platform_version_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_PlatformVersion_Args, platform_version_size);

struct PJRT_Client_Devices_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_Devices_Args, num_devices);

struct PJRT_Client_AddressableDevices_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_AddressableDevices_Args, num_addressable_devices);

struct PJRT_Client_LookupDevice_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  int id;
  PJRT_Device* device;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_LookupDevice_Args, device);

struct PJRT_Client_LookupAddressableDevice_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  int local_hardware_id;
  PJRT_Device* addressable_device;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_LookupAddressableDevice_Args, addressable_device);

struct PJRT_Client_AddressableMemories_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  PJRT_Memory* const* addressable_memories;  // out
  size_t num_addressable_memories;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_AddressableMemories_Args, num_addressable_memories);

// A program to compile: format "mlir" (MLIR text or bytecode), "hlo", ...
struct PJRT_Program {
  TL_PJRT_ARGS_HEADER;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};
TL_PJRT_STRUCT_SIZE(PJRT_Program, format_size);

struct PJRT_Client_Compile_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // a serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_Compile_Args, executable);

// Ahead-of-time compilation: a topology described by name (libtpu: "v6e:2x2"; Tlaloc's plugin:
// "cpu:N") and PJRT_Compile against it, with no client and no device.
struct PJRT_TopologyDescription_Create_Args {
  TL_PJRT_ARGS_HEADER;
  const char* topology_name;
  size_t topology_name_size;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_TopologyDescription* topology;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_TopologyDescription_Create_Args, topology);

struct PJRT_TopologyDescription_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_TopologyDescription* topology;
};
TL_PJRT_STRUCT_SIZE(PJRT_TopologyDescription_Destroy_Args, topology);

struct PJRT_TopologyDescription_PlatformName_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_TopologyDescription* topology;
  const char* platform_name;  // out, owned by the topology
  size_t platform_name_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_TopologyDescription_PlatformName_Args, platform_name_size);

struct PJRT_TopologyDescription_PlatformVersion_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_TopologyDescription* topology;
  const char* platform_version;  // out, owned by the topology
  size_t platform_version_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_TopologyDescription_PlatformVersion_Args, platform_version_size);

struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_TopologyDescription* topology;
  PJRT_DeviceDescription* const* descriptions;  // out, owned by the topology
  size_t num_descriptions;                      // out
};
TL_PJRT_STRUCT_SIZE(PJRT_TopologyDescription_GetDeviceDescriptions_Args, num_descriptions);

struct PJRT_Compile_Args {
  TL_PJRT_ARGS_HEADER;
  const PJRT_TopologyDescription* topology;
  const PJRT_Program* program;
  const char* compile_options;  // a serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_Client* client;          // optional
  PJRT_Executable* executable;  // out, not loaded
};
TL_PJRT_STRUCT_SIZE(PJRT_Compile_Args, executable);

struct PJRT_Client_DefaultDeviceAssignment_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;
  int* default_assignment;  // caller's array; num_replicas * num_partitions ids written
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_DefaultDeviceAssignment_Args, default_assignment);

struct PJRT_Client_BufferFromHostBuffer_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // optional; dense row-major when absent
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;  // if set, used instead of `device`
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Event* done_with_host_buffer;  // out, caller destroys
  PJRT_Buffer* buffer;                // out, caller destroys
};
TL_PJRT_STRUCT_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer);

// ----------------------------------------------------------------- device descriptions
struct PJRT_DeviceDescription_Id_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  int id;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Id_Args, id);

struct PJRT_DeviceDescription_ProcessIndex_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  int process_index;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_ProcessIndex_Args, process_index);

struct PJRT_DeviceDescription_Attributes_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue* attributes;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Attributes_Args, attributes);

// Kind, DebugString and ToString share one shape: a description in, a string out.
struct PJRT_DeviceDescription_Kind_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* device_kind;  // out
  size_t device_kind_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Kind_Args, device_kind_size);

struct PJRT_DeviceDescription_DebugString_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_DebugString_Args, debug_string_size);

struct PJRT_DeviceDescription_ToString_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* to_string;  // out
  size_t to_string_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_ToString_Args, to_string_size);

// ----------------------------------------------------------------------------- devices
struct PJRT_Device_GetDescription_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_GetDescription_Args, device_description);

struct PJRT_Device_IsAddressable_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  bool is_addressable;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_IsAddressable_Args, is_addressable);

struct PJRT_Device_LocalHardwareId_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  int local_hardware_id;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_LocalHardwareId_Args, local_hardware_id);

struct PJRT_Device_AddressableMemories_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  PJRT_Memory* const* memories;  // out
  size_t num_memories;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_AddressableMemories_Args, num_memories);

struct PJRT_Device_DefaultMemory_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  PJRT_Memory* memory;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_DefaultMemory_Args, memory);

// A device's allocator statistics. Every figure but bytes_in_use is optional: the plugin sets
// its `_is_set` flag when it reports it. The fields after bytes_reservable_limit were appended
// later; an older plugin writes only those its own struct_size covers.
struct PJRT_Device_MemoryStats_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Device* device;
  int64_t bytes_in_use;       // out
  int64_t peak_bytes_in_use;  // out
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;  // out
  bool num_allocs_is_set;
  int64_t largest_alloc_size;  // out
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;  // out: what the device lets callers allocate in all
  bool bytes_limit_is_set;
  int64_t bytes_reserved;  // out
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;  // out
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;  // out
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;  // out
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;  // out
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;  // out
  bool peak_pool_bytes_is_set;
};
TL_PJRT_STRUCT_SIZE(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set);
// The fields a plugin must know for Tlaloc's use (bytes_in_use and bytes_limit).
inline constexpr size_t PJRT_Device_MemoryStats_Args_LIMIT_SIZE =
    offsetof(PJRT_Device_MemoryStats_Args, bytes_limit_is_set) + sizeof(bool);

// ----------------------------------------------------------------------------- memories
struct PJRT_Memory_Id_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  int id;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_Id_Args, id);

struct PJRT_Memory_Kind_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  const char* kind;  // out
  size_t kind_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_Kind_Args, kind_size);

struct PJRT_Memory_Kind_Id_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  int kind_id;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_Kind_Id_Args, kind_id);

struct PJRT_Memory_DebugString_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_DebugString_Args, debug_string_size);

struct PJRT_Memory_ToString_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  const char* to_string;  // out
  size_t to_string_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_ToString_Args, to_string_size);

struct PJRT_Memory_AddressableByDevices_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Memory* memory;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Memory_AddressableByDevices_Args, num_devices);

// ------------------------------------------------------------------------- executables
struct PJRT_Executable_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_Destroy_Args, executable);

struct PJRT_Executable_Name_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  const char* executable_name;  // out
  size_t executable_name_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_Name_Args, executable_name_size);

struct PJRT_Executable_NumReplicas_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  size_t num_replicas;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_NumReplicas_Args, num_replicas);

struct PJRT_Executable_NumPartitions_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  size_t num_partitions;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_NumPartitions_Args, num_partitions);

struct PJRT_Executable_NumOutputs_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  size_t num_outputs;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_NumOutputs_Args, num_outputs);

struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  int64_t size_in_bytes;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes);

struct PJRT_Executable_Fingerprint_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  const char* executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_Fingerprint_Args, executable_fingerprint_size);

// Mirrors xla::CompiledMemoryStats.
struct PJRT_Executable_GetCompiledMemoryStats_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  int64_t generated_code_size_in_bytes;  // out
  int64_t argument_size_in_bytes;        // out
  int64_t output_size_in_bytes;          // out
  int64_t alias_size_in_bytes;           // out: argument bytes reused by outputs
  int64_t temp_size_in_bytes;            // out
  int64_t host_generated_code_size_in_bytes;
  int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes;
  int64_t host_alias_size_in_bytes;
  int64_t host_temp_size_in_bytes;
  // Later in the API: written only when struct_size covers them (the size below stays the
  // 0.60 one, so that clients built before them still pass Tlaloc's plugin's check). XLA
  // 0.115 refuses a size that stops before peak_memory_in_bytes.
  int64_t peak_memory_in_bytes;  // out
  int64_t total_size_in_bytes;   // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args, host_temp_size_in_bytes);

struct PJRT_Executable_OutputElementTypes_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types;  // out
  size_t num_output_types;         // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_OutputElementTypes_Args, num_output_types);

struct PJRT_Executable_OutputDimensions_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  size_t num_outputs;       // out
  const int64_t* dims;      // out: all outputs' dims concatenated
  const size_t* dim_sizes;  // out: rank of each output
};
TL_PJRT_STRUCT_SIZE(PJRT_Executable_OutputDimensions_Args, dim_sizes);

struct PJRT_LoadedExecutable_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Destroy_Args, executable);

struct PJRT_LoadedExecutable_GetExecutable_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out, caller destroys
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_GetExecutable_Args, executable);

struct PJRT_LoadedExecutable_AddressableDevices_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices);

struct PJRT_LoadedExecutable_Delete_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Delete_Args, executable);

struct PJRT_LoadedExecutable_IsDeleted_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
  bool is_deleted;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted);

// Options of one execution. Fields after num_non_donatable_input_indices were appended by
// later minors (context 0.64, call_location 0.76, tasks and incarnations 0.78,
// multi_slice_config 0.97); a plugin reads only what the struct_size it receives covers, and
// Tlaloc zeroes them all (single host, single task). On LP64 four bytes of padding follow the
// 32-bit launch_id.
struct PJRT_ExecuteOptions {
  TL_PJRT_ARGS_HEADER;
  PJRT_SendCallbackInfo** send_callbacks;
  PJRT_RecvCallbackInfo** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  PJRT_MultiSlice_Config* multi_slice_config;
};
TL_PJRT_STRUCT_SIZE(PJRT_ExecuteOptions, multi_slice_config);
// The size as of API 0.60, before the appended fields.
inline constexpr size_t kPjrtExecuteOptionsSizeV60 =
    offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t);

struct PJRT_LoadedExecutable_Execute_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;    // [num_devices][num_outputs], caller allocates
  PJRT_Event** device_complete_events;  // optional [num_devices], caller destroys
  PJRT_Device* execute_device;          // optional
};
TL_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device);

// ----------------------------------------------------------------------------- buffers
struct PJRT_Buffer_Destroy_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_Destroy_Args, buffer);

struct PJRT_Buffer_ElementType_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_ElementType_Args, type);

struct PJRT_Buffer_Dimensions_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out
  size_t num_dims;      // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_Dimensions_Args, num_dims);

struct PJRT_Buffer_UnpaddedDimensions_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  const int64_t* unpadded_dims;  // out
  size_t num_dims;               // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_UnpaddedDimensions_Args, num_dims);

struct PJRT_Buffer_DynamicDimensionIndices_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  const size_t* dynamic_dim_indices;  // out
  size_t num_dynamic_dims;            // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims);

struct PJRT_Buffer_ToHostBuffer_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // optional
  void* dst;                              // null: only report the size needed in dst_size
  size_t dst_size;                        // in/out
  PJRT_Event* event;                      // out, caller destroys
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event);

struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);

struct PJRT_Buffer_Delete_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_Delete_Args, buffer);

struct PJRT_Buffer_IsDeleted_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  bool is_deleted;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_IsDeleted_Args, is_deleted);

// The device address of a buffer's memory (platform-specific; tests compare donated inputs'
// addresses with outputs' to see an update in place).
struct PJRT_Buffer_UnsafePointer_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_UnsafePointer_Args, buffer_pointer);

struct PJRT_Buffer_CopyToDevice_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_CopyToDevice_Args, dst_buffer);

struct PJRT_Buffer_CopyToMemory_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Memory* dst_memory;
  PJRT_Buffer* dst_buffer;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_CopyToMemory_Args, dst_buffer);

struct PJRT_Buffer_IsOnCpu_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  bool is_on_cpu;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_IsOnCpu_Args, is_on_cpu);

struct PJRT_Buffer_Device_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Device* device;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_Device_Args, device);

struct PJRT_Buffer_Memory_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Memory* memory;  // out
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_Memory_Args, memory);

struct PJRT_Buffer_ReadyEvent_Args {
  TL_PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out, caller destroys
};
TL_PJRT_STRUCT_SIZE(PJRT_Buffer_ReadyEvent_Args, event);

// ------------------------------------------------------------------------ the function table
// Every slot's function type: PJRT_<name>(PJRT_<name>_Args*). The two error accessors that
// cannot fail return void. Slots whose arguments Tlaloc never reads get their struct by name.
#define TL_PJRT_SLOT_TYPE_X_(name) \
  struct PJRT_##name##_Args;       \
  typedef PJRT_Error* PJRT_##name(PJRT_##name##_Args* args);
#define TL_PJRT_SLOT_TYPE_V_(name) \
  struct PJRT_##name##_Args;       \
  typedef void PJRT_##name(PJRT_##name##_Args* args);
TL_PJRT_API_SLOTS(TL_PJRT_SLOT_TYPE_X_, TL_PJRT_SLOT_TYPE_V_)
#undef TL_PJRT_SLOT_TYPE_X_
#undef TL_PJRT_SLOT_TYPE_V_

// What GetPjrtApi returns. Slots are appended only, so a newer plugin's table starts with
// this one; `struct_size` says how many slots a plugin actually provides.
struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
#define TL_PJRT_SLOT_FIELD_(name) PJRT_##name* PJRT_##name;
  TL_PJRT_API_SLOTS(TL_PJRT_SLOT_FIELD_, TL_PJRT_SLOT_FIELD_)
#undef TL_PJRT_SLOT_FIELD_
};
TL_PJRT_STRUCT_SIZE(PJRT_Api, PJRT_Client_CreateBuffersForAsyncHostToDevice);

// The plugin's one exported symbol.
typedef const PJRT_Api* (*PJRT_GetPjrtApi_Fn)();

}  // extern "C"

namespace tlaloc::pjrt {

// Number of function slots in the 0.60 table.
#define TL_PJRT_COUNT_(name) +1
inline constexpr int kNumApiSlots = 0 TL_PJRT_API_SLOTS(TL_PJRT_COUNT_, TL_PJRT_COUNT_);
#undef TL_PJRT_COUNT_

// Slot names ("PJRT_Client_Compile") in table order.
#define TL_PJRT_NAME_(name) "PJRT_" #name,
inline constexpr const char* kApiSlotNames[] = {TL_PJRT_API_SLOTS(TL_PJRT_NAME_, TL_PJRT_NAME_)};
#undef TL_PJRT_NAME_

// Byte offset of slot i: the table is a header followed by function pointers only.
inline constexpr size_t ApiSlotOffset(int i) {
  return offsetof(PJRT_Api, PJRT_Error_Destroy) + sizeof(void*) * static_cast<size_t>(i);
}

}  // namespace tlaloc::pjrt
