// Model references through a fake Hugging Face hub cache: refs/main and other revisions, the
// precedence of HF_HUB_CACHE over HF_HOME, and the errors that name the paths looked at.
#include "tlaloc/io/hf_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "io_test_util.h"
#include "tlaloc/io/hub_download.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteText;

// Sets (or unsets, with nullopt) an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// hub/models--org--name with refs/<ref> -> hash and snapshots/<hash>/config.json.
fs::path AddCachedModel(const fs::path& hub, const std::string& org, const std::string& name,
                        const std::string& ref, const std::string& hash) {
  const fs::path entry = hub / ("models--" + org + "--" + name);
  fs::create_directories(entry / "refs");
  fs::create_directories(entry / "snapshots" / hash);
  WriteText(entry / "refs" / ref, hash + "\n");  // the hub writes no newline; tolerate one
  WriteText(entry / "snapshots" / hash / "config.json", "{}");
  return entry / "snapshots" / hash;
}

TEST(HfCache, ExistingLocalPathIsReturnedAsIs) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "empty-hub").string());
  auto got = ResolveModelReference(dir.path().string());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, dir.path());
}

TEST(HfCache, OrgNameResolvesThroughRefsMain) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  const fs::path snapshot = AddCachedModel(dir / "hub", "Qwen", "Qwen3-0.6B", "main", "abc123");
  auto got = ResolveModelReference("Qwen/Qwen3-0.6B");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, snapshot);
}

TEST(HfCache, RevisionPicksItsRefOrSnapshotHash) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  AddCachedModel(dir / "hub", "org", "model", "main", "1111");
  const fs::path v2 = AddCachedModel(dir / "hub", "org", "model", "v2", "2222");
  auto by_ref = ResolveModelReference("org/model@v2");
  ASSERT_TRUE(by_ref.ok()) << by_ref.status().ToString();
  EXPECT_EQ(*by_ref, v2);
  auto by_hash = ResolveModelReference("org/model@1111");
  ASSERT_TRUE(by_hash.ok()) << by_hash.status().ToString();
  EXPECT_EQ(*by_hash, dir / "hub" / "models--org--model" / "snapshots" / "1111");
}

TEST(HfCache, HubCacheTakesPrecedenceOverHfHome) {
  TempDir dir;
  const fs::path in_hub = AddCachedModel(dir / "hub", "org", "model", "main", "aaaa");
  const fs::path in_home = AddCachedModel(dir / "home" / "hub", "org", "model", "main", "bbbb");
  {
    ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
    ScopedEnv home("HF_HOME", (dir / "home").string());
    EXPECT_EQ(HuggingFaceHubCache(), dir / "hub");
    auto got = ResolveModelReference("org/model");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, in_hub);
  }
  {
    ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    ScopedEnv home("HF_HOME", (dir / "home").string());
    EXPECT_EQ(HuggingFaceHubCache(), dir / "home" / "hub");
    auto got = ResolveModelReference("org/model");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, in_home);
  }
  {
    ScopedEnv hub("HF_HUB_CACHE", std::nullopt);
    ScopedEnv home("HF_HOME", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv user("HOME", (dir / "user").string());
    EXPECT_EQ(HuggingFaceHubCache(), dir / "user" / ".cache" / "huggingface" / "hub");
  }
}

TEST(HfCache, MissingModelNamesThePathAndDownloadsNothing) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  auto got = ResolveModelReference("org/absent");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  const std::string& msg = got.status().message();
  EXPECT_NE(msg.find((dir / "hub" / "models--org--absent").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("nothing is downloaded"), std::string::npos) << msg;
}

TEST(HfCache, MissingSnapshotOrRevisionIsAnError) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  const fs::path snapshot = AddCachedModel(dir / "hub", "org", "model", "main", "cccc");
  fs::remove_all(snapshot);  // a ref left behind by an interrupted download
  auto got = ResolveModelReference("org/model");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(snapshot.string()), std::string::npos)
      << got.status().message();
  auto rev = ResolveModelReference("org/model@nope");
  ASSERT_FALSE(rev.ok());
  EXPECT_NE(rev.status().message().find("refs/nope"), std::string::npos) << rev.status().message();
}

TEST(HfCache, OtherMissingPathsAreNotTakenForRepoIds) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  for (const std::string ref :
       {"no-such-folder", "./org/model", "/abs/path", "a/b/c", "org/../x"}) {
    auto got = ResolveModelReference(ref);
    ASSERT_FALSE(got.ok()) << ref;
    EXPECT_NE(got.status().message().find("does not exist"), std::string::npos)
        << ref << ": " << got.status().message();
  }
}

// The Hub download's pieces that need no server (tests/io/hub_download_test.sh runs the rest).
namespace hub_tests {

TEST(HubDownload, ParsesReferences) {
  auto a = ParseHubReference("Qwen/Qwen3-0.6B");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(a->revision, "main");
  auto b = ParseHubReference("org/m@refs/pr/1");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->revision, "refs/pr/1");
  for (const char* bad : {"model", "a/b/c", "../x", "org/m@", "org/m@../x", "org/.m"})
    EXPECT_FALSE(ParseHubReference(bad).has_value()) << bad;
}

TEST(HubDownload, SelectsWhatAModelRunReads) {
  for (const char* keep : {"config.json", "tokenizer.json", "generation_config.json",
                           "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                           "merges.txt", "vocab.json", "chat_template.jinja", "tokenizer.model"})
    EXPECT_TRUE(IsModelRunFile(keep)) << keep;
  for (const char* skip : {"pytorch_model.bin", "model.gguf", "README.md", ".gitattributes",
                           "onnx/model.onnx", "flax_model.msgpack", "tf_model.h5", "sub/a.json"})
    EXPECT_FALSE(IsModelRunFile(skip)) << skip;
}

TEST(HubDownload, TokenEndpointAndOfflineFollowHuggingfaceHub) {
  TempDir dir;
  ScopedEnv token("HF_TOKEN", std::nullopt);
  ScopedEnv legacy("HUGGING_FACE_HUB_TOKEN", std::nullopt);
  ScopedEnv path("HF_TOKEN_PATH", std::nullopt);
  ScopedEnv home("HF_HOME", (dir / "home").string());
  EXPECT_FALSE(HubToken().has_value());
  fs::create_directories(dir / "home");
  WriteText(dir / "home" / "token", " from-home\n");
  EXPECT_EQ(HubToken().value_or(""), "from-home");
  WriteText(dir / "file", "from-path\n");
  {
    ScopedEnv p("HF_TOKEN_PATH", (dir / "file").string());
    EXPECT_EQ(HubToken().value_or(""), "from-path");
    ScopedEnv t("HF_TOKEN", "from-env");
    EXPECT_EQ(HubToken().value_or(""), "from-env");
  }
  {
    ScopedEnv e("HF_ENDPOINT", "http://127.0.0.1:1234//");
    EXPECT_EQ(HubEndpoint(), "http://127.0.0.1:1234");
  }
  {
    ScopedEnv e("HF_ENDPOINT", std::nullopt);
    EXPECT_EQ(HubEndpoint(), "https://huggingface.co");
  }
  ScopedEnv tr("TRANSFORMERS_OFFLINE", std::nullopt);
  for (const char* on : {"1", "true", "YES", "On"}) {
    ScopedEnv off("HF_HUB_OFFLINE", on);
    EXPECT_TRUE(HubOfflineFromEnv()) << on;
  }
  for (const char* not_on : {"0", "false", ""}) {
    ScopedEnv off("HF_HUB_OFFLINE", not_on);
    EXPECT_FALSE(HubOfflineFromEnv()) << not_on;
  }
}

TEST(HubDownload, OfflineRefusesNamingTheReference) {
  TempDir dir;
  ScopedEnv hub("HF_HUB_CACHE", (dir / "hub").string());
  ScopedEnv off("HF_HUB_OFFLINE", "1");
  auto got = ResolveOrDownloadModel("org/absent@v1", HubDownloadOptions{});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  const std::string& msg = got.status().message();
  EXPECT_NE(msg.find("org/absent@v1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HF_HUB_OFFLINE"), std::string::npos) << msg;
  ScopedEnv on("HF_HUB_OFFLINE", "0");
  HubDownloadOptions options;
  options.offline = true;
  auto flag = ResolveOrDownloadModel("org/absent", options);
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("--offline"), std::string::npos)
      << flag.status().message();
}

}  // namespace hub_tests

}  // namespace
}  // namespace tlaloc::io
