// Client, devices, memories and buffers of Tlaloc's PJRT plugin. A device is a slot of host
// memory; buffers are Literals.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "plugin/plugin_internal.h"
#include "tlaloc/pjrt/api.h"

namespace tlaloc::plugin {

namespace {

constexpr int64_t kMaxDevices = 1024;

std::string_view NameOf(const PJRT_NamedValue& v) { return {v.name, v.name_size}; }

}  // namespace

namespace {

// An int64 create option in [lo, hi], or an error naming it.
PJRT_Error* Int64Option(const PJRT_NamedValue& v, int64_t lo, int64_t hi, int64_t& out) {
  const std::string name(NameOf(v));
  TL_PLUGIN_REQUIRE(v.type == PJRT_NamedValue_kInt64, INVALID_ARGUMENT,
                    "PJRT_Client_Create: " + name + " must be an int64");
  TL_PLUGIN_REQUIRE(v.int64_value >= lo && v.int64_value <= hi, INVALID_ARGUMENT,
                    "PJRT_Client_Create: " + name + " = " + std::to_string(v.int64_value) +
                        ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
  out = v.int64_value;
  return nullptr;
}

// Lets the caller's key-value callbacks return an error built by this plugin.
PJRT_Error* CallbackError(PJRT_Error_Code code, const char* message, size_t size) {
  return MakeError(code, std::string(message, size));
}

// Publishes this node's device count under the client's store and reads every node's (the
// store's Get blocks until the node has published, or fails after the timeout).
PJRT_Error* ExchangeDeviceCounts(PJRT_Client_Create_Args* args, int64_t node_id, int64_t num_nodes,
                                 int64_t local_count, std::vector<int64_t>& counts) {
  static const std::string kPrefix = "tlaloc_pjrt_cpu:devices_of_node:";
  PJRT_CallbackError error_fn = CallbackError;
  const std::string mine = std::to_string(local_count);
  const std::string my_key = kPrefix + std::to_string(node_id);
  PJRT_KeyValuePutCallback_Args put{};
  put.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
  put.key = my_key.data();
  put.key_size = my_key.size();
  put.value = mine.data();
  put.value_size = mine.size();
  put.callback_error = &error_fn;
  put.user_arg = args->kv_put_user_arg;
  if (PJRT_Error* e = args->kv_put_callback(&put)) return e;
  for (int64_t n = 0; n < num_nodes; ++n) {
    const std::string key = kPrefix + std::to_string(n);
    PJRT_KeyValueGetCallback_Args get{};
    get.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
    get.key = key.data();
    get.key_size = key.size();
    get.timeout_in_ms = 60000;
    get.callback_error = &error_fn;
    get.user_arg = args->kv_get_user_arg;
    if (PJRT_Error* e = args->kv_get_callback(&get)) return e;
    const std::string value(get.value ? get.value : "", get.value_size);
    if (get.value && get.value_deleter_callback) get.value_deleter_callback(get.value);
    char* end = nullptr;
    const long long count = std::strtoll(value.c_str(), &end, 10);
    TL_PLUGIN_REQUIRE(!value.empty() && *end == '\0' && count >= 1 && count <= kMaxDevices,
                      INVALID_ARGUMENT,
                      "PJRT_Client_Create: node " + std::to_string(n) +
                          " published device count '" + value + "' under " + key);
    counts.push_back(count);
  }
  return nullptr;
}

std::unique_ptr<PJRT_Device> MakeDevice(PJRT_Client* client, int local_index, int global_id,
                                        int node) {
  auto d = std::make_unique<PJRT_Device>();
  d->client = client;
  d->index = local_index;
  d->description.id = global_id;
  d->description.process_index = node;
  d->description.to_string = "TlalocCpuDevice(id=" + std::to_string(global_id) + ")";
  d->description.debug_string =
      "Tlaloc interpreter CPU device " + std::to_string(global_id) +
      (client->num_nodes > 1 ? " of node " + std::to_string(node) : std::string());
  d->memory.id = global_id;
  d->memory.device = d.get();
  d->memory.to_string = "TlalocCpuMemory(id=" + std::to_string(global_id) + ")";
  d->memory.debug_string = "host memory of Tlaloc CPU device " + std::to_string(global_id);
  d->memories[0] = &d->memory;
  return d;
}

}  // namespace

// ----------------------------------------------------------------------------------- client
// node_id / num_nodes (XLA's multi-process options) with the key-value callbacks make the
// client's device list span every node: each node publishes its device count and reads the
// others'; this node's devices are the addressable ones. Executing across nodes is the
// interpreter backend's (interp/process_world.h), not this plugin's.
PJRT_Error* Plugin_Client_Create(PJRT_Client_Create_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_Create_Args, "PJRT_Client_Create");
  auto default_count = DefaultDeviceCount();  // TLALOC_CPU_DEVICES; the option overrides it
  if (!default_count.ok())
    return FromStatus(default_count.status().WithContext("PJRT_Client_Create"));
  int64_t device_count = *default_count, node_id = 0, num_nodes = 1;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& v = args->create_options[i];
    std::string name(NameOf(v));
    PJRT_Error* e = nullptr;
    if (name == "cpu_device_count") {
      e = Int64Option(v, 1, kMaxDevices, device_count);
    } else if (name == "node_id") {
      e = Int64Option(v, 0, kMaxDevices - 1, node_id);
    } else if (name == "num_nodes") {
      e = Int64Option(v, 1, kMaxDevices, num_nodes);
    } else {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "PJRT_Client_Create: unknown create option '" + name +
                           "' (this plugin accepts cpu_device_count, node_id, num_nodes)");
    }
    if (e) return e;
  }
  TL_PLUGIN_REQUIRE(node_id < num_nodes, INVALID_ARGUMENT,
                    "PJRT_Client_Create: node_id " + std::to_string(node_id) +
                        " is not below num_nodes " + std::to_string(num_nodes));
  std::vector<int64_t> counts{device_count};
  if (num_nodes > 1) {
    TL_PLUGIN_REQUIRE(args->kv_get_callback != nullptr && args->kv_put_callback != nullptr,
                      INVALID_ARGUMENT,
                      "PJRT_Client_Create: num_nodes " + std::to_string(num_nodes) +
                          " needs the kv_get_callback and kv_put_callback key-value store");
    counts.clear();
    if (PJRT_Error* e = ExchangeDeviceCounts(args, node_id, num_nodes, device_count, counts))
      return e;
  }
  auto client = std::make_unique<PJRT_Client>();
  client->platform_version = "tlaloc-interpreter 0.1.0";
  client->node_id = static_cast<int>(node_id);
  client->num_nodes = static_cast<int>(num_nodes);
  int global_id = 0;
  std::vector<PJRT_Device*> global;
  for (int64_t n = 0; n < num_nodes; ++n) {
    for (int64_t i = 0; i < counts[n]; ++i) {
      auto d = MakeDevice(client.get(), static_cast<int>(i), global_id++, static_cast<int>(n));
      global.push_back(d.get());
      if (n == node_id) {
        client->device_list.push_back(d.get());
        client->memory_list.push_back(&d->memory);
      }
      client->devices.push_back(std::move(d));
    }
  }
  client->global_list = std::move(global);
  args->client = client.release();
  return nullptr;
}

PJRT_Error* Plugin_Client_Destroy(PJRT_Client_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_Destroy_Args, "PJRT_Client_Destroy");
  delete args->client;
  return nullptr;
}

#define TL_NEED_CLIENT(fn) \
  TL_PLUGIN_REQUIRE(args->client != nullptr, INVALID_ARGUMENT, fn ": null client")

PJRT_Error* Plugin_Client_PlatformName(PJRT_Client_PlatformName_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_PlatformName_Args, "PJRT_Client_PlatformName");
  TL_NEED_CLIENT("PJRT_Client_PlatformName");
  args->platform_name = args->client->platform_name.data();
  args->platform_name_size = args->client->platform_name.size();
  return nullptr;
}

PJRT_Error* Plugin_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_ProcessIndex_Args, "PJRT_Client_ProcessIndex");
  TL_NEED_CLIENT("PJRT_Client_ProcessIndex");
  args->process_index = args->client->node_id;
  return nullptr;
}

PJRT_Error* Plugin_Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_PlatformVersion_Args, "PJRT_Client_PlatformVersion");
  TL_NEED_CLIENT("PJRT_Client_PlatformVersion");
  args->platform_version = args->client->platform_version.data();
  args->platform_version_size = args->client->platform_version.size();
  return nullptr;
}

PJRT_Error* Plugin_Client_Devices(PJRT_Client_Devices_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_Devices_Args, "PJRT_Client_Devices");
  TL_NEED_CLIENT("PJRT_Client_Devices");
  args->devices = args->client->global_list.data();
  args->num_devices = args->client->global_list.size();
  return nullptr;
}

PJRT_Error* Plugin_Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_AddressableDevices_Args, "PJRT_Client_AddressableDevices");
  TL_NEED_CLIENT("PJRT_Client_AddressableDevices");
  args->addressable_devices = args->client->device_list.data();
  args->num_addressable_devices = args->client->device_list.size();
  return nullptr;
}

namespace {
// Device `id` of `list` (global ids for LookupDevice, local hardware ids for the addressable).
PJRT_Error* Lookup(PJRT_Client* client, bool global, int id, PJRT_Device** out, const char* fn) {
  TL_PLUGIN_REQUIRE(client != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null client");
  const auto& list = global ? client->global_list : client->device_list;
  TL_PLUGIN_REQUIRE(id >= 0 && id < static_cast<int>(list.size()), INVALID_ARGUMENT,
                    std::string(fn) + ": no device with id " + std::to_string(id) + " (have " +
                        std::to_string(list.size()) + ")");
  *out = list[id];
  return nullptr;
}
}  // namespace

PJRT_Error* Plugin_Client_LookupDevice(PJRT_Client_LookupDevice_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_LookupDevice_Args, "PJRT_Client_LookupDevice");
  return Lookup(args->client, true, args->id, &args->device, "PJRT_Client_LookupDevice");
}

PJRT_Error* Plugin_Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_LookupAddressableDevice_Args,
                  "PJRT_Client_LookupAddressableDevice");
  return Lookup(args->client, false, args->local_hardware_id, &args->addressable_device,
                "PJRT_Client_LookupAddressableDevice");
}

PJRT_Error* Plugin_Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_AddressableMemories_Args, "PJRT_Client_AddressableMemories");
  TL_NEED_CLIENT("PJRT_Client_AddressableMemories");
  args->addressable_memories = args->client->memory_list.data();
  args->num_addressable_memories = args->client->memory_list.size();
  return nullptr;
}

PJRT_Error* Plugin_Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Client_DefaultDeviceAssignment_Args,
                  "PJRT_Client_DefaultDeviceAssignment");
  TL_NEED_CLIENT("PJRT_Client_DefaultDeviceAssignment");
  int64_t needed = int64_t{args->num_replicas} * args->num_partitions;
  int64_t have = static_cast<int64_t>(args->client->device_list.size());
  TL_PLUGIN_REQUIRE(args->num_replicas >= 1 && args->num_partitions >= 1 && needed <= have,
                    INVALID_ARGUMENT,
                    "PJRT_Client_DefaultDeviceAssignment: " + std::to_string(args->num_replicas) +
                        " replicas x " + std::to_string(args->num_partitions) +
                        " partitions do not fit " + std::to_string(have) + " devices");
  TL_PLUGIN_REQUIRE(args->default_assignment != nullptr &&
                        static_cast<int64_t>(args->default_assignment_size) >= needed,
                    INVALID_ARGUMENT,
                    "PJRT_Client_DefaultDeviceAssignment: default_assignment too small");
  for (int64_t i = 0; i < needed; ++i) args->default_assignment[i] = static_cast<int>(i);
  return nullptr;
}

PJRT_Error* Plugin_Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  static const char* fn = "PJRT_Client_BufferFromHostBuffer";
  TL_PLUGIN_CHECK(args, PJRT_Client_BufferFromHostBuffer_Args, fn);
  TL_NEED_CLIENT("PJRT_Client_BufferFromHostBuffer");
  PJRT_Device* device = args->memory != nullptr ? args->memory->device : args->device;
  TL_PLUGIN_REQUIRE(device != nullptr && device->client == args->client, INVALID_ARGUMENT,
                    std::string(fn) + ": no device (or memory) of this client given");
  auto et = pjrt::FromPjrtBufferType(args->type);
  if (!et.ok()) return FromStatus(et.status().WithContext(fn));
  TL_PLUGIN_REQUIRE(args->device_layout == nullptr, UNIMPLEMENTED,
                    std::string(fn) + ": device_layout is not supported (dense row-major only)");
  std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
  for (int64_t d : dims) {
    TL_PLUGIN_REQUIRE(d >= 0, INVALID_ARGUMENT, std::string(fn) + ": negative dimension");
  }
  Literal literal{TensorType(*et, dims)};
  TL_PLUGIN_REQUIRE(args->data != nullptr || literal.byte_size() == 0, INVALID_ARGUMENT,
                    std::string(fn) + ": null data");
  if (args->num_byte_strides != 0) {
    // Only strides that describe the dense row-major layout are accepted.
    TL_PLUGIN_REQUIRE(args->num_byte_strides == dims.size(), INVALID_ARGUMENT,
                      std::string(fn) + ": byte_strides must have one entry per dimension");
    std::vector<int64_t> dense = RowMajorStrides(dims);
    for (size_t i = 0; i < dims.size(); ++i) {
      TL_PLUGIN_REQUIRE(dims[i] <= 1 || args->byte_strides[i] == dense[i] * ElementSize(*et),
                        UNIMPLEMENTED,
                        std::string(fn) + ": non-dense byte_strides are not supported");
    }
  }
  if (literal.byte_size() > 0) std::memcpy(literal.data(), args->data, literal.byte_size());
  auto* buffer = new PJRT_Buffer();
  buffer->element_type = *et;
  buffer->device = device;
  HoldLiteral(buffer, std::move(literal));
  buffer->dims = std::move(dims);
  args->buffer = buffer;
  // Copied already: the caller may reuse its memory at once.
  args->done_with_host_buffer = ReadyEvent();
  return nullptr;
}

// -------------------------------------------------------------------- device descriptions
#define TL_NEED_DESC(fn) \
  TL_PLUGIN_REQUIRE(args->device_description != nullptr, INVALID_ARGUMENT, fn ": null description")

PJRT_Error* Plugin_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_Id_Args, "PJRT_DeviceDescription_Id");
  TL_NEED_DESC("PJRT_DeviceDescription_Id");
  args->id = args->device_description->id;
  return nullptr;
}

PJRT_Error* Plugin_DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_ProcessIndex_Args,
                  "PJRT_DeviceDescription_ProcessIndex");
  TL_NEED_DESC("PJRT_DeviceDescription_ProcessIndex");
  args->process_index = args->device_description->process_index;
  return nullptr;
}

PJRT_Error* Plugin_DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_Attributes_Args,
                  "PJRT_DeviceDescription_Attributes");
  TL_NEED_DESC("PJRT_DeviceDescription_Attributes");
  args->attributes = args->device_description->attributes.data();
  args->num_attributes = args->device_description->attributes.size();
  return nullptr;
}

PJRT_Error* Plugin_DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_Kind_Args, "PJRT_DeviceDescription_Kind");
  TL_NEED_DESC("PJRT_DeviceDescription_Kind");
  args->device_kind = args->device_description->kind.data();
  args->device_kind_size = args->device_description->kind.size();
  return nullptr;
}

PJRT_Error* Plugin_DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_DebugString_Args,
                  "PJRT_DeviceDescription_DebugString");
  TL_NEED_DESC("PJRT_DeviceDescription_DebugString");
  args->debug_string = args->device_description->debug_string.data();
  args->debug_string_size = args->device_description->debug_string.size();
  return nullptr;
}

PJRT_Error* Plugin_DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_DeviceDescription_ToString_Args, "PJRT_DeviceDescription_ToString");
  TL_NEED_DESC("PJRT_DeviceDescription_ToString");
  args->to_string = args->device_description->to_string.data();
  args->to_string_size = args->device_description->to_string.size();
  return nullptr;
}

// ---------------------------------------------------------------------------------- devices
#define TL_NEED_DEVICE(fn) \
  TL_PLUGIN_REQUIRE(args->device != nullptr, INVALID_ARGUMENT, fn ": null device")

PJRT_Error* Plugin_Device_GetDescription(PJRT_Device_GetDescription_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Device_GetDescription_Args, "PJRT_Device_GetDescription");
  TL_NEED_DEVICE("PJRT_Device_GetDescription");
  args->device_description = &args->device->description;
  return nullptr;
}

PJRT_Error* Plugin_Device_IsAddressable(PJRT_Device_IsAddressable_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Device_IsAddressable_Args, "PJRT_Device_IsAddressable");
  TL_NEED_DEVICE("PJRT_Device_IsAddressable");
  args->is_addressable = args->device->description.process_index == args->device->client->node_id;
  return nullptr;
}

PJRT_Error* Plugin_Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Device_LocalHardwareId_Args, "PJRT_Device_LocalHardwareId");
  TL_NEED_DEVICE("PJRT_Device_LocalHardwareId");
  args->local_hardware_id = args->device->index;
  return nullptr;
}

PJRT_Error* Plugin_Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Device_AddressableMemories_Args, "PJRT_Device_AddressableMemories");
  TL_NEED_DEVICE("PJRT_Device_AddressableMemories");
  args->memories = args->device->memories;
  args->num_memories = 1;
  return nullptr;
}

PJRT_Error* Plugin_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Device_DefaultMemory_Args, "PJRT_Device_DefaultMemory");
  TL_NEED_DEVICE("PJRT_Device_DefaultMemory");
  args->memory = &args->device->memory;
  return nullptr;
}

// --------------------------------------------------------------------------------- memories
#define TL_NEED_MEMORY(fn) \
  TL_PLUGIN_REQUIRE(args->memory != nullptr, INVALID_ARGUMENT, fn ": null memory")

PJRT_Error* Plugin_Memory_Id(PJRT_Memory_Id_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_Id_Args, "PJRT_Memory_Id");
  TL_NEED_MEMORY("PJRT_Memory_Id");
  args->id = args->memory->id;
  return nullptr;
}

PJRT_Error* Plugin_Memory_Kind(PJRT_Memory_Kind_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_Kind_Args, "PJRT_Memory_Kind");
  TL_NEED_MEMORY("PJRT_Memory_Kind");
  args->kind = args->memory->kind.data();
  args->kind_size = args->memory->kind.size();
  return nullptr;
}

PJRT_Error* Plugin_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_Kind_Id_Args, "PJRT_Memory_Kind_Id");
  args->kind_id = 0;
  return nullptr;
}

PJRT_Error* Plugin_Memory_DebugString(PJRT_Memory_DebugString_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_DebugString_Args, "PJRT_Memory_DebugString");
  TL_NEED_MEMORY("PJRT_Memory_DebugString");
  args->debug_string = args->memory->debug_string.data();
  args->debug_string_size = args->memory->debug_string.size();
  return nullptr;
}

PJRT_Error* Plugin_Memory_ToString(PJRT_Memory_ToString_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_ToString_Args, "PJRT_Memory_ToString");
  TL_NEED_MEMORY("PJRT_Memory_ToString");
  args->to_string = args->memory->to_string.data();
  args->to_string_size = args->memory->to_string.size();
  return nullptr;
}

PJRT_Error* Plugin_Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Memory_AddressableByDevices_Args, "PJRT_Memory_AddressableByDevices");
  TL_NEED_MEMORY("PJRT_Memory_AddressableByDevices");
  // The device owns the memory; its address is stable for the client's lifetime.
  args->devices = &args->memory->device->client->device_list[args->memory->device->index];
  args->num_devices = 1;
  return nullptr;
}

// ---------------------------------------------------------------------------------- buffers
#define TL_NEED_BUFFER(fn) \
  TL_PLUGIN_REQUIRE(args->buffer != nullptr, INVALID_ARGUMENT, fn ": null buffer")

PJRT_Error* Plugin_Buffer_Destroy(PJRT_Buffer_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_Destroy_Args, "PJRT_Buffer_Destroy");
  if (args->buffer) DropLiteral(args->buffer);
  delete args->buffer;
  return nullptr;
}

PJRT_Error* Plugin_Buffer_ElementType(PJRT_Buffer_ElementType_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_ElementType_Args, "PJRT_Buffer_ElementType");
  TL_NEED_BUFFER("PJRT_Buffer_ElementType");
  args->type = pjrt::ToPjrtBufferType(args->buffer->element_type);
  return nullptr;
}

PJRT_Error* Plugin_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_Dimensions_Args, "PJRT_Buffer_Dimensions");
  TL_NEED_BUFFER("PJRT_Buffer_Dimensions");
  args->dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* Plugin_Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_UnpaddedDimensions_Args, "PJRT_Buffer_UnpaddedDimensions");
  TL_NEED_BUFFER("PJRT_Buffer_UnpaddedDimensions");
  args->unpadded_dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* Plugin_Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_DynamicDimensionIndices_Args,
                  "PJRT_Buffer_DynamicDimensionIndices");
  args->dynamic_dim_indices = nullptr;
  args->num_dynamic_dims = 0;  // shapes are static
  return nullptr;
}

PJRT_Error* Plugin_Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_OnDeviceSizeInBytes_Args, "PJRT_Buffer_OnDeviceSizeInBytes");
  TL_NEED_BUFFER("PJRT_Buffer_OnDeviceSizeInBytes");
  args->on_device_size_in_bytes =
      args->buffer->deleted ? 0 : static_cast<size_t>(args->buffer->literal.byte_size());
  return nullptr;
}

PJRT_Error* Plugin_Buffer_Device(PJRT_Buffer_Device_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_Device_Args, "PJRT_Buffer_Device");
  TL_NEED_BUFFER("PJRT_Buffer_Device");
  args->device = args->buffer->device;
  return nullptr;
}

PJRT_Error* Plugin_Buffer_Memory(PJRT_Buffer_Memory_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_Memory_Args, "PJRT_Buffer_Memory");
  TL_NEED_BUFFER("PJRT_Buffer_Memory");
  args->memory = &args->buffer->device->memory;
  return nullptr;
}

PJRT_Error* Plugin_Buffer_Delete(PJRT_Buffer_Delete_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_Delete_Args, "PJRT_Buffer_Delete");
  TL_NEED_BUFFER("PJRT_Buffer_Delete");
  DropLiteral(args->buffer);
  args->buffer->deleted = true;
  return nullptr;
}

PJRT_Error* Plugin_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_IsDeleted_Args, "PJRT_Buffer_IsDeleted");
  TL_NEED_BUFFER("PJRT_Buffer_IsDeleted");
  args->is_deleted = args->buffer->deleted;
  return nullptr;
}

namespace {
PJRT_Error* CopyTo(PJRT_Buffer* src, PJRT_Device* device, PJRT_Buffer** out, const char* fn) {
  TL_PLUGIN_REQUIRE(src != nullptr && device != nullptr, INVALID_ARGUMENT,
                    std::string(fn) + ": null buffer or destination");
  TL_PLUGIN_REQUIRE(!src->deleted, FAILED_PRECONDITION,
                    std::string(fn) + ": the buffer was deleted or donated");
  TL_PLUGIN_REQUIRE(src->device != device, INVALID_ARGUMENT,
                    std::string(fn) + ": the buffer is already on that device");
  auto* b = new PJRT_Buffer();
  b->element_type = src->element_type;
  b->device = device;
  HoldLiteral(b, src->literal.Clone());
  b->dims = src->dims;
  *out = b;
  return nullptr;
}
}  // namespace

PJRT_Error* Plugin_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_CopyToDevice_Args, "PJRT_Buffer_CopyToDevice");
  return CopyTo(args->buffer, args->dst_device, &args->dst_buffer, "PJRT_Buffer_CopyToDevice");
}

PJRT_Error* Plugin_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_CopyToMemory_Args, "PJRT_Buffer_CopyToMemory");
  return CopyTo(args->buffer, args->dst_memory ? args->dst_memory->device : nullptr,
                &args->dst_buffer, "PJRT_Buffer_CopyToMemory");
}

PJRT_Error* Plugin_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  static const char* fn = "PJRT_Buffer_ToHostBuffer";
  TL_PLUGIN_CHECK(args, PJRT_Buffer_ToHostBuffer_Args, fn);
  TL_PLUGIN_REQUIRE(args->src != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null src");
  TL_PLUGIN_REQUIRE(!args->src->deleted, FAILED_PRECONDITION,
                    std::string(fn) + ": the buffer was deleted or donated");
  TL_PLUGIN_REQUIRE(args->host_layout == nullptr, UNIMPLEMENTED,
                    std::string(fn) + ": host_layout is not supported (dense row-major only)");
  size_t needed = static_cast<size_t>(args->src->literal.byte_size());
  if (args->dst == nullptr) {
    args->dst_size = needed;
    args->event = nullptr;
    return nullptr;
  }
  TL_PLUGIN_REQUIRE(args->dst_size >= needed, INVALID_ARGUMENT,
                    std::string(fn) + ": dst_size " + std::to_string(args->dst_size) +
                        " is smaller than the " + std::to_string(needed) + " bytes needed");
  if (needed > 0) std::memcpy(args->dst, args->src->literal.data(), needed);
  args->event = ReadyEvent();
  return nullptr;
}

PJRT_Error* Plugin_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_IsOnCpu_Args, "PJRT_Buffer_IsOnCpu");
  args->is_on_cpu = true;
  return nullptr;
}

PJRT_Error* Plugin_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Buffer_ReadyEvent_Args, "PJRT_Buffer_ReadyEvent");
  TL_NEED_BUFFER("PJRT_Buffer_ReadyEvent");
  args->event = args->buffer->deleted
                    ? ReadyEvent(FailedPrecondition("the buffer was deleted or donated"))
                    : ReadyEvent();
  return nullptr;
}

}  // namespace tlaloc::plugin
