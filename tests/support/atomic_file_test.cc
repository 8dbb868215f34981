// Atomic writes: the target is replaced by a rename (a hard link to the old file keeps the old
// bytes), no temporary file stays behind, a failed write leaves the previous file as it was, and
// errors name the file.
#include "tlaloc/support/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tlaloc {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every entry of `dir`, hidden ones included.
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlaloc_atomic_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesANewFileAndLeavesNoTemporary) {
  const fs::path p = dir_ / "a.json";
  ASSERT_TRUE(WriteStringAtomic(p, "{\"x\": 1}\n").ok());
  EXPECT_EQ(Read(p), "{\"x\": 1}\n");
  EXPECT_EQ(Entries(dir_), std::vector<std::string>{"a.json"});
}

TEST_F(AtomicFileTest, ReplacesByRenameNotInPlace) {
  const fs::path p = dir_ / "w.bin";
  ASSERT_TRUE(WriteStringAtomic(p, "old bytes").ok());
  // A hard link to the old file: an in-place rewrite would change what it shows too.
  fs::create_hard_link(p, dir_ / "old_link");
  ASSERT_TRUE(WriteStringAtomic(p, "new").ok());
  EXPECT_EQ(Read(p), "new");
  EXPECT_EQ(Read(dir_ / "old_link"), "old bytes");
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"old_link", "w.bin"}));
}

TEST_F(AtomicFileTest, AFailedWriteLeavesThePreviousFile) {
  const fs::path p = dir_ / "model.safetensors";
  ASSERT_TRUE(WriteStringAtomic(p, "complete").ok());
  Status s = WriteFileAtomic(p, [](const ByteSink& sink) -> Status {
    const std::string half = "half";
    TL_RETURN_IF_ERROR(sink({reinterpret_cast<const std::byte*>(half.data()), half.size()}));
    return ResourceExhausted("disk full (simulated)");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Read(p), "complete");
  EXPECT_EQ(Entries(dir_), std::vector<std::string>{"model.safetensors"});
}

TEST_F(AtomicFileTest, ErrorsNameTheFileAndCarryStrerror) {
  // A missing folder.
  const fs::path missing = dir_ / "no_such_folder" / "x.json";
  Status s = WriteStringAtomic(missing, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(missing.string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  // A "folder" that is a file.
  ASSERT_TRUE(WriteStringAtomic(dir_ / "plain", "x").ok());
  const fs::path under_file = dir_ / "plain" / "x.json";
  s = WriteStringAtomic(under_file, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(under_file.string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Not a directory"), std::string::npos) << s.message();
}

TEST_F(AtomicFileTest, UnwritableFolderIsAnErrorNamingThePath) {
  const fs::path ro = dir_ / "read_only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  fs::path p = ro / "trainer_state.json";
  Status s = WriteStringAtomic(p, "{}");
  // Root writes into a read-only folder; sysfs refuses new files even to root.
  if (s.ok() && geteuid() == 0) {
    if (!fs::is_directory("/sys/kernel")) GTEST_SKIP() << "root, and no /sys to refuse a write";
    p = "/sys/kernel/tlaloc_atomic_test.json";
    s = WriteStringAtomic(p, "{}");
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find(p.string()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s.message();
}

TEST_F(AtomicFileTest, CopyIsCompleteAndMissingSourceIsNamed) {
  std::string big(300000, 'q');
  big[123456] = 'z';
  ASSERT_TRUE(WriteStringAtomic(dir_ / "src", big).ok());
  ASSERT_TRUE(CopyFileAtomic(dir_ / "src", dir_ / "dst").ok());
  EXPECT_EQ(Read(dir_ / "dst"), big);
  Status s = CopyFileAtomic(dir_ / "nope", dir_ / "dst");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find((dir_ / "nope").string()), std::string::npos) << s.message();
  EXPECT_EQ(Read(dir_ / "dst"), big);
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"dst", "src"}));
}

TEST_F(AtomicFileTest, RenameDurablyMovesAFolder) {
  fs::create_directories(dir_ / ".stage");
  ASSERT_TRUE(WriteStringAtomic(dir_ / ".stage" / "f", "1").ok());
  ASSERT_TRUE(RenameDurably(dir_ / ".stage", dir_ / "checkpoint-3").ok());
  EXPECT_EQ(Read(dir_ / "checkpoint-3" / "f"), "1");
  EXPECT_FALSE(fs::exists(dir_ / ".stage"));
}

TEST(AtomicFileNames, TemporaryNamesAreHiddenSiblingsAndRecognised) {
  const fs::path t = TemporarySibling("/a/b/model.safetensors");
  EXPECT_EQ(t.parent_path(), fs::path("/a/b"));
  EXPECT_TRUE(IsTemporaryName(t.filename().string())) << t;
  EXPECT_NE(TemporarySibling("/a/x"), TemporarySibling("/a/x"));
  EXPECT_FALSE(IsTemporaryName("model.safetensors"));
  EXPECT_FALSE(IsTemporaryName("checkpoint-4"));
}

}  // namespace
}  // namespace tlaloc
