// Test oracles that live outside the project (the checkout's Python venv from PyPI: llama.cpp,
// transformers, torch, tokenizers; git, the shared conformance programs): how tests find them, and
// what a test does when one is missing. Outside CI it skips, naming what is missing; under CI
// (CI=true, as .ci/run is started) it fails, because a green CI must mean the checks that matter
// ran. Skips for hardware CI cannot have (CUDA, TPU) do not use this.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tlaloc::testing {

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// The Python that runs the oracles: the checkout's venv (third_party_py/, made by
// scripts/setup.sh from scripts/python/requirements.lock), quoted for a shell command line.
inline std::string OraclePythonPath() {
  return (std::filesystem::path(TLALOC_SOURCE_DIR) / "third_party_py/bin/python").string();
}
inline std::string OraclePython() { return "'" + OraclePythonPath() + "'"; }

// Why the venv's Python cannot import every module of `modules` (space separated, e.g.
// "torch numpy"), or empty when it can.
inline std::string PythonMissing(const std::string& modules) {
  if (!std::filesystem::exists(OraclePythonPath()))
    return OraclePythonPath() + " is missing (run scripts/setup.sh)";
  std::string imports;
  for (size_t i = 0; i < modules.size();) {
    size_t j = modules.find(' ', i);
    if (j == std::string::npos) j = modules.size();
    if (j > i) imports += "import " + modules.substr(i, j - i) + ";";
    i = j + 1;
  }
  const std::string probe = OraclePython() + " -c '" + imports + "' >/dev/null 2>&1";
  if (std::system(probe.c_str()) == 0) return "";
  return "the venv's Python cannot import " + modules + " (run scripts/setup.sh)";
}

}  // namespace tlaloc::testing

// Skips naming `why`, or fails under CI. A statement in a test body (it returns from it).
#define TL_ORACLE_MISSING(why)                                               \
  do {                                                                       \
    if (::tlaloc::testing::InCi()) {                                         \
      FAIL() << "CI=true and an oracle this test needs is missing: " << why; \
    } else {                                                                 \
      GTEST_SKIP() << why;                                                   \
    }                                                                        \
  } while (0)
