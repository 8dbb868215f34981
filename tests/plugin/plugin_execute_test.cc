// Executing through the raw C ABI as an older client would: PJRT_ExecuteOptions of the 0.60
// size (before context, call_location and the task fields were appended).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tlaloc/pjrt/c_api.h"

namespace {

constexpr const char* kStep = R"(
func.func public @main(%w: tensor<3xf32> {tf.aliasing_output = 0 : i32}, %g: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.subtract %w, %g : tensor<3xf32>
  return %0 : tensor<3xf32>
})";

class RawPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    void* handle = dlopen(TLALOC_PJRT_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    api_ = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"))();
    PJRT_Client_Create_Args c{};
    c.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    ASSERT_EQ(api_->PJRT_Client_Create(&c), nullptr);
    client_ = c.client;
    PJRT_Client_AddressableDevices_Args d{};
    d.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
    d.client = client_;
    ASSERT_EQ(api_->PJRT_Client_AddressableDevices(&d), nullptr);
    device_ = d.addressable_devices[0];
  }
  void TearDown() override {
    if (client_ == nullptr) return;
    PJRT_Client_Destroy_Args d{};
    d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
    d.client = client_;
    EXPECT_EQ(api_->PJRT_Client_Destroy(&d), nullptr);
  }
  PJRT_Buffer* Upload(const float* data) {
    int64_t dims[1] = {3};
    PJRT_Client_BufferFromHostBuffer_Args a{};
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = client_;
    a.data = data;
    a.type = PJRT_Buffer_Type_F32;
    a.dims = dims;
    a.num_dims = 1;
    a.device = device_;
    EXPECT_EQ(api_->PJRT_Client_BufferFromHostBuffer(&a), nullptr);
    DestroyEvent(a.done_with_host_buffer);
    return a.buffer;
  }
  void DestroyEvent(PJRT_Event* e) {
    PJRT_Event_Destroy_Args d{};
    d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
    d.event = e;
    EXPECT_EQ(api_->PJRT_Event_Destroy(&d), nullptr);
  }
  bool IsDeleted(PJRT_Buffer* b) {
    PJRT_Buffer_IsDeleted_Args a{};
    a.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE;
    a.buffer = b;
    EXPECT_EQ(api_->PJRT_Buffer_IsDeleted(&a), nullptr);
    return a.is_deleted;
  }
  void DestroyBuffer(PJRT_Buffer* b) {
    PJRT_Buffer_Destroy_Args d{};
    d.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
    d.buffer = b;
    EXPECT_EQ(api_->PJRT_Buffer_Destroy(&d), nullptr);
  }
  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  PJRT_Device* device_ = nullptr;
};

TEST_F(RawPlugin, OldExecuteOptionsStillVetoDonation) {
  PJRT_Program program{};
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = const_cast<char*>(kStep);
  program.code_size = std::strlen(kStep);
  program.format = "mlir";
  program.format_size = 4;
  PJRT_Client_Compile_Args c{};
  c.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  c.client = client_;
  c.program = &program;  // no compile options: one replica, one partition
  ASSERT_EQ(api_->PJRT_Client_Compile(&c), nullptr);

  const float w_data[3] = {1, 2, 3}, g_data[3] = {1, 1, 1};
  PJRT_Buffer* w = Upload(w_data);
  PJRT_Buffer* g = Upload(g_data);
  PJRT_Buffer* args[2] = {w, g};
  PJRT_Buffer* const* arg_lists[1] = {args};

  for (bool keep : {true, false}) {
    int64_t keep_index = 0;
    PJRT_ExecuteOptions options{};
    options.struct_size = kPjrtExecuteOptionsSizeV60;
    if (keep) {
      options.non_donatable_input_indices = &keep_index;
      options.num_non_donatable_input_indices = 1;
    }
    PJRT_Buffer* out[1] = {nullptr};
    PJRT_Buffer** out_lists[1] = {out};
    PJRT_Event* done[1] = {nullptr};
    PJRT_LoadedExecutable_Execute_Args e{};
    e.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
    e.executable = c.executable;
    e.options = &options;
    e.argument_lists = arg_lists;
    e.num_devices = 1;
    e.num_args = 2;
    e.output_lists = out_lists;
    e.device_complete_events = done;
    ASSERT_EQ(api_->PJRT_LoadedExecutable_Execute(&e), nullptr);
    DestroyEvent(done[0]);
    EXPECT_EQ(IsDeleted(w), !keep);
    float host[3] = {};
    PJRT_Buffer_ToHostBuffer_Args t{};
    t.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    t.src = out[0];
    t.dst = host;
    t.dst_size = sizeof(host);
    ASSERT_EQ(api_->PJRT_Buffer_ToHostBuffer(&t), nullptr);
    DestroyEvent(t.event);
    EXPECT_EQ(host[0], 0.0f);
    EXPECT_EQ(host[2], 2.0f);
    DestroyBuffer(out[0]);
  }
  DestroyBuffer(w);
  DestroyBuffer(g);
  PJRT_LoadedExecutable_Destroy_Args d{};
  d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  d.executable = c.executable;
  EXPECT_EQ(api_->PJRT_LoadedExecutable_Destroy(&d), nullptr);
}

}  // namespace
