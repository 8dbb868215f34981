// ProcessWorld over MPI_COMM_WORLD (Open MPI's mpirun). Exchanges are non-blocking allgathers
// polled against a deadline, so a rank never waits forever for one that went away; MPI calls
// are serialized by a mutex (the devices of a process are threads, MPI_THREAD_SERIALIZED).
#include "interp/process_world_mpi.h"

#if TLALOC_HAVE_MPI
// The C API only: Open MPI's header would otherwise pull in its deprecated C++ bindings, which
// live in another library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>
#endif

namespace tlaloc::internal {

#if TLALOC_HAVE_MPI

namespace {

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

class OpenMpiWorld : public ProcessWorld {
 public:
  Status Init() {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return Internal("MPI_Init_thread failed: " + MpiError(rc));
    // Errors come back as codes (reported with the rank) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (provided < MPI_THREAD_SERIALIZED)
      return Internal("this MPI gives thread level " + std::to_string(provided) +
                      "; Tlaloc's device threads need MPI_THREAD_SERIALIZED");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
    return OkStatus();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  StatusOr<std::vector<std::string>> AllGather(std::string_view bytes,
                                               std::chrono::milliseconds timeout,
                                               const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // Arrival notes: each rank tells every other one it reached this exchange, so that a rank
    // that times out can name the ranks that never came (the allgather itself cannot).
    const uint64_t ordinal = exchanges_++;
    std::vector<uint64_t> arrived(size_);
    std::vector<MPI_Request> notes_in, notes_out;
    std::vector<int> peers;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      peers.push_back(r);
      notes_in.emplace_back();
      notes_out.emplace_back();
      MPI_Irecv(&arrived[r], 1, MPI_UINT64_T, r, kArrivalTag, MPI_COMM_WORLD, &notes_in.back());
      MPI_Isend(&ordinal, 1, MPI_UINT64_T, r, kArrivalTag, MPI_COMM_WORLD, &notes_out.back());
    }
    auto missing = [&] {
      std::string who;
      for (size_t i = 0; i < notes_in.size(); ++i) {
        int done = 0;
        MPI_Test(&notes_in[i], &done, MPI_STATUS_IGNORE);
        if (!done) who += (who.empty() ? "" : ", ") + std::to_string(peers[i]);
      }
      return who;
    };
    uint64_t mine = bytes.size();
    std::vector<uint64_t> sizes(size_);
    MPI_Request req;
    int rc =
        MPI_Iallgather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
    TL_RETURN_IF_ERROR(Wait(rc, 1, &req, deadline, timeout, what, missing));
    std::vector<int> counts(size_), displs(size_);
    uint64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      if (sizes[r] > INT_MAX || total + sizes[r] > INT_MAX)
        return ResourceExhausted("rank " + std::to_string(rank_) + ": " + what + " exchanges " +
                                 std::to_string(total + sizes[r]) +
                                 " bytes, beyond one MPI message (2 GiB)");
      counts[r] = static_cast<int>(sizes[r]);
      displs[r] = static_cast<int>(total);
      total += sizes[r];
    }
    std::string all(total, '\0');
    rc = MPI_Iallgatherv(bytes.data(), static_cast<int>(mine), MPI_BYTE, all.data(), counts.data(),
                         displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req);
    TL_RETURN_IF_ERROR(Wait(rc, 1, &req, deadline, timeout, what, missing));
    // Every peer sent its note before joining the allgather, so these complete at once.
    TL_RETURN_IF_ERROR(Wait(MPI_SUCCESS, static_cast<int>(notes_in.size()), notes_in.data(),
                            deadline, timeout, what, missing));
    TL_RETURN_IF_ERROR(Wait(MPI_SUCCESS, static_cast<int>(notes_out.size()), notes_out.data(),
                            deadline, timeout, what, missing));
    for (int r : peers)
      if (arrived[r] != ordinal)
        return Internal("rank " + std::to_string(rank_) + " is at exchange #" +
                        std::to_string(ordinal) + " (" + what + "), rank " + std::to_string(r) +
                        " at #" + std::to_string(arrived[r]));
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], counts[r]));
    return out;
  }

  [[noreturn]] void Abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  // Polls `reqs` until all are done or the deadline: spinning first (a collective's partner is
  // usually close behind), then sleeping briefly so that a waiting rank leaves the cores to the
  // others. Past the deadline, the error names the ranks `missing` says never arrived.
  template <typename Missing>
  Status Wait(int rc, int count, MPI_Request* reqs, std::chrono::steady_clock::time_point deadline,
              std::chrono::milliseconds timeout, const std::string& what, Missing missing) {
    if (rc != MPI_SUCCESS)
      return Internal("rank " + std::to_string(rank_) + ": MPI failed at " + what + ": " +
                      MpiError(rc));
    for (int polls = 0;; ++polls) {
      int done = 0;
      rc = MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS)
        return Internal("rank " + std::to_string(rank_) + ": MPI failed at " + what + ": " +
                        MpiError(rc));
      if (done) return OkStatus();
      if (std::chrono::steady_clock::now() > deadline) {
        const std::string who = missing();
        return Status(StatusCode::kDeadlineExceeded,
                      "rank " + std::to_string(rank_) + " waited " +
                          std::to_string(timeout.count()) + " ms at " + what + " for " +
                          (who.empty() ? std::string("the other ranks")
                                       : "rank(s) " + who + ", which never arrived") +
                          " (TLALOC_COLLECTIVE_TIMEOUT_S): stopped, stuck or gone");
      }
      if (polls < 2000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  static constexpr int kArrivalTag = 7201;
  uint64_t exchanges_ = 0;  // AllGather calls so far: every rank counts the same
  std::mutex mu_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

StatusOr<ProcessWorld*> MpiWorld() {
  static OpenMpiWorld* world = nullptr;
  static Status status = [] {
    auto* w = new OpenMpiWorld();  // lives until exit: MPI is finalized by atexit
    Status s = w->Init();
    world = w;
    return s;
  }();
  if (!status.ok()) return status;
  return static_cast<ProcessWorld*>(world);
}

#else

StatusOr<ProcessWorld*> MpiWorld() {
  return FailedPrecondition(
      "this process was started by mpirun (OMPI_COMM_WORLD_SIZE / PMIX_RANK are set) but "
      "Tlaloc was built without MPI; install libopenmpi-dev (scripts/setup.sh) and rebuild");
}

#endif

}  // namespace tlaloc::internal
