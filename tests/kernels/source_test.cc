// Kernel sources over real git repositories: file:// and dumb HTTP, versions and revisions, the
// cache and offline use, TLALOC_LOCAL_KERNELS, and the trust rules for native code.
#include "tlaloc/kernels/source.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "kernels/kernel_repo_fixture.h"

namespace tlaloc::kernels {
namespace {

using testing::FileUrl;
using testing::KernelTempDir;

class KernelSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveGit()) TL_ORACLE_MISSING("git (the git CLI) is not installed");
    root_ = KernelTempDir("src");
    repo_ = root_ / "rmsnorm";
    Status s = testing::MakeGitKernelRepo(repo_, testing::RmsNormVariants());
    ASSERT_TRUE(s.ok()) << s.ToString();
    options_.cache_dir = root_ / "cache";
    options_.local_overrides = "none=none";  // ignore the developer's environment
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  std::filesystem::path root_, repo_;
  LoaderOptions options_;
};

TEST_F(KernelSourceTest, FileUrlVersionsSelectTheirBranches) {
  for (int version : {1, 2}) {
    KernelSource src{FileUrl(repo_), version, ""};
    auto v = LoadVariant(src, Target::HostCpu(), [&] {
      LoaderOptions o = options_;
      o.trust_remote_code = true;
      return o;
    }());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->meta.version, version);
    EXPECT_EQ(v->meta.variant, testing::HostCpuVariant());
    EXPECT_EQ(v->checkout.commit.size(), 40u);
    EXPECT_EQ(v->trusted_by, "trust flag");
  }
  auto missing = FetchRepository({FileUrl(repo_), 7, ""}, options_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("version 7"), std::string::npos);
  EXPECT_NE(missing.status().message().find("v1"), std::string::npos)
      << missing.status().ToString();
}

TEST_F(KernelSourceTest, UntrustedNativeIsRefusedButUniversalLoads) {
  KernelSource src{FileUrl(repo_), 1, ""};
  auto v = LoadVariant(src, Target::HostCpu(), options_);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(v.status().message().find("not trusted"), std::string::npos);
  EXPECT_NE(v.status().message().find("tlaloc kernels lock"), std::string::npos);
  EXPECT_NE(v.status().message().find("--trust-remote-code"), std::string::npos);
  // The universal variant is StableHLO (data), so it needs no trust.
  auto c = FetchRepository(src, options_);
  ASSERT_TRUE(c.ok());
  auto uni = LoadNamedVariant(*c, "tlaloc-universal", options_);
  ASSERT_TRUE(uni.ok()) << uni.status().ToString();
  EXPECT_FALSE(uni->native);
}

TEST_F(KernelSourceTest, LockfileTrustsExactlyTheLockedCommitAndHash) {
  KernelSource src{FileUrl(repo_), 1, ""};
  auto c = FetchRepository(src, options_);
  ASSERT_TRUE(c.ok());
  std::string variant = testing::HostCpuVariant();
  auto hash = VariantHash(c->root / "build" / variant);
  ASSERT_TRUE(hash.ok());
  Lockfile lock;
  lock.Upsert({src.repo, c->commit, {{variant, *hash}}});
  LoaderOptions o = options_;
  o.lockfile = &lock;
  // The lockfile pins the commit when no version is asked for.
  auto v = LoadVariant({src.repo, std::nullopt, ""}, Target::HostCpu(), o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->trusted_by, "lockfile");
  EXPECT_EQ(v->meta.version, 1);
  // Asking for v2 fetches another commit than the locked one: refused.
  auto v2 = LoadVariant({src.repo, 2, ""}, Target::HostCpu(), o);
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("locked at commit"), std::string::npos)
      << v2.status().ToString();
  lock.entries[0].variant_hashes[variant] = "sha256-0000";
  auto wrong = LoadVariant({src.repo, std::nullopt, ""}, Target::HostCpu(), o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("lockfile says"), std::string::npos);
}

TEST_F(KernelSourceTest, RevisionCacheAndOffline) {
  auto head = RunCommand({"git", "-C", repo_.string(), "rev-parse", "v1"});
  ASSERT_TRUE(head.ok());
  std::string commit = head->substr(0, 40);
  auto c = FetchRepository({FileUrl(repo_), std::nullopt, commit}, options_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->commit, commit);
  // Offline: served from the cache even once the origin is gone.
  std::filesystem::rename(repo_, root_ / "moved");
  LoaderOptions off = options_;
  off.offline = true;
  auto again = FetchRepository({FileUrl(repo_), 2, ""}, off);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(again->root / "build" / "tlaloc-universal"));
  off.cache_dir = root_ / "empty-cache";
  auto cold = FetchRepository({FileUrl(repo_), 2, ""}, off);
  ASSERT_FALSE(cold.ok());
  EXPECT_NE(cold.status().message().find("offline"), std::string::npos);
  // Online with the origin gone: a clear clone error.
  LoaderOptions on = options_;
  on.cache_dir = root_ / "cache2";
  auto gone = FetchRepository({FileUrl(repo_), 2, ""}, on);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("cannot clone"), std::string::npos);
}

TEST_F(KernelSourceTest, LocalFolderAndOverrideAreTrusted) {
  auto local = LoadVariant({repo_.string(), std::nullopt, ""}, Target::HostCpu(), options_);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->trusted_by, "local folder");
  LoaderOptions o = options_;
  o.local_overrides = "https://example.invalid/org/rmsnorm.git=" + repo_.string();
  auto over = LoadVariant({"https://example.invalid/org/rmsnorm.git", 1, ""}, Target::HostCpu(), o);
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(over->trusted_by, "TLALOC_LOCAL_KERNELS");
}

TEST_F(KernelSourceTest, DumbHttpServer) {
  if (std::system("python3 -c 'import http.server' >/dev/null 2>&1") != 0)
    TL_ORACLE_MISSING("python3 (with http.server) is not installed");
  // A port the kernel just handed out as free (the server binds it right after).
  int port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    close(fd);
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string dir = (repo_ / ".git").string();
    // The server's request log would drown the test output.
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execlp("python3", "python3", "-m", "http.server", std::to_string(port).c_str(), "--bind",
           "127.0.0.1", "--directory", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  StatusOr<Checkout> c = NotFound("not tried");
  for (int i = 0; i < 50 && !c.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::filesystem::remove_all(options_.cache_dir);
    c = FetchRepository({url, 2, ""}, options_);
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto meta = ReadMetadata(c->root / "build" / "tlaloc-universal");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->version, 2);
}

TEST(KernelSource, ParsesVersionsAndRevisions) {
  auto a = KernelSource::Parse("https://h/org/k.git@v3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->repo, "https://h/org/k.git");
  EXPECT_EQ(*a->version, 3);
  auto b = KernelSource::Parse("file:///x/k@main");
  EXPECT_EQ(b->revision, "main");
  EXPECT_FALSE(b->version);
  auto c = KernelSource::Parse("/some/folder");
  EXPECT_EQ(c->repo, "/some/folder");
  auto both = FetchRepository({"/x", 1, "main"}, {});
  EXPECT_FALSE(both.ok());
}

}  // namespace
}  // namespace tlaloc::kernels
