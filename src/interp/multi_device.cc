#include "tlaloc/interp/multi_device.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

namespace tlaloc {

namespace {

std::string FormatIds(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Where the devices of one execution meet. A collective is identified by its ordinal on each
// device (the k-th collective a device enters) and the set of its group's members.
class Rendezvous {
 public:
  Rendezvous(int64_t num_devices, std::chrono::milliseconds timeout)
      : timeout_(timeout),
        entered_(num_devices, 0),
        done_(num_devices, false),
        failed_(num_devices) {}

  StatusOr<std::vector<std::vector<Literal>>> Exchange(int64_t device, const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) {
    std::vector<int64_t> members = group;
    std::sort(members.begin(), members.end());
    if (std::adjacent_find(members.begin(), members.end()) != members.end() ||
        !std::binary_search(members.begin(), members.end(), device))
      return Internal(what + ": bad process group " + FormatIds(group));
    for (int64_t m : members)
      if (m < 0 || m >= static_cast<int64_t>(entered_.size()))
        return InvalidArgument(what + ": process group " + FormatIds(group) + " names device " +
                               std::to_string(m) + ", the run has " +
                               std::to_string(entered_.size()));
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t ordinal = entered_[device]++;
    const std::string label = what + " with group " + FormatIds(group);
    seen_[{device, ordinal}] = label;
    const SlotKey key{ordinal, members, what};
    Slot& slot = slots_[key];
    slot.values[device] = std::move(values);
    cv_.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    Status problem;
    while (slot.values.size() < members.size()) {
      problem = CheckMembers(slot, members, ordinal, label);
      if (!problem.ok()) break;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
          slot.values.size() < members.size()) {
        std::vector<int64_t> missing;
        for (int64_t m : members)
          if (!slot.values.count(m)) missing.push_back(m);
        problem =
            Status(StatusCode::kDeadlineExceeded,
                   "device " + std::to_string(device) + " waited " +
                       std::to_string(timeout_.count()) + " ms at " + label + " (its collective #" +
                       std::to_string(ordinal) + ") for device(s) " + FormatIds(missing));
        break;
      }
    }
    std::vector<std::vector<Literal>> out;
    if (problem.ok()) {
      for (int64_t m : group) out.push_back(slot.values.at(m));
    }
    // The last arrived member to leave removes the slot; values stay alive through the copies
    // taken above.
    if (++slot.departed == static_cast<int64_t>(slot.values.size())) slots_.erase(key);
    if (!problem.ok()) return problem;
    return out;
  }

  void Finish(int64_t device) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[device] = true;
    cv_.notify_all();
  }

  void Fail(int64_t device, const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[device] = true;
    failed_[device] = status;
    order_.push_back(device);
    cv_.notify_all();
  }

  // The device that failed first, if any.
  std::optional<int64_t> FirstFailure() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (order_.empty()) return std::nullopt;
    return order_.front();
  }

 private:
  // The devices' ordinal of the collective, its members (sorted) and its op: members that
  // disagree on any of them wait in different slots and are told so by CheckMembers.
  using SlotKey = std::tuple<int64_t, std::vector<int64_t>, std::string>;
  struct Slot {
    std::map<int64_t, std::vector<Literal>> values;  // by device
    int64_t departed = 0;
  };

  // Why a member that has not arrived never will, or OK while it still may.
  Status CheckMembers(const Slot& slot, const std::vector<int64_t>& members, int64_t ordinal,
                      const std::string& label) const {
    for (int64_t m : members) {
      if (slot.values.count(m)) continue;
      const std::string who = "device " + std::to_string(m);
      if (failed_[m])
        return Status(StatusCode::kAborted,
                      label + " abandoned: " + who + " failed: " + failed_[m]->message());
      if (done_[m])
        return FailedPrecondition(label + ": " + who +
                                  " finished its program without reaching it (collective #" +
                                  std::to_string(ordinal) + ")");
      if (entered_[m] > ordinal) {
        auto it = seen_.find({m, ordinal});
        return InvalidArgument(label + " (collective #" + std::to_string(ordinal) + "): " + who +
                               " reached " + (it == seen_.end() ? "another" : it->second) +
                               " instead");
      }
    }
    return OkStatus();
  }

  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> entered_;
  std::vector<bool> done_;
  std::vector<std::optional<Status>> failed_;
  std::vector<int64_t> order_;
  std::map<SlotKey, Slot> slots_;
  std::map<std::pair<int64_t, int64_t>, std::string> seen_;  // (device, ordinal) -> label
};

class DeviceContext : public CollectiveContext {
 public:
  DeviceContext(Rendezvous& rdv, const ProcessGrid& grid, int64_t device)
      : rdv_(rdv), grid_(grid), device_(device) {}
  const ProcessGrid& grid() const override { return grid_; }
  int64_t device() const override { return device_; }
  StatusOr<std::vector<std::vector<Literal>>> Exchange(const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) override {
    return rdv_.Exchange(device_, what, group, std::move(values));
  }

 private:
  Rendezvous& rdv_;
  const ProcessGrid& grid_;
  int64_t device_;
};

std::chrono::milliseconds DefaultTimeout() {
  if (const char* env = std::getenv("TLALOC_COLLECTIVE_TIMEOUT_S")) {
    char* end = nullptr;
    double s = std::strtod(env, &end);
    if (end != env && *end == '\0' && s > 0)
      return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return std::chrono::seconds(300);
}

}  // namespace

StatusOr<std::vector<std::vector<Literal>>> ExecuteOnDevices(const Executable& exe,
                                                             std::vector<std::vector<Literal>> args,
                                                             const ProcessGrid& grid,
                                                             MultiDeviceOptions options,
                                                             std::vector<ExecutionStats>* stats) {
  const int64_t n = grid.num_processes();
  if (grid.num_replicas < 1 || grid.num_partitions < 1)
    return InvalidArgument("a process grid needs at least one replica and one partition");
  if (static_cast<int64_t>(args.size()) != n)
    return InvalidArgument("the grid has " + std::to_string(grid.num_replicas) + " replica(s) x " +
                           std::to_string(grid.num_partitions) +
                           " partition(s) = " + std::to_string(n) + " device(s), got " +
                           std::to_string(args.size()) + " argument list(s)");
  Rendezvous rdv(n, options.timeout.count() > 0 ? options.timeout : DefaultTimeout());
  std::vector<std::optional<StatusOr<std::vector<Literal>>>> outs(n);
  if (stats) stats->assign(n, ExecutionStats{});
  auto run = [&](int64_t d) {
    DeviceContext ctx(rdv, grid, d);
    ScopedCollectiveContext scope(&ctx);
    auto r = exe.Execute(std::move(args[d]), stats ? &(*stats)[d] : nullptr);
    if (r.ok())
      rdv.Finish(d);
    else
      rdv.Fail(d, r.status());
    outs[d] = std::move(r);
  };
  std::vector<std::thread> threads;
  for (int64_t d = 1; d < n; ++d) threads.emplace_back(run, d);
  run(0);
  for (auto& t : threads) t.join();
  if (auto first = rdv.FirstFailure())
    return outs[*first]->status().WithContext("device " + std::to_string(*first));
  std::vector<std::vector<Literal>> results;
  for (auto& o : outs) results.push_back(std::move(**o));
  return results;
}

StatusOr<int> CpuDevicesFromEnvironment() {
  const char* env = std::getenv("TLALOC_CPU_DEVICES");
  if (!env || !*env) return 1;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || v < 1 || v > 4096)
    return InvalidArgument("TLALOC_CPU_DEVICES must be a device count in [1, 4096], got '" +
                           std::string(env) + "'");
  return static_cast<int>(v);
}

}  // namespace tlaloc
