// The world of one, the literal byte format of cross-rank exchanges and the agreement check
// (process_world.h). The MPI world is process_world_mpi.cc.
#include "tlaloc/interp/process_world.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "interp/process_world_mpi.h"

namespace tlaloc {

namespace {

class OneProcessWorld : public ProcessWorld {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single"; }
  StatusOr<std::vector<std::string>> AllGather(std::string_view bytes, std::chrono::milliseconds,
                                               const std::string&) override {
    return std::vector<std::string>{std::string(bytes)};
  }
  [[noreturn]] void Abort(int exit_code) override { std::exit(exit_code); }
};

void AppendU64(uint64_t v, std::string& out) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

bool ReadU64(std::string_view bytes, size_t& pos, uint64_t& v) {
  if (pos > bytes.size() || bytes.size() - pos < sizeof(v)) return false;
  std::memcpy(&v, bytes.data() + pos, sizeof(v));
  pos += sizeof(v);
  return true;
}

}  // namespace

ProcessWorld& SingleProcessWorld() {
  static OneProcessWorld world;
  return world;
}

bool LaunchedByMpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(var);
    if (v && *v) return true;
  }
  return false;
}

StatusOr<ProcessWorld*> CurrentWorld() {
  if (!LaunchedByMpi()) return &SingleProcessWorld();
  return internal::MpiWorld();
}

void AppendLiterals(const std::vector<Literal>& literals, std::string& out) {
  AppendU64(literals.size(), out);
  for (const Literal& l : literals) {
    AppendU64(static_cast<uint64_t>(l.element_type()), out);
    AppendU64(l.dims().size(), out);
    for (int64_t d : l.dims()) AppendU64(static_cast<uint64_t>(d), out);
    AppendU64(static_cast<uint64_t>(l.byte_size()), out);
    if (l.byte_size() > 0) out.append(reinterpret_cast<const char*>(l.data()), l.byte_size());
  }
}

StatusOr<std::vector<Literal>> ReadLiterals(std::string_view bytes, size_t& pos) {
  auto bad = [&](const std::string& why) {
    return DataLoss("malformed literal bytes from another rank at offset " + std::to_string(pos) +
                    ": " + why);
  };
  uint64_t count = 0;
  if (!ReadU64(bytes, pos, count) || count > bytes.size()) return bad("no literal count");
  std::vector<Literal> out;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t type = 0, rank = 0, size = 0;
    if (!ReadU64(bytes, pos, type) || !ReadU64(bytes, pos, rank) || rank > 64)
      return bad("no element type or rank");
    std::vector<int64_t> dims(rank);
    for (auto& d : dims) {
      uint64_t v = 0;
      if (!ReadU64(bytes, pos, v)) return bad("truncated dimensions");
      d = static_cast<int64_t>(v);
    }
    Literal l(TensorType(static_cast<ElementType>(type), dims));
    if (!ReadU64(bytes, pos, size) || size != static_cast<uint64_t>(l.byte_size()) ||
        bytes.size() - pos < size)
      return bad("contents do not match the type");
    if (size > 0) std::memcpy(l.data(), bytes.data() + pos, size);
    pos += size;
    out.push_back(std::move(l));
  }
  return out;
}

std::string Digest(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Status CheckSameOnAllRanks(ProcessWorld& world,
                           const std::vector<std::pair<std::string, std::string>>& fields,
                           std::chrono::milliseconds timeout) {
  if (world.size() == 1) return OkStatus();
  std::string mine;
  for (const auto& [name, value] : fields) {
    AppendU64(name.size(), mine);
    mine += name;
    AppendU64(value.size(), mine);
    mine += value;
  }
  TL_ASSIGN_OR_RETURN(auto all, world.AllGather(mine, timeout, "the ranks' run settings"));
  std::vector<std::map<std::string, std::string>> by_rank;
  for (const std::string& bytes : all) {
    std::map<std::string, std::string> m;
    size_t pos = 0;
    while (pos < bytes.size()) {
      uint64_t n = 0;
      if (!ReadU64(bytes, pos, n) || bytes.size() - pos < n)
        return DataLoss("malformed run settings from another rank");
      std::string name = bytes.substr(pos, n);
      pos += n;
      if (!ReadU64(bytes, pos, n) || bytes.size() - pos < n)
        return DataLoss("malformed run settings from another rank");
      m[name] = bytes.substr(pos, n);
      pos += n;
    }
    by_rank.push_back(std::move(m));
  }
  std::string problems;
  for (const auto& [name, value] : by_rank[0]) {
    for (size_t r = 1; r < by_rank.size(); ++r) {
      auto it = by_rank[r].find(name);
      const std::string other = it == by_rank[r].end() ? "(none)" : it->second;
      if (other == value) continue;
      problems += (problems.empty() ? "" : "; ") + name + ": rank " + std::to_string(r) + " has " +
                  other + ", rank 0 has " + value;
    }
  }
  for (size_t r = 1; r < by_rank.size(); ++r)
    for (const auto& [name, value] : by_rank[r])
      if (!by_rank[0].count(name))
        problems +=
            (problems.empty() ? "" : "; ") + name + ": only rank " + std::to_string(r) + " has it";
  if (!problems.empty())
    return FailedPrecondition(
        "the " + std::to_string(world.size()) +
        " ranks do not run the same job (refused before the first step): " + problems);
  return OkStatus();
}

}  // namespace tlaloc
