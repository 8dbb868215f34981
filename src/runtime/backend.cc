#include "tlaloc/runtime/backend.h"

#include "tlaloc/interp/interpreter.h"

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

namespace {

class InterpBuffer : public DeviceBuffer {
 public:
  explicit InterpBuffer(Literal l) : literal_(std::move(l)) {}
  const TensorType& type() const override { return literal_.type(); }
  int device() const override { return 0; }
  bool is_deleted() const override { return deleted_; }
  const void* host_data() const override { return deleted_ ? nullptr : literal_.data(); }
  Literal& literal() { return literal_; }
  void MarkDeleted() {
    literal_ = Literal();
    deleted_ = true;
  }

 private:
  Literal literal_;
  bool deleted_ = false;
};

class InterpProgram : public CompiledProgram {
 public:
  explicit InterpProgram(std::unique_ptr<Executable> exe) : exe_(std::move(exe)) {
    args_ = exe_->function().argument_types();
    results_ = exe_->function().result_types();
  }
  const std::vector<Type>& argument_types() const override { return args_; }
  const std::vector<Type>& result_types() const override { return results_; }
  const Executable& executable() const { return *exe_; }

 private:
  std::unique_ptr<Executable> exe_;
  std::vector<Type> args_, results_;
};

class InterpreterBackend : public Backend {
 public:
  explicit InterpreterBackend(InterpreterOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "interp"; }
  std::vector<DeviceInfo> devices() const override { return {DeviceInfo{0, "interpreter"}}; }

  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry) override {
    TL_ASSIGN_OR_RETURN(auto exe, Executable::Prepare(std::move(module), entry, options_));
    return std::unique_ptr<CompiledProgram>(new InterpProgram(std::move(exe)));
  }

  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& literal, int device) override {
    if (device != 0) {
      return InvalidArgument("interpreter backend has one device (0); got device " +
                             std::to_string(device));
    }
    return std::unique_ptr<DeviceBuffer>(new InterpBuffer(literal.Clone()));
  }

  StatusOr<std::unique_ptr<DeviceBuffer>> Adopt(Literal literal, int device) override {
    if (device != 0) {
      return InvalidArgument("interpreter backend has one device (0); got device " +
                             std::to_string(device));
    }
    return std::unique_ptr<DeviceBuffer>(new InterpBuffer(std::move(literal)));
  }

  StatusOr<Literal> ToHost(const DeviceBuffer& buffer) override {
    if (buffer.is_deleted()) return FailedPrecondition("buffer was donated or deleted");
    return const_cast<InterpBuffer&>(static_cast<const InterpBuffer&>(buffer)).literal().Clone();
  }

  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& program, const std::vector<ExecuteArg>& args) override {
    auto& p = static_cast<InterpProgram&>(program);
    std::vector<Literal> inputs;
    for (size_t i = 0; i < args.size(); ++i) {
      auto* b = static_cast<InterpBuffer*>(args[i].buffer);
      if (b == nullptr || b->is_deleted()) {
        return InvalidArgument("argument " + std::to_string(i) + " is null, donated or deleted");
      }
      // A donated literal moves in with unique storage, so the interpreter may reuse it in
      // place; a kept one is shared, which forbids that.
      inputs.push_back(args[i].donate ? std::move(b->literal()) : b->literal());
    }
    for (const ExecuteArg& a : args) {
      if (a.donate) static_cast<InterpBuffer*>(a.buffer)->MarkDeleted();
    }
    TL_ASSIGN_OR_RETURN(auto outs, p.executable().Execute(std::move(inputs)));
    std::vector<std::unique_ptr<DeviceBuffer>> result;
    for (Literal& l : outs) result.push_back(std::make_unique<InterpBuffer>(std::move(l)));
    return result;
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
    return stats;
  }

 private:
  InterpreterOptions options_;
};

}  // namespace

std::unique_ptr<Backend> MakeInterpreterBackend(InterpreterOptions options) {
  return std::make_unique<InterpreterBackend>(std::move(options));
}

}  // namespace tlaloc
