// Compiling (parsing StableHLO text into Tlaloc IR and preparing the interpreter) and executing
// in Tlaloc's PJRT plugin.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "plugin/plugin_internal.h"
#include "tlaloc/ir/memory_plan.h"
#include "tlaloc/pjrt/api.h"
#include "tlaloc/stablehlo/conformance.h"
#include "tlaloc/stablehlo/parser.h"

struct PJRT_Executable {
  std::shared_ptr<tlaloc::plugin::Compiled> compiled;
};

struct PJRT_LoadedExecutable {
  std::shared_ptr<tlaloc::plugin::Compiled> compiled;
  PJRT_Client* client = nullptr;
  bool deleted = false;
};

namespace tlaloc::plugin {

namespace {

int64_t TensorBytes(const Type& t) { return t.is_tensor() ? t.tensor.byte_size() : 0; }

}  // namespace

void ComputeMemoryStats(const Module& module, const Function& f, Compiled& c) {
  c.argument_bytes = c.output_bytes = c.alias_bytes = c.temp_bytes = 0;
  for (const Type& t : f.argument_types()) c.argument_bytes += TensorBytes(t);
  for (const Type& t : f.result_types()) c.output_bytes += TensorBytes(t);
  // A donated argument and the output it becomes are one buffer: PJRT reports those bytes as
  // aliased, so argument + output + temporaries - alias is what the run needs at most.
  for (size_t i = 0; i < c.aliasing.size(); ++i) {
    if (c.aliasing[i] >= 0) c.alias_bytes += TensorBytes(f.argument_types()[i]);
  }
  c.temp_bytes = TemporaryPeakBytes(module, f);
}

namespace {

// Reads the two fields the plugin uses from a serialized CompileOptionsProto:
// executable_build_options (3) { num_replicas (4), num_partitions (5) }. Hand-decoded so the
// plugin carries no protobuf descriptors that could clash with its host process's.
class WireReader {
 public:
  WireReader(const char* p, size_t n) : p_(reinterpret_cast<const uint8_t*>(p)), end_(p_ + n) {}
  bool done() const { return p_ >= end_; }
  bool Varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      uint8_t b = *p_++;
      v |= uint64_t{b & 0x7Fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Reads one field: its number, wire type, varint value or length-delimited bytes.
  bool Field(uint32_t& number, uint32_t& wire, uint64_t& value, const char*& bytes) {
    uint64_t key;
    if (!Varint(key)) return false;
    number = static_cast<uint32_t>(key >> 3);
    wire = static_cast<uint32_t>(key & 7);
    switch (wire) {
      case 0:
        return Varint(value);
      case 1:
        return Skip(8);
      case 5:
        return Skip(4);
      case 2:
        if (!Varint(value) || value > static_cast<uint64_t>(end_ - p_)) return false;
        bytes = reinterpret_cast<const char*>(p_);
        p_ += value;
        return true;
      default:
        return false;  // groups are not used by this message
    }
  }

 private:
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

Status ReadCompileOptions(const char* data, size_t size, int64_t& replicas, int64_t& partitions) {
  replicas = partitions = 1;
  WireReader outer(data, size);
  while (!outer.done()) {
    uint32_t number, wire;
    uint64_t value = 0;
    const char* bytes = nullptr;
    if (!outer.Field(number, wire, value, bytes)) {
      return InvalidArgument("compile_options: malformed CompileOptionsProto");
    }
    if (number != 3 || wire != 2) continue;
    WireReader inner(bytes, value);
    while (!inner.done()) {
      uint32_t n, w;
      uint64_t v = 0;
      const char* b = nullptr;
      if (!inner.Field(n, w, v, b)) {
        return InvalidArgument("compile_options: malformed executable_build_options");
      }
      if (w == 0 && n == 4 && v > 0) replicas = static_cast<int64_t>(v);
      if (w == 0 && n == 5 && v > 0) partitions = static_cast<int64_t>(v);
    }
  }
  return OkStatus();
}

bool IsMlirBytecode(const char* code, size_t size) {
  return size >= 4 && std::memcmp(code, "ML\xEFR", 4) == 0;
}

Compiled* CompiledOf(PJRT_Executable* e) { return e ? e->compiled.get() : nullptr; }

#define TL_NEED_EXE(fn)                       \
  Compiled* c = CompiledOf(args->executable); \
  TL_PLUGIN_REQUIRE(c != nullptr, INVALID_ARGUMENT, fn ": null executable")

}  // namespace

PJRT_Error* BuildCompiled(const PJRT_Program* program, const char* compile_options,
                          size_t compile_options_size, size_t num_devices, const char* whose,
                          const char* fn, std::shared_ptr<Compiled>& out) {
  TL_PLUGIN_REQUIRE(program != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null program");
  if (PJRT_Error* e = CheckArgs(program, program->struct_size, PJRT_Program_STRUCT_SIZE,
                                (std::string(fn) + " (program)").c_str())) {
    return e;
  }
  std::string format(program->format ? program->format : "", program->format_size);
  TL_PLUGIN_REQUIRE(
      format == "mlir", INVALID_ARGUMENT,
      std::string(fn) + ": program format '" + format +
          "' is not supported; this plugin compiles format \"mlir\" (StableHLO text)");
  TL_PLUGIN_REQUIRE(!IsMlirBytecode(program->code, program->code_size), INVALID_ARGUMENT,
                    std::string(fn) +
                        ": the program is MLIR bytecode; Tlaloc's plugin reads "
                        "MLIR text only (print the module as text)");
  int64_t replicas = 1, partitions = 1;
  Status options = ReadCompileOptions(compile_options, compile_options_size, replicas, partitions);
  if (!options.ok()) return FromStatus(options.WithContext(fn));
  TL_PLUGIN_REQUIRE(replicas * partitions <= static_cast<int64_t>(num_devices), INVALID_ARGUMENT,
                    std::string(fn) + ": " + std::to_string(replicas) + " replica(s) x " +
                        std::to_string(partitions) + " partition(s) do not fit the " + whose + " " +
                        std::to_string(num_devices) + " device(s)");
  auto module = ParseModule(std::string_view(program->code, program->code_size), "<pjrt program>");
  if (!module.ok()) return FromStatus(module.status().WithContext(fn));
  auto c = std::make_shared<Compiled>();
  c->module = std::shared_ptr<const Module>(std::move(*module));
  const Function* f = c->module->Entry();
  TL_PLUGIN_REQUIRE(f != nullptr, INVALID_ARGUMENT,
                    std::string(fn) + ": the module has no main or public function");
  for (const Type& t : f->result_types()) {
    TL_PLUGIN_REQUIRE(t.is_tensor(), UNIMPLEMENTED,
                      std::string(fn) + ": results of type " + t.ToString() +
                          " are not supported (tensors only)");
    c->output_types.push_back(pjrt::ToPjrtBufferType(t.tensor.element_type));
    c->output_ranks.push_back(t.tensor.dims.size());
    c->output_dims.insert(c->output_dims.end(), t.tensor.dims.begin(), t.tensor.dims.end());
  }
  for (int i = 0; i < f->num_arguments(); ++i) {
    auto it = f->arg_attrs(i).find("tf.aliasing_output");
    int64_t out_index = -1;
    if (it != f->arg_attrs(i).end() && it->second.kind() == Attribute::Kind::kInt) {
      out_index = it->second.as_int();
      TL_PLUGIN_REQUIRE(
          out_index >= 0 && out_index < static_cast<int64_t>(f->result_types().size()) &&
              f->result_types()[out_index] == f->argument_types()[i],
          INVALID_ARGUMENT,
          std::string(fn) + ": argument " + std::to_string(i) + " has tf.aliasing_output = " +
              std::to_string(out_index) + ", which is not a result of the same type");
    }
    c->aliasing.push_back(out_index);
  }
  c->num_replicas = replicas;
  c->num_partitions = partitions;
  c->name = c->module->name();
  c->fingerprint = std::to_string(
      std::hash<std::string_view>()(std::string_view(program->code, program->code_size)));
  ComputeMemoryStats(*c->module, *f, *c);
  // StableHLO's self-checking programs call check.expect_*; a failed check fails the run.
  InterpreterOptions interp_options;
  c->checks = std::make_shared<CheckRecorder>();
  AddConformanceChecks(interp_options, c->checks);
  auto exe = Executable::Prepare(c->module, f->name(), std::move(interp_options));
  if (!exe.ok()) return FromStatus(exe.status().WithContext(fn));
  c->executable = std::move(*exe);
  out = std::move(c);
  return nullptr;
}

PJRT_Error* Plugin_Client_Compile(PJRT_Client_Compile_Args* args) {
  static const char* fn = "PJRT_Client_Compile";
  TL_PLUGIN_CHECK(args, PJRT_Client_Compile_Args, fn);
  TL_PLUGIN_REQUIRE(args->client != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null client");
  std::shared_ptr<Compiled> c;
  if (PJRT_Error* e =
          BuildCompiled(args->program, args->compile_options, args->compile_options_size,
                        args->client->device_list.size(), "client's", fn, c)) {
    return e;
  }
  auto* loaded = new PJRT_LoadedExecutable();
  loaded->compiled = std::move(c);
  loaded->client = args->client;
  args->executable = loaded;
  return nullptr;
}

PJRT_Error* Plugin_Compile(PJRT_Compile_Args* args) {
  static const char* fn = "PJRT_Compile";
  TL_PLUGIN_CHECK(args, PJRT_Compile_Args, fn);
  TL_PLUGIN_REQUIRE(args->topology != nullptr, INVALID_ARGUMENT,
                    std::string(fn) + ": null topology");
  std::shared_ptr<Compiled> c;
  if (PJRT_Error* e =
          BuildCompiled(args->program, args->compile_options, args->compile_options_size,
                        args->topology->descriptions.size(), "topology's", fn, c)) {
    return e;
  }
  args->executable = new PJRT_Executable{std::move(c)};
  return nullptr;
}

PJRT_Error* Plugin_Executable_Destroy(PJRT_Executable_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_Destroy_Args, "PJRT_Executable_Destroy");
  delete args->executable;
  return nullptr;
}

PJRT_Error* Plugin_Executable_Name(PJRT_Executable_Name_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_Name_Args, "PJRT_Executable_Name");
  TL_NEED_EXE("PJRT_Executable_Name");
  args->executable_name = c->name.data();
  args->executable_name_size = c->name.size();
  return nullptr;
}

PJRT_Error* Plugin_Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_NumReplicas_Args, "PJRT_Executable_NumReplicas");
  TL_NEED_EXE("PJRT_Executable_NumReplicas");
  args->num_replicas = static_cast<size_t>(c->num_replicas);
  return nullptr;
}

PJRT_Error* Plugin_Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_NumPartitions_Args, "PJRT_Executable_NumPartitions");
  TL_NEED_EXE("PJRT_Executable_NumPartitions");
  args->num_partitions = static_cast<size_t>(c->num_partitions);
  return nullptr;
}

PJRT_Error* Plugin_Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_NumOutputs_Args, "PJRT_Executable_NumOutputs");
  TL_NEED_EXE("PJRT_Executable_NumOutputs");
  args->num_outputs = c->output_types.size();
  return nullptr;
}

PJRT_Error* Plugin_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_SizeOfGeneratedCodeInBytes_Args,
                  "PJRT_Executable_SizeOfGeneratedCodeInBytes");
  args->size_in_bytes = 0;  // interpreted: no generated code
  return nullptr;
}

PJRT_Error* Plugin_Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_Fingerprint_Args, "PJRT_Executable_Fingerprint");
  TL_NEED_EXE("PJRT_Executable_Fingerprint");
  args->executable_fingerprint = c->fingerprint.data();
  args->executable_fingerprint_size = c->fingerprint.size();
  return nullptr;
}

PJRT_Error* Plugin_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_GetCompiledMemoryStats_Args,
                  "PJRT_Executable_GetCompiledMemoryStats");
  TL_NEED_EXE("PJRT_Executable_GetCompiledMemoryStats");
  args->generated_code_size_in_bytes = 0;
  args->argument_size_in_bytes = c->argument_bytes;
  args->output_size_in_bytes = c->output_bytes;
  args->alias_size_in_bytes = c->alias_bytes;
  args->temp_size_in_bytes = c->temp_bytes;
  // The device is host memory: nothing is reported separately as host memory.
  args->host_generated_code_size_in_bytes = 0;
  args->host_argument_size_in_bytes = 0;
  args->host_output_size_in_bytes = 0;
  args->host_alias_size_in_bytes = 0;
  args->host_temp_size_in_bytes = 0;
  return nullptr;
}

PJRT_Error* Plugin_Executable_OutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_OutputElementTypes_Args,
                  "PJRT_Executable_OutputElementTypes");
  TL_NEED_EXE("PJRT_Executable_OutputElementTypes");
  args->output_types = c->output_types.data();
  args->num_output_types = c->output_types.size();
  return nullptr;
}

PJRT_Error* Plugin_Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_Executable_OutputDimensions_Args, "PJRT_Executable_OutputDimensions");
  TL_NEED_EXE("PJRT_Executable_OutputDimensions");
  args->num_outputs = c->output_ranks.size();
  args->dims = c->output_dims.data();
  args->dim_sizes = c->output_ranks.data();
  return nullptr;
}

#define TL_NEED_LOADED(fn) \
  TL_PLUGIN_REQUIRE(args->executable != nullptr, INVALID_ARGUMENT, fn ": null executable")

PJRT_Error* Plugin_LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_Destroy_Args, "PJRT_LoadedExecutable_Destroy");
  delete args->executable;
  return nullptr;
}

PJRT_Error* Plugin_LoadedExecutable_GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_GetExecutable_Args,
                  "PJRT_LoadedExecutable_GetExecutable");
  TL_PLUGIN_REQUIRE(args->loaded_executable != nullptr, INVALID_ARGUMENT,
                    "PJRT_LoadedExecutable_GetExecutable: null loaded_executable");
  args->executable = new PJRT_Executable{args->loaded_executable->compiled};
  return nullptr;
}

PJRT_Error* Plugin_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_AddressableDevices_Args,
                  "PJRT_LoadedExecutable_AddressableDevices");
  TL_NEED_LOADED("PJRT_LoadedExecutable_AddressableDevices");
  const auto& devices = args->executable->client->device_list;
  size_t n =
      std::min(devices.size(), static_cast<size_t>(args->executable->compiled->num_replicas *
                                                   args->executable->compiled->num_partitions));
  args->addressable_devices = devices.data();
  args->num_addressable_devices = n;
  return nullptr;
}

PJRT_Error* Plugin_LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_Delete_Args, "PJRT_LoadedExecutable_Delete");
  TL_NEED_LOADED("PJRT_LoadedExecutable_Delete");
  args->executable->deleted = true;
  return nullptr;
}

PJRT_Error* Plugin_LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_IsDeleted_Args, "PJRT_LoadedExecutable_IsDeleted");
  TL_NEED_LOADED("PJRT_LoadedExecutable_IsDeleted");
  args->is_deleted = args->executable->deleted;
  return nullptr;
}

PJRT_Error* Plugin_LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args) {
  static const char* fn = "PJRT_LoadedExecutable_Execute";
  TL_PLUGIN_CHECK(args, PJRT_LoadedExecutable_Execute_Args, fn);
  TL_NEED_LOADED("PJRT_LoadedExecutable_Execute");
  TL_PLUGIN_REQUIRE(!args->executable->deleted, FAILED_PRECONDITION,
                    std::string(fn) + ": the executable was deleted");
  Compiled& c = *args->executable->compiled;
  const Function& f = c.executable->function();
  std::set<int64_t> keep;  // arguments the caller forbids donating
  if (args->options != nullptr) {
    const PJRT_ExecuteOptions* o = args->options;
    size_t needed = offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t);
    if (o->struct_size >= needed) {
      for (size_t i = 0; i < o->num_non_donatable_input_indices; ++i) {
        keep.insert(o->non_donatable_input_indices[i]);
      }
    }
    TL_PLUGIN_REQUIRE(o->struct_size < PJRT_ExecuteOptions_STRUCT_SIZE || o->num_tasks == 0,
                      UNIMPLEMENTED, std::string(fn) + ": multi-task execution is not supported");
  }
  TL_PLUGIN_REQUIRE(args->num_devices >= 1, INVALID_ARGUMENT,
                    std::string(fn) + ": num_devices must be >= 1");
  TL_PLUGIN_REQUIRE(args->num_args == static_cast<size_t>(f.num_arguments()), INVALID_ARGUMENT,
                    std::string(fn) + ": the program takes " + std::to_string(f.num_arguments()) +
                        " arguments, got " + std::to_string(args->num_args));
  TL_PLUGIN_REQUIRE(args->output_lists != nullptr && args->argument_lists != nullptr,
                    INVALID_ARGUMENT, std::string(fn) + ": null argument or output lists");
  const std::vector<Type> arg_types = f.argument_types();
  std::vector<std::vector<Literal>> device_inputs;
  std::vector<PJRT_Device*> devices;
  for (size_t d = 0; d < args->num_devices; ++d) {
    std::vector<Literal> inputs;
    std::vector<PJRT_Buffer*> donated;
    PJRT_Device* device = args->execute_device;
    for (size_t i = 0; i < args->num_args; ++i) {
      PJRT_Buffer* b = args->argument_lists[d][i];
      TL_PLUGIN_REQUIRE(b != nullptr, INVALID_ARGUMENT,
                        std::string(fn) + ": argument " + std::to_string(i) + " is null");
      TL_PLUGIN_REQUIRE(
          !b->deleted, FAILED_PRECONDITION,
          std::string(fn) + ": argument " + std::to_string(i) + " was deleted or donated before");
      const Type& want = arg_types[i];
      TL_PLUGIN_REQUIRE(want.is_tensor() && want.tensor == b->literal.type(), INVALID_ARGUMENT,
                        std::string(fn) + ": argument " + std::to_string(i) + " is " +
                            b->literal.type().ToString() + ", the program expects " +
                            want.ToString());
      if (device == nullptr) device = b->device;
      // Donated: the literal moves in with its storage, which the interpreter may update in
      // place; kept: a shared view, which it never writes.
      if (c.aliasing[i] >= 0 && !keep.count(static_cast<int64_t>(i))) {
        inputs.push_back(std::move(b->literal));
        donated.push_back(b);
      } else {
        inputs.push_back(b->literal);
      }
    }
    if (device == nullptr) device = args->executable->client->device_list[d];
    for (PJRT_Buffer* b : donated) {
      b->deleted = true;
      DropLiteral(b);  // the storage now belongs to the run
    }
    device_inputs.push_back(std::move(inputs));
    devices.push_back(device);
  }
  size_t checks_before = c.checks->results().size();
  // One list per device, all together: collectives meet across the lists (plugin_devices.cc).
  auto all_outs = ExecuteLists(c, std::move(device_inputs));
  if (!all_outs.ok()) return FromStatus(all_outs.status().WithContext(fn));
  std::vector<CheckResult> checks = c.checks->results();
  for (size_t k = checks_before; k < checks.size(); ++k) {
    TL_PLUGIN_REQUIRE(checks[k].passed, INTERNAL,
                      std::string(fn) + ": " + checks[k].target + " failed: " + checks[k].message);
  }
  for (size_t d = 0; d < args->num_devices; ++d) {
    auto* outs = &(*all_outs)[d];
    for (size_t k = 0; k < outs->size(); ++k) {
      auto* b = new PJRT_Buffer();
      b->device = devices[d];
      HoldLiteral(b, std::move((*outs)[k]));
      b->element_type = b->literal.element_type();
      b->dims = b->literal.dims();
      args->output_lists[d][k] = b;
    }
    if (args->device_complete_events != nullptr) args->device_complete_events[d] = ReadyEvent();
  }
  return nullptr;
}

}  // namespace tlaloc::plugin
