// The machine's memory read bandwidth as a weight-streaming kernel sees it: a buffer far larger
// than the caches summed on every thread of a pool. Decode speed is bound by it (each token
// reads every weight once), so benchmarks report their figures as a fraction of it.
#pragma once

#include <cstdint>

#include "tlaloc/support/thread_pool.h"

namespace tlaloc {

// The median of `repeats` passes over `bytes` of memory on the pool's thread count, in bytes per
// second (ProbeReadBandwidth, machine_probe.h, also gives the spread).
double MeasureReadBandwidth(ThreadPool& pool, int64_t bytes = int64_t{512} << 20, int repeats = 5);

}  // namespace tlaloc
