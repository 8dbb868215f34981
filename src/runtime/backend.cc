#include "tlaloc/runtime/backend.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/interp/multi_device.h"
#include "tlaloc/ir/memory_plan.h"
#include "tlaloc/runtime/memory_budget.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc {

StatusOr<std::vector<Literal>> Backend::Run(CompiledProgram& program,
                                            const std::vector<Literal>& args) {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<ExecuteArg> exec_args;
  for (const Literal& arg : args) {
    TL_ASSIGN_OR_RETURN(auto buffer, ToDevice(arg));
    exec_args.push_back({buffer.get(), false});
    buffers.push_back(std::move(buffer));
  }
  TL_ASSIGN_OR_RETURN(auto outputs, Execute(program, exec_args));
  std::vector<Literal> results;
  for (auto& out : outputs) {
    TL_ASSIGN_OR_RETURN(Literal l, ToHost(*out));
    results.push_back(std::move(l));
  }
  return results;
}

bool Backend::is_addressable(int device) const {
  const std::vector<DeviceInfo> all = devices();
  return device >= 0 && device < static_cast<int>(all.size()) &&
         all[device].process == world().rank();
}

StatusOr<std::unique_ptr<CompiledProgram>> Backend::CompileForDevices(
    std::shared_ptr<const Module> module, const ProcessGrid& grid, const std::string& entry) {
  if (grid.num_processes() == 1) return Compile(std::move(module), entry);
  return Unimplemented("backend " + name() + " does not compile for several devices");
}

StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> Backend::ExecuteOnDevices(
    CompiledProgram& program, const std::vector<std::vector<ExecuteArg>>& args) {
  if (args.size() != 1)
    return Unimplemented("backend " + name() + " does not execute on several devices");
  TL_ASSIGN_OR_RETURN(auto outs, Execute(program, args[0]));
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> result;
  result.push_back(std::move(outs));
  return result;
}

StatusOr<std::vector<std::vector<Literal>>> Backend::RunOnDevices(
    CompiledProgram& program, const std::vector<std::vector<Literal>>& args) {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<std::vector<ExecuteArg>> exec_args(args.size());
  for (size_t d = 0; d < args.size(); ++d) {
    if (args.size() > 1 && !is_addressable(static_cast<int>(d))) continue;  // another rank's
    for (const Literal& arg : args[d]) {
      TL_ASSIGN_OR_RETURN(auto buffer, ToDevice(arg, static_cast<int>(d)));
      exec_args[d].push_back({buffer.get(), false});
      buffers.push_back(std::move(buffer));
    }
  }
  TL_ASSIGN_OR_RETURN(auto outputs, ExecuteOnDevices(program, exec_args));
  std::vector<std::vector<Literal>> results(outputs.size());
  for (size_t d = 0; d < outputs.size(); ++d) {
    for (auto& out : outputs[d]) {
      TL_ASSIGN_OR_RETURN(Literal l, ToHost(*out));
      results[d].push_back(std::move(l));
    }
  }
  return results;
}

namespace {

class InterpBuffer : public DeviceBuffer {
 public:
  explicit InterpBuffer(Literal l, int device = 0) : literal_(std::move(l)), device_(device) {}
  const TensorType& type() const override { return literal_.type(); }
  int device() const override { return device_; }
  bool is_deleted() const override { return deleted_; }
  const void* host_data() const override { return deleted_ ? nullptr : literal_.data(); }
  Literal& literal() { return literal_; }
  void MarkDeleted() {
    literal_ = Literal();
    deleted_ = true;
  }

 private:
  Literal literal_;
  int device_ = 0;
  bool deleted_ = false;
};

class InterpProgram : public CompiledProgram {
 public:
  explicit InterpProgram(std::unique_ptr<Executable> exe, ProcessGrid grid = {})
      : exe_(std::move(exe)), grid_(grid) {
    args_ = exe_->function().argument_types();
    results_ = exe_->function().result_types();
  }
  const std::vector<Type>& argument_types() const override { return args_; }
  const std::vector<Type>& result_types() const override { return results_; }
  const Executable& executable() const { return *exe_; }
  const ProcessGrid& grid() const { return grid_; }
  // Per device, the last execution's statistics (runs of one program do not overlap).
  mutable std::vector<ExecutionStats> last_stats;

 private:
  std::unique_ptr<Executable> exe_;
  ProcessGrid grid_;
  std::vector<Type> args_, results_;
};

class InterpreterBackend : public Backend {
 public:
  InterpreterBackend(InterpreterOptions options, StatusOr<int> local_devices,
                     ProcessWorld& world = SingleProcessWorld())
      : options_(std::move(options)),
        world_(world),
        local_devices_(local_devices.ok() ? *local_devices : 1),
        num_devices_(local_devices_ * world.size()),
        devices_status_(local_devices.status()) {}
  std::string name() const override { return "interp"; }
  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (int i = 0; i < num_devices_; ++i)
      out.push_back(DeviceInfo{i, "interpreter", i / local_devices_});
    return out;
  }
  ProcessWorld& world() const override { return world_; }

  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry) override {
    TL_RETURN_IF_ERROR(devices_status_);
    TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(std::move(module), entry, options_));
    return std::unique_ptr<CompiledProgram>(new InterpProgram(std::move(exe)));
  }

  StatusOr<std::unique_ptr<CompiledProgram>> CompileForDevices(std::shared_ptr<const Module> module,
                                                               const ProcessGrid& grid,
                                                               const std::string& entry) override {
    TL_RETURN_IF_ERROR(devices_status_);
    if (grid.num_replicas < 1 || grid.num_partitions < 1 || grid.num_processes() > num_devices_)
      return InvalidArgument("a grid of " + std::to_string(grid.num_replicas) + " replica(s) x " +
                             std::to_string(grid.num_partitions) +
                             " partition(s) does not fit the interpreter's " +
                             std::to_string(num_devices_) + " device(s) (TLALOC_CPU_DEVICES)");
    if (world_.size() > 1 && grid.num_processes() > 1 && grid.num_processes() != num_devices_)
      return InvalidArgument("a grid of " + std::to_string(grid.num_processes()) +
                             " device(s) across " + std::to_string(world_.size()) +
                             " processes must use all " + std::to_string(num_devices_) +
                             " devices (" + std::to_string(local_devices_) + " per process)");
    TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(std::move(module), entry, options_));
    return std::unique_ptr<CompiledProgram>(new InterpProgram(std::move(exe), grid));
  }

  Status CheckDevice(int device) const {
    if (device < 0 || device >= num_devices_)
      return InvalidArgument("interpreter backend has " + std::to_string(num_devices_) +
                             " device(s); got device " + std::to_string(device));
    if (device / local_devices_ != world_.rank())
      return InvalidArgument("device " + std::to_string(device) + " belongs to rank " +
                             std::to_string(device / local_devices_) + ", not this rank " +
                             std::to_string(world_.rank()));
    return OkStatus();
  }

  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& literal, int device) override {
    TL_RETURN_IF_ERROR(CheckDevice(device));
    return std::unique_ptr<DeviceBuffer>(new InterpBuffer(literal.Clone(), device));
  }

  StatusOr<std::unique_ptr<DeviceBuffer>> Adopt(Literal literal, int device) override {
    TL_RETURN_IF_ERROR(CheckDevice(device));
    return std::unique_ptr<DeviceBuffer>(new InterpBuffer(std::move(literal), device));
  }

  void PrepareInt8Weight(const DeviceBuffer& q, const DeviceBuffer& scale) override {
    if (q.is_deleted() || scale.is_deleted()) return;
    PrepareQ8Weight(const_cast<InterpBuffer&>(static_cast<const InterpBuffer&>(q)).literal(),
                    const_cast<InterpBuffer&>(static_cast<const InterpBuffer&>(scale)).literal());
  }

  StatusOr<Literal> ToHost(const DeviceBuffer& buffer) override {
    if (buffer.is_deleted()) return FailedPrecondition("buffer was donated or deleted");
    return const_cast<InterpBuffer&>(static_cast<const InterpBuffer&>(buffer)).literal().Clone();
  }

  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& program, const std::vector<ExecuteArg>& args) override {
    auto& p = static_cast<InterpProgram&>(program);
    TL_ASSIGN_OR_RETURN(std::vector<Literal> inputs, TakeInputs(args, -1));
    p.last_stats.assign(1, ExecutionStats{});
    TL_ASSIGN_OR_RETURN(auto outs, p.executable().Execute(std::move(inputs), &p.last_stats[0]));
    std::vector<std::unique_ptr<DeviceBuffer>> result;
    for (Literal& l : outs) result.push_back(std::make_unique<InterpBuffer>(std::move(l)));
    return result;
  }

  StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> ExecuteOnDevices(
      CompiledProgram& program, const std::vector<std::vector<ExecuteArg>>& args) override {
    auto& p = static_cast<InterpProgram&>(program);
    if (p.grid().num_processes() == 1 && args.size() == 1)
      return Backend::ExecuteOnDevices(program, args);
    if (static_cast<int64_t>(args.size()) != p.grid().num_processes())
      return InvalidArgument("the program was compiled for " +
                             std::to_string(p.grid().num_processes()) + " device(s), got " +
                             std::to_string(args.size()) + " argument list(s)");
    for (size_t d = 0; d < args.size(); ++d) {
      if (!is_addressable(static_cast<int>(d)) && !args[d].empty())
        return InvalidArgument("device " + std::to_string(d) + " belongs to another process; " +
                               "its argument list must be empty here");
      for (size_t i = 0; i < args[d].size(); ++i)
        if (args[d][i].buffer && args[d][i].buffer->device() != static_cast<int>(d))
          return InvalidArgument("argument " + std::to_string(i) + " of device " +
                                 std::to_string(d) + " lives on device " +
                                 std::to_string(args[d][i].buffer->device()));
    }
    std::vector<std::vector<Literal>> inputs;
    for (size_t d = 0; d < args.size(); ++d) {
      TL_ASSIGN_OR_RETURN(auto in, TakeInputs(args[d], static_cast<int>(d)));
      inputs.push_back(std::move(in));
    }
    MultiDeviceOptions md;
    md.world = &world_;
    TL_ASSIGN_OR_RETURN(auto outs, tlaloc::ExecuteOnDevices(p.executable(), std::move(inputs),
                                                            p.grid(), md, &p.last_stats));
    std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> result(outs.size());
    for (size_t d = 0; d < outs.size(); ++d)
      for (Literal& l : outs[d])
        result[d].push_back(std::make_unique<InterpBuffer>(std::move(l), static_cast<int>(d)));
    return result;
  }

  // The literals of one argument list; donated buffers are marked deleted. `device` < 0: any.
  StatusOr<std::vector<Literal>> TakeInputs(const std::vector<ExecuteArg>& args, int device) {
    std::vector<Literal> inputs;
    for (size_t i = 0; i < args.size(); ++i) {
      auto* b = static_cast<InterpBuffer*>(args[i].buffer);
      if (b == nullptr || b->is_deleted()) {
        return InvalidArgument("argument " + std::to_string(i) +
                               (device >= 0 ? " of device " + std::to_string(device) : "") +
                               " is null, donated or deleted");
      }
      // A donated literal moves in with unique storage, so the interpreter may reuse it in
      // place; a kept one is shared, which forbids that.
      inputs.push_back(args[i].donate ? std::move(b->literal()) : b->literal());
    }
    for (const ExecuteArg& a : args) {
      if (a.donate) static_cast<InterpBuffer*>(a.buffer)->MarkDeleted();
    }
    return inputs;
  }

  std::vector<int64_t> LastPeakLiveBytes(const CompiledProgram& program) const override {
    std::vector<int64_t> out;
    for (const ExecutionStats& s : static_cast<const InterpProgram&>(program).last_stats)
      out.push_back(s.peak_live_bytes);
    return out;
  }

  StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram& program) override {
    const Function& f = static_cast<InterpProgram&>(program).executable().function();
    ProgramMemoryStats stats;
    for (const Type& t : f.argument_types()) {
      if (t.is_tensor()) stats.argument_bytes += t.tensor.byte_size();
    }
    for (const Type& t : f.result_types()) {
      if (t.is_tensor()) stats.output_bytes += t.tensor.byte_size();
    }
    // The plan's temporaries replayed on sizes (an upper bound of the run's peak above its
    // arguments and outputs), plus the moment an op's aliased output is allocated beside the
    // donated argument it then replaces; and the donated arguments the results are written into.
    stats.temp_bytes =
        TemporaryPeakBytes(static_cast<InterpProgram&>(program).executable().module(), f) +
        LargestAliasedResultBytes(f);
    stats.alias_bytes = AliasedArgumentBytes(f);
    stats.overhead_bytes = HostOverheadBytes(stats.argument_bytes + stats.output_bytes +
                                             stats.temp_bytes - stats.alias_bytes);
    return stats;
  }

  // Host memory: what this process can still take, shared evenly by its device threads (each
  // runs its own copy of a program compiled for several devices).
  StatusOr<int64_t> AvailableDeviceMemory(int device) override {
    TL_RETURN_IF_ERROR(CheckDevice(device));
    const std::optional<uint64_t> bytes = AvailableMemoryBytes();
    if (!bytes) return Unimplemented("the host's available memory cannot be read here");
    return static_cast<int64_t>(std::min<uint64_t>(*bytes / local_devices_, INT64_MAX));
  }

 private:
  InterpreterOptions options_;
  ProcessWorld& world_;
  int local_devices_ = 1;
  int num_devices_ = 1;
  Status devices_status_;  // an invalid TLALOC_CPU_DEVICES, reported by Compile
};

}  // namespace

std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options) {
  return std::make_unique<InterpreterBackend>(std::move(options), CpuDevicesFromEnvironment());
}

std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options, int num_devices) {
  StatusOr<int> n =
      num_devices >= 1
          ? StatusOr<int>(num_devices)
          : StatusOr<int>(InvalidArgument("the interpreter needs at least one device, got " +
                                          std::to_string(num_devices)));
  return std::make_unique<InterpreterBackend>(std::move(options), std::move(n));
}

std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options, int local_devices,
                                                ProcessWorld& world) {
  StatusOr<int> n =
      local_devices >= 1
          ? StatusOr<int>(local_devices)
          : StatusOr<int>(InvalidArgument("the interpreter needs at least one device, got " +
                                          std::to_string(local_devices)));
  return std::make_unique<InterpreterBackend>(std::move(options), std::move(n), world);
}

}  // namespace tlaloc
