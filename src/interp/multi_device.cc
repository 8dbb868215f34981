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

// What both meeting places below keep of their local devices: how many collectives each
// entered, which finished or failed, and in what order they failed. A device that finishes or
// fails wakes every waiter, so none waits for a member that will never come.
class DeviceProgress {
 public:
  DeviceProgress(int64_t first, int64_t count)
      : first_(first), entered_(count, 0), done_(count, false), failed_(count) {}

  void Finish(int64_t device) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[device - first_] = true;
    cv_.notify_all();
  }

  void Fail(int64_t device, const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[device - first_] = true;
    failed_[device - first_] = status;
    order_.push_back(device);
    cv_.notify_all();
  }

  // The device that failed first, if any.
  std::optional<int64_t> FirstFailure() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (order_.empty()) return std::nullopt;
    return order_.front();
  }

 protected:
  int64_t num_local() const { return static_cast<int64_t>(entered_.size()); }
  int64_t& entered(int64_t device) { return entered_[device - first_]; }
  int64_t entered(int64_t device) const { return entered_[device - first_]; }

  // Why `device`, absent from collective #ordinal, will never reach it because it failed or
  // finished; OK while it still may. The caller holds mu_.
  Status WhyNeverArrives(int64_t device, int64_t ordinal, const std::string& label) const {
    const std::string who = "device " + std::to_string(device);
    if (const auto& failure = failed_[device - first_])
      return Status(StatusCode::kAborted,
                    label + " abandoned: " + who + " failed: " + failure->message());
    if (done_[device - first_])
      return FailedPrecondition(label + ": " + who +
                                " finished its program without reaching it (collective #" +
                                std::to_string(ordinal) + ")");
    return OkStatus();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;

 private:
  const int64_t first_;
  std::vector<int64_t> entered_;
  std::vector<bool> done_;
  std::vector<std::optional<Status>> failed_;
  std::vector<int64_t> order_;
};

// Where the devices of one execution meet. A collective is identified by its ordinal on each
// device (the k-th collective a device enters) and the set of its group's members.
class Rendezvous : public DeviceProgress {
 public:
  Rendezvous(int64_t num_devices, std::chrono::milliseconds timeout)
      : DeviceProgress(0, num_devices), timeout_(timeout) {}

  StatusOr<std::vector<std::vector<Literal>>> Exchange(int64_t device, const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) {
    std::vector<int64_t> members = group;
    std::sort(members.begin(), members.end());
    if (std::adjacent_find(members.begin(), members.end()) != members.end() ||
        !std::binary_search(members.begin(), members.end(), device))
      return Internal(what + ": bad process group " + FormatIds(group));
    for (int64_t m : members)
      if (m < 0 || m >= num_local())
        return InvalidArgument(what + ": process group " + FormatIds(group) + " names device " +
                               std::to_string(m) + ", the run has " + std::to_string(num_local()));
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t ordinal = entered(device)++;
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
      TL_RETURN_IF_ERROR(WhyNeverArrives(m, ordinal, label));
      if (entered(m) > ordinal) {
        auto it = seen_.find({m, ordinal});
        return InvalidArgument(label + " (collective #" + std::to_string(ordinal) + "): device " +
                               std::to_string(m) + " reached " +
                               (it == seen_.end() ? "another" : it->second) + " instead");
      }
    }
    return OkStatus();
  }

  const std::chrono::milliseconds timeout_;
  std::map<SlotKey, Slot> slots_;
  std::map<std::pair<int64_t, int64_t>, std::string> seen_;  // (device, ordinal) -> label
};

// Where the devices of several processes meet: this process's devices deposit their
// contributions to the k-th collective; once all have, one of them gathers every rank's
// contributions through the world (one allgather per collective, SPMD programs reach the same
// ones in the same order), and each device takes its group's values from them.
class WorldRendezvous : public DeviceProgress {
 public:
  WorldRendezvous(ProcessWorld& world, int64_t first, int64_t count, int64_t num_devices,
                  std::chrono::milliseconds timeout)
      : DeviceProgress(first, count),
        world_(world),
        first_(first),
        count_(count),
        num_devices_(num_devices),
        timeout_(timeout) {}

  StatusOr<std::vector<std::vector<Literal>>> Exchange(int64_t device, const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) {
    for (int64_t m : group)
      if (m < 0 || m >= num_devices_)
        return InvalidArgument(what + ": process group " + FormatIds(group) + " names device " +
                               std::to_string(m) + ", the run has " + std::to_string(num_devices_));
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t ordinal = entered(device)++;
    const std::string label = what + " with group " + FormatIds(group);
    Round& round = rounds_[ordinal];
    round.local[device] = Contribution{what, group, std::move(values)};
    cv_.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!round.gathered && round.problem.ok()) {
      if (static_cast<int64_t>(round.local.size()) == count_ && !round.gathering) {
        round.gathering = true;
        std::string bytes;
        for (const auto& [d, c] : round.local) AppendContribution(d, c, bytes);
        lock.unlock();
        auto all = world_.AllGather(bytes, timeout_,
                                    label + " (collective #" + std::to_string(ordinal) + ")");
        lock.lock();
        round.problem = all.ok() ? ReadRound(*all, round.all) : all.status();
        round.gathered = true;
        cv_.notify_all();
        break;
      }
      if (round.gathering) {  // the gatherer's own wait is bounded by the world's timeout
        cv_.wait(lock);
        continue;
      }
      round.problem = CheckLocal(round, ordinal, label);
      if (!round.problem.ok()) break;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !round.gathered &&
          !round.gathering && round.problem.ok())
        round.problem =
            Status(StatusCode::kDeadlineExceeded, "device " + std::to_string(device) + " waited " +
                                                      std::to_string(timeout_.count()) + " ms at " +
                                                      label + " for the other devices of rank " +
                                                      std::to_string(world_.rank()));
    }
    Status problem = round.problem;
    std::vector<std::vector<Literal>> out;
    for (int64_t m : group) {
      if (!problem.ok()) break;
      auto it = round.all.find(m);
      if (it == round.all.end()) {
        problem = Internal(label + ": no contribution of device " + std::to_string(m));
      } else if (it->second.what != what || it->second.group != group) {
        problem = InvalidArgument(label + " (collective #" + std::to_string(ordinal) +
                                  "): device " + std::to_string(m) + " reached " + it->second.what +
                                  " with group " + FormatIds(it->second.group) + " instead");
      } else {
        out.push_back(it->second.values);
      }
    }
    if (++round.departed == count_) rounds_.erase(ordinal);
    if (!problem.ok()) return problem;
    return out;
  }

 private:
  struct Contribution {
    std::string what;
    std::vector<int64_t> group;
    std::vector<Literal> values;
  };
  struct Round {
    std::map<int64_t, Contribution> local, all;  // by device
    bool gathering = false, gathered = false;
    Status problem;
    int64_t departed = 0;
  };

  // Why a local device that has not deposited never will, or OK while it still may.
  Status CheckLocal(const Round& round, int64_t ordinal, const std::string& label) const {
    for (int64_t d = first_; d < first_ + count_; ++d)
      if (!round.local.count(d)) TL_RETURN_IF_ERROR(WhyNeverArrives(d, ordinal, label));
    return OkStatus();
  }

  static void AppendContribution(int64_t device, const Contribution& c, std::string& out) {
    std::string head = std::to_string(device) + "\n" + c.what + "\n" + FormatIds(c.group) + "\n";
    out += std::to_string(head.size()) + "\n" + head;
    AppendLiterals(c.values, out);
  }

  static Status ReadRound(const std::vector<std::string>& ranks,
                          std::map<int64_t, Contribution>& all) {
    for (const std::string& bytes : ranks) {
      size_t pos = 0;
      while (pos < bytes.size()) {
        const size_t nl = bytes.find('\n', pos);
        if (nl == std::string::npos) return DataLoss("malformed collective contribution");
        const size_t len = std::stoul(bytes.substr(pos, nl - pos));
        std::string head = bytes.substr(nl + 1, len);
        pos = nl + 1 + len;
        const size_t a = head.find('\n'), b = head.find('\n', a + 1);
        if (a == std::string::npos || b == std::string::npos)
          return DataLoss("malformed collective contribution header");
        Contribution c;
        const int64_t device = std::stoll(head.substr(0, a));
        c.what = head.substr(a + 1, b - a - 1);
        const std::string ids = head.substr(b + 1, head.size() - b - 2);  // "[0, 1]"
        for (size_t p = 1; p < ids.size();) {
          size_t end = ids.find_first_of(",]", p);
          if (end == std::string::npos || end == p) break;
          c.group.push_back(std::stoll(ids.substr(p, end - p)));
          p = end + 2;
        }
        TL_ASSIGN_OR_RETURN(c.values, ReadLiterals(bytes, pos));
        all[device] = std::move(c);
      }
    }
    return OkStatus();
  }

  ProcessWorld& world_;
  const int64_t first_, count_, num_devices_;
  const std::chrono::milliseconds timeout_;
  std::map<int64_t, Round> rounds_;  // by ordinal
};

template <typename Meeting>
class DeviceContext : public CollectiveContext {
 public:
  DeviceContext(Meeting& rdv, const ProcessGrid& grid, int64_t device)
      : rdv_(rdv), grid_(grid), device_(device) {}
  const ProcessGrid& grid() const override { return grid_; }
  int64_t device() const override { return device_; }
  StatusOr<std::vector<std::vector<Literal>>> Exchange(const std::string& what,
                                                       const std::vector<int64_t>& group,
                                                       std::vector<Literal> values) override {
    return rdv_.Exchange(device_, what, group, std::move(values));
  }

 private:
  Meeting& rdv_;
  const ProcessGrid& grid_;
  int64_t device_;
};

// Runs devices [first, first + count) of the grid on threads meeting at `rdv`; results of the
// other devices stay empty.
template <typename Meeting>
StatusOr<std::vector<std::vector<Literal>>> RunDevices(const Executable& exe,
                                                       std::vector<std::vector<Literal>>& args,
                                                       const ProcessGrid& grid, Meeting& rdv,
                                                       int64_t first, int64_t count,
                                                       std::vector<ExecutionStats>* stats) {
  const int64_t n = grid.num_processes();
  std::vector<std::optional<StatusOr<std::vector<Literal>>>> outs(n);
  if (stats) stats->assign(n, ExecutionStats{});
  auto run = [&](int64_t d) {
    DeviceContext<Meeting> ctx(rdv, grid, d);
    ScopedCollectiveContext scope(&ctx);
    auto r = exe.Execute(std::move(args[d]), stats ? &(*stats)[d] : nullptr);
    if (r.ok())
      rdv.Finish(d);
    else
      rdv.Fail(d, r.status());
    outs[d] = std::move(r);
  };
  std::vector<std::thread> threads;
  for (int64_t d = first + 1; d < first + count; ++d) threads.emplace_back(run, d);
  run(first);
  for (auto& t : threads) t.join();
  if (auto failed = rdv.FirstFailure())
    return outs[*failed]->status().WithContext("device " + std::to_string(*failed));
  std::vector<std::vector<Literal>> results(n);
  for (int64_t d = first; d < first + count; ++d) results[d] = std::move(**outs[d]);
  return results;
}

}  // namespace

std::chrono::milliseconds CollectiveTimeout() {
  if (const char* env = std::getenv("TLALOC_COLLECTIVE_TIMEOUT_S")) {
    char* end = nullptr;
    double s = std::strtod(env, &end);
    if (end != env && *end == '\0' && s > 0)
      return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return std::chrono::seconds(300);
}

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
  const auto timeout = options.timeout.count() > 0 ? options.timeout : CollectiveTimeout();
  ProcessWorld* world = options.world;
  if (world == nullptr || world->size() == 1) {
    Rendezvous rdv(n, timeout);
    return RunDevices(exe, args, grid, rdv, 0, n, stats);
  }
  if (n % world->size() != 0)
    return InvalidArgument("a grid of " + std::to_string(n) + " device(s) does not split over " +
                           std::to_string(world->size()) + " processes");
  const int64_t local = n / world->size();
  WorldRendezvous rdv(*world, world->rank() * local, local, n, timeout);
  return RunDevices(exe, args, grid, rdv, world->rank() * local, local, stats);
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
