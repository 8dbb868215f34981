// Tlaloc's plugin seen as any PJRT client sees it: one exported symbol, a full table, checks
// on every call.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/pjrt/c_api.h"

namespace {

const PJRT_Api* LoadApi() {
  void* handle = dlopen(TLALOC_PJRT_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  if (handle == nullptr) return nullptr;
  auto get = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"));
  EXPECT_NE(get, nullptr);
  return get ? get() : nullptr;
}

std::string Message(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_Error_Message_Args m{};
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = e;
  api->PJRT_Error_Message(&m);
  return std::string(m.message, m.message_size);
}

PJRT_Error_Code Code(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_Error_GetCode_Args c{};
  c.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  c.error = e;
  EXPECT_EQ(api->PJRT_Error_GetCode(&c), nullptr);
  return c.code;
}

void Destroy(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_Error_Destroy_Args d{};
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = e;
  api->PJRT_Error_Destroy(&d);
}

TEST(TlalocPlugin, ExportsOnlyGetPjrtApi) {
  void* handle = dlopen(TLALOC_PJRT_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr);
  EXPECT_NE(dlsym(handle, "GetPjrtApi"), nullptr);
  // Internal symbols (Tlaloc's own C++ API, the stubs) stay hidden.
  EXPECT_EQ(dlsym(handle,
                  "_ZN6tlaloc11ParseModuleESt17basic_string_viewIcSt11char_traitsIcEES3_"
                  "RKNS_12ParseOptionsE"),
            nullptr);
}

TEST(TlalocPlugin, FillsEverySlotOfItsTable) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, PJRT_Api_STRUCT_SIZE);
  EXPECT_EQ(api->pjrt_api_version.major_version, 0);
  EXPECT_EQ(api->pjrt_api_version.minor_version, TL_PJRT_API_MINOR);
  for (int i = 0; i < tlaloc::pjrt::kNumApiSlots; ++i) {
    const void* fn = *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(api) +
                                                     tlaloc::pjrt::ApiSlotOffset(i));
    EXPECT_NE(fn, nullptr) << tlaloc::pjrt::kApiSlotNames[i];
  }
}

TEST(TlalocPlugin, UnsupportedSlotsReturnUnimplementedByName) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  struct {
    size_t struct_size;
    PJRT_Extension_Base* extension_start;
    void* payload[8];
  } args{};
  args.struct_size = sizeof(args);
  PJRT_Error* e =
      api->PJRT_Executable_Serialize(reinterpret_cast<PJRT_Executable_Serialize_Args*>(&args));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Code(api, e), PJRT_Error_Code_UNIMPLEMENTED);
  EXPECT_NE(Message(api, e).find("PJRT_Executable_Serialize"), std::string::npos);
  Destroy(api, e);
  e = api->PJRT_TopologyDescription_Serialize(
      reinterpret_cast<PJRT_TopologyDescription_Serialize_Args*>(&args));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Code(api, e), PJRT_Error_Code_UNIMPLEMENTED);
  Destroy(api, e);
}

TEST(TlalocPlugin, ChecksStructSizeOnEveryCall) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  PJRT_Client_Create_Args create{};
  create.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE - 8;  // a header missing `client`
  PJRT_Error* e = api->PJRT_Client_Create(&create);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Code(api, e), PJRT_Error_Code_INVALID_ARGUMENT);
  EXPECT_NE(Message(api, e).find("struct_size"), std::string::npos);
  Destroy(api, e);
  EXPECT_EQ(create.client, nullptr);

  PJRT_Buffer_IsDeleted_Args is_deleted{};
  is_deleted.struct_size = 4;
  e = api->PJRT_Buffer_IsDeleted(&is_deleted);
  ASSERT_NE(e, nullptr);
  Destroy(api, e);

  e = api->PJRT_Client_Create(nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Code(api, e), PJRT_Error_Code_INVALID_ARGUMENT);
  Destroy(api, e);
}

TEST(TlalocPlugin, AcceptsLargerStructsFromNewerCallers) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  struct Bigger {
    PJRT_Client_Create_Args args;
    char future_fields[32];
  } big{};
  big.args.struct_size = sizeof(big);
  PJRT_Error* e = api->PJRT_Client_Create(&big.args);
  ASSERT_EQ(e, nullptr) << Message(api, e);
  ASSERT_NE(big.args.client, nullptr);
  PJRT_Client_Destroy_Args d{};
  d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  d.client = big.args.client;
  EXPECT_EQ(api->PJRT_Client_Destroy(&d), nullptr);
}

TEST(TlalocPlugin, RefusesUnknownCreateOptionsByName) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = "memory_fraction";
  v.name_size = 15;
  v.type = PJRT_NamedValue_kFloat;
  v.float_value = 0.5f;
  v.value_size = 1;
  PJRT_Client_Create_Args create{};
  create.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  create.create_options = &v;
  create.num_options = 1;
  PJRT_Error* e = api->PJRT_Client_Create(&create);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(Message(api, e).find("memory_fraction"), std::string::npos);
  Destroy(api, e);
}

}  // namespace
