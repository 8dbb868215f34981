// loss.svg, the picture of a fine-tuning run: loss per step (left axis) and the learning rate
// (right axis) as SVG paths, with optional note lines (finetune-demo puts the held-out score
// there). Written by hand rather than with a plotting library: the picture is two polylines,
// axes and some text, and a dependency would cost more than these few hundred lines.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::train {

inline constexpr std::string_view kLossPlotFile = "loss.svg";

struct LossPoint {
  int64_t step = 0;
  double loss = 0;  // NaN or infinite losses leave a gap in the curve and a red mark
  double lr = 0;
};

struct LossPlotOptions {
  std::string title = "tlaloc finetune";
  // Step count of the whole run, so a plot drawn mid-run keeps its final x axis (0: last step).
  int64_t total_steps = 0;
  std::vector<std::string> notes;  // extra text lines under the title
};

// The SVG document. The loss curve is <path id="loss-curve"> with one point per step whose loss
// is finite (a new "M" subpath after each non-finite one); the learning rate is
// <path id="lr-curve"> with one point per step. Text is XML-escaped.
std::string RenderLossSvg(std::span<const LossPoint> points, const LossPlotOptions& options);

// Writes RenderLossSvg atomically (a temporary file beside `path`, then rename), so a browser
// reading it mid-run, or a run killed mid-write, never sees a half-written file.
Status WriteLossSvg(const std::filesystem::path& path, std::span<const LossPoint> points,
                    const LossPlotOptions& options);

}  // namespace tlaloc::train
