// The machine probes give a median inside their spread, over the passes asked for, and name what
// they measured; the pinned team runs every thread's body once per pass.
#include "tlaloc/support/machine_probe.h"

#include <gtest/gtest.h>

#include <atomic>

namespace tlaloc {
namespace {

void ExpectSane(const ProbeFigure& f, int passes) {
  EXPECT_EQ(f.passes, passes);
  EXPECT_GT(f.median, 0);
  EXPECT_LE(f.low, f.median);
  EXPECT_LE(f.median, f.high);
  EXPECT_FALSE(f.what.empty());
}

TEST(MachineProbe, PinnedPassesRunEachThreadOncePerPass) {
  std::atomic<int> setups{0}, bodies{0};
  auto seconds = TimePinnedPasses(
      3, 4, [&](int) { ++setups; }, [&](int) { ++bodies; });
  EXPECT_EQ(seconds.size(), 4u);
  EXPECT_EQ(setups.load(), 3);
  EXPECT_EQ(bodies.load(), 3 * 5);  // one untimed warm-up pass, then four timed
}

TEST(MachineProbe, RatesAreMedianLowHigh) {
  ProbeFigure f = RatesOf(12, {1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(f.low, 3);
  EXPECT_DOUBLE_EQ(f.high, 12);
  EXPECT_DOUBLE_EQ(f.median, (4 + 6) / 2.0);
  EXPECT_DOUBLE_EQ(f.spread(), 9 / 5.0);
}

TEST(MachineProbe, ReadBandwidth) {
  // 16 MiB: more than most L2s, small enough for a unit test (a figure, not a measurement).
  ExpectSane(ProbeReadBandwidth(2, int64_t{16} << 20, 3), 3);
}

TEST(MachineProbe, PeakOfEachKind) {
  for (PeakKind kind : {PeakKind::kF32, PeakKind::kBf16, PeakKind::kInt8}) {
    ProbeFigure f = ProbePeakFlops(1, kind, 2);
    ExpectSane(f, 2);
    // Far below any CPU that runs this: a probe that lost its work would read near zero or
    // infinity, not this.
    EXPECT_GT(f.median, 1e8) << f.what;
  }
}

}  // namespace
}  // namespace tlaloc
