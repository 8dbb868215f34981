// PjrtSession: one plugin, one client. Initializes the plugin, creates the client with
// platform-gated options, checks the platform name against the target, and compiles,
// transfers and executes through the C API. Every PJRT object is owned by a C++ object that
// destroys it; every event is awaited and destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tlaloc/ir/literal.h"
#include "tlaloc/pjrt/api.h"
#include "tlaloc/pjrt/compile_options.h"
#include "tlaloc/pjrt/kv_store.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::pjrt {

// A client create option (PJRT_NamedValue) in C++ form.
struct NamedOption {
  std::string name;
  std::variant<std::string, int64_t, std::vector<int64_t>, float, bool> value;
  bool operator==(const NamedOption&) const = default;
};

// Platform families that decide which create options are legal.
enum class OptionFamily { kCpu, kGpu, kTpu };
// The family of a target: explicit paths go by their file name (tpu-shaped, cuda/gpu-shaped,
// else cpu).
OptionFamily OptionFamilyOf(const PjrtTarget& target);

struct SessionOptions {
  PjrtTarget target = PjrtTarget::Cpu();
  // The plugin file; empty: resolved from the target (runtime/target.h).
  std::string plugin_path;
  // XLA GPU allocator options; legal only for the GPU family.
  std::optional<float> memory_fraction;
  std::optional<bool> preallocate;
  std::optional<std::string> allocator;  // default | platform | bfc | cuda_async
  // libtpu's pinned host memory reservation; legal only for the TPU family. Unset: from
  // TPU_PREMAPPED_BUFFER_SIZE, else 0.
  std::optional<int64_t> premapped_buffer_size;
  // CPU family: the device count (Tlaloc's plugin and XLA:CPU both take cpu_device_count).
  std::optional<int64_t> cpu_device_count;
  // Further options passed as they are (checked against the family's gate where known).
  std::vector<NamedOption> extra_options;
  // Refuse a client whose platform name differs from the target's.
  bool check_platform = true;
  // Several processes (XLA's node_id / num_nodes create options; CPU and GPU families): the
  // client lends `kv_store` to the plugin through PJRT_Client_Create's key-value callbacks, and
  // the plugin's global device list spans every node. Unset: one process.
  std::optional<int64_t> node_id, num_nodes;
  std::shared_ptr<KeyValueStore> kv_store;
};

// The create options a session sends, after the platform gate: a TPU session sends only
// premapped_buffer_size and refuses GPU options by name; a GPU session refuses TPU options by
// name; a CPU session refuses both. `env_premapped` stands for TPU_PREMAPPED_BUFFER_SIZE.
StatusOr<std::vector<NamedOption>> BuildCreateOptions(const SessionOptions& options,
                                                      std::optional<std::string> env_premapped);

class PjrtSession;

// A device buffer. Destroys its PJRT_Buffer.
class PjrtBuffer {
 public:
  ~PjrtBuffer();
  PjrtBuffer(PjrtBuffer&&) noexcept;
  PjrtBuffer& operator=(PjrtBuffer&&) noexcept;
  const TensorType& type() const { return type_; }
  PJRT_Buffer* raw() const { return buffer_; }
  int device_index() const { return device_index_; }
  // True once the plugin deleted it (donated to an execution).
  bool IsDeleted() const;

 private:
  friend class PjrtSession;
  PjrtBuffer(std::shared_ptr<PjrtApi> api, PJRT_Buffer* b, TensorType t, int device)
      : api_(std::move(api)), buffer_(b), type_(std::move(t)), device_index_(device) {}
  std::shared_ptr<PjrtApi> api_;
  PJRT_Buffer* buffer_ = nullptr;
  TensorType type_;
  int device_index_ = 0;
};

struct CompiledMemoryStats {
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t alias_bytes = 0;
  int64_t temp_bytes = 0;
  int64_t generated_code_bytes = 0;
  // The plugin's peak device memory for a run, where it reports one (XLA; not API 0.60).
  std::optional<int64_t> peak_bytes;
};

// A loaded executable. Destroys its PJRT_LoadedExecutable.
class PjrtExecutable {
 public:
  ~PjrtExecutable();
  size_t num_outputs() const { return num_outputs_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  PJRT_LoadedExecutable* raw() const { return exe_; }
  StatusOr<CompiledMemoryStats> MemoryStats() const;
  StatusOr<std::string> Name() const;

 private:
  friend class PjrtSession;
  PjrtExecutable() = default;
  std::shared_ptr<PjrtApi> api_;
  PJRT_LoadedExecutable* exe_ = nullptr;
  size_t num_outputs_ = 0;
  std::vector<TensorType> output_types_;
};

struct ExecuteRequest {
  // Inputs that must not be donated even where the program aliases them
  // (PJRT_ExecuteOptions.non_donatable_input_indices).
  std::vector<int64_t> non_donatable_input_indices;
  int device_index = 0;  // which addressable device runs it
};

class PjrtSession {
 public:
  ~PjrtSession();
  // Resolves (if needed) and loads the plugin, initializes it and creates the client.
  static StatusOr<std::unique_ptr<PjrtSession>> Open(const SessionOptions& options);
  // Same over an already-loaded API (tests).
  static StatusOr<std::unique_ptr<PjrtSession>> OpenWithApi(std::shared_ptr<PjrtApi> api,
                                                            const SessionOptions& options);

  const PjrtApi& api() const { return *api_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const std::vector<NamedOption>& create_options() const { return create_options_; }
  // Plugin attributes (xla_version, stablehlo_current_version, ...) as text.
  const std::vector<std::pair<std::string, std::string>>& attributes() const { return attributes_; }
  struct Device {
    PJRT_Device* raw = nullptr;
    int id = 0;
    std::string kind;
  };
  // This process's (addressable) devices.
  const std::vector<Device>& devices() const { return devices_; }
  // Across processes (num_nodes > 1): this process's index and the devices of all of them.
  int process_index() const { return process_index_; }
  int global_device_count() const { return global_device_count_; }

  // A device's memory as the plugin reports it (PJRT_Device_MemoryStats): Unimplemented when
  // the plugin's table predates that slot or the plugin does not implement it.
  struct DeviceMemory {
    int64_t bytes_in_use = 0;
    std::optional<int64_t> bytes_limit;  // unset when the plugin reports no limit
  };
  StatusOr<DeviceMemory> DeviceMemoryStats(int device_index) const;

  // Compiles MLIR text (StableHLO) with serialized options.
  StatusOr<std::unique_ptr<PjrtExecutable>> Compile(const std::string& mlir,
                                                    const CompileOptions& options = {});
  StatusOr<PjrtBuffer> ToDevice(const Literal& literal, int device_index = 0);
  // Where the buffer's memory is on its device (PJRT_Buffer_UnsafePointer): Unimplemented where
  // the plugin does not say (Tlaloc's plugin).
  StatusOr<uintptr_t> DeviceAddress(const PjrtBuffer& buffer) const;
  StatusOr<Literal> ToHost(const PjrtBuffer& buffer);
  // Runs on one device. Arguments the program aliases (tf.aliasing_output) are donated unless
  // listed as non-donatable.
  StatusOr<std::vector<PjrtBuffer>> Execute(PjrtExecutable& exe,
                                            const std::vector<const PjrtBuffer*>& args,
                                            const ExecuteRequest& request = {});
  // Runs a program compiled for several devices (CompileOptions' replicas x partitions and
  // device assignment): args[d] on the d-th device of the assignment, replica-major. Returns
  // each device's outputs, resident there.
  StatusOr<std::vector<std::vector<PjrtBuffer>>> ExecuteOnDevices(
      PjrtExecutable& exe, const std::vector<std::vector<const PjrtBuffer*>>& args,
      const ExecuteRequest& request = {});
  // Upload, execute, download.
  StatusOr<std::vector<Literal>> Run(PjrtExecutable& exe, const std::vector<Literal>& args);

 private:
  PjrtSession() = default;
  StatusOr<std::vector<std::vector<PjrtBuffer>>> Launch(
      PjrtExecutable& exe, const std::vector<std::vector<const PjrtBuffer*>>& args,
      const ExecuteRequest& request, int single_device);
  std::shared_ptr<PjrtApi> api_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_, platform_version_;
  std::vector<NamedOption> create_options_;
  std::vector<std::pair<std::string, std::string>> attributes_;
  std::vector<Device> devices_;
  int process_index_ = 0, global_device_count_ = 0;
  std::shared_ptr<KeyValueStore> kv_store_;  // outlives the client: plugins call it later too
};

// Builds PJRT_ExecuteOptions for a single-host, single-task run: every multi-task field zero.
PJRT_ExecuteOptions MakeExecuteOptions(const std::vector<int64_t>& non_donatable);

}  // namespace tlaloc::pjrt
