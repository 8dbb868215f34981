// Compile-only topologies of Tlaloc's plugin: "cpu:N" names N interpreter devices, so
// PJRT_Compile (plugin_executable.cc) can check and size a program for N devices with no client,
// as libtpu does for "v6e:2x2". The compiled memory statistics come from the interpreter's plan.
#include <charconv>
#include <string_view>

#include "plugin/plugin_internal.h"

namespace tlaloc::plugin {

namespace {

constexpr int64_t kMaxTopologyDevices = 1024;

// "cpu:N" -> N; "cpu" or "" -> TLALOC_CPU_DEVICES, else 1.
StatusOr<int64_t> ParseTopologyName(std::string_view name) {
  if (name.empty() || name == "cpu") return DefaultDeviceCount();
  constexpr std::string_view kPrefix = "cpu:";
  if (name.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view digits = name.substr(kPrefix.size());
    int64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc() && end == digits.data() + digits.size() && n >= 1 &&
        n <= kMaxTopologyDevices) {
      return n;
    }
  }
  return InvalidArgument("topology '" + std::string(name) +
                         "' is not one Tlaloc's plugin knows: expected cpu:N with N in 1.." +
                         std::to_string(kMaxTopologyDevices));
}

}  // namespace

PJRT_Error* Plugin_TopologyDescription_Create(PJRT_TopologyDescription_Create_Args* args) {
  static const char* fn = "PJRT_TopologyDescription_Create";
  TL_PLUGIN_CHECK(args, PJRT_TopologyDescription_Create_Args, fn);
  if (args->num_options > 0 && args->create_options != nullptr) {
    const PJRT_NamedValue& v = args->create_options[0];
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, std::string(fn) + ": unknown option '" +
                                                           std::string(v.name, v.name_size) +
                                                           "' (a cpu:N topology takes none)");
  }
  std::string_view name(args->topology_name ? args->topology_name : "",
                        args->topology_name ? args->topology_name_size : 0);
  auto n = ParseTopologyName(name);
  if (!n.ok()) return FromStatus(n.status().WithContext(fn));
  auto t = std::make_unique<PJRT_TopologyDescription>();
  t->platform_version = "tlaloc-interpreter 0.1.0 (compile-only cpu:" + std::to_string(*n) + ")";
  for (int64_t i = 0; i < *n; ++i) {
    auto d = std::make_unique<PJRT_DeviceDescription>();
    d->id = static_cast<int>(i);
    d->to_string = "TlalocCpuDevice(id=" + std::to_string(i) + ")";
    d->debug_string = "Tlaloc interpreter CPU device " + std::to_string(i) + " (compile-only)";
    t->descriptions.push_back(d.get());
    t->owned.push_back(std::move(d));
  }
  args->topology = t.release();
  return nullptr;
}

PJRT_Error* Plugin_TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_TopologyDescription_Destroy_Args, "PJRT_TopologyDescription_Destroy");
  delete args->topology;
  return nullptr;
}

PJRT_Error* Plugin_TopologyDescription_PlatformName(
    PJRT_TopologyDescription_PlatformName_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_TopologyDescription_PlatformName_Args,
                  "PJRT_TopologyDescription_PlatformName");
  TL_PLUGIN_REQUIRE(args->topology != nullptr, INVALID_ARGUMENT,
                    "PJRT_TopologyDescription_PlatformName: null topology");
  args->platform_name = args->topology->platform_name.data();
  args->platform_name_size = args->topology->platform_name.size();
  return nullptr;
}

PJRT_Error* Plugin_TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_TopologyDescription_PlatformVersion_Args,
                  "PJRT_TopologyDescription_PlatformVersion");
  TL_PLUGIN_REQUIRE(args->topology != nullptr, INVALID_ARGUMENT,
                    "PJRT_TopologyDescription_PlatformVersion: null topology");
  args->platform_version = args->topology->platform_version.data();
  args->platform_version_size = args->topology->platform_version.size();
  return nullptr;
}

PJRT_Error* Plugin_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args) {
  TL_PLUGIN_CHECK(args, PJRT_TopologyDescription_GetDeviceDescriptions_Args,
                  "PJRT_TopologyDescription_GetDeviceDescriptions");
  TL_PLUGIN_REQUIRE(args->topology != nullptr, INVALID_ARGUMENT,
                    "PJRT_TopologyDescription_GetDeviceDescriptions: null topology");
  args->descriptions = args->topology->descriptions.data();
  args->num_descriptions = args->topology->descriptions.size();
  return nullptr;
}

}  // namespace tlaloc::plugin
