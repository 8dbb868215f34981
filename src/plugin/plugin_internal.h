// Tlaloc's PJRT plugin: the objects behind the C API's opaque handles, and the checks every
// entry point makes. All work is synchronous (the interpreter runs on the calling thread), so
// every event a call returns is already ready.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/pjrt/c_api.h"
#include "tlaloc/support/status.h"

struct PJRT_Error {
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string message;
};

struct PJRT_Event {
  bool ok = true;
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string message;
};

struct PJRT_DeviceDescription {
  int id = 0;
  int process_index = 0;  // the node holding the device (num_nodes > 1: every node's devices)
  std::string kind = "cpu";
  std::string debug_string;
  std::string to_string;
  std::vector<PJRT_NamedValue> attributes;
};

struct PJRT_Memory {
  int id = 0;
  PJRT_Device* device = nullptr;
  std::string kind = "device";
  std::string debug_string;
  std::string to_string;
};

struct PJRT_Device {
  PJRT_Client* client = nullptr;
  int index = 0;
  // Bytes of this device's live buffers (PJRT_Device_MemoryStats; plugin_memory.cc).
  std::atomic<int64_t> bytes_in_use{0};
  std::atomic<int64_t> peak_bytes_in_use{0};
  PJRT_DeviceDescription description;
  PJRT_Memory memory;
  PJRT_Memory* memories[1] = {nullptr};
};

struct PJRT_Client {
  std::vector<std::unique_ptr<PJRT_Device>> devices;  // this node's, then the other nodes'
  std::vector<PJRT_Device*> device_list;  // addressable: this node's, by local hardware id
  std::vector<PJRT_Device*> global_list;  // every node's, by global id (node 0's first)
  int node_id = 0, num_nodes = 1;
  std::vector<PJRT_Memory*> memory_list;
  std::string platform_name = "cpu";
  std::string platform_version;
};

// A compile-only topology ("cpu:N"): N device descriptions, no client.
struct PJRT_TopologyDescription {
  std::string platform_name = "cpu";
  std::string platform_version;
  std::vector<std::unique_ptr<PJRT_DeviceDescription>> owned;
  std::vector<PJRT_DeviceDescription*> descriptions;
};

struct PJRT_Buffer {
  tlaloc::Literal literal;  // empty once deleted or donated
  tlaloc::ElementType element_type = tlaloc::ElementType::kF32;
  PJRT_Device* device = nullptr;
  bool deleted = false;
  std::vector<int64_t> dims;  // kept for PJRT_Buffer_Dimensions' pointer
  int64_t counted_bytes = 0;  // what HoldLiteral added to the device's bytes_in_use
};

namespace tlaloc {
class CheckRecorder;
}

namespace tlaloc::plugin {

// A compiled program, shared by the loaded executable and every PJRT_Executable view of it.
struct Compiled {
  std::shared_ptr<const Module> module;
  std::unique_ptr<Executable> executable;
  std::string name;
  std::string fingerprint;
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims;  // all outputs' dims, concatenated
  std::vector<size_t> output_ranks;
  // Argument index -> output index it may alias (tf.aliasing_output), -1 if none.
  std::vector<int64_t> aliasing;
  int64_t argument_bytes = 0, output_bytes = 0, alias_bytes = 0, temp_bytes = 0;
  std::shared_ptr<CheckRecorder> checks;  // outcomes of check.expect_* custom calls
};

// PJRT's compiled memory statistics for the entry function `f` of `module`: argument and output
// bytes, the bytes donated arguments share with outputs (tf.aliasing_output, counted once), and
// the peak of live temporaries replaying the interpreter's plan (values die after their last
// use; a region's or a callee's temporaries live while the op holding it runs).
void ComputeMemoryStats(const Module& module, const Function& f, Compiled& c);

// Runs one argument list per device (plugin_devices.cc): a program compiled for one replica
// and one partition runs on each list in turn; one compiled for R x P runs on R * P lists at
// once, on device threads whose collectives meet.
StatusOr<std::vector<std::vector<Literal>>> ExecuteLists(const Compiled& c,
                                                         std::vector<std::vector<Literal>> inputs);
// Devices a client has without a cpu_device_count option: TLALOC_CPU_DEVICES, else 1.
StatusOr<int64_t> DefaultDeviceCount();

// Parses and prepares a program for `num_devices` devices (a client's or a topology's): the
// shared body of PJRT_Client_Compile and PJRT_Compile (`whose` devices: "client's",
// "topology's"). Null on success, `out` set.
PJRT_Error* BuildCompiled(const PJRT_Program* program, const char* compile_options,
                          size_t compile_options_size, size_t num_devices, const char* whose,
                          const char* fn, std::shared_ptr<Compiled>& out);

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message);
PJRT_Error* FromStatus(const Status& status);
// A ready event carrying `status`.
PJRT_Event* ReadyEvent(Status status = OkStatus());

// A buffer's storage, counted in its device's bytes_in_use (b->device set first); DropLiteral
// empties it (deleted, donated, destroyed) and takes its bytes off again.
void HoldLiteral(PJRT_Buffer* b, Literal literal);
void DropLiteral(PJRT_Buffer* b);

// Refuses null arguments or a struct_size smaller than this plugin's declaration.
PJRT_Error* CheckArgs(const void* args, size_t struct_size, size_t needed, const char* fn);

}  // namespace tlaloc::plugin

#define TL_PLUGIN_CHECK(args, T, fn)                                                           \
  do {                                                                                         \
    if (PJRT_Error* e_ = ::tlaloc::plugin::CheckArgs((args), (args) ? (args)->struct_size : 0, \
                                                     T##_STRUCT_SIZE, fn)) {                   \
      return e_;                                                                               \
    }                                                                                          \
  } while (0)

#define TL_PLUGIN_REQUIRE(cond, code, message)                                        \
  do {                                                                                \
    if (!(cond)) return ::tlaloc::plugin::MakeError(PJRT_Error_Code_##code, message); \
  } while (0)

// Entry points defined across the plugin's files (one per implemented slot).
#define TL_PLUGIN_DECLARE_(name) PJRT_Error* Plugin_##name(PJRT_##name##_Args* args);
namespace tlaloc::plugin {
// Client and device family (plugin_client.cc).
TL_PLUGIN_DECLARE_(Client_Create)
TL_PLUGIN_DECLARE_(Client_Destroy)
TL_PLUGIN_DECLARE_(Client_PlatformName)
TL_PLUGIN_DECLARE_(Client_ProcessIndex)
TL_PLUGIN_DECLARE_(Client_PlatformVersion)
TL_PLUGIN_DECLARE_(Client_Devices)
TL_PLUGIN_DECLARE_(Client_AddressableDevices)
TL_PLUGIN_DECLARE_(Client_LookupDevice)
TL_PLUGIN_DECLARE_(Client_LookupAddressableDevice)
TL_PLUGIN_DECLARE_(Client_AddressableMemories)
TL_PLUGIN_DECLARE_(Client_DefaultDeviceAssignment)
TL_PLUGIN_DECLARE_(Client_BufferFromHostBuffer)
TL_PLUGIN_DECLARE_(DeviceDescription_Id)
TL_PLUGIN_DECLARE_(DeviceDescription_ProcessIndex)
TL_PLUGIN_DECLARE_(DeviceDescription_Attributes)
TL_PLUGIN_DECLARE_(DeviceDescription_Kind)
TL_PLUGIN_DECLARE_(DeviceDescription_DebugString)
TL_PLUGIN_DECLARE_(DeviceDescription_ToString)
TL_PLUGIN_DECLARE_(Device_GetDescription)
TL_PLUGIN_DECLARE_(Device_IsAddressable)
TL_PLUGIN_DECLARE_(Device_LocalHardwareId)
TL_PLUGIN_DECLARE_(Device_AddressableMemories)
TL_PLUGIN_DECLARE_(Device_DefaultMemory)
TL_PLUGIN_DECLARE_(Device_MemoryStats)  // plugin_memory.cc
TL_PLUGIN_DECLARE_(Memory_Id)
TL_PLUGIN_DECLARE_(Memory_Kind)
TL_PLUGIN_DECLARE_(Memory_Kind_Id)
TL_PLUGIN_DECLARE_(Memory_DebugString)
TL_PLUGIN_DECLARE_(Memory_ToString)
TL_PLUGIN_DECLARE_(Memory_AddressableByDevices)
// Buffers (plugin_client.cc).
TL_PLUGIN_DECLARE_(Buffer_Destroy)
TL_PLUGIN_DECLARE_(Buffer_ElementType)
TL_PLUGIN_DECLARE_(Buffer_Dimensions)
TL_PLUGIN_DECLARE_(Buffer_UnpaddedDimensions)
TL_PLUGIN_DECLARE_(Buffer_DynamicDimensionIndices)
TL_PLUGIN_DECLARE_(Buffer_OnDeviceSizeInBytes)
TL_PLUGIN_DECLARE_(Buffer_Device)
TL_PLUGIN_DECLARE_(Buffer_Memory)
TL_PLUGIN_DECLARE_(Buffer_Delete)
TL_PLUGIN_DECLARE_(Buffer_IsDeleted)
TL_PLUGIN_DECLARE_(Buffer_CopyToDevice)
TL_PLUGIN_DECLARE_(Buffer_CopyToMemory)
TL_PLUGIN_DECLARE_(Buffer_ToHostBuffer)
TL_PLUGIN_DECLARE_(Buffer_IsOnCpu)
TL_PLUGIN_DECLARE_(Buffer_ReadyEvent)
// Executables (plugin_executable.cc).
TL_PLUGIN_DECLARE_(Client_Compile)
TL_PLUGIN_DECLARE_(Executable_Destroy)
TL_PLUGIN_DECLARE_(Executable_Name)
TL_PLUGIN_DECLARE_(Executable_NumReplicas)
TL_PLUGIN_DECLARE_(Executable_NumPartitions)
TL_PLUGIN_DECLARE_(Executable_NumOutputs)
TL_PLUGIN_DECLARE_(Executable_SizeOfGeneratedCodeInBytes)
TL_PLUGIN_DECLARE_(Executable_Fingerprint)
TL_PLUGIN_DECLARE_(Executable_GetCompiledMemoryStats)
TL_PLUGIN_DECLARE_(Executable_OutputElementTypes)
TL_PLUGIN_DECLARE_(Executable_OutputDimensions)
TL_PLUGIN_DECLARE_(LoadedExecutable_Destroy)
TL_PLUGIN_DECLARE_(LoadedExecutable_GetExecutable)
TL_PLUGIN_DECLARE_(LoadedExecutable_AddressableDevices)
TL_PLUGIN_DECLARE_(LoadedExecutable_Delete)
TL_PLUGIN_DECLARE_(LoadedExecutable_IsDeleted)
TL_PLUGIN_DECLARE_(LoadedExecutable_Execute)
// Ahead-of-time compilation (plugin_topology.cc, PJRT_Compile in plugin_executable.cc).
TL_PLUGIN_DECLARE_(TopologyDescription_Create)
TL_PLUGIN_DECLARE_(TopologyDescription_Destroy)
TL_PLUGIN_DECLARE_(TopologyDescription_PlatformName)
TL_PLUGIN_DECLARE_(TopologyDescription_PlatformVersion)
TL_PLUGIN_DECLARE_(TopologyDescription_GetDeviceDescriptions)
TL_PLUGIN_DECLARE_(Compile)
}  // namespace tlaloc::plugin
#undef TL_PLUGIN_DECLARE_
