#include "tlaloc/pjrt/session.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

#include "tlaloc/pjrt/program_recorder.h"

namespace tlaloc::pjrt {

OptionFamily OptionFamilyOf(const PjrtTarget& target) {
  switch (target.kind) {
    case PjrtTarget::Kind::kCpu:
    case PjrtTarget::Kind::kXlaCpu:
      return OptionFamily::kCpu;
    case PjrtTarget::Kind::kCuda:
      return OptionFamily::kGpu;
    case PjrtTarget::Kind::kTpu:
      return OptionFamily::kTpu;
    case PjrtTarget::Kind::kPath:
      break;
  }
  if (IsTpuShapedPath(target.path)) return OptionFamily::kTpu;
  std::string name = target.path.substr(target.path.find_last_of('/') + 1);
  if (name.find("cuda") != std::string::npos || name.find("gpu") != std::string::npos) {
    return OptionFamily::kGpu;
  }
  return OptionFamily::kCpu;
}

namespace {

const char* FamilyName(OptionFamily f) {
  switch (f) {
    case OptionFamily::kCpu:
      return "CPU";
    case OptionFamily::kGpu:
      return "GPU";
    case OptionFamily::kTpu:
      return "TPU";
  }
  return "?";
}

// Options that belong to one family only (XLA GPU client options; TorchTPU's libtpu option).
const std::set<std::string>& GpuOnlyOptions() {
  static const std::set<std::string> names = {
      "memory_fraction",        "preallocate",       "allocator",
      "collective_memory_size", "visible_devices",   "should_stage_host_to_device_transfers",
      "enable_mock_nccl",       "mock_gpu_topology", "abort_collectives_on_failure",
      "use_tfrt_gpu_client"};
  return names;
}
const std::set<std::string>& TpuOnlyOptions() {
  static const std::set<std::string> names = {"premapped_buffer_size"};
  return names;
}

Status Refuse(const std::string& option, OptionFamily family, const char* belongs) {
  return InvalidArgument("create option '" + option + "' is a " + belongs + " option; a " +
                         FamilyName(family) + " session refuses it");
}

// PJRT_Client_Create's key-value callbacks over a KeyValueStore (user_arg).
PJRT_Error_Code CodeOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return PJRT_Error_Code_NOT_FOUND;
    case StatusCode::kDeadlineExceeded:
      return PJRT_Error_Code_DEADLINE_EXCEEDED;
    default:
      return PJRT_Error_Code_INTERNAL;
  }
}

PJRT_Error* Report(PJRT_CallbackError* error_fn, const Status& s) {
  const std::string& m = s.message();
  return (*error_fn)(CodeOf(s), m.data(), m.size());
}

void DeleteValue(char* value) { delete[] value; }

template <typename Args>
PJRT_Error* Answer(Args* a, const StatusOr<std::string>& v) {
  if (!v.ok()) return Report(a->callback_error, v.status());
  a->value = new char[v->size() + 1];
  std::memcpy(a->value, v->data(), v->size());
  a->value[v->size()] = '\0';
  a->value_size = v->size();
  a->value_deleter_callback = DeleteValue;
  return nullptr;
}

PJRT_Error* KvGet(PJRT_KeyValueGetCallback_Args* a) {
  auto* store = static_cast<KeyValueStore*>(a->user_arg);
  return Answer(
      a, store->Get(std::string(a->key, a->key_size), std::chrono::milliseconds(a->timeout_in_ms)));
}

PJRT_Error* KvTryGet(PJRT_KeyValueTryGetCallback_Args* a) {
  auto* store = static_cast<KeyValueStore*>(a->user_arg);
  return Answer(a, store->TryGet(std::string(a->key, a->key_size)));
}

PJRT_Error* KvPut(PJRT_KeyValuePutCallback_Args* a) {
  auto* store = static_cast<KeyValueStore*>(a->user_arg);
  Status s = store->Put(std::string(a->key, a->key_size), std::string(a->value, a->value_size));
  return s.ok() ? nullptr : Report(a->callback_error, s);
}

}  // namespace

StatusOr<std::vector<NamedOption>> BuildCreateOptions(const SessionOptions& o,
                                                      std::optional<std::string> env_premapped) {
  OptionFamily family = OptionFamilyOf(o.target);
  std::vector<NamedOption> out;
  // GPU allocator options: only a GPU session sends them.
  std::vector<std::pair<std::string, bool>> gpu_set = {
      {"memory_fraction", o.memory_fraction.has_value()},
      {"preallocate", o.preallocate.has_value()},
      {"allocator", o.allocator.has_value()}};
  for (auto& [name, set] : gpu_set) {
    if (set && family != OptionFamily::kGpu) return Refuse(name, family, "GPU");
  }
  if (o.premapped_buffer_size && family != OptionFamily::kTpu) {
    return Refuse("premapped_buffer_size", family, "TPU");
  }
  if (o.cpu_device_count && family != OptionFamily::kCpu) {
    return Refuse("cpu_device_count", family, "CPU");
  }
  if (o.node_id.has_value() != o.num_nodes.has_value())
    return InvalidArgument("create options node_id and num_nodes go together");
  if (o.num_nodes) {
    if (family == OptionFamily::kTpu)
      return InvalidArgument(
          "create options node_id / num_nodes: libtpu finds its slice's hosts itself "
          "(TPU_WORKER_ID, TPU_WORKER_HOSTNAMES); a TPU session does not send them");
    if (*o.num_nodes < 1 || *o.node_id < 0 || *o.node_id >= *o.num_nodes)
      return InvalidArgument("create options node_id " + std::to_string(*o.node_id) +
                             " / num_nodes " + std::to_string(*o.num_nodes) +
                             ": expected 0 <= node_id < num_nodes");
    if (*o.num_nodes > 1 && !o.kv_store)
      return InvalidArgument("num_nodes " + std::to_string(*o.num_nodes) +
                             " needs a key-value store for the plugin's processes to meet");
    out.push_back({"node_id", *o.node_id});
    out.push_back({"num_nodes", *o.num_nodes});
  }
  for (const NamedOption& extra : o.extra_options) {
    if (GpuOnlyOptions().count(extra.name) && family != OptionFamily::kGpu) {
      return Refuse(extra.name, family, "GPU");
    }
    if (TpuOnlyOptions().count(extra.name) && family != OptionFamily::kTpu) {
      return Refuse(extra.name, family, "TPU");
    }
  }
  switch (family) {
    case OptionFamily::kGpu:
      if (o.memory_fraction) {
        if (!(*o.memory_fraction > 0.0f && *o.memory_fraction <= 1.0f)) {
          return InvalidArgument("create option memory_fraction = " +
                                 std::to_string(*o.memory_fraction) + ": expected (0, 1]");
        }
        out.push_back({"memory_fraction", *o.memory_fraction});
      }
      if (o.preallocate) out.push_back({"preallocate", *o.preallocate});
      if (o.allocator) {
        static const std::set<std::string> kinds = {"default", "platform", "bfc", "cuda_async"};
        if (!kinds.count(*o.allocator)) {
          return InvalidArgument("create option allocator = '" + *o.allocator +
                                 "': expected default, platform, bfc or cuda_async");
        }
        out.push_back({"allocator", *o.allocator});
      }
      break;
    case OptionFamily::kTpu: {
      int64_t premapped = 0;
      if (o.premapped_buffer_size) {
        premapped = *o.premapped_buffer_size;
      } else if (env_premapped && !env_premapped->empty()) {
        char* end = nullptr;
        long long v = std::strtoll(env_premapped->c_str(), &end, 10);
        if (*end != '\0' || v < 0) {
          return InvalidArgument("TPU_PREMAPPED_BUFFER_SIZE = '" + *env_premapped +
                                 "': expected a non-negative byte count");
        }
        premapped = v;
      }
      if (premapped < 0) return InvalidArgument("premapped_buffer_size must be >= 0");
      // The one option of a TPU session: keeps libtpu from pinning its default 4 GiB.
      out.push_back({"premapped_buffer_size", premapped});
      break;
    }
    case OptionFamily::kCpu:
      if (o.cpu_device_count) {
        if (*o.cpu_device_count < 1) {
          return InvalidArgument("create option cpu_device_count = " +
                                 std::to_string(*o.cpu_device_count) + ": expected >= 1");
        }
        out.push_back({"cpu_device_count", *o.cpu_device_count});
      }
      break;
  }
  for (const NamedOption& extra : o.extra_options) out.push_back(extra);
  return out;
}

PJRT_ExecuteOptions MakeExecuteOptions(const std::vector<int64_t>& non_donatable) {
  PJRT_ExecuteOptions o{};  // zero: no callbacks, launch_id 0, no context, no tasks
  o.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  o.non_donatable_input_indices = non_donatable.empty() ? nullptr : non_donatable.data();
  o.num_non_donatable_input_indices = non_donatable.size();
  return o;
}

// ------------------------------------------------------------------------------- buffers

PjrtBuffer::~PjrtBuffer() {
  if (buffer_ != nullptr && api_) {
    TL_PJRT_ARGS(PJRT_Buffer_Destroy_Args, d);
    d.buffer = buffer_;
    (void)TL_PJRT_CALL(*api_, Buffer_Destroy, &d);
  }
}
PjrtBuffer::PjrtBuffer(PjrtBuffer&& o) noexcept
    : api_(std::move(o.api_)),
      buffer_(o.buffer_),
      type_(std::move(o.type_)),
      device_index_(o.device_index_) {
  o.buffer_ = nullptr;
}
PjrtBuffer& PjrtBuffer::operator=(PjrtBuffer&& o) noexcept {
  if (this != &o) {
    this->~PjrtBuffer();
    new (this) PjrtBuffer(std::move(o));
  }
  return *this;
}
bool PjrtBuffer::IsDeleted() const {
  if (buffer_ == nullptr) return true;
  TL_PJRT_ARGS(PJRT_Buffer_IsDeleted_Args, a);
  a.buffer = buffer_;
  if (!TL_PJRT_CALL(*api_, Buffer_IsDeleted, &a).ok()) return false;
  return a.is_deleted;
}

// ---------------------------------------------------------------------------- executables

PjrtExecutable::~PjrtExecutable() {
  if (exe_ != nullptr) {
    TL_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, d);
    d.executable = exe_;
    (void)TL_PJRT_CALL(*api_, LoadedExecutable_Destroy, &d);
  }
}

namespace {

// Runs `fn` on the PJRT_Executable behind a loaded one, destroying it afterwards.
template <typename Fn>
Status WithExecutable(const PjrtApi& api, PJRT_LoadedExecutable* loaded, Fn&& fn) {
  TL_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, g);
  g.loaded_executable = loaded;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(api, LoadedExecutable_GetExecutable, &g));
  Status status = fn(g.executable);
  TL_PJRT_ARGS(PJRT_Executable_Destroy_Args, d);
  d.executable = g.executable;
  Status destroyed = TL_PJRT_CALL(api, Executable_Destroy, &d);
  return status.ok() ? destroyed : status;
}

}  // namespace

StatusOr<CompiledMemoryStats> PjrtExecutable::MemoryStats() const {
  CompiledMemoryStats stats;
  TL_RETURN_IF_ERROR(WithExecutable(*api_, exe_, [&](PJRT_Executable* e) -> Status {
    TL_PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args, m);
    // The whole struct: newer plugins (XLA 0.115) refuse the 0.60 size; older ones read less.
    m.struct_size = sizeof(m);
    m.executable = e;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Executable_GetCompiledMemoryStats, &m));
    stats.argument_bytes = m.argument_size_in_bytes;
    stats.output_bytes = m.output_size_in_bytes;
    stats.alias_bytes = m.alias_size_in_bytes;
    stats.temp_bytes = m.temp_size_in_bytes;
    stats.generated_code_bytes = m.generated_code_size_in_bytes;
    if (m.peak_memory_in_bytes > 0) stats.peak_bytes = m.peak_memory_in_bytes;
    return OkStatus();
  }));
  return stats;
}

StatusOr<std::string> PjrtExecutable::Name() const {
  std::string name;
  TL_RETURN_IF_ERROR(WithExecutable(*api_, exe_, [&](PJRT_Executable* e) -> Status {
    TL_PJRT_ARGS(PJRT_Executable_Name_Args, n);
    n.executable = e;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Executable_Name, &n));
    name.assign(n.executable_name, n.executable_name_size);
    return OkStatus();
  }));
  return name;
}

// -------------------------------------------------------------------------------- session

PjrtSession::~PjrtSession() {
  devices_.clear();
  if (client_ != nullptr) {
    TL_PJRT_ARGS(PJRT_Client_Destroy_Args, d);
    d.client = client_;
    (void)TL_PJRT_CALL(*api_, Client_Destroy, &d);
  }
}

StatusOr<std::unique_ptr<PjrtSession>> PjrtSession::Open(const SessionOptions& options) {
  std::string path = options.plugin_path;
  if (path.empty()) {
    PluginResolution r = ResolvePjrtPlugin(options.target, ResolveEnvironment::Process());
    TL_RETURN_IF_ERROR(r.ToStatus());
    path = r.path;
  }
  TL_ASSIGN_OR_RETURN(auto api, PjrtApi::Load(path));
  return OpenWithApi(std::move(api), options);
}

StatusOr<std::unique_ptr<PjrtSession>> PjrtSession::OpenWithApi(std::shared_ptr<PjrtApi> api,
                                                                const SessionOptions& options) {
  // Every slot a session may call, checked up front so an old plugin is refused by name
  // before any work.
  static const std::pair<size_t, const char*> kRequired[] = {
#define TL_REQ_(name) {offsetof(PJRT_Api, PJRT_##name), "PJRT_" #name},
      TL_REQ_(Error_Destroy) TL_REQ_(Error_Message) TL_REQ_(Error_GetCode) TL_REQ_(
          Plugin_Initialize) TL_REQ_(Event_Destroy) TL_REQ_(Event_Await) TL_REQ_(Client_Create)
          TL_REQ_(Client_Destroy) TL_REQ_(Client_PlatformName) TL_REQ_(Client_AddressableDevices)
              TL_REQ_(Client_Compile) TL_REQ_(Client_BufferFromHostBuffer)
                  TL_REQ_(Device_GetDescription) TL_REQ_(DeviceDescription_Id)
                      TL_REQ_(DeviceDescription_Kind) TL_REQ_(LoadedExecutable_Destroy)
                          TL_REQ_(LoadedExecutable_GetExecutable) TL_REQ_(LoadedExecutable_Execute)
                              TL_REQ_(Executable_Destroy) TL_REQ_(Executable_NumOutputs)
                                  TL_REQ_(Executable_OutputElementTypes)
                                      TL_REQ_(Executable_OutputDimensions)
                                          TL_REQ_(Executable_GetCompiledMemoryStats)
                                              TL_REQ_(Buffer_Destroy) TL_REQ_(Buffer_ToHostBuffer)
#undef TL_REQ_
  };
  for (auto& [offset, name] : kRequired) TL_RETURN_IF_ERROR(api->CheckSlot(offset, name));

  const char* env_premapped = std::getenv("TPU_PREMAPPED_BUFFER_SIZE");
  TL_ASSIGN_OR_RETURN(
      auto create_options,
      BuildCreateOptions(options,
                         env_premapped ? std::optional<std::string>(env_premapped) : std::nullopt));
  std::unique_ptr<PjrtSession> s(new PjrtSession());
  s->api_ = api;
  s->create_options_ = create_options;

  TL_PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Plugin_Initialize, &init));

  if (api->CheckSlot(offsetof(PJRT_Api, PJRT_Plugin_Attributes), "PJRT_Plugin_Attributes").ok()) {
    TL_PJRT_ARGS(PJRT_Plugin_Attributes_Args, attrs);
    // The published size stops at `attributes`; num_attributes follows it in memory and
    // every plugin writes it, so ask for the full struct.
    attrs.struct_size = sizeof(PJRT_Plugin_Attributes_Args);
    if (TL_PJRT_CALL(*api, Plugin_Attributes, &attrs).ok()) {
      for (size_t i = 0; i < attrs.num_attributes; ++i) {
        const PJRT_NamedValue& v = attrs.attributes[i];
        std::string value;
        switch (v.type) {
          case PJRT_NamedValue_kString:
            value.assign(v.string_value, v.value_size);
            break;
          case PJRT_NamedValue_kInt64:
            value = std::to_string(v.int64_value);
            break;
          case PJRT_NamedValue_kInt64List:
            for (size_t k = 0; k < v.value_size; ++k) {
              value += (k ? "," : "") + std::to_string(v.int64_array_value[k]);
            }
            break;
          case PJRT_NamedValue_kFloat:
            value = std::to_string(v.float_value);
            break;
          case PJRT_NamedValue_kBool:
            value = v.bool_value ? "true" : "false";
            break;
        }
        s->attributes_.emplace_back(std::string(v.name, v.name_size), value);
      }
    }
  }

  // The C view of the create options; strings and lists stay owned by `create_options`.
  std::vector<PJRT_NamedValue> values;
  for (const NamedOption& o : s->create_options_) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = o.name.data();
    v.name_size = o.name.size();
    v.value_size = 1;
    if (auto* str = std::get_if<std::string>(&o.value)) {
      v.type = PJRT_NamedValue_kString;
      v.string_value = str->data();
      v.value_size = str->size();
    } else if (auto* i = std::get_if<int64_t>(&o.value)) {
      v.type = PJRT_NamedValue_kInt64;
      v.int64_value = *i;
    } else if (auto* list = std::get_if<std::vector<int64_t>>(&o.value)) {
      v.type = PJRT_NamedValue_kInt64List;
      v.int64_array_value = list->data();
      v.value_size = list->size();
    } else if (auto* f = std::get_if<float>(&o.value)) {
      v.type = PJRT_NamedValue_kFloat;
      v.float_value = *f;
    } else {
      v.type = PJRT_NamedValue_kBool;
      v.bool_value = std::get<bool>(o.value);
    }
    values.push_back(v);
  }
  TL_PJRT_ARGS(PJRT_Client_Create_Args, create);
  // The whole struct, try-get fields included (null unless a store is lent): XLA's CPU plugin
  // (API 0.115) refuses the 0.60 size; older plugins read only what they know.
  create.struct_size = sizeof(create);
  create.create_options = values.empty() ? nullptr : values.data();
  create.num_options = values.size();
  if (options.kv_store) {
    s->kv_store_ = options.kv_store;
    void* store = s->kv_store_.get();
    create.kv_get_callback = KvGet;
    create.kv_get_user_arg = store;
    create.kv_put_callback = KvPut;
    create.kv_put_user_arg = store;
    create.kv_try_get_callback = KvTryGet;
    create.kv_try_get_user_arg = store;
  }
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Client_Create, &create));
  s->client_ = create.client;

  TL_PJRT_ARGS(PJRT_Client_PlatformName_Args, pn);
  pn.client = s->client_;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Client_PlatformName, &pn));
  s->platform_name_.assign(pn.platform_name, pn.platform_name_size);
  std::string expected = options.target.ExpectedPlatform();
  // XLA's CUDA plugin has reported both "cuda" and "gpu" over its history.
  bool platform_ok = expected.empty() || s->platform_name_ == expected ||
                     (expected == "cuda" && s->platform_name_ == "gpu");
  if (options.check_platform && !platform_ok) {
    return FailedPrecondition("PJRT plugin " + api->origin() + " reports platform '" +
                              s->platform_name_ + "', but target " + options.target.ToString() +
                              " expects '" + expected + "'");
  }
  if (api->CheckSlot(offsetof(PJRT_Api, PJRT_Client_PlatformVersion), "PJRT_Client_PlatformVersion")
          .ok()) {
    TL_PJRT_ARGS(PJRT_Client_PlatformVersion_Args, pv);
    pv.client = s->client_;
    if (TL_PJRT_CALL(*api, Client_PlatformVersion, &pv).ok() && pv.platform_version) {
      s->platform_version_.assign(pv.platform_version, pv.platform_version_size);
    }
  }

  TL_PJRT_ARGS(PJRT_Client_AddressableDevices_Args, ad);
  ad.client = s->client_;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Client_AddressableDevices, &ad));
  for (size_t i = 0; i < ad.num_addressable_devices; ++i) {
    Device d;
    d.raw = ad.addressable_devices[i];
    TL_PJRT_ARGS(PJRT_Device_GetDescription_Args, gd);
    gd.device = d.raw;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Device_GetDescription, &gd));
    TL_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
    id.device_description = gd.device_description;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, DeviceDescription_Id, &id));
    d.id = id.id;
    TL_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kind);
    kind.device_description = gd.device_description;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, DeviceDescription_Kind, &kind));
    d.kind.assign(kind.device_kind, kind.device_kind_size);
    s->devices_.push_back(d);
  }
  if (s->devices_.empty()) {
    return FailedPrecondition("PJRT plugin " + api->origin() + " (platform " + s->platform_name_ +
                              ") has no addressable devices");
  }
  // Across processes: this process's index and every process's devices.
  s->global_device_count_ = static_cast<int>(s->devices_.size());
  if (options.num_nodes && *options.num_nodes > 1) {
    TL_PJRT_ARGS(PJRT_Client_Devices_Args, all);
    all.client = s->client_;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Client_Devices, &all));
    s->global_device_count_ = static_cast<int>(all.num_devices);
    TL_PJRT_ARGS(PJRT_Client_ProcessIndex_Args, pi);
    pi.client = s->client_;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Client_ProcessIndex, &pi));
    s->process_index_ = pi.process_index;
  }
  return s;
}

StatusOr<std::unique_ptr<PjrtExecutable>> PjrtSession::Compile(const std::string& mlir,
                                                               const CompileOptions& options) {
  TL_ASSIGN_OR_RETURN(std::string serialized, options.Serialize());
  // Recorded before compiling, so a program the plugin refuses is on record too.
  if (auto dir = ProgramsDirFromEnvironment()) {
    TL_RETURN_IF_ERROR(RecordProgram(*dir, platform_name_, mlir, options)
                           .WithContext("programs recorder (TLALOC_PROGRAMS_DIR)"));
  }
  PJRT_Program program = MlirProgram(mlir);
  TL_PJRT_ARGS(PJRT_Client_Compile_Args, c);
  c.client = client_;
  c.program = &program;
  c.compile_options = serialized.data();
  c.compile_options_size = serialized.size();
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Client_Compile, &c));

  std::unique_ptr<PjrtExecutable> exe(new PjrtExecutable());
  exe->api_ = api_;
  exe->exe_ = c.executable;
  TL_RETURN_IF_ERROR(WithExecutable(*api_, exe->exe_, [&](PJRT_Executable* e) -> Status {
    TL_PJRT_ARGS(PJRT_Executable_NumOutputs_Args, n);
    n.executable = e;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Executable_NumOutputs, &n));
    exe->num_outputs_ = n.num_outputs;
    TL_PJRT_ARGS(PJRT_Executable_OutputElementTypes_Args, t);
    t.executable = e;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Executable_OutputElementTypes, &t));
    TL_PJRT_ARGS(PJRT_Executable_OutputDimensions_Args, d);
    d.executable = e;
    TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Executable_OutputDimensions, &d));
    if (t.num_output_types != n.num_outputs || d.num_outputs != n.num_outputs) {
      return Internal("PJRT plugin " + api_->origin() + " reports " +
                      std::to_string(n.num_outputs) + " outputs but " +
                      std::to_string(t.num_output_types) + " types and " +
                      std::to_string(d.num_outputs) + " shapes");
    }
    size_t pos = 0;
    for (size_t i = 0; i < n.num_outputs; ++i) {
      TL_ASSIGN_OR_RETURN(ElementType et, FromPjrtBufferType(t.output_types[i]));
      std::vector<int64_t> dims(d.dims + pos, d.dims + pos + d.dim_sizes[i]);
      pos += d.dim_sizes[i];
      exe->output_types_.emplace_back(et, std::move(dims));
    }
    return OkStatus();
  }));
  return exe;
}

StatusOr<PjrtBuffer> PjrtSession::ToDevice(const Literal& literal, int device_index) {
  if (device_index < 0 || device_index >= static_cast<int>(devices_.size())) {
    return InvalidArgument("device index " + std::to_string(device_index) + " out of range [0, " +
                           std::to_string(devices_.size()) + ")");
  }
  TL_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, a);
  a.client = client_;
  a.data = literal.data();
  a.type = ToPjrtBufferType(literal.element_type());
  a.dims = literal.dims().data();
  a.num_dims = literal.dims().size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  a.device = devices_[device_index].raw;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Client_BufferFromHostBuffer, &a));
  PjrtBuffer buffer(api_, a.buffer, literal.type(), device_index);
  // `literal` must stay untouched until the plugin is done reading it.
  TL_RETURN_IF_ERROR(api_->AwaitAndDestroy(a.done_with_host_buffer, "host-to-device transfer"));
  return buffer;
}

StatusOr<uintptr_t> PjrtSession::DeviceAddress(const PjrtBuffer& buffer) const {
  if (buffer.raw() == nullptr) return FailedPrecondition("buffer was moved from");
  TL_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args, a);
  a.buffer = buffer.raw();
  Status called = TL_PJRT_CALL(*api_, Buffer_UnsafePointer, &a);
  if (!called.ok()) return Unimplemented(called.message());
  return a.buffer_pointer;
}

StatusOr<PjrtSession::DeviceMemory> PjrtSession::DeviceMemoryStats(int device_index) const {
  if (device_index < 0 || device_index >= static_cast<int>(devices_.size()))
    return InvalidArgument("device " + std::to_string(device_index) + ": the plugin " +
                           api_->origin() + " has " + std::to_string(devices_.size()) +
                           " addressable device(s)");
  // A table too short for the slot (a plugin older than the call) is Unimplemented, not an error:
  // the caller then goes without the figure.
  Status has_slot =
      api_->CheckSlot(offsetof(PJRT_Api, PJRT_Device_MemoryStats), "PJRT_Device_MemoryStats");
  if (!has_slot.ok()) return Unimplemented(has_slot.message());
  TL_PJRT_ARGS(PJRT_Device_MemoryStats_Args, a);
  a.device = devices_[device_index].raw;
  Status called = TL_PJRT_CALL(*api_, Device_MemoryStats, &a);
  if (!called.ok()) return Unimplemented(called.message());
  DeviceMemory out;
  out.bytes_in_use = a.bytes_in_use;
  if (a.bytes_limit_is_set) out.bytes_limit = a.bytes_limit;
  return out;
}

StatusOr<Literal> PjrtSession::ToHost(const PjrtBuffer& buffer) {
  if (buffer.raw() == nullptr) return FailedPrecondition("buffer was moved from");
  Literal out(buffer.type());
  TL_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, q);
  q.src = buffer.raw();
  q.dst = nullptr;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Buffer_ToHostBuffer, &q));
  TL_RETURN_IF_ERROR(api_->AwaitAndDestroy(q.event, "device-to-host size query"));
  if (q.dst_size != static_cast<size_t>(out.byte_size())) {
    return Internal("PJRT plugin " + api_->origin() + " needs " + std::to_string(q.dst_size) +
                    " bytes for a " + buffer.type().ToString() + ", expected " +
                    std::to_string(out.byte_size()));
  }
  TL_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, a);
  a.src = buffer.raw();
  a.dst = out.data();
  a.dst_size = static_cast<size_t>(out.byte_size());
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Buffer_ToHostBuffer, &a));
  TL_RETURN_IF_ERROR(api_->AwaitAndDestroy(a.event, "device-to-host transfer"));
  return out;
}

StatusOr<std::vector<PjrtBuffer>> PjrtSession::Execute(PjrtExecutable& exe,
                                                       const std::vector<const PjrtBuffer*>& args,
                                                       const ExecuteRequest& request) {
  if (request.device_index < 0 || request.device_index >= static_cast<int>(devices_.size())) {
    return InvalidArgument("execute: device index " + std::to_string(request.device_index) +
                           " out of range");
  }
  TL_ASSIGN_OR_RETURN(auto outs, Launch(exe, {args}, request, request.device_index));
  return std::move(outs[0]);
}

StatusOr<std::vector<std::vector<PjrtBuffer>>> PjrtSession::ExecuteOnDevices(
    PjrtExecutable& exe, const std::vector<std::vector<const PjrtBuffer*>>& args,
    const ExecuteRequest& request) {
  if (args.empty() || args.size() > devices_.size())
    return InvalidArgument("execute: " + std::to_string(args.size()) +
                           " argument lists for a client with " + std::to_string(devices_.size()) +
                           " addressable device(s)");
  return Launch(exe, args, request, -1);
}

// One PJRT_LoadedExecutable_Execute. `single_device` >= 0 launches one argument list on that
// device; -1 launches one list per device of the executable's device assignment, list d on its
// d-th addressable device (replica-major, partition-minor, as CompileOptions assigns them).
StatusOr<std::vector<std::vector<PjrtBuffer>>> PjrtSession::Launch(
    PjrtExecutable& exe, const std::vector<std::vector<const PjrtBuffer*>>& args,
    const ExecuteRequest& request, int single_device) {
  const size_t n = args.size();
  std::vector<std::vector<PJRT_Buffer*>> raw(n);
  for (size_t d = 0; d < n; ++d) {
    if (args[d].size() != args[0].size())
      return InvalidArgument("execute: device " + std::to_string(d) + " has " +
                             std::to_string(args[d].size()) + " arguments, device 0 has " +
                             std::to_string(args[0].size()));
    for (size_t i = 0; i < args[d].size(); ++i) {
      if (args[d][i] == nullptr || args[d][i]->raw() == nullptr)
        return InvalidArgument("execute: argument " + std::to_string(i) +
                               (n > 1 ? " of device " + std::to_string(d) : std::string()) +
                               " is null");
      raw[d].push_back(args[d][i]->raw());
    }
  }
  PJRT_ExecuteOptions options = MakeExecuteOptions(request.non_donatable_input_indices);
  std::vector<std::vector<PJRT_Buffer*>> outputs(n, std::vector<PJRT_Buffer*>(exe.num_outputs()));
  std::vector<PJRT_Buffer* const*> arg_lists(n);
  std::vector<PJRT_Buffer**> output_lists(n);
  for (size_t d = 0; d < n; ++d) {
    arg_lists[d] = raw[d].data();
    output_lists[d] = outputs[d].data();
  }
  std::vector<PJRT_Event*> done(n, nullptr);
  TL_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, e);
  e.executable = exe.raw();
  e.options = &options;
  e.argument_lists = arg_lists.data();
  e.num_devices = n;
  e.num_args = raw[0].size();
  e.output_lists = output_lists.data();
  e.device_complete_events = done.data();
  // A single-device launch names its device when the client has several.
  e.execute_device =
      single_device >= 0 && devices_.size() > 1 ? devices_[single_device].raw : nullptr;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, LoadedExecutable_Execute, &e));
  std::vector<std::vector<PjrtBuffer>> result(n);
  for (size_t d = 0; d < n; ++d) {
    const int device = single_device >= 0 ? single_device : static_cast<int>(d);
    for (size_t i = 0; i < outputs[d].size(); ++i)
      result[d].push_back(PjrtBuffer(api_, outputs[d][i], exe.output_types()[i], device));
  }
  // Every event is awaited and destroyed, also after a failed one.
  Status status;
  for (PJRT_Event* event : done) {
    Status s = api_->AwaitAndDestroy(event, "execution");
    if (status.ok() && !s.ok()) status = s;
  }
  TL_RETURN_IF_ERROR(status);
  return result;
}

StatusOr<std::vector<Literal>> PjrtSession::Run(PjrtExecutable& exe,
                                                const std::vector<Literal>& args) {
  std::vector<PjrtBuffer> buffers;
  std::vector<const PjrtBuffer*> ptrs;
  buffers.reserve(args.size());
  for (const Literal& a : args) {
    TL_ASSIGN_OR_RETURN(PjrtBuffer b, ToDevice(a));
    buffers.push_back(std::move(b));
  }
  for (const PjrtBuffer& b : buffers) ptrs.push_back(&b);
  TL_ASSIGN_OR_RETURN(auto outs, Execute(exe, ptrs));
  std::vector<Literal> result;
  for (const PjrtBuffer& b : outs) {
    TL_ASSIGN_OR_RETURN(Literal l, ToHost(b));
    result.push_back(std::move(l));
  }
  return result;
}

}  // namespace tlaloc::pjrt
