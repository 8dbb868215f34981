#include "tlaloc/ir/quant_format.h"

namespace tlaloc {

namespace {

// The quants' and scales' trailing dimensions of a row of k elements in `f`.
std::vector<int64_t> QuantTail(const QuantFormatInfo& f, int64_t k) {
  if (f.quant_blocks_axis) return {k / f.block, f.quant_bytes};
  return {k / f.block * f.quant_bytes};
}

std::vector<int64_t> ScaleTail(const QuantFormatInfo& f, int64_t k) {
  if (f.scale_pairs) return {k / f.scale_group, 2};
  return {k / f.scale_group};
}

}  // namespace

std::optional<QuantFormat> FindQuantFormat(std::string_view name) {
  for (const QuantFormatInfo& f : kQuantFormats)
    if (f.name == name) return f.format;
  return std::nullopt;
}

std::string KnownQuantFormats() {
  std::string s;
  for (const QuantFormatInfo& f : kQuantFormats) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

StatusOr<QuantFormat> ParseQuantFormat(std::string_view name, std::string_view what) {
  if (auto f = FindQuantFormat(name)) return *f;
  return InvalidArgument(std::string(what) + " \"" + std::string(name) +
                         "\" is no quantised format Tlaloc knows (known: " + KnownQuantFormats() +
                         ")");
}

std::string QuantScaleName(std::string_view weight_name) {
  return std::string(weight_name) + std::string(kQuantScaleSuffix);
}

std::optional<std::string_view> QuantWeightOfScale(std::string_view scale_name) {
  if (scale_name.size() <= kQuantScaleSuffix.size() || !scale_name.ends_with(kQuantScaleSuffix))
    return std::nullopt;
  return scale_name.substr(0, scale_name.size() - kQuantScaleSuffix.size());
}

StatusOr<std::pair<TensorType, TensorType>> QuantStorageTypes(QuantFormat format,
                                                              const std::vector<int64_t>& dims) {
  const QuantFormatInfo& f = QuantTraits(format);
  const int64_t k = dims.empty() ? 0 : dims.back();
  if (k <= 0 || k % f.block != 0)
    return InvalidArgument(std::string(f.name) + " storage of a " + DimsToString(dims) +
                           " matrix: its rows (last dimension) must be a positive multiple of " +
                           std::to_string(f.block) + " elements, " + std::string(f.name) +
                           "'s block");
  std::vector<int64_t> q(dims.begin(), dims.end() - 1), s = q;
  for (int64_t d : QuantTail(f, k)) q.push_back(d);
  for (int64_t d : ScaleTail(f, k)) s.push_back(d);
  return std::pair<TensorType, TensorType>{TensorType(f.quant_type, std::move(q)),
                                           TensorType(f.scale_type, std::move(s))};
}

std::optional<QuantStorage> QuantFormatOf(const TensorType& quants, const TensorType& scales) {
  for (const QuantFormatInfo& f : kQuantFormats) {
    if (quants.element_type != f.quant_type || scales.element_type != f.scale_type) continue;
    const size_t scale_tail = f.scale_pairs ? 2 : 1;
    if (scales.dims.size() < scale_tail || (f.scale_pairs && scales.dims.back() != 2)) continue;
    const size_t lead = scales.dims.size() - scale_tail;
    const int64_t k = scales.dims[lead] * f.scale_group;
    if (k <= 0 || k % f.block != 0) continue;
    std::vector<int64_t> want(scales.dims.begin(), scales.dims.begin() + lead);
    for (int64_t d : QuantTail(f, k)) want.push_back(d);
    if (quants.dims == want) return QuantStorage{f.format, k};
  }
  return std::nullopt;
}

std::string QuantLayoutText(QuantFormat format) {
  const QuantFormatInfo& f = QuantTraits(format);
  auto per = [](int64_t divisor) {
    return divisor == 1 ? std::string("K") : "K/" + std::to_string(divisor);
  };
  std::string q = f.quant_blocks_axis
                      ? per(f.block) + ", " + std::to_string(f.quant_bytes)
                      : (f.quant_bytes >= f.block ? "K" : per(f.block / f.quant_bytes));
  std::string s = per(f.scale_group) + (f.scale_pairs ? ", 2" : "");
  return std::string(f.name) + ": " + std::string(ShortName(f.quant_type)) + " [..., " + q +
         "] with " + std::string(ShortName(f.scale_type)) + " [..., " + s + "]";
}

}  // namespace tlaloc
