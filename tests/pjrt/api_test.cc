// Version and slot checks on a plugin's table, and PJRT_Error -> Status. The tables are copies
// of Tlaloc's own plugin table with the version or size changed.
#include "tlaloc/pjrt/api.h"

#include <gtest/gtest.h>

#include "pjrt_test_util.h"
#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {
namespace {

const PJRT_Api& PluginTable() {
  static std::shared_ptr<PjrtApi> api = [] {
    auto a = PjrtApi::Load(testing::CpuPluginPath());
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : nullptr;
  }();
  return *api->raw();
}

TEST(PjrtApi, LoadsTlalocPluginAndReadsItsVersion) {
  auto api = PjrtApi::Load(testing::CpuPluginPath());
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ((*api)->major_version(), 0);
  EXPECT_EQ((*api)->minor_version(), TL_PJRT_API_MINOR);
}

TEST(PjrtApi, MissingLibraryAndNonPluginAreClearErrors) {
  auto missing = PjrtApi::Load("/nonexistent/libnothing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/libnothing.so"), std::string::npos);
  auto not_plugin = PjrtApi::Load("libm.so.6");
  ASSERT_FALSE(not_plugin.ok());
  EXPECT_NE(not_plugin.status().message().find("GetPjrtApi"), std::string::npos);
}

TEST(PjrtApi, RefusesADifferentMajor) {
  PJRT_Api table = PluginTable();
  table.pjrt_api_version.major_version = 1;
  auto r = PjrtApi::FromTable(&table, "fake-major");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("1."), std::string::npos);
  EXPECT_NE(r.status().message().find("major"), std::string::npos);
}

TEST(PjrtApi, RefusesAMinorOlderThanTheTableLayout) {
  PJRT_Api table = PluginTable();
  table.pjrt_api_version.minor_version = kMinimumApiMinor - 1;
  auto r = PjrtApi::FromTable(&table, "fake-old");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("0.56"), std::string::npos);
  EXPECT_NE(r.status().message().find("PJRT_Client_Compile"), std::string::npos);
}

TEST(PjrtApi, ToleratesANewerMinor) {
  PJRT_Api table = PluginTable();
  table.pjrt_api_version.minor_version = 115;
  auto api = PjrtApi::FromTable(&table, "fake-new");
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  SessionOptions o;
  o.target = PjrtTarget::Path(testing::CpuPluginPath());
  auto session = PjrtSession::OpenWithApi(*api, o);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
}

TEST(PjrtApi, RefusesATableTooShortForAFunctionTlalocCalls) {
  PJRT_Api table = PluginTable();
  // A table that ends just before PJRT_Executable_GetCompiledMemoryStats.
  table.struct_size = offsetof(PJRT_Api, PJRT_Executable_GetCompiledMemoryStats);
  auto api = PjrtApi::FromTable(&table, "fake-short");
  ASSERT_TRUE(api.ok());  // the version itself is fine
  SessionOptions o;
  o.target = PjrtTarget::Path(testing::CpuPluginPath());
  auto session = PjrtSession::OpenWithApi(*api, o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(session.status().message().find("PJRT_Executable_GetCompiledMemoryStats"),
            std::string::npos)
      << session.status().message();
}

TEST(PjrtApi, RefusesAnEmptySlotByName) {
  PJRT_Api table = PluginTable();
  table.PJRT_Client_Compile = nullptr;
  auto api = PjrtApi::FromTable(&table, "fake-empty");
  ASSERT_TRUE(api.ok());
  Status s = (*api)->CheckSlot(offsetof(PJRT_Api, PJRT_Client_Compile), "PJRT_Client_Compile");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("PJRT_Client_Compile"), std::string::npos);
}

TEST(PjrtApi, ErrorsCarryThePluginsCodeAndMessage) {
  auto api = PjrtApi::Load(testing::CpuPluginPath());
  ASSERT_TRUE(api.ok());
  // A call with a struct_size too small for the plugin: refused with INVALID_ARGUMENT.
  PJRT_Client_Create_Args args{};
  args.struct_size = 8;
  Status s = TL_PJRT_CALL(**api, Client_Create, &args);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("INVALID_ARGUMENT"), std::string::npos);
  EXPECT_NE(s.message().find("struct_size 8"), std::string::npos);
  EXPECT_NE(s.message().find("PJRT_Client_Create"), std::string::npos);
}

TEST(PjrtApi, CodesMapBothWays) {
  EXPECT_EQ(StatusCodeFromPjrt(PJRT_Error_Code_UNIMPLEMENTED), StatusCode::kUnimplemented);
  EXPECT_EQ(StatusCodeFromPjrt(PJRT_Error_Code_RESOURCE_EXHAUSTED), StatusCode::kResourceExhausted);
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kUnimplemented,
        StatusCode::kInternal, StatusCode::kDataLoss, StatusCode::kOutOfRange}) {
    EXPECT_EQ(StatusCodeFromPjrt(PjrtCodeFromStatus(c)), c);
  }
}

}  // namespace
}  // namespace tlaloc::pjrt
