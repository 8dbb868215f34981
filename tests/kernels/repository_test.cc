// metadata.json, sealing and verifying digests, variant hashes and the lockfile format.
#include "tlaloc/kernels/repository.h"

#include <gtest/gtest.h>

#include "kernels/kernel_repo_fixture.h"
#include "tlaloc/kernels/lockfile.h"

namespace tlaloc::kernels {
namespace {

using testing::ExamplesDir;
using testing::KernelTempDir;

TEST(KernelRepository, Sha256MatchesKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Base64("abc"), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
}

TEST(KernelRepository, SealedVariantVerifiesAndTamperingIsNamed) {
  auto root = KernelTempDir("seal");
  ASSERT_TRUE(testing::WriteVariants(root, testing::RmsNormVariants(), 1).ok());
  auto dir = root / "build" / "tlaloc-universal";
  auto meta = ReadMetadata(dir);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->name, "rmsnorm");
  EXPECT_EQ(meta->backend, Backend::kUniversal);
  ASSERT_TRUE(meta->layers.count("RMSNorm"));
  EXPECT_EQ(meta->layers.at("RMSNorm").operands, (std::vector<std::string>{"x", "weight"}));
  EXPECT_TRUE(VerifyVariant(dir, *meta).ok());
  auto hash1 = VariantHash(dir);
  ASSERT_TRUE(hash1.ok());
  EXPECT_EQ(hash1->rfind("sha256-", 0), 0u);

  std::ofstream(dir / "rms_norm.mlir", std::ios::app) << "// tampered\n";
  Status s = VerifyVariant(dir, *meta);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("rms_norm.mlir"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("tampered"), std::string::npos);
  EXPECT_NE(*VariantHash(dir), *hash1);

  std::ofstream(dir / "extra.txt") << "x";
  ASSERT_TRUE(SealVariant(dir).ok());
  meta = ReadMetadata(dir);
  EXPECT_TRUE(VerifyVariant(dir, *meta).ok());
  std::filesystem::remove(dir / "extra.txt");
  s = VerifyVariant(dir, *meta);
  EXPECT_NE(s.message().find("extra.txt"), std::string::npos) << s.ToString();
  std::filesystem::create_symlink("/etc/hostname", dir / "link.so");
  s = VerifyVariant(dir, *meta);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("symbolic link (link.so)"), std::string::npos) << s.ToString();
  std::filesystem::remove_all(root);
}

TEST(KernelRepository, BadMetadataIsRefusedWithItsPath) {
  auto root = KernelTempDir("badmeta");
  std::ofstream(root / "metadata.json")
      << R"({"name": "x", "version": 1, "backend": {"type": "quantum"}, "layers": {"A": {"results": ["y"]}}})";
  auto m = ReadMetadata(root);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("quantum"), std::string::npos);
  EXPECT_NE(m.status().message().find("metadata.json"), std::string::npos);
  std::ofstream(root / "metadata.json", std::ios::trunc)
      << R"({"name": "x", "version": 1, "backend": {"type": "cpu"}, "layers": {"A": {"results": ["y"]}}})";
  m = ReadMetadata(root);
  ASSERT_TRUE(m.ok());
  Status s = VerifyVariant(root, *m);
  EXPECT_NE(s.message().find("no sha256 digest"), std::string::npos) << s.ToString();
  std::filesystem::remove_all(root);
}

TEST(KernelRepository, LockfileRoundTripsAndRejectsShortCommits) {
  auto root = KernelTempDir("lock");
  Lockfile lock;
  lock.Upsert({"file:///r.git", std::string(40, 'a'), {{"tlaloc-universal", "sha256-00"}}});
  lock.Upsert({"file:///r.git", std::string(40, 'b'), {{"tlaloc-universal", "sha256-11"}}});
  ASSERT_EQ(lock.entries.size(), 1u);
  ASSERT_TRUE(WriteLockfile(lock, root / "kernels.lock").ok());
  auto back = ReadLockfile(root / "kernels.lock");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_NE(back->Find("file:///r.git"), nullptr);
  EXPECT_EQ(back->Find("file:///r.git")->commit, std::string(40, 'b'));
  EXPECT_EQ(back->Find("file:///r.git")->variant_hashes.at("tlaloc-universal"), "sha256-11");
  std::ofstream(root / "bad.lock") << R"([{"repo": "x", "commit": "abc"}])";
  auto bad = ReadLockfile(root / "bad.lock");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("40-hex"), std::string::npos);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tlaloc::kernels
