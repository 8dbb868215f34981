// The printed per-device train step through Tlaloc's PJRT plugin's C ABI, as any PJRT client
// would run it: compiled for 1 replica x 2 partitions, one argument list per device in one
// Execute. The loss and every gradient part equal the interpreter backend's per-device run bit
// for bit (the plugin runs the same interpreter; what this pins is that the printed text, the
// compile options and the argument lists carry the lowering whole).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "testing/tiny_qwen3.h"
#include "tlaloc/models/init.h"
#include "tlaloc/pjrt/c_api.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/train/sharded_trainer.h"

namespace tlaloc::train {
namespace {

class PluginClient {
 public:
  bool Open(int64_t devices) {
    void* handle = dlopen(TLALOC_PJRT_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return false;
    api_ = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"))();
    PJRT_NamedValue option{};
    option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    option.name = "cpu_device_count";
    option.name_size = std::strlen(option.name);
    option.type = PJRT_NamedValue_kInt64;
    option.int64_value = devices;
    option.value_size = 1;
    PJRT_Client_Create_Args c{};
    c.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    c.create_options = &option;
    c.num_options = 1;
    if (!Ok(api_->PJRT_Client_Create(&c))) return false;
    client_ = c.client;
    PJRT_Client_AddressableDevices_Args d{};
    d.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
    d.client = client_;
    if (!Ok(api_->PJRT_Client_AddressableDevices(&d))) return false;
    devices_.assign(d.addressable_devices, d.addressable_devices + d.num_addressable_devices);
    return true;
  }
  ~PluginClient() {
    for (PJRT_Buffer* b : buffers_) {
      PJRT_Buffer_Destroy_Args d{};
      d.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
      d.buffer = b;
      api_->PJRT_Buffer_Destroy(&d);
    }
    if (exe_) {
      PJRT_LoadedExecutable_Destroy_Args d{};
      d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
      d.executable = exe_;
      api_->PJRT_LoadedExecutable_Destroy(&d);
    }
    if (client_) {
      PJRT_Client_Destroy_Args d{};
      d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
      d.client = client_;
      api_->PJRT_Client_Destroy(&d);
    }
  }
  // executable_build_options { num_replicas: 1, num_partitions: partitions }
  bool Compile(const std::string& text, int partitions) {
    PJRT_Program program{};
    program.struct_size = PJRT_Program_STRUCT_SIZE;
    program.code = const_cast<char*>(text.data());
    program.code_size = text.size();
    program.format = "mlir";
    program.format_size = 4;
    const char options[6] = {0x1A, 0x04, 0x20, 0x01, 0x28, static_cast<char>(partitions)};
    PJRT_Client_Compile_Args c{};
    c.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
    c.client = client_;
    c.program = &program;
    c.compile_options = options;
    c.compile_options_size = sizeof(options);
    if (!Ok(api_->PJRT_Client_Compile(&c))) return false;
    exe_ = c.executable;
    return true;
  }
  PJRT_Buffer* Upload(const Literal& l, int device) {
    PJRT_Client_BufferFromHostBuffer_Args a{};
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = client_;
    a.data = l.data();
    a.type = l.element_type() == ElementType::kS32 ? PJRT_Buffer_Type_S32 : PJRT_Buffer_Type_F32;
    a.dims = l.dims().data();
    a.num_dims = l.dims().size();
    a.device = devices_[device];
    if (!Ok(api_->PJRT_Client_BufferFromHostBuffer(&a))) return nullptr;
    DestroyEvent(a.done_with_host_buffer);
    buffers_.push_back(a.buffer);
    return a.buffer;
  }
  // args[d] on device d; returns each device's outputs.
  bool Execute(const std::vector<std::vector<PJRT_Buffer*>>& args, size_t num_outputs,
               std::vector<std::vector<PJRT_Buffer*>>& outputs) {
    const size_t n = args.size();
    std::vector<PJRT_Buffer* const*> arg_lists(n);
    for (size_t d = 0; d < n; ++d) arg_lists[d] = args[d].data();
    outputs.assign(n, std::vector<PJRT_Buffer*>(num_outputs, nullptr));
    std::vector<PJRT_Buffer**> out_lists(n);
    for (size_t d = 0; d < n; ++d) out_lists[d] = outputs[d].data();
    std::vector<PJRT_Event*> done(n, nullptr);
    PJRT_LoadedExecutable_Execute_Args e{};
    e.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
    e.executable = exe_;
    e.argument_lists = arg_lists.data();
    e.num_devices = n;
    e.num_args = args[0].size();
    e.output_lists = out_lists.data();
    e.device_complete_events = done.data();
    const bool ok = Ok(api_->PJRT_LoadedExecutable_Execute(&e));
    for (PJRT_Event* ev : done)
      if (ev) DestroyEvent(ev);
    for (auto& list : outputs)
      for (PJRT_Buffer* b : list)
        if (b) buffers_.push_back(b);
    return ok;
  }
  Literal Download(PJRT_Buffer* b, const TensorType& type) {
    Literal host(type);
    PJRT_Buffer_ToHostBuffer_Args t{};
    t.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    t.src = b;
    t.dst = host.data();
    t.dst_size = host.byte_size();
    EXPECT_TRUE(Ok(api_->PJRT_Buffer_ToHostBuffer(&t)));
    DestroyEvent(t.event);
    return host;
  }
  const std::string& error() const { return error_; }

 private:
  bool Ok(PJRT_Error* e) {
    if (e == nullptr) return true;
    PJRT_Error_Message_Args m{};
    m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
    m.error = e;
    api_->PJRT_Error_Message(&m);
    error_.assign(m.message, m.message_size);
    PJRT_Error_Destroy_Args d{};
    d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
    d.error = e;
    api_->PJRT_Error_Destroy(&d);
    return false;
  }
  void DestroyEvent(PJRT_Event* e) {
    if (!e) return;
    PJRT_Event_Destroy_Args d{};
    d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
    d.event = e;
    api_->PJRT_Event_Destroy(&d);
  }

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  PJRT_LoadedExecutable* exe_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::vector<PJRT_Buffer*> buffers_;
  std::string error_;
};

io::ModelConfig TinyConfig() {
  return testing::TinyQwen3Config({.num_attention_heads = 4, .num_key_value_heads = 2});
}

TEST(ShardedPlugin, PrintedPerDeviceGradientsRunThroughThePluginsCApi) {
  constexpr int64_t kBatch = 4, kSeq = 8;
  const io::ModelConfig c = TinyConfig();
  for (const char* k : {"dp data=2", "tp model=2"}) {
    const std::string spec(k);
    const std::string plan_name = spec.substr(0, spec.find(' '));
    auto mesh = Mesh::Parse(spec.substr(spec.find(' ') + 1));
    ASSERT_TRUE(mesh.ok());
    auto plan = shard::ShardingPlan::Make(plan_name, *mesh, c, kBatch);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto module = BuildDeviceStepProgram(c, TrainOptions{}, *plan, kSeq, /*grads_only=*/true);
    ASSERT_TRUE(module.ok()) << module.status().ToString();

    // Each device's arguments: its weight parts, then its batch rows.
    std::vector<Literal> whole;
    for (auto& t : models::RandomWeights(c, 3, ElementType::kF32)) whole.push_back(t.value);
    std::mt19937 rng(9);
    std::vector<int32_t> ids(kBatch * kSeq);
    for (auto& x : ids) x = static_cast<int32_t>(rng() % c.vocab_size);
    const Literal tokens = Literal::FromVector<int32_t>({kBatch, kSeq}, ids);
    std::vector<std::vector<Literal>> args(2);
    for (int d = 0; d < 2; ++d) {
      for (size_t i = 0; i < whole.size(); ++i) {
        auto part = shard::LocalPart(whole[i], *mesh, plan->weight(i), d);
        ASSERT_TRUE(part.ok());
        args[d].push_back(*part);
      }
      auto rows = shard::LocalPart(tokens, *mesh, plan->tokens(), d);
      ASSERT_TRUE(rows.ok());
      args[d].push_back(*rows);
      args[d].push_back(*rows);
    }
    auto backend = MakeInterpreterBackend({}, 2);
    auto program = backend->CompileForDevices(*module, ProcessGrid{1, 2});
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto want = backend->RunOnDevices(**program, args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    PluginClient plugin;
    ASSERT_TRUE(plugin.Open(2)) << plugin.error();
    ASSERT_TRUE(plugin.Compile(PrintModule(**module), 2)) << plugin.error();
    std::vector<std::vector<PJRT_Buffer*>> inputs(2), outputs;
    for (int d = 0; d < 2; ++d)
      for (const Literal& l : args[d]) inputs[d].push_back(plugin.Upload(l, d));
    const size_t num_outputs = (*want)[0].size();
    ASSERT_TRUE(plugin.Execute(inputs, num_outputs, outputs)) << plugin.error();
    for (int d = 0; d < 2; ++d) {
      for (size_t r = 0; r < num_outputs; ++r) {
        const Literal got = plugin.Download(outputs[d][r], (*want)[d][r].type());
        EXPECT_TRUE(got.BitwiseEquals((*want)[d][r])) << k << ": device " << d << " result " << r;
      }
    }
  }
}

}  // namespace
}  // namespace tlaloc::train
