// `tlaloc kernels lock|download|info|variants|verify`: kernel repositories from the command line.
//   lock SOURCE...      resolve each source (URL[@vN|@REV] or folder) and write kernels.lock
//   download            fetch exactly the locked commits into the cache and verify them
//   info SOURCE         name, version, license, layers and payload of every variant
//   variants SOURCE     which variants fit the target, and why the others do not
//   verify SOURCE       check every variant's files against the digests in its metadata
//   seal VARIANT_DIR... write the digest of every file into each variant's metadata.json
//   resolve MAPPING     load a kernel mapping (JSON) for a target and mode: which kernel each
//                       layer gets, or why it keeps its decomposition
// Exit status: 0 success, 1 an error, 2 a verification failure.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/kernels/lockfile.h"
#include "tlaloc/kernels/source.h"

namespace tlaloc::cli {
namespace {

namespace k = tlaloc::kernels;

struct KernelsOptions {
  std::vector<std::string> sources;
  std::string lockfile = "kernels.lock";
  std::string cache;
  std::string target = "cpu";
  std::string mode = "inference";
  bool offline = false;
  bool trust_remote_code = false;
  bool use_lockfile = false;
  std::string format = "tlaloc";  // lock: "tlaloc" or "hub" (Hugging Face kernels' kernels.lock)
};

k::LoaderOptions Loader(const KernelsOptions& o) {
  k::LoaderOptions l;
  l.cache_dir = o.cache;
  l.offline = o.offline;
  return l;
}

int Fail(const char* cmd, const Status& s, int code = kExitFailure) {
  std::fprintf(stderr, "tlaloc kernels %s: %s\n", cmd, s.ToString().c_str());
  return code;
}

// A flag or argument of the wrong form (a source, --target, --mode): a usage error.
int Usage(const char* cmd, const Status& s) { return Fail(cmd, s, kExitUsage); }

StatusOr<k::Checkout> Fetch(const std::string& text, const k::LoaderOptions& loader) {
  TL_ASSIGN_OR_RETURN(k::KernelSource src, k::KernelSource::Parse(text));
  return k::FetchRepository(src, loader);
}

int RunLock(const KernelsOptions& o) {
  k::Lockfile lock;
  if (auto existing = k::ReadLockfile(o.lockfile); existing.ok()) lock = *existing;
  for (const auto& text : o.sources) {
    auto src = k::KernelSource::Parse(text);
    if (!src.ok()) return Usage("lock", src.status());
    auto c = k::FetchRepository(*src, Loader(o));
    if (!c.ok()) return Fail("lock", c.status());
    if (c->local && c->commit == "local")
      return Fail("lock", InvalidArgument(text + " is a plain folder; lock a git repository"));
    auto variants = k::ListVariants(c->root);
    if (!variants.ok()) return Fail("lock", variants.status());
    k::LockEntry e{src->repo, c->commit, {}, src->version, src->revision};
    for (const auto& v : *variants) {
      {
        auto dir = c->root / "build" / v;
        auto meta = k::ReadMetadata(dir);
        if (!meta.ok()) return Fail("lock", meta.status());
        if (Status s = k::VerifyVariant(dir, *meta); !s.ok()) return Fail("lock", s);
        auto hash = k::VariantHash(dir);
        if (!hash.ok()) return Fail("lock", hash.status());
        e.variant_hashes[v] = *hash;
      }
    }
    std::printf("locked %s at %s (%zu variants)\n", src->repo.c_str(), c->commit.c_str(),
                e.variant_hashes.size());
    lock.Upsert(e);
  }
  const auto format = o.format == "hub" ? k::LockfileFormat::kHub : k::LockfileFormat::kTlaloc;
  if (Status s = k::WriteLockfile(lock, o.lockfile, format); !s.ok()) return Fail("lock", s);
  return 0;
}

int RunDownload(const KernelsOptions& o) {
  auto lock = k::ReadLockfile(o.lockfile);
  if (!lock.ok()) return Fail("download", lock.status());
  int rc = 0;
  for (const auto& e : lock->entries) {
    k::KernelSource src{e.repo, std::nullopt, e.commit};
    auto c = k::FetchRepository(src, Loader(o));
    if (!c.ok()) return Fail("download", c.status());
    // The hub's form pins the commit only: every variant is checked against its own digests.
    std::map<std::string, std::string> hashes = e.variant_hashes;
    if (hashes.empty()) {
      auto variants = k::ListVariants(c->root);
      if (!variants.ok()) return Fail("download", variants.status());
      for (const auto& v : *variants) hashes[v] = "";
    }
    for (const auto& [v, want] : hashes) {
      auto dir = c->root / "build" / v;
      auto meta = k::ReadMetadata(dir);
      Status s = meta.ok() ? k::VerifyVariant(dir, *meta) : meta.status();
      auto hash = k::VariantHash(dir);
      if (s.ok() && hash.ok() && !want.empty() && *hash != want)
        s = DataLoss("variant " + v + " hashes to " + *hash + ", the lockfile says " + want);
      if (!s.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", e.repo.c_str(), v.c_str(), s.ToString().c_str());
        rc = 2;
      }
    }
    std::printf("%s %s -> %s\n", e.repo.c_str(), e.commit.c_str(), c->root.c_str());
  }
  return rc;
}

int RunInfo(const KernelsOptions& o) {
  auto c = Fetch(o.sources.at(0), Loader(o));
  if (!c.ok()) return Fail("info", c.status());
  auto variants = k::ListVariants(c->root);
  if (!variants.ok()) return Fail("info", variants.status());
  std::printf("repository %s\ncommit %s (%s)\n", c->repo.c_str(), c->commit.c_str(),
              c->origin.c_str());
  for (const auto& v : *variants) {
    auto m = k::ReadMetadata(c->root / "build" / v);
    if (!m.ok()) {
      std::printf("  %s: %s\n", v.c_str(), m.status().message().c_str());
      continue;
    }
    std::printf("  %s: %s v%d (%s), backend %s, payload %s\n", v.c_str(), m->name.c_str(),
                m->version, m->license.c_str(), std::string(k::BackendName(m->backend)).c_str(),
                (m->module + m->library).c_str());
    for (const auto& [name, l] : m->layers) {
      std::string ops;
      for (const auto& s : l.operands) ops += (ops.empty() ? "" : ", ") + s;
      std::printf("    layer %s(%s)%s\n", name.c_str(), ops.c_str(),
                  l.has_backward ? " with backward" : "");
    }
    for (const auto& d : m->depends) std::printf("    depends on %s\n", d.repo_id.c_str());
  }
  return 0;
}

int RunVariants(const KernelsOptions& o) {
  auto target = k::Target::Parse(o.target);
  if (!target.ok()) return Usage("variants", target.status());
  auto c = Fetch(o.sources.at(0), Loader(o));
  if (!c.ok()) return Fail("variants", c.status());
  auto variants = k::ListVariants(c->root);
  if (!variants.ok()) return Fail("variants", variants.status());
  std::printf("target %s\n", target->ToString().c_str());
  bool first = true;
  for (const auto& d : k::RankVariants(*variants, *target)) {
    std::printf("  %-32s %s  %s\n", d.variant.c_str(),
                d.accepted ? (first ? "chosen  " : "accepted") : "rejected", d.reason.c_str());
    first = first && !d.accepted;
  }
  return 0;
}

int RunVerify(const KernelsOptions& o) {
  auto c = Fetch(o.sources.at(0), Loader(o));
  if (!c.ok()) return Fail("verify", c.status());
  auto variants = k::ListVariants(c->root);
  if (!variants.ok()) return Fail("verify", variants.status());
  int rc = 0;
  for (const auto& v : *variants) {
    auto dir = c->root / "build" / v;
    auto m = k::ReadMetadata(dir);
    Status s = m.ok() ? k::VerifyVariant(dir, *m) : m.status();
    std::printf("  %s: %s\n", v.c_str(), s.ok() ? "ok" : s.message().c_str());
    if (!s.ok()) rc = kExitFailure;
  }
  return rc;
}

int RunResolve(const KernelsOptions& o) {
  auto text = k::ReadFileBytes(o.sources.at(0));
  if (!text.ok()) return Fail("resolve", text.status());
  auto mapping = k::ParseKernelMapping(*text);
  if (!mapping.ok()) return Fail("resolve", mapping.status());
  k::KernelizeOptions options;
  auto target = k::Target::Parse(o.target);
  if (!target.ok()) return Usage("resolve", target.status());
  options.target = *target;
  if (o.mode != "inference" && o.mode != "training")
    return Usage("resolve", InvalidArgument("--mode must be inference or training"));
  options.mode = o.mode == "training" ? k::Mode::kTraining : k::Mode::kInference;
  options.loader = Loader(o);
  options.loader.trust_remote_code = o.trust_remote_code;
  k::Lockfile lock;
  if (o.use_lockfile) {
    auto read = k::ReadLockfile(o.lockfile);
    if (!read.ok()) return Fail("resolve", read.status());
    lock = *read;
    options.loader.lockfile = &lock;
  }
  auto kernelizer = k::Kernelizer::Create(*mapping, options);
  if (!kernelizer.ok()) return Fail("resolve", kernelizer.status());
  std::printf("target %s, %s mode\n", target->ToString().c_str(), o.mode.c_str());
  for (const auto& [layer, r] : kernelizer->resolved())
    std::printf("  %-16s -> %s %s (%s, trusted by %s)\n", layer.c_str(),
                r.variant.checkout.repo.c_str(), r.variant.meta.variant.c_str(),
                r.variant.checkout.commit.c_str(), r.variant.trusted_by.c_str());
  for (const auto& [layer, why] : kernelizer->unresolved())
    std::printf("  %-16s keeps its decomposition: %s\n", layer.c_str(), why.c_str());
  return 0;
}

int RunSeal(const KernelsOptions& o) {
  for (const auto& dir : o.sources) {
    if (Status s = k::SealVariant(dir); !s.ok()) return Fail("seal", s);
    std::printf("sealed %s\n", dir.c_str());
  }
  return 0;
}

}  // namespace

void RegisterKernelsCommand(CLI::App& app) {
  auto o = std::make_shared<KernelsOptions>();
  auto* cmd = app.add_subcommand("kernels", "Lock, download and explain kernel repositories");
  cmd->require_subcommand(1);
  auto common = [o](CLI::App* sub) {
    sub->add_option("--cache", o->cache, "Kernel cache folder (default $TLALOC_KERNELS_CACHE)");
    sub->add_flag("--offline", o->offline, "Use only the cache");
  };
  auto* lock = cmd->add_subcommand("lock", "Resolve sources and write their commits and hashes");
  lock->add_option("SOURCE", o->sources, "URL[@vN|@REVISION] or git folder")->required();
  lock->add_option("--lockfile", o->lockfile, "Lockfile to write");
  lock->add_option("--format", o->format,
                   "tlaloc (commits and variant hashes) or hub (Hugging Face kernels' form)")
      ->check(CLI::IsMember({"tlaloc", "hub"}));
  common(lock);
  lock->callback([o] { SetExitCode(RunLock(*o)); });
  auto* download = cmd->add_subcommand("download", "Fetch and verify the locked commits");
  download->add_option("--lockfile", o->lockfile, "Lockfile to read");
  common(download);
  download->callback([o] { SetExitCode(RunDownload(*o)); });
  auto* seal = cmd->add_subcommand("seal", "Write file digests into variants' metadata.json");
  seal->add_option("VARIANT_DIR", o->sources, "build/<variant> folders")->required();
  seal->callback([o] { SetExitCode(RunSeal(*o)); });
  auto* resolve = cmd->add_subcommand("resolve", "Which kernel each mapped layer gets, and why");
  resolve->add_option("MAPPING", o->sources, "kernel mapping JSON file")->required();
  resolve->add_option("--target", o->target, "cpu, tpu or cuda[M.m][:smNN]");
  resolve->add_option("--mode", o->mode, "inference or training");
  resolve->add_flag("--trust-remote-code", o->trust_remote_code,
                    "Allow native kernels from sources that are neither local nor locked");
  resolve->add_flag("--use-lockfile", o->use_lockfile, "Pin and trust what --lockfile lists");
  resolve->add_option("--lockfile", o->lockfile, "Lockfile (with --use-lockfile)");
  common(resolve);
  resolve->callback([o] { SetExitCode(RunResolve(*o)); });
  struct One {
    const char* name;
    const char* help;
    int (*run)(const KernelsOptions&);
  };
  for (const One& one :
       {One{"info", "Describe every variant of a repository", RunInfo},
        One{"variants", "Which variants fit a target, and why", RunVariants},
        One{"verify", "Check every variant's files against its digests", RunVerify}}) {
    auto* sub = cmd->add_subcommand(one.name, one.help);
    sub->add_option("SOURCE", o->sources, "URL[@vN|@REVISION] or folder")->required();
    if (std::string(one.name) == "variants")
      sub->add_option("--target", o->target, "cpu, tpu or cuda[M.m][:smNN]");
    common(sub);
    auto run = one.run;
    sub->callback([o, run] { SetExitCode(run(*o)); });
  }
}

}  // namespace tlaloc::cli
