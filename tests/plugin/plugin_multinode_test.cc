// Tlaloc's plugin with XLA's multi-process create options (node_id, num_nodes) and the client's
// key-value callbacks: the global device list spans every node, this node's devices are the
// addressable ones. One process plays node 1; the store already holds node 0's publication.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "tlaloc/pjrt/c_api.h"

namespace {

const PJRT_Api* LoadApi() {
  void* handle = dlopen(TLALOC_PJRT_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  if (handle == nullptr) return nullptr;
  auto get = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(handle, "GetPjrtApi"));
  return get ? get() : nullptr;
}

std::string Message(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_Error_Message_Args m{};
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = e;
  api->PJRT_Error_Message(&m);
  std::string s(m.message, m.message_size);
  PJRT_Error_Destroy_Args d{};
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = e;
  api->PJRT_Error_Destroy(&d);
  return s;
}

// The store the callbacks read and write (user_arg), and what they saw.
struct Store {
  std::map<std::string, std::string> values;
  std::vector<std::string> gets, puts;
};

PJRT_Error* Put(PJRT_KeyValuePutCallback_Args* a) {
  auto* s = static_cast<Store*>(a->user_arg);
  const std::string key(a->key, a->key_size);
  s->puts.push_back(key);
  s->values[key] = std::string(a->value, a->value_size);
  return nullptr;
}

PJRT_Error* Get(PJRT_KeyValueGetCallback_Args* a) {
  auto* s = static_cast<Store*>(a->user_arg);
  const std::string key(a->key, a->key_size);
  s->gets.push_back(key);
  auto it = s->values.find(key);
  if (it == s->values.end()) {
    const std::string msg = "no key " + key;
    return (*a->callback_error)(PJRT_Error_Code_NOT_FOUND, msg.data(), msg.size());
  }
  a->value = new char[it->second.size()];
  std::memcpy(a->value, it->second.data(), it->second.size());
  a->value_size = it->second.size();
  a->value_deleter_callback = [](char* p) { delete[] p; };
  return nullptr;
}

PJRT_NamedValue Int(const char* name, int64_t v) {
  PJRT_NamedValue n{};
  n.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  n.name = name;
  n.name_size = std::strlen(name);
  n.type = PJRT_NamedValue_kInt64;
  n.int64_value = v;
  n.value_size = 1;
  return n;
}

PJRT_Error* Create(const PJRT_Api* api, Store* store, int64_t node, int64_t nodes,
                   PJRT_Client** out) {
  PJRT_NamedValue options[] = {Int("cpu_device_count", 2), Int("node_id", node),
                               Int("num_nodes", nodes)};
  PJRT_Client_Create_Args c{};
  c.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  c.create_options = options;
  c.num_options = 3;
  if (store) {
    c.kv_get_callback = Get;
    c.kv_get_user_arg = store;
    c.kv_put_callback = Put;
    c.kv_put_user_arg = store;
  }
  PJRT_Error* e = api->PJRT_Client_Create(&c);
  *out = c.client;
  return e;
}

TEST(TlalocPluginNodes, GlobalDeviceListSpansTheNodesInTheStore) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  Store store;
  store.values["tlaloc_pjrt_cpu:devices_of_node:0"] = "3";  // node 0 holds 3 devices
  PJRT_Client* client = nullptr;
  PJRT_Error* e = Create(api, &store, 1, 2, &client);
  ASSERT_EQ(e, nullptr) << Message(api, e);
  EXPECT_EQ(store.values["tlaloc_pjrt_cpu:devices_of_node:1"], "2");
  EXPECT_EQ(store.gets, (std::vector<std::string>{"tlaloc_pjrt_cpu:devices_of_node:0",
                                                  "tlaloc_pjrt_cpu:devices_of_node:1"}));

  PJRT_Client_ProcessIndex_Args pi{};
  pi.struct_size = PJRT_Client_ProcessIndex_Args_STRUCT_SIZE;
  pi.client = client;
  ASSERT_EQ(api->PJRT_Client_ProcessIndex(&pi), nullptr);
  EXPECT_EQ(pi.process_index, 1);

  PJRT_Client_Devices_Args all{};
  all.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE;
  all.client = client;
  ASSERT_EQ(api->PJRT_Client_Devices(&all), nullptr);
  ASSERT_EQ(all.num_devices, 5u);
  PJRT_Client_AddressableDevices_Args mine{};
  mine.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  mine.client = client;
  ASSERT_EQ(api->PJRT_Client_AddressableDevices(&mine), nullptr);
  ASSERT_EQ(mine.num_addressable_devices, 2u);
  EXPECT_EQ(mine.addressable_devices[0], all.devices[3]);
  EXPECT_EQ(mine.addressable_devices[1], all.devices[4]);

  for (size_t i = 0; i < all.num_devices; ++i) {
    PJRT_Device_GetDescription_Args gd{};
    gd.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
    gd.device = all.devices[i];
    ASSERT_EQ(api->PJRT_Device_GetDescription(&gd), nullptr);
    PJRT_DeviceDescription_Id_Args id{};
    id.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE;
    id.device_description = gd.device_description;
    ASSERT_EQ(api->PJRT_DeviceDescription_Id(&id), nullptr);
    EXPECT_EQ(id.id, static_cast<int>(i));
    PJRT_DeviceDescription_ProcessIndex_Args p{};
    p.struct_size = PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE;
    p.device_description = gd.device_description;
    ASSERT_EQ(api->PJRT_DeviceDescription_ProcessIndex(&p), nullptr);
    EXPECT_EQ(p.process_index, i < 3 ? 0 : 1) << "device " << i;
    PJRT_Device_IsAddressable_Args a{};
    a.struct_size = PJRT_Device_IsAddressable_Args_STRUCT_SIZE;
    a.device = all.devices[i];
    ASSERT_EQ(api->PJRT_Device_IsAddressable(&a), nullptr);
    EXPECT_EQ(a.is_addressable, i >= 3) << "device " << i;
  }
  PJRT_Client_LookupDevice_Args look{};
  look.struct_size = PJRT_Client_LookupDevice_Args_STRUCT_SIZE;
  look.client = client;
  look.id = 4;
  ASSERT_EQ(api->PJRT_Client_LookupDevice(&look), nullptr);
  EXPECT_EQ(look.device, all.devices[4]);

  PJRT_Client_Destroy_Args d{};
  d.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  d.client = client;
  EXPECT_EQ(api->PJRT_Client_Destroy(&d), nullptr);
}

TEST(TlalocPluginNodes, SeveralNodesNeedTheStoreAndAValidNodeId) {
  const PJRT_Api* api = LoadApi();
  ASSERT_NE(api, nullptr);
  PJRT_Client* client = nullptr;
  PJRT_Error* e = Create(api, nullptr, 0, 2, &client);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(Message(api, e).find("kv_get_callback and kv_put_callback"), std::string::npos);
  Store store;
  e = Create(api, &store, 2, 2, &client);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(Message(api, e).find("node_id 2 is not below num_nodes 2"), std::string::npos);
  // Node 0 never published: the store's error comes back.
  e = Create(api, &store, 1, 2, &client);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(Message(api, e).find("no key tlaloc_pjrt_cpu:devices_of_node:0"), std::string::npos);
}

}  // namespace
