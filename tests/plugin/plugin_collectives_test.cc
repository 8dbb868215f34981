// N devices through Tlaloc's plugin's C ABI: a client with cpu_device_count (or
// TLALOC_CPU_DEVICES) devices, a program compiled for R replicas x P partitions, one argument
// list per device in one PJRT_LoadedExecutable_Execute, collectives meeting across the lists,
// and results that stay on their device for the next execution.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/pjrt/c_api.h"

namespace {

constexpr const char* kAllReduce = R"(
func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<ui32>) {
  %r = "stablehlo.all_reduce"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  %id = stablehlo.replica_id : tensor<ui32>
  return %r, %id : tensor<2xf32>, tensor<ui32>
})";

class PluginDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    void* handle = dlopen(tlaloc::pjrt::testing::CpuPluginPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    api_ = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"))();
  }
  void TearDown() override {
    if (client_ == nullptr) return;
    PJRT_Client_Destroy_Args d{};
    d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
    d.client = client_;
    EXPECT_EQ(api_->PJRT_Client_Destroy(&d), nullptr);
  }
  // Message of `e` (destroyed), "" for success.
  std::string Take(PJRT_Error* e) {
    if (e == nullptr) return "";
    PJRT_Error_Message_Args m{};
    m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
    m.error = e;
    api_->PJRT_Error_Message(&m);
    std::string s(m.message, m.message_size);
    PJRT_Error_Destroy_Args d{};
    d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
    d.error = e;
    api_->PJRT_Error_Destroy(&d);
    return s;
  }
  // Creates the client; `count` < 0 sends no cpu_device_count option.
  std::vector<PJRT_Device*> CreateClient(int64_t count) {
    PJRT_NamedValue option{};
    option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    option.name = "cpu_device_count";
    option.name_size = std::strlen(option.name);
    option.type = PJRT_NamedValue_kInt64;
    option.int64_value = count;
    option.value_size = 1;
    PJRT_Client_Create_Args c{};
    c.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    if (count >= 0) {
      c.create_options = &option;
      c.num_options = 1;
    }
    EXPECT_EQ(Take(api_->PJRT_Client_Create(&c)), "");
    client_ = c.client;
    PJRT_Client_AddressableDevices_Args d{};
    d.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
    d.client = client_;
    EXPECT_EQ(Take(api_->PJRT_Client_AddressableDevices(&d)), "");
    return std::vector<PJRT_Device*>(d.addressable_devices,
                                     d.addressable_devices + d.num_addressable_devices);
  }
  // Compiles with executable_build_options { num_replicas, num_partitions }.
  PJRT_LoadedExecutable* Compile(const char* text, int replicas, int partitions,
                                 std::string* error = nullptr) {
    PJRT_Program program{};
    program.struct_size = PJRT_Program_STRUCT_SIZE;
    program.code = const_cast<char*>(text);
    program.code_size = std::strlen(text);
    program.format = "mlir";
    program.format_size = 4;
    const char options[6] = {
        0x1A, 0x04, 0x20, static_cast<char>(replicas), 0x28, static_cast<char>(partitions)};
    PJRT_Client_Compile_Args c{};
    c.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
    c.client = client_;
    c.program = &program;
    c.compile_options = options;
    c.compile_options_size = sizeof(options);
    std::string e = Take(api_->PJRT_Client_Compile(&c));
    if (error)
      *error = e;
    else
      EXPECT_EQ(e, "");
    return c.executable;
  }
  PJRT_Buffer* Upload(const std::vector<float>& data, PJRT_Device* device) {
    int64_t dims[1] = {static_cast<int64_t>(data.size())};
    PJRT_Client_BufferFromHostBuffer_Args a{};
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = client_;
    a.data = data.data();
    a.type = PJRT_Buffer_Type_F32;
    a.dims = dims;
    a.num_dims = 1;
    a.device = device;
    EXPECT_EQ(Take(api_->PJRT_Client_BufferFromHostBuffer(&a)), "");
    DestroyEvent(a.done_with_host_buffer);
    return a.buffer;
  }
  void DestroyEvent(PJRT_Event* e) {
    PJRT_Event_Destroy_Args d{};
    d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
    d.event = e;
    EXPECT_EQ(api_->PJRT_Event_Destroy(&d), nullptr);
  }
  template <typename T>
  std::vector<T> Download(PJRT_Buffer* b, size_t n) {
    std::vector<T> host(n);
    PJRT_Buffer_ToHostBuffer_Args t{};
    t.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    t.src = b;
    t.dst = host.data();
    t.dst_size = n * sizeof(T);
    EXPECT_EQ(Take(api_->PJRT_Buffer_ToHostBuffer(&t)), "");
    DestroyEvent(t.event);
    return host;
  }
  PJRT_Device* DeviceOf(PJRT_Buffer* b) {
    PJRT_Buffer_Device_Args a{};
    a.struct_size = PJRT_Buffer_Device_Args_STRUCT_SIZE;
    a.buffer = b;
    EXPECT_EQ(Take(api_->PJRT_Buffer_Device(&a)), "");
    return a.device;
  }
  void DestroyBuffer(PJRT_Buffer* b) {
    PJRT_Buffer_Destroy_Args d{};
    d.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
    d.buffer = b;
    EXPECT_EQ(api_->PJRT_Buffer_Destroy(&d), nullptr);
  }
  void DestroyExecutable(PJRT_LoadedExecutable* exe) {
    PJRT_LoadedExecutable_Destroy_Args d{};
    d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
    d.executable = exe;
    EXPECT_EQ(api_->PJRT_LoadedExecutable_Destroy(&d), nullptr);
  }
  // Runs `exe` with one argument per device; returns the error message ("" on success).
  std::string Execute(PJRT_LoadedExecutable* exe, const std::vector<PJRT_Buffer*>& inputs,
                      size_t num_outputs, std::vector<std::vector<PJRT_Buffer*>>& outputs) {
    const size_t n = inputs.size();
    std::vector<PJRT_Buffer* const*> arg_lists(n);
    for (size_t d = 0; d < n; ++d) arg_lists[d] = &inputs[d];
    outputs.assign(n, std::vector<PJRT_Buffer*>(num_outputs, nullptr));
    std::vector<PJRT_Buffer**> out_lists(n);
    for (size_t d = 0; d < n; ++d) out_lists[d] = outputs[d].data();
    std::vector<PJRT_Event*> done(n, nullptr);
    PJRT_LoadedExecutable_Execute_Args e{};
    e.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
    e.executable = exe;
    e.argument_lists = arg_lists.data();
    e.num_devices = n;
    e.num_args = 1;
    e.output_lists = out_lists.data();
    e.device_complete_events = done.data();
    std::string error = Take(api_->PJRT_LoadedExecutable_Execute(&e));
    for (PJRT_Event* ev : done)
      if (ev) DestroyEvent(ev);
    return error;
  }
  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
};

TEST_F(PluginDevices, AllReduceAcrossFourDevicesAndResultsStayOnTheirDevice) {
  std::vector<PJRT_Device*> devices = CreateClient(4);
  ASSERT_EQ(devices.size(), 4u);
  PJRT_LoadedExecutable* exe = Compile(kAllReduce, 4, 1);
  ASSERT_NE(exe, nullptr);
  std::vector<PJRT_Buffer*> inputs;
  for (int d = 0; d < 4; ++d) inputs.push_back(Upload({d + 1.0f, 10.0f * (d + 1)}, devices[d]));
  std::vector<std::vector<PJRT_Buffer*>> outs;
  ASSERT_EQ(Execute(exe, inputs, 2, outs), "");
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(Download<float>(outs[d][0], 2), (std::vector<float>{10, 100}));
    EXPECT_EQ(Download<uint32_t>(outs[d][1], 1), (std::vector<uint32_t>{uint32_t(d)}));
    EXPECT_EQ(DeviceOf(outs[d][0]), devices[d]);
  }
  // The results, still on their devices, feed the next execution.
  std::vector<PJRT_Buffer*> again;
  for (int d = 0; d < 4; ++d) again.push_back(outs[d][0]);
  std::vector<std::vector<PJRT_Buffer*>> outs2;
  ASSERT_EQ(Execute(exe, again, 2, outs2), "");
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(Download<float>(outs2[d][0], 2), (std::vector<float>{40, 400}));
    EXPECT_EQ(DeviceOf(outs2[d][0]), devices[d]);
  }
  for (auto* lists : {&outs, &outs2})
    for (auto& l : *lists)
      for (PJRT_Buffer* b : l) DestroyBuffer(b);
  for (PJRT_Buffer* b : inputs) DestroyBuffer(b);
  DestroyExecutable(exe);
}

TEST_F(PluginDevices, TwoDevicesFromTheEnvironmentAndMismatchesRefused) {
  setenv("TLALOC_CPU_DEVICES", "2", 1);
  std::vector<PJRT_Device*> devices = CreateClient(-1);
  unsetenv("TLALOC_CPU_DEVICES");
  ASSERT_EQ(devices.size(), 2u);
  std::string error;
  EXPECT_EQ(Compile(kAllReduce, 4, 1, &error), nullptr);
  EXPECT_NE(error.find("4 replica(s) x 1 partition(s) do not fit the client's 2 device(s)"),
            std::string::npos)
      << error;
  // Compiled for 2 replicas, the program's 4-member group is refused when it runs.
  PJRT_LoadedExecutable* exe = Compile(kAllReduce, 2, 1);
  ASSERT_NE(exe, nullptr);
  std::vector<PJRT_Buffer*> inputs = {Upload({1, 2}, devices[0]), Upload({3, 4}, devices[1])};
  std::vector<std::vector<PJRT_Buffer*>> outs;
  error = Execute(exe, inputs, 2, outs);
  EXPECT_NE(error.find("replica id 2 is out of range [0, 2)"), std::string::npos) << error;
  // One list for a two-device program is refused, naming both counts.
  error = Execute(exe, {inputs[0]}, 2, outs);
  EXPECT_NE(error.find("2 replica(s) x 1 partition(s), got 1 argument list(s)"), std::string::npos)
      << error;
  for (PJRT_Buffer* b : inputs) DestroyBuffer(b);
  DestroyExecutable(exe);
}

}  // namespace
