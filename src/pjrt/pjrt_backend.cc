#include "tlaloc/pjrt/pjrt_backend.h"

#include <algorithm>
#include <cstdlib>

#include "tlaloc/pjrt/program_text.h"
#include "tlaloc/runtime/open_backend.h"

namespace tlaloc::pjrt {
namespace {

class PjrtDeviceBuffer : public DeviceBuffer {
 public:
  explicit PjrtDeviceBuffer(PjrtBuffer b)
      : type_(b.type()), buffer_(std::make_unique<PjrtBuffer>(std::move(b))) {}
  const TensorType& type() const override { return type_; }
  int device() const override { return buffer_ ? buffer_->device_index() : 0; }
  bool is_deleted() const override { return !buffer_ || buffer_->IsDeleted(); }
  const PjrtBuffer* buffer() const { return buffer_.get(); }
  // Drops the PJRT buffer (a donated argument's handle is destroyed after the run).
  void Release() { buffer_.reset(); }

 private:
  TensorType type_;
  std::unique_ptr<PjrtBuffer> buffer_;
};

class PjrtProgram : public CompiledProgram {
 public:
  PjrtProgram(std::unique_ptr<PjrtExecutable> exe, std::vector<Type> args,
              std::vector<Type> results, std::vector<bool> aliased)
      : exe_(std::move(exe)),
        args_(std::move(args)),
        results_(std::move(results)),
        aliased_(std::move(aliased)) {}
  const std::vector<Type>& argument_types() const override { return args_; }
  const std::vector<Type>& result_types() const override { return results_; }
  PjrtExecutable& exe() { return *exe_; }
  const std::vector<bool>& aliased() const { return aliased_; }

 private:
  std::unique_ptr<PjrtExecutable> exe_;
  std::vector<Type> args_, results_;
  std::vector<bool> aliased_;  // argument i carries tf.aliasing_output
};

class PjrtBackendImpl : public Backend {
 public:
  PjrtBackendImpl(std::unique_ptr<PjrtSession> s, CompileOptions o)
      : session_(std::move(s)), options_(std::move(o)) {
    for (const auto& [key, value] : session_->attributes())
      is_xla_ = is_xla_ || key == "xla_version";
  }

  std::string name() const override { return "pjrt:" + session_->platform_name(); }
  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (const auto& d : session_->devices()) out.push_back({d.id, d.kind});
    return out;
  }

  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry) override {
    return CompileWith(*module, entry, options_);
  }

  // A per-device program (explicit collectives, the interpreter's lowering) compiled for
  // replicas x partitions with this client's devices assigned in order, replica-major: the
  // plugin runs it as it is (no SPMD partitioning), device d taking argument list d.
  StatusOr<std::unique_ptr<CompiledProgram>> CompileForDevices(std::shared_ptr<const Module> module,
                                                               const ProcessGrid& grid,
                                                               const std::string& entry) override {
    if (grid.num_processes() == 1) return Compile(std::move(module), entry);
    const std::vector<PjrtSession::Device>& devices = session_->devices();
    if (grid.num_processes() > static_cast<int64_t>(devices.size()))
      return InvalidArgument("a program for " + std::to_string(grid.num_replicas) +
                             " replica(s) x " + std::to_string(grid.num_partitions) +
                             " partition(s) needs " + std::to_string(grid.num_processes()) +
                             " devices; " + name() + " has " + std::to_string(devices.size()) +
                             " (XLA:CPU: --xla_force_host_platform_device_count; Tlaloc's plugin: "
                             "TLALOC_CPU_DEVICES)");
    CompileOptions options = options_;
    options.num_replicas = grid.num_replicas;
    options.num_partitions = grid.num_partitions;
    // XLA refuses num_partitions > 1 without SPMD partitioning; the program is already per
    // device, so its arguments and results are marked manual and the partitioner leaves it be
    // (Tlaloc's plugin ignores both).
    options.use_spmd_partitioning = grid.num_partitions > 1;
    options.device_assignment.assign(grid.num_replicas, {});
    for (int64_t r = 0; r < grid.num_replicas; ++r)
      for (int64_t p = 0; p < grid.num_partitions; ++p)
        options.device_assignment[r].push_back(devices[grid.DeviceOf(r, p)].id);
    return CompileWith(*module, entry, options);
  }

  StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> ExecuteOnDevices(
      CompiledProgram& program, const std::vector<std::vector<ExecuteArg>>& args) override {
    if (args.size() == 1) return Backend::ExecuteOnDevices(program, args);
    auto& p = static_cast<PjrtProgram&>(program);
    std::vector<std::vector<const PjrtBuffer*>> buffers(args.size());
    ExecuteRequest request;
    for (size_t d = 0; d < args.size(); ++d) {
      for (size_t i = 0; i < args[d].size(); ++i) {
        auto* b = static_cast<PjrtDeviceBuffer*>(args[d][i].buffer);
        if (b == nullptr || b->buffer() == nullptr)
          return InvalidArgument("argument " + std::to_string(i) + " of device " +
                                 std::to_string(d) + " is null, donated or deleted");
        if (b->device() != static_cast<int>(d))
          return InvalidArgument("argument " + std::to_string(i) + " of device " +
                                 std::to_string(d) + " lives on device " +
                                 std::to_string(b->device()));
        buffers[d].push_back(b->buffer());
      }
    }
    // PJRT takes one donation list for all devices: an argument is donated only where every
    // device gives it up.
    for (size_t i = 0; i < p.aliased().size(); ++i) {
      if (!p.aliased()[i]) continue;
      bool donated_everywhere = true;
      for (const auto& device_args : args)
        donated_everywhere = donated_everywhere && i < device_args.size() && device_args[i].donate;
      if (!donated_everywhere)
        request.non_donatable_input_indices.push_back(static_cast<int64_t>(i));
    }
    TL_ASSIGN_OR_RETURN(auto outs, session_->ExecuteOnDevices(p.exe(), buffers, request));
    for (const auto& device_args : args)
      for (const ExecuteArg& a : device_args)
        if (a.donate) static_cast<PjrtDeviceBuffer*>(a.buffer)->Release();
    std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> result(outs.size());
    for (size_t d = 0; d < outs.size(); ++d)
      for (PjrtBuffer& b : outs[d])
        result[d].push_back(std::make_unique<PjrtDeviceBuffer>(std::move(b)));
    return result;
  }

  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& literal, int device) override {
    TL_ASSIGN_OR_RETURN(PjrtBuffer b, session_->ToDevice(literal, device));
    return std::unique_ptr<DeviceBuffer>(new PjrtDeviceBuffer(std::move(b)));
  }

  StatusOr<Literal> ToHost(const DeviceBuffer& buffer) override {
    const auto& b = static_cast<const PjrtDeviceBuffer&>(buffer);
    if (b.buffer() == nullptr) return FailedPrecondition("buffer was donated or deleted");
    return session_->ToHost(*b.buffer());
  }

  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& program, const std::vector<ExecuteArg>& args) override {
    auto& p = static_cast<PjrtProgram&>(program);
    std::vector<const PjrtBuffer*> buffers;
    ExecuteRequest request;
    for (size_t i = 0; i < args.size(); ++i) {
      auto* b = static_cast<PjrtDeviceBuffer*>(args[i].buffer);
      if (b == nullptr || b->buffer() == nullptr) {
        return InvalidArgument("argument " + std::to_string(i) + " is null, donated or deleted");
      }
      buffers.push_back(b->buffer());
      // The program decides what may alias; a caller keeping an argument vetoes it.
      if (!args[i].donate && i < p.aliased().size() && p.aliased()[i]) {
        request.non_donatable_input_indices.push_back(static_cast<int64_t>(i));
      }
    }
    TL_ASSIGN_OR_RETURN(auto outs, session_->Execute(p.exe(), buffers, request));
    for (const ExecuteArg& a : args) {
      if (a.donate) static_cast<PjrtDeviceBuffer*>(a.buffer)->Release();
    }
    std::vector<std::unique_ptr<DeviceBuffer>> result;
    for (PjrtBuffer& b : outs) result.push_back(std::make_unique<PjrtDeviceBuffer>(std::move(b)));
    return result;
  }

  StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram& program) override {
    TL_ASSIGN_OR_RETURN(auto s, static_cast<PjrtProgram&>(program).exe().MemoryStats());
    ProgramMemoryStats stats;
    stats.argument_bytes = s.argument_bytes;
    stats.output_bytes = s.output_bytes;
    stats.temp_bytes = s.temp_bytes;
    stats.alias_bytes = s.alias_bytes;
    stats.reported_peak_bytes = s.peak_bytes.value_or(0);
    return stats;
  }

  // The device's limit less what is in use, from PJRT_Device_MemoryStats; Unimplemented (the
  // budget check is then skipped with a note) where the plugin reports no limit.
  StatusOr<int64_t> AvailableDeviceMemory(int device) override {
    TL_ASSIGN_OR_RETURN(PjrtSession::DeviceMemory memory, session_->DeviceMemoryStats(device));
    if (!memory.bytes_limit)
      return Unimplemented("PJRT plugin " + session_->api().origin() + " reports no bytes_limit " +
                           "for device " + std::to_string(device));
    return std::max<int64_t>(*memory.bytes_limit - memory.bytes_in_use, 0);
  }

 private:
  StatusOr<std::unique_ptr<CompiledProgram>> CompileWith(const Module& module,
                                                         const std::string& entry,
                                                         const CompileOptions& options) {
    const Function* f = entry.empty() ? module.Entry() : module.Find(entry);
    if (f == nullptr) {
      return NotFound("module " + module.name() + " has no function '" +
                      (entry.empty() ? std::string("<entry>") : entry) + "'");
    }
    if (f != module.Entry()) {
      return InvalidArgument("PJRT compiles a module's entry function; '" + entry +
                             "' is not the entry of module " + module.name());
    }
    std::vector<bool> aliased;
    for (int i = 0; i < f->num_arguments(); ++i) {
      aliased.push_back(f->arg_attrs(i).count("tf.aliasing_output") > 0);
    }
    ProgramTextOptions text;
    text.manual_shardings = options.use_spmd_partitioning && !options.use_shardy_partitioner &&
                            options.num_partitions > 1;
    // XLA's GSPMD partitioner aborts the process on a ragged-dot in a partitioned program
    // ("RaggedDot is only supported with Shardy", a CHECK): expanded up front there.
    text.expand_ragged_dot = expand_ragged_dot_ || (is_xla_ && text.manual_shardings);
    // A TPU session sends the TPU form: f32 dots at HIGHEST (program_text.h).
    text.f32_dots_highest = session_->platform_name() == "tpu";
    TL_ASSIGN_OR_RETURN(std::string printed, PrintProgramText(module, *f, text));
    auto exe = session_->Compile(printed, options);
    // A plugin without a grouped matmul (XLA:CPU: "HLO opcode `ragged-dot` is not supported")
    // gets the dense form of chlo.ragged_dot, from then on for every program of the session.
    if (!exe.ok() && !expand_ragged_dot_ &&
        exe.status().message().find("ragged-dot") != std::string::npos) {
      expand_ragged_dot_ = text.expand_ragged_dot = true;
      TL_ASSIGN_OR_RETURN(printed, PrintProgramText(module, *f, text));
      exe = session_->Compile(printed, options);
    }
    if (!exe.ok()) return exe.status();
    return std::unique_ptr<CompiledProgram>(new PjrtProgram(std::move(*exe), f->argument_types(),
                                                            f->result_types(), std::move(aliased)));
  }

  std::unique_ptr<PjrtSession> session_;
  CompileOptions options_;
  bool expand_ragged_dot_ = false;  // the plugin refused chlo.ragged_dot once
  bool is_xla_ = false;             // the plugin reports an xla_version (XLA:CPU, CUDA, TPU)
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakePjrtBackend(const SessionOptions& options,
                                                   const CompileOptions& compile_options) {
  TL_ASSIGN_OR_RETURN(auto session, PjrtSession::Open(options));
  return MakePjrtBackend(std::move(session), compile_options);
}

std::unique_ptr<Backend> MakePjrtBackend(std::unique_ptr<PjrtSession> session,
                                         const CompileOptions& compile_options) {
  return std::make_unique<PjrtBackendImpl>(std::move(session), compile_options);
}

}  // namespace tlaloc::pjrt

namespace tlaloc {

namespace {

// runtime::OpenBackend's way to a plugin (runtime sits below pjrt; open_backend.h).
StatusOr<std::unique_ptr<Backend>> OpenPjrt(const PjrtTarget& target, int cpu_devices) {
  pjrt::SessionOptions options;
  options.target = target;
  if (cpu_devices > 0 && pjrt::OptionFamilyOf(target) == pjrt::OptionFamily::kCpu)
    options.cpu_device_count = cpu_devices;
  return pjrt::MakePjrtBackend(options);
}

}  // namespace

void pjrt::RegisterBackendOpener() { runtime::RegisterPjrtOpener(&OpenPjrt); }

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendChoice& choice) {
  return runtime::OpenLocalBackend(choice);
}

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendChoice& choice, int devices) {
  return runtime::OpenLocalBackend(choice, devices);
}

}  // namespace tlaloc
