// Time per op kind across a process's interpreter runs, for finding what a model spends its
// time on: TLALOC_PROFILE=1 turns it on and prints a table to stderr at exit (=2: one row per op
// kind and result type). Times are self times (an op that runs regions or calls does not count
// its inner ops' time twice).
#pragma once

#include <cstdint>
#include <string>

namespace tlaloc::interp {

// 0: off; 1: by op kind; 2: by op kind and result type (TLALOC_PROFILE, read once).
int OpProfilingLevel();

// Adds one evaluation under `key` (an op name, or name and type) taking `self_seconds` and
// writing `result_bytes`.
void RecordOpTime(const std::string& key, double self_seconds, int64_t result_bytes);

}  // namespace tlaloc::interp
