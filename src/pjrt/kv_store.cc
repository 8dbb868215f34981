// In-memory and MPI-world key-value stores for multi-process PJRT clients (kv_store.h).
#include "tlaloc/pjrt/kv_store.h"

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace tlaloc::pjrt {

namespace {

class InMemoryStore : public KeyValueStore {
 public:
  Status Put(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
    return OkStatus();
  }
  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds) override {
    return TryGet(key);
  }
  StatusOr<std::string> TryGet(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it == values_.end()) return NotFound("key-value store: no key '" + key + "'");
    return it->second;
  }

 protected:
  std::mutex mu_;
  std::map<std::string, std::string> values_;
};

void AppendString(const std::string& s, std::string& out) {
  const uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out += s;
}

bool ReadString(const std::string& bytes, size_t& pos, std::string& s) {
  uint64_t n = 0;
  if (pos > bytes.size() || bytes.size() - pos < sizeof(n)) return false;
  std::memcpy(&n, bytes.data() + pos, sizeof(n));
  pos += sizeof(n);
  if (bytes.size() - pos < n) return false;
  s = bytes.substr(pos, n);
  pos += n;
  return true;
}

class WorldStore : public InMemoryStore {
 public:
  explicit WorldStore(ProcessWorld& world) : world_(world) {}

  Status Put(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
    pending_.emplace_back(key, value);
    return OkStatus();
  }

  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    if (auto held = TryGet(key); held.ok()) return held;
    std::string mine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [k, v] : pending_) {
        AppendString(k, mine);
        AppendString(v, mine);
      }
      pending_.clear();
    }
    TL_ASSIGN_OR_RETURN(
        auto all, world_.AllGather(mine, timeout, "the PJRT key-value store (get '" + key + "')"));
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& bytes : all) {
      size_t pos = 0;
      std::string k, v;
      while (pos < bytes.size()) {
        if (!ReadString(bytes, pos, k) || !ReadString(bytes, pos, v))
          return DataLoss("key-value store: malformed entries from another rank");
        values_[k] = v;
      }
    }
    auto it = values_.find(key);
    if (it == values_.end())
      return NotFound("key-value store: no rank of " + std::to_string(world_.size()) + " put '" +
                      key + "' before this get");
    return it->second;
  }

 private:
  ProcessWorld& world_;
  std::vector<std::pair<std::string, std::string>> pending_;  // puts not yet exchanged
};

}  // namespace

std::shared_ptr<KeyValueStore> MakeInMemoryKeyValueStore() {
  return std::make_shared<InMemoryStore>();
}

std::shared_ptr<KeyValueStore> MakeWorldKeyValueStore(ProcessWorld& world) {
  return std::make_shared<WorldStore>(world);
}

}  // namespace tlaloc::pjrt
