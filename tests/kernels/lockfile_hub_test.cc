// kernels.lock in the Hugging Face kernel hub's form: read beside Tlaloc's own, written by
// LockfileToHubJson, and refused by name when an entry is incomplete (tests/kernels/hub_interop.py
// checks the same files against the hub's own reader).
#include <gtest/gtest.h>

#include "tlaloc/kernels/lockfile.h"

namespace tlaloc::kernels {
namespace {

const std::string kCommit(40, 'a');

TEST(LockfileHubForm, ReadsBesideTlalocEntries) {
  const std::string text = R"([
    {"dependency": {"repo-id": "org/rmsnorm", "version": 2}, "lock": {"commit": ")" +
                           kCommit +
                           R"("}},
    {"dependency": {"repo-id": "org/relu", "revision": "main"}, "lock": {"commit": ")" +
                           kCommit + R"("}},
    {"repo": "file:///r.git", "commit": ")" +
                           kCommit + R"(", "variants": {"tlaloc-tpu": {"hash": "sha256-00"}}}])";
  auto lock = ParseLockfile(text);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  ASSERT_EQ(lock->entries.size(), 3u);
  EXPECT_EQ(lock->entries[0].repo, "org/rmsnorm");
  EXPECT_EQ(lock->entries[0].version, 2);
  EXPECT_TRUE(lock->entries[0].variant_hashes.empty());
  EXPECT_EQ(lock->entries[1].revision, "main");
  EXPECT_EQ(lock->entries[2].variant_hashes.at("tlaloc-tpu"), "sha256-00");
  ASSERT_NE(lock->Find("org/relu"), nullptr);
  EXPECT_EQ(lock->Find("org/relu")->commit, kCommit);
}

TEST(LockfileHubForm, WritesWhatItReads) {
  Lockfile lock;
  lock.Upsert({"org/rmsnorm", kCommit, {{"tlaloc-tpu", "sha256-00"}}, 1, ""});
  lock.Upsert({"org/relu", kCommit, {}, std::nullopt, "v2-rc"});
  auto text = LockfileToHubJson(lock);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  // No variant hashes: the hub's reader refuses unknown fields.
  EXPECT_EQ(text->find("variants"), std::string::npos) << *text;
  auto again = ParseLockfile(*text);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->entries.size(), 2u);
  EXPECT_EQ(again->entries[0].version, 1);
  EXPECT_EQ(again->entries[1].revision, "v2-rc");
  EXPECT_EQ(again->entries[1].commit, kCommit);
}

TEST(LockfileHubForm, RefusesIncompleteEntriesByName) {
  auto no_version = ParseLockfile(R"([{"dependency": {"repo-id": "org/x"}, "lock": {"commit": ")" +
                                  kCommit + R"("}}])");
  ASSERT_FALSE(no_version.ok());
  EXPECT_NE(no_version.status().message().find("org/x needs a \"version\" or a \"revision\""),
            std::string::npos)
      << no_version.status().ToString();
  auto short_commit = ParseLockfile(
      R"([{"dependency": {"repo-id": "org/x", "version": 1}, "lock": {"commit": "abc"}}])");
  ASSERT_FALSE(short_commit.ok());
  EXPECT_NE(short_commit.status().message().find("not a full 40-hex commit id"), std::string::npos);
  Lockfile unpinned;
  unpinned.Upsert({"org/y", kCommit, {}, std::nullopt, ""});
  auto text = LockfileToHubJson(unpinned);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("org/y has no version or revision"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::kernels
