// The ABI facts Tlaloc's declarations must match on LP64 (x86_64 and aarch64 alike): slot
// order of PJRT_Api and field offsets of the structs that cross the boundary.
#include "tlaloc/pjrt/c_api.h"

#include <gtest/gtest.h>

#include <string>

namespace tlaloc::pjrt {
namespace {

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "these offsets are for LP64");

TEST(PjrtCApi, ExecuteOptionsHasPaddingAfterLaunchId) {
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, struct_size), 0u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, extension_start), 8u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, send_callbacks), 16u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, recv_callbacks), 24u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, num_send_ops), 32u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, num_recv_ops), 40u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, launch_id), 48u);
  EXPECT_EQ(sizeof(PJRT_ExecuteOptions::launch_id), 4u);
  // Four bytes of padding: the pointer that follows is 8-aligned.
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, non_donatable_input_indices), 56u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices), 64u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, context), 72u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, call_location), 80u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, num_tasks), 88u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, task_ids), 96u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, incarnation_ids), 104u);
  EXPECT_EQ(offsetof(PJRT_ExecuteOptions, multi_slice_config), 112u);
  EXPECT_EQ(PJRT_ExecuteOptions_STRUCT_SIZE, 120u);
  EXPECT_EQ(kPjrtExecuteOptionsSizeV60, 72u);
}

TEST(PjrtCApi, ExecuteArgsLayout) {
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, executable), 16u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, options), 24u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, argument_lists), 32u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, num_devices), 40u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, num_args), 48u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, output_lists), 56u);
  EXPECT_EQ(offsetof(PJRT_LoadedExecutable_Execute_Args, device_complete_events), 64u);
  EXPECT_EQ(PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE, 80u);
}

TEST(PjrtCApi, NamedValueAndHostBufferLayouts) {
  EXPECT_EQ(offsetof(PJRT_NamedValue, type), 32u);
  EXPECT_EQ(offsetof(PJRT_NamedValue, int64_value), 40u);
  EXPECT_EQ(offsetof(PJRT_NamedValue, value_size), 48u);
  EXPECT_EQ(PJRT_NamedValue_STRUCT_SIZE, 56u);
  EXPECT_EQ(offsetof(PJRT_Client_BufferFromHostBuffer_Args, type), 32u);
  EXPECT_EQ(offsetof(PJRT_Client_BufferFromHostBuffer_Args, dims), 40u);
  EXPECT_EQ(offsetof(PJRT_Client_BufferFromHostBuffer_Args, host_buffer_semantics), 72u);
  EXPECT_EQ(offsetof(PJRT_Client_BufferFromHostBuffer_Args, device), 80u);
  EXPECT_EQ(PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE, 120u);
  // The published size of the attributes query ends at `attributes`.
  EXPECT_EQ(PJRT_Plugin_Attributes_Args_STRUCT_SIZE, 24u);
  EXPECT_EQ(PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE, 24u + 10 * 8u);
}

TEST(PjrtCApi, ApiTableOrderIsTheAbi) {
  EXPECT_EQ(offsetof(PJRT_Api, pjrt_api_version), 16u);
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_Error_Destroy), 40u);
  EXPECT_EQ(kNumApiSlots, 104);
  EXPECT_EQ(PJRT_Api_STRUCT_SIZE, 40u + 104u * 8u);
  // A few anchors from the published table (index = position after the version struct).
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_Client_Create), ApiSlotOffset(10));
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_Client_Compile), ApiSlotOffset(20));
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_LoadedExecutable_Execute), ApiSlotOffset(55));
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_Compile), ApiSlotOffset(89));
  EXPECT_EQ(offsetof(PJRT_Api, PJRT_Executable_GetCompiledMemoryStats), ApiSlotOffset(96));
  EXPECT_EQ(std::string(kApiSlotNames[0]), "PJRT_Error_Destroy");
  EXPECT_EQ(std::string(kApiSlotNames[20]), "PJRT_Client_Compile");
  EXPECT_EQ(std::string(kApiSlotNames[kNumApiSlots - 1]),
            "PJRT_Client_CreateBuffersForAsyncHostToDevice");
}

}  // namespace
}  // namespace tlaloc::pjrt
