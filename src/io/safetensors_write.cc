// safetensors writer, laid out byte for byte as the reference implementation does.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "io/io_util.h"
#include "io/safetensors_layout.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

namespace {

// The position of each dtype in the reference implementation's Dtype enum, which lists types in
// increasing alignment; the writer sorts by descending position so every tensor starts aligned.
int ReferenceDtypeRank(ElementType t) {
  switch (t) {
    case ElementType::kPred:
      return 0;
    case ElementType::kU8:
      return 4;
    case ElementType::kS8:
      return 5;
    case ElementType::kS16:
      return 11;
    case ElementType::kU16:
      return 12;
    case ElementType::kF16:
      return 13;
    case ElementType::kBF16:
      return 14;
    case ElementType::kS32:
      return 15;
    case ElementType::kU32:
      return 16;
    case ElementType::kF32:
      return 17;
    case ElementType::kF64:
      return 19;
    case ElementType::kS64:
      return 20;
    case ElementType::kU64:
      return 21;
  }
  return 0;
}

struct Prepared {
  SafetensorsPlan plan;
  std::vector<const NamedTensor*> order;  // data order
};

StatusOr<Prepared> Prepare(std::span<const NamedTensor> tensors,
                           const std::map<std::string, std::string>& metadata,
                           SafetensorsLayout layout) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!t.value.valid())
      return InvalidArgument("safetensors writer: tensor \"" + t.name + "\" has no data");
    entries.push_back({t.name, t.value.type()});
  }
  Prepared p;
  TL_ASSIGN_OR_RETURN(p.plan, PlanSafetensors(entries, metadata, layout));
  for (size_t i : p.plan.order) p.order.push_back(&tensors[i]);
  return p;
}

}  // namespace

StatusOr<SafetensorsPlan> PlanSafetensors(std::span<const SafetensorsEntry> entries,
                                          const std::map<std::string, std::string>& metadata,
                                          SafetensorsLayout layout) {
  SafetensorsPlan p;
  std::set<std::string_view> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& t = entries[i];
    if (t.name == "__metadata__")
      return InvalidArgument("safetensors writer: \"__metadata__\" is reserved, not a tensor name");
    if (!names.insert(t.name).second)
      return InvalidArgument("safetensors writer: tensor \"" + t.name + "\" given twice");
    p.order.push_back(i);
  }
  std::stable_sort(p.order.begin(), p.order.end(), [&](size_t a, size_t b) {
    int ra = ReferenceDtypeRank(entries[a].type.element_type);
    int rb = ReferenceDtypeRank(entries[b].type.element_type);
    if (ra != rb) return ra > rb;
    // bytewise, as Rust's String ordering
    return layout == SafetensorsLayout::kReference && entries[a].name < entries[b].name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  p.offsets.assign(entries.size(), 0);
  uint64_t offset = 0;
  for (size_t i : p.order) {
    const SafetensorsEntry& t = entries[i];
    uint64_t n = static_cast<uint64_t>(t.type.byte_size());
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(SafetensorsDtypeName(t.type.element_type));
    entry["shape"] = t.type.dims;
    entry["data_offsets"] = {offset, offset + n};
    header[t.name] = std::move(entry);
    p.offsets[i] = offset;
    offset += n;
  }
  p.data_size = offset;
  try {
    p.header = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("safetensors writer: a tensor name or metadata string is "
                                       "not valid UTF-8: ") +
                           e.what());
  }
  p.header.resize((p.header.size() + 7) / 8 * 8, ' ');
  if (p.header.size() > kSafetensorsMaxHeaderSize)
    return InvalidArgument("safetensors writer: header of " + std::to_string(p.header.size()) +
                           " bytes exceeds the " + std::to_string(kSafetensorsMaxHeaderSize) +
                           "-byte limit readers enforce");
  return p;
}

std::array<std::byte, 8> SafetensorsLengthPrefix(uint64_t n) {
  std::array<std::byte, 8> out;
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  return out;
}

StatusOr<std::vector<std::byte>> SerializeSafetensors(
    std::span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata,
    SafetensorsLayout layout) {
  TL_ASSIGN_OR_RETURN(Prepared p, Prepare(tensors, metadata, layout));
  const std::string& header = p.plan.header;
  std::vector<std::byte> out;
  out.reserve(8 + header.size() + p.plan.data_size);
  auto prefix = SafetensorsLengthPrefix(header.size());
  out.insert(out.end(), prefix.begin(), prefix.end());
  const auto* h = reinterpret_cast<const std::byte*>(header.data());
  out.insert(out.end(), h, h + header.size());
  for (const NamedTensor* t : p.order)
    out.insert(out.end(), t->value.data(), t->value.data() + t->value.byte_size());
  return out;
}

Status WriteSafetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                        const std::map<std::string, std::string>& metadata,
                        SafetensorsLayout layout) {
  TL_ASSIGN_OR_RETURN(Prepared p, Prepare(tensors, metadata, layout));
  return WriteFileAtomically(path, [&](const ByteSink& sink) -> Status {
    const std::string& header = p.plan.header;
    auto prefix = SafetensorsLengthPrefix(header.size());
    TL_RETURN_IF_ERROR(sink(prefix));
    TL_RETURN_IF_ERROR(sink({reinterpret_cast<const std::byte*>(header.data()), header.size()}));
    for (const NamedTensor* t : p.order)
      TL_RETURN_IF_ERROR(sink({t->value.data(), static_cast<size_t>(t->value.byte_size())}));
    return OkStatus();
  });
}

}  // namespace tlaloc::io
