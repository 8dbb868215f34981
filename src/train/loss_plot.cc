// loss.svg (see loss_plot.h): hand-written SVG, no plotting library.
#include "tlaloc/train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc::train {

namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 80, kRight = 90, kBottom = 56, kTitleTop = 28, kLineHeight = 18;
constexpr int kTicks = 5;
constexpr const char* kLossColour = "#1f77b4";
constexpr const char* kLrColour = "#ff7f0e";

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control characters other than tab are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string Label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// Maps [lo, hi] onto [out_lo, out_hi]; a degenerate range maps to the middle.
struct Scale {
  double lo, hi, out_lo, out_hi;
  double operator()(double v) const {
    if (hi == lo) return (out_lo + out_hi) / 2;
    return out_lo + (v - lo) / (hi - lo) * (out_hi - out_lo);
  }
};

std::string Text(double x, double y, const std::string& anchor, const std::string& text,
                 const std::string& extra = "") {
  return "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + Escape(text) + "</text>\n";
}

}  // namespace

std::string RenderLossSvg(std::span<const LossPoint> points, const LossPlotOptions& options) {
  const double top = kTitleTop + kLineHeight * (1.0 + static_cast<double>(options.notes.size()));
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = top;

  // Axis ranges: steps up to the run's end, finite losses padded by 5%, lr from 0.
  int64_t first = points.empty() ? 1 : points.front().step, last = first;
  double lo = INFINITY, hi = -INFINITY, lr_hi = 0;
  for (const LossPoint& p : points) {
    first = std::min(first, p.step);
    last = std::max(last, p.step);
    if (std::isfinite(p.loss)) {
      lo = std::min(lo, p.loss);
      hi = std::max(hi, p.loss);
    }
    if (std::isfinite(p.lr)) lr_hi = std::max(lr_hi, p.lr);
  }
  last = std::max(last, options.total_steps);
  if (last == first) ++last;
  if (!(lo <= hi)) lo = 0, hi = 1;
  const double pad = hi > lo ? (hi - lo) * 0.05 : std::max(std::abs(hi) * 0.1, 0.5);
  lo -= pad;
  hi += pad;
  if (lr_hi <= 0) lr_hi = 1;
  const Scale sx{static_cast<double>(first), static_cast<double>(last), x0, x1};
  const Scale sy{lo, hi, y0, y1}, slr{0, lr_hi, y0, y1};

  std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"500\" "
      "viewBox=\"0 0 800 500\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"800\" height=\"500\" fill=\"white\"/>\n";
  svg += Text(kWidth / 2, kTitleTop, "middle", options.title, " font-size=\"16\"");
  for (size_t i = 0; i < options.notes.size(); ++i)
    svg += Text(kWidth / 2, kTitleTop + kLineHeight * static_cast<double>(i + 1), "middle",
                options.notes[i]);

  // Frame, grid and tick labels: loss on the left, learning rate on the right, steps below.
  svg += "<rect x=\"" + Num(x0) + "\" y=\"" + Num(y1) + "\" width=\"" + Num(x1 - x0) +
         "\" height=\"" + Num(y0 - y1) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (int t = 0; t <= kTicks; ++t) {
    const double f = static_cast<double>(t) / kTicks;
    const double y = y0 + f * (y1 - y0);
    svg += "<line x1=\"" + Num(x0) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(x1) + "\" y2=\"" +
           Num(y) + "\" stroke=\"#ddd\"/>\n";
    svg += Text(x0 - 6, y + 4, "end", Label(lo + f * (hi - lo)),
                " fill=\"" + std::string(kLossColour) + "\"");
    svg +=
        Text(x1 + 6, y + 4, "start", Label(f * lr_hi), " fill=\"" + std::string(kLrColour) + "\"");
    const double step = static_cast<double>(first) + f * static_cast<double>(last - first);
    svg += Text(sx(step), y0 + 18, "middle", std::to_string(std::llround(step)));
  }
  svg += Text((x0 + x1) / 2, kHeight - 14, "middle", "step");
  svg += "<text transform=\"translate(18," + Num((y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" fill=\"" + kLossColour + "\">loss</text>\n";
  svg += "<text transform=\"translate(" + Num(kWidth - 16) + "," + Num((y0 + y1) / 2) +
         ") rotate(90)\" text-anchor=\"middle\" fill=\"" + kLrColour + "\">learning rate</text>\n";

  // The curves: a gap (new subpath) after every non-finite loss, which also gets a red mark.
  std::string loss_d, lr_d, marks;
  bool pen_down = false;
  for (const LossPoint& p : points) {
    const std::string x = Num(sx(static_cast<double>(p.step)));
    if (std::isfinite(p.loss)) {
      loss_d += (loss_d.empty() ? "" : " ") + std::string(pen_down ? "L" : "M") + x + "," +
                Num(sy(p.loss));
      pen_down = true;
    } else {
      pen_down = false;
      marks += "<line class=\"nonfinite\" x1=\"" + x + "\" y1=\"" + Num(y0) + "\" x2=\"" + x +
               "\" y2=\"" + Num(y0 - 10) + "\" stroke=\"red\" stroke-width=\"2\"/>\n";
    }
    const double lr = std::isfinite(p.lr) ? p.lr : 0;
    lr_d += (lr_d.empty() ? "M" : " L") + x + "," + Num(slr(lr));
  }
  if (!lr_d.empty())
    svg += "<path id=\"lr-curve\" d=\"" + lr_d + "\" fill=\"none\" stroke=\"" + kLrColour +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n";
  if (!loss_d.empty())
    svg += "<path id=\"loss-curve\" d=\"" + loss_d + "\" fill=\"none\" stroke=\"" + kLossColour +
           "\" stroke-width=\"2\"/>\n";
  svg += marks;

  // Legend in the top right corner of the plot.
  const double lx = x1 - 150, ly = y1 + 16;
  svg += "<line x1=\"" + Num(lx) + "\" y1=\"" + Num(ly - 4) + "\" x2=\"" + Num(lx + 24) +
         "\" y2=\"" + Num(ly - 4) + "\" stroke=\"" + kLossColour + "\" stroke-width=\"2\"/>\n";
  svg += Text(lx + 30, ly, "start", "loss");
  svg += "<line x1=\"" + Num(lx) + "\" y1=\"" + Num(ly + 14) + "\" x2=\"" + Num(lx + 24) +
         "\" y2=\"" + Num(ly + 14) + "\" stroke=\"" + kLrColour +
         "\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n";
  svg += Text(lx + 30, ly + 18, "start", "learning rate");
  svg += "</svg>\n";
  return svg;
}

Status WriteLossSvg(const std::filesystem::path& path, std::span<const LossPoint> points,
                    const LossPlotOptions& options) {
  // A browser reloading the plot mid-run never sees a truncated file.
  return WriteStringAtomic(path, RenderLossSvg(points, options));
}

}  // namespace tlaloc::train
