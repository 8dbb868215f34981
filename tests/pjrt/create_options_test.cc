// The runbook's platform gate on client create options, both cross-wirings.
#include <gtest/gtest.h>

#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {
namespace {

SessionOptions For(PjrtTarget t) {
  SessionOptions o;
  o.target = t;
  return o;
}

TEST(CreateOptions, TpuSendsOnlyPremappedBufferSizeDefaultZero) {
  auto opts = BuildCreateOptions(For(PjrtTarget::Tpu()), std::nullopt);
  ASSERT_TRUE(opts.ok()) << opts.status().ToString();
  ASSERT_EQ(opts->size(), 1u);
  EXPECT_EQ((*opts)[0].name, "premapped_buffer_size");
  ASSERT_TRUE(std::holds_alternative<int64_t>((*opts)[0].value));
  EXPECT_EQ(std::get<int64_t>((*opts)[0].value), 0);
}

TEST(CreateOptions, TpuReadsPremappedBufferSizeFromEnvironment) {
  auto opts = BuildCreateOptions(For(PjrtTarget::Tpu()), std::string("1073741824"));
  ASSERT_TRUE(opts.ok());
  EXPECT_EQ(std::get<int64_t>((*opts)[0].value), int64_t{1} << 30);
  auto bad = BuildCreateOptions(For(PjrtTarget::Tpu()), std::string("4GiB"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TPU_PREMAPPED_BUFFER_SIZE"), std::string::npos);
}

TEST(CreateOptions, TpuRefusesGpuOptionsByName) {
  auto o = For(PjrtTarget::Tpu());
  o.memory_fraction = 0.5f;
  auto r = BuildCreateOptions(o, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("memory_fraction"), std::string::npos);
  auto p = For(PjrtTarget::Tpu());
  p.preallocate = false;
  EXPECT_NE(BuildCreateOptions(p, std::nullopt).status().message().find("preallocate"),
            std::string::npos);
  auto extra = For(PjrtTarget::Tpu());
  extra.extra_options.push_back({"allocator", std::string("bfc")});
  EXPECT_NE(BuildCreateOptions(extra, std::nullopt).status().message().find("allocator"),
            std::string::npos);
}

TEST(CreateOptions, GpuSendsAllocatorOptionsAndRefusesTpuOption) {
  auto o = For(PjrtTarget::Cuda());
  o.memory_fraction = 0.75f;
  o.preallocate = false;
  o.allocator = "bfc";
  auto r = BuildCreateOptions(o, std::string("123"));  // the TPU variable is ignored here
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (NamedOption{"memory_fraction", 0.75f}));
  EXPECT_EQ((*r)[1], (NamedOption{"preallocate", false}));
  EXPECT_EQ((*r)[2], (NamedOption{"allocator", std::string("bfc")}));
  auto t = For(PjrtTarget::Cuda());
  t.premapped_buffer_size = 0;
  auto refused = BuildCreateOptions(t, std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("premapped_buffer_size"), std::string::npos);
  auto bad = For(PjrtTarget::Cuda());
  bad.allocator = "magic";
  EXPECT_FALSE(BuildCreateOptions(bad, std::nullopt).ok());
  auto frac = For(PjrtTarget::Cuda());
  frac.memory_fraction = 1.5f;
  EXPECT_FALSE(BuildCreateOptions(frac, std::nullopt).ok());
}

TEST(CreateOptions, CpuSendsDeviceCountOnlyWhenAsked) {
  auto none = BuildCreateOptions(For(PjrtTarget::Cpu()), std::string("99"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto o = For(PjrtTarget::Cpu());
  o.cpu_device_count = 4;
  auto r = BuildCreateOptions(o, std::nullopt);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], (NamedOption{"cpu_device_count", int64_t{4}}));
  auto g = For(PjrtTarget::Cpu());
  g.memory_fraction = 0.5f;
  EXPECT_FALSE(BuildCreateOptions(g, std::nullopt).ok());
}

TEST(CreateOptions, ExplicitPathsGateByFileName) {
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::Path("/opt/libtpu/libtpu.so")), OptionFamily::kTpu);
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::Path("/x/pjrt_c_api_tpu_plugin.so")), OptionFamily::kTpu);
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::Path("/x/xla_cuda13/xla_cuda_plugin.so")),
            OptionFamily::kGpu);
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::Path("/x/libtlaloc_pjrt_cpu.so")), OptionFamily::kCpu);
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::XlaCpu()), OptionFamily::kCpu);
  EXPECT_EQ(OptionFamilyOf(PjrtTarget::Path("/x/pjrt_c_api_cpu_plugin.so")), OptionFamily::kCpu);
  auto o = For(PjrtTarget::Path("/usr/lib/libtpu.so"));
  o.preallocate = true;
  EXPECT_FALSE(BuildCreateOptions(o, std::nullopt).ok());
}

TEST(CreateOptions, ExecuteOptionsZeroMultiTaskFields) {
  std::vector<int64_t> keep = {1, 3};
  PJRT_ExecuteOptions o = MakeExecuteOptions(keep);
  EXPECT_EQ(o.struct_size, PJRT_ExecuteOptions_STRUCT_SIZE);
  EXPECT_EQ(o.launch_id, 0);
  EXPECT_EQ(o.num_tasks, 0u);
  EXPECT_EQ(o.task_ids, nullptr);
  EXPECT_EQ(o.incarnation_ids, nullptr);
  EXPECT_EQ(o.multi_slice_config, nullptr);
  EXPECT_EQ(o.context, nullptr);
  EXPECT_EQ(o.num_non_donatable_input_indices, 2u);
  EXPECT_EQ(o.non_donatable_input_indices[1], 3);
}

}  // namespace
}  // namespace tlaloc::pjrt
