// One interface for every place a program runs: Tlaloc's interpreter in process, or any PJRT
// plugin (pjrt/pjrt_backend.h). Tests run the same program on several backends and compare;
// the interpreter is the oracle.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/ir/collectives.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

struct DeviceInfo {
  int id = 0;
  std::string kind;  // "cpu", a GPU model, "TPU v6 lite", ...
  int process = 0;   // the rank whose process holds it (ProcessWorld; 0 in a world of one)
};

// A tensor resident on one device of a backend.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual const TensorType& type() const = 0;
  virtual int device() const = 0;
  // True once the buffer was donated to an execution (its contents are gone).
  virtual bool is_deleted() const = 0;
  // Where the contents live in host memory when the backend keeps them there (the
  // interpreter), else null: lets callers check that donation reused a buffer in place.
  virtual const void* host_data() const { return nullptr; }
};

// A compiled entry function.
class CompiledProgram {
 public:
  virtual ~CompiledProgram() = default;
  virtual const std::vector<Type>& argument_types() const = 0;
  virtual const std::vector<Type>& result_types() const = 0;
};

// Memory a compiled program needs, as PJRT's compiled memory statistics report it.
struct ProgramMemoryStats {
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t temp_bytes = 0;
  int64_t alias_bytes = 0;  // output bytes that reuse a donated argument
  // The compiler's own peak where it reports one (XLA's peak_memory_in_bytes), else 0.
  int64_t reported_peak_bytes = 0;
  // What the process takes beyond the live tensors (host backends): freed blocks the buffer
  // cache may keep during the run and the allocator's own overhead.
  int64_t overhead_bytes = 0;
};

// One argument of an execution. A donated buffer may be updated in place or freed; it is
// deleted afterwards either way.
struct ExecuteArg {
  DeviceBuffer* buffer = nullptr;
  bool donate = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "interp" or "pjrt:<platform>".
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;

  // Compiles `entry` of `module` ("" = the module's entry function).
  virtual StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                             const std::string& entry = "") = 0;
  virtual StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& literal,
                                                           int device = 0) = 0;
  // Like ToDevice for a literal the caller gives up: a host-memory backend keeps its storage
  // instead of copying it (weights mapped from a checkpoint stay mapped). The caller must not
  // write into that storage afterwards.
  virtual StatusOr<std::unique_ptr<DeviceBuffer>> Adopt(Literal literal, int device = 0) {
    return ToDevice(literal, device);
  }
  virtual StatusOr<Literal> ToHost(const DeviceBuffer& buffer) = 0;
  // A hint that programs will multiply by the int8 matrix q with its f16 block scales in the
  // q8_0 form (tlaloc.int8_linear, or an expert stack's ragged product): a backend that lays such
  // weights out for its kernels (the interpreter's repacked copy) may do it now, at load, rather
  // than inside the first request. Nothing changes but when that work is done.
  virtual void PrepareInt8Weight(const DeviceBuffer& q, const DeviceBuffer& scale) {
    (void)q, (void)scale;
  }
  virtual StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& program, const std::vector<ExecuteArg>& args) = 0;
  // Compiled memory statistics where the backend knows them.
  virtual StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram& program) = 0;
  // Bytes a new allocation on `device` can still get (host backends: what this process can
  // take; PJRT: the device's limit minus its use), or Unimplemented where nobody reports it.
  virtual StatusOr<int64_t> AvailableDeviceMemory(int device) {
    return Unimplemented("backend " + name() + " does not report device " + std::to_string(device) +
                         "'s memory");
  }

  // Uploads, executes without donation and downloads: the common test path.
  StatusOr<std::vector<Literal>> Run(CompiledProgram& program, const std::vector<Literal>& args);

  // ---- Several devices (docs/SHARDING.md) ----
  // Every device of the run, those of other processes included (their buffers live there).
  int num_devices() const { return static_cast<int>(devices().size()); }
  // The processes the devices span; a world of one unless launched by mpirun.
  virtual ProcessWorld& world() const { return SingleProcessWorld(); }
  // Whether this process holds `device` (PJRT's "addressable"): buffers and results exist
  // here only for those.
  bool is_addressable(int device) const;
  // Compiles `entry` for a grid of replicas x partitions; process (r, p) runs on device
  // r * num_partitions + p. A 1 x 1 grid is Compile.
  virtual StatusOr<std::unique_ptr<CompiledProgram>> CompileForDevices(
      std::shared_ptr<const Module> module, const ProcessGrid& grid, const std::string& entry = "");
  // Runs a program compiled for N devices: args[d] on device d, each argument resident there.
  // Returns each device's results, resident on it. One list is Execute. Across processes,
  // args[d] of a device this process does not hold is empty and so are its results.
  virtual StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> ExecuteOnDevices(
      CompiledProgram& program, const std::vector<std::vector<ExecuteArg>>& args);
  // Each device's peak live bytes in the last execution of `program` (empty where the backend
  // does not measure them; the interpreter does).
  virtual std::vector<int64_t> LastPeakLiveBytes(const CompiledProgram&) const { return {}; }
  // Uploads args[d] to device d, executes without donation and downloads.
  StatusOr<std::vector<std::vector<Literal>>> RunOnDevices(
      CompiledProgram& program, const std::vector<std::vector<Literal>>& args);
};

// The in-process reference interpreter as a backend. `options` carry custom_call handlers
// (e.g. the cpu kernels kernelize installs). Its devices: TLALOC_CPU_DEVICES (default 1); an
// invalid value makes Compile fail naming the variable.
std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options = {});
// The same with `num_devices` devices (>= 1), each a thread of this process.
std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options, int num_devices);
// The same over every process of `world`: `local_devices` each, world.size() x local_devices in
// all, rank r holding devices [r * local_devices, (r + 1) * local_devices). A program for
// several devices must span all of them; collectives cross processes (multi_device.h).
std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options, int local_devices,
                                                ProcessWorld& world);

}  // namespace tlaloc
