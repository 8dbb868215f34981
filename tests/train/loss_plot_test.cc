// loss.svg: well-formed (balanced tags, escaped text), one curve point per step, NaN losses as
// gaps, and an atomic rewrite that leaves no temporary file behind.
#include "tlaloc/train/loss_plot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tlaloc::train {
namespace {

namespace fs = std::filesystem;

// Checks the tags nest: every <name ...> is closed by </name> in order or is self-closing.
// Returns "" when well formed, else what is wrong.
std::string TagProblem(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t i = svg.find('<'); i != std::string::npos; i = svg.find('<', i + 1)) {
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(i);
    if (tag[0] == '?') continue;  // the XML declaration
    if (tag.find('<') != std::string::npos) return "'<' inside a tag at " + std::to_string(i);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "unexpected </" + tag.substr(1);
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (svg.find("<svg") == std::string::npos) return "no <svg> element";
  return "";
}

// The d attribute of the path with the given id.
std::string PathData(const std::string& svg, const std::string& id) {
  const size_t at = svg.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t d = svg.find(" d=\"", at);
  return svg.substr(d + 4, svg.find('"', d + 4) - d - 4);
}

int Count(const std::string& s, char c) {
  return static_cast<int>(std::count(s.begin(), s.end(), c));
}

std::vector<LossPoint> Points(int n) {
  std::vector<LossPoint> points;
  for (int i = 1; i <= n; ++i) points.push_back({i, 5.0 / i, 1e-3 * std::min(1.0, i / 3.0)});
  return points;
}

TEST(LossPlotTest, OnePointPerStepInWellFormedSvg) {
  const auto points = Points(17);
  LossPlotOptions options;
  options.title = "run <1> & \"two\"";
  options.notes = {"held-out: before 0/4, after 3/4"};
  const std::string svg = RenderLossSvg(points, options);
  EXPECT_EQ(TagProblem(svg), "");
  const std::string loss = PathData(svg, "loss-curve"), lr = PathData(svg, "lr-curve");
  EXPECT_EQ(Count(loss, 'M') + Count(loss, 'L'), 17) << loss;
  EXPECT_EQ(Count(loss, 'M'), 1);
  EXPECT_EQ(Count(lr, 'M') + Count(lr, 'L'), 17) << lr;
  EXPECT_NE(svg.find("run &lt;1&gt; &amp; &quot;two&quot;"), std::string::npos);
  EXPECT_NE(svg.find("held-out: before 0/4, after 3/4"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(LossPlotTest, NonFiniteLossesLeaveGapsAndMarks) {
  auto points = Points(10);
  points[3].loss = NAN;
  points[7].loss = INFINITY;
  points[8].lr = NAN;
  const std::string svg = RenderLossSvg(points, {});
  EXPECT_EQ(TagProblem(svg), "");
  const std::string loss = PathData(svg, "loss-curve");
  EXPECT_EQ(Count(loss, 'M') + Count(loss, 'L'), 8) << loss;
  EXPECT_EQ(Count(loss, 'M'), 3) << "a new subpath after each non-finite loss: " << loss;
  EXPECT_EQ(Count(PathData(svg, "lr-curve"), 'L') + 1, 10);
  size_t marks = 0;
  for (size_t p = svg.find("class=\"nonfinite\""); p != std::string::npos;
       p = svg.find("class=\"nonfinite\"", p + 1))
    ++marks;
  EXPECT_EQ(marks, 2u);
  for (const char* bad : {"nan", "inf", "NaN"}) EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
}

TEST(LossPlotTest, EdgeCasesStayWellFormed) {
  EXPECT_EQ(TagProblem(RenderLossSvg({}, {})), "");
  const std::vector<LossPoint> one = {{1, 2.5, 1e-4}};
  const std::string svg = RenderLossSvg(one, {});
  EXPECT_EQ(TagProblem(svg), "");
  EXPECT_EQ(PathData(svg, "loss-curve").substr(0, 1), "M");
  const std::vector<LossPoint> all_nan = {{1, NAN, 0}, {2, NAN, 0}};
  const std::string nan_svg = RenderLossSvg(all_nan, {});
  EXPECT_EQ(TagProblem(nan_svg), "");
  EXPECT_EQ(nan_svg.find("id=\"loss-curve\""), std::string::npos);
}

TEST(LossPlotTest, MidRunPlotKeepsTheRunsAxis) {
  LossPlotOptions options;
  options.total_steps = 100;
  const std::string svg = RenderLossSvg(Points(10), options);
  // The last tick label is the run's last step, not the last step done so far.
  EXPECT_NE(svg.find(">100</text>"), std::string::npos);
  options.total_steps = 20000;  // step labels stay plain integers
  EXPECT_NE(RenderLossSvg(Points(10), options).find(">20000</text>"), std::string::npos);
}

TEST(LossPlotTest, WriteReplacesTheFileAtomically) {
  const fs::path dir = fs::temp_directory_path() / ("loss_plot_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "loss.svg";
  ASSERT_TRUE(WriteLossSvg(path, Points(3), {}).ok());
  ASSERT_TRUE(WriteLossSvg(path, Points(5), {}).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(TagProblem(text.str()), "");
  const std::string loss = PathData(text.str(), "loss-curve");
  EXPECT_EQ(Count(loss, 'M') + Count(loss, 'L'), 5);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  const auto status = WriteLossSvg(dir / "missing" / "loss.svg", Points(2), {});
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("missing"), std::string::npos) << status.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tlaloc::train
