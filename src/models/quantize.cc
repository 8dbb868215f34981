// int8 weight-only checkpoints (see quantize.h).
#include "tlaloc/models/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/support/half.h"

namespace tlaloc::models {

namespace fs = std::filesystem;

namespace {

// Outputs larger than this are sharded even when the input was one file.
constexpr uint64_t kShardAbove = io::kDefaultMaxShardBytes;

float ElementAsFloat(const Literal& v, int64_t i) {
  switch (v.element_type()) {
    case ElementType::kBF16:
      return Bf16BitsToFloat(v.span<uint16_t>()[i]);
    case ElementType::kF16:
      return HalfBitsToFloat(v.span<uint16_t>()[i]);
    default:
      return v.span<float>()[i];
  }
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Status CheckQuantizable(const TensorType& type, const std::string& name) {
  const int64_t block = kQ8_0BlockElements;
  const ElementType et = type.element_type;
  if (et != ElementType::kF32 && et != ElementType::kBF16 && et != ElementType::kF16)
    return InvalidArgument("quantize: tensor \"" + name + "\" has dtype " +
                           std::string(ShortName(et)) + " (expected f32, bf16 or f16)");
  if (type.dims.size() < 2 || type.dims.back() % block != 0)
    return InvalidArgument(
        "quantize: tensor \"" + name + "\" has shape " + ShapeText(type.dims) +
        " (expected a matrix, or a stack of them, whose rows are a multiple of " +
        std::to_string(block) + " long)");
  return OkStatus();
}

TensorType ScaleType(const TensorType& matrix) {
  std::vector<int64_t> dims = matrix.dims;
  dims.back() /= kQ8_0BlockElements;
  return TensorType(ElementType::kF16, std::move(dims));
}

std::span<const std::byte> BytesOf(const Literal& v) {
  return {v.data(), static_cast<size_t>(v.byte_size())};
}

}  // namespace

StatusOr<std::pair<Literal, Literal>> QuantizeInt8Matrix(const Literal& value,
                                                         const std::string& name) {
  TL_RETURN_IF_ERROR(CheckQuantizable(value.type(), name));
  const int64_t block = kQ8_0BlockElements;
  // A stack [E, out, in] (an MoE layer's experts) is E * out rows.
  const int64_t k = value.dims().back(), rows = value.num_elements() / k, blocks = k / block;
  std::vector<int64_t> scale_dims = value.dims();
  scale_dims.back() = blocks;
  Literal q = Literal::Uninitialized(TensorType(ElementType::kS8, value.dims()));
  Literal scale = Literal::Uninitialized(TensorType(ElementType::kF16, scale_dims));
  auto qs = q.span<int8_t>();
  auto ss = scale.span<uint16_t>();
  float x[kQ8_0BlockElements];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t base = r * k + b * block;
      float amax = 0;
      for (int64_t j = 0; j < block; ++j) {
        x[j] = ElementAsFloat(value, base + j);
        if (!std::isfinite(x[j]))
          return InvalidArgument("quantize: tensor \"" + name + "\" has a non-finite value at [" +
                                 std::to_string(r) + ", " + std::to_string(b * block + j) + "]");
        amax = std::max(amax, std::fabs(x[j]));
      }
      const uint16_t bits = FloatToHalfBits(amax / 127.0f);
      const float d = HalfBitsToFloat(bits);
      if (!std::isfinite(d))
        return InvalidArgument("quantize: tensor \"" + name + "\" row " + std::to_string(r) +
                               " block " + std::to_string(b) + ": magnitude " +
                               std::to_string(amax) + " overflows the f16 block scale");
      ss[r * blocks + b] = bits;
      for (int64_t j = 0; j < block; ++j) {
        const float v = d > 0 ? std::nearbyint(x[j] / d) : 0.0f;
        qs[base + j] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
      }
    }
  }
  return std::make_pair(std::move(q), std::move(scale));
}

Literal DequantizeInt8Matrix(const Literal& q, const Literal& scale) {
  Literal out = Literal::Uninitialized(TensorType(ElementType::kF32, q.dims()));
  const int64_t k = q.dims().empty() ? 0 : q.dims().back();
  const int64_t blocks = scale.dims().empty() ? 1 : scale.dims().back();
  const int64_t block = blocks > 0 ? k / blocks : 1;
  auto qs = q.span<int8_t>();
  auto ss = scale.span<uint16_t>();
  auto os = out.span<float>();
  for (int64_t i = 0; i < static_cast<int64_t>(qs.size()); ++i) {
    const int64_t row = i / k, b = (i % k) / block;
    os[i] = static_cast<float>(qs[i]) * HalfBitsToFloat(ss[row * blocks + b]);
  }
  return out;
}

StatusOr<QuantizeSummary> QuantizeCheckpoint(const fs::path& in, const fs::path& out,
                                             const QuantizeOptions& options) {
  const std::string where = "quantize " + in.string();
  std::error_code ec;
  if (!fs::is_directory(in, ec)) return NotFound(where + ": no such checkpoint folder");
  if (fs::exists(out, ec) && (!fs::is_directory(out, ec) || !fs::is_empty(out, ec)))
    return FailedPrecondition(where + ": output " + out.string() +
                              " exists and is not an empty folder");
  auto loaded = LoadConfig(in);
  if (!loaded.ok())
    return Status(loaded.status().code(), where + ": " + std::string(loaded.status().message()));
  io::ModelConfig config = *loaded;
  if (config.quantization)
    return InvalidArgument(where + ": the checkpoint is already quantized (quantization_config " +
                           config.quantization->quant_method + ")");
  TL_RETURN_IF_ERROR(CheckSupported(config));
  config.quantization = io::WeightQuantization{};
  if (Status s = CheckSupported(config); !s.ok())
    return Status(s.code(), where + ": " + std::string(s.message()));
  auto checkpoint = io::Checkpoint::Open(in);
  if (!checkpoint.ok())
    return Status(checkpoint.status().code(),
                  where + ": " + std::string(checkpoint.status().message()));

  // Plan from the headers alone: which tensors are read, and the name and type of every
  // tensor written, so the output's headers are known before any tensor is made.
  struct Source {
    std::string name;
    bool quantize = false;
  };
  std::vector<Source> sources;
  std::map<std::string, TensorType> planned;  // output name -> type
  for (const auto& expected : ExpectedTensors(config)) {
    if (expected.fixed_type == ElementType::kF16) continue;  // a scale, made with its matrix
    const io::SafetensorsTensorInfo* info = checkpoint->Find(expected.name);
    if (!info) {
      if (expected.optional) continue;
      return NotFound(where + ": checkpoint is missing tensor \"" + expected.name + "\"");
    }
    if (expected.optional) continue;  // a tied head's stored copy: the embedding serves
    if (info->shape != expected.shape)
      return InvalidArgument(where + ": tensor \"" + expected.name + "\" has shape " +
                             ShapeText(info->shape) + ", expected " + ShapeText(expected.shape));
    const bool quantize = expected.fixed_type == ElementType::kS8;
    if (!quantize) {
      if (!IsFloat(info->dtype))
        return InvalidArgument(where + ": tensor \"" + expected.name + "\" has dtype " +
                               std::string(ShortName(info->dtype)) + " (expected a float type)");
      planned[expected.name] = info->type();
    } else {
      if (Status s = CheckQuantizable(info->type(), expected.name); !s.ok())
        return Status(s.code(), where + ": " + std::string(s.message()));
      planned[expected.name] = TensorType(ElementType::kS8, info->shape);
      planned[Int8ScaleName(expected.name)] = ScaleType(info->type());
    }
    sources.push_back({expected.name, quantize});
  }
  // In WeightSpecs order, each stacked weight's experts (and their scales) one after another in
  // expert order and in one shard, so that loading maps every stacked s8 tensor and its scales
  // as views.
  std::vector<std::vector<io::PlannedTensor>> groups;
  uint64_t planned_bytes = 0;
  {
    std::map<std::string, TensorType> left = planned;
    auto take = [&](const std::string& name, std::vector<io::PlannedTensor>& group) {
      auto it = left.find(name);
      if (it == left.end()) return;
      planned_bytes += static_cast<uint64_t>(it->second.byte_size());
      group.push_back({name, std::move(it->second)});
      left.erase(it);
    };
    for (const auto& spec : WeightSpecs(config)) {
      std::vector<io::PlannedTensor> group;
      if (spec.stacked.empty()) take(spec.name, group);
      for (const std::string& part : spec.stacked) take(part, group);
      if (!group.empty()) groups.push_back(std::move(group));
    }
    for (const auto& source : sources)  // any the specs do not name, in checkpoint order
      for (const std::string& name : {source.name, Int8ScaleName(source.name)}) {
        std::vector<io::PlannedTensor> group;
        take(name, group);
        if (!group.empty()) groups.push_back(std::move(group));
      }
  }
  io::CheckpointWriteOptions write_options = ExpertsInOrder();
  write_options.max_shard_bytes = options.max_shard_bytes.value_or(
      checkpoint->sharded() || planned_bytes > kShardAbove ? io::kDefaultMaxShardBytes : 0);

  // Staged beside `out`, published by one rename.
  const fs::path stage = TemporarySibling(out);
  std::unique_ptr<io::CheckpointStreamWriter> writer;
  auto fail = [&](const Status& s) {
    writer.reset();
    fs::remove_all(stage, ec);
    return Status(s.code(), where + ": " + std::string(s.message()));
  };
  fs::create_directories(stage, ec);
  if (ec) return fail(InvalidArgument("cannot create " + stage.string() + ": " + ec.message()));
  auto created = io::CheckpointStreamWriter::Create(stage, groups, write_options);
  if (!created.ok()) return fail(created.status());
  writer = std::move(*created);

  // One tensor at a time: read (a view of the mapped input), quantize, write, then drop the
  // input's pages, so memory holds one tensor and its int8 form, not the model.
  QuantizeSummary summary;
  for (const Source& source : sources) {
    auto value = checkpoint->Get(source.name);
    if (!value.ok()) return fail(value.status());
    summary.bytes_in += static_cast<uint64_t>(value->byte_size());
    if (!source.quantize) {
      if (Status s = writer->Write(source.name, BytesOf(*value)); !s.ok()) return fail(s);
      summary.bytes_out += static_cast<uint64_t>(value->byte_size());
      summary.kept_tensors += 1;
    } else {
      auto qs = QuantizeInt8Matrix(*value, source.name);
      if (!qs.ok()) return fail(qs.status());
      const Literal& q = qs->first;
      const Literal& scale = qs->second;
      // |x - q * scale| as DequantizeInt8Matrix computes q * scale, without its f32 copy.
      const int64_t k = q.dims().back(), blocks = scale.dims().back();
      auto qv = q.span<int8_t>();
      auto sv = scale.span<uint16_t>();
      for (int64_t i = 0; i < static_cast<int64_t>(qv.size()); ++i) {
        const float back = static_cast<float>(qv[i]) *
                           HalfBitsToFloat(sv[(i / k) * blocks + (i % k) / kQ8_0BlockElements]);
        summary.max_abs_error =
            std::max(summary.max_abs_error,
                     std::fabs(static_cast<double>(ElementAsFloat(*value, i)) - back));
      }
      if (Status s = writer->Write(source.name, BytesOf(q)); !s.ok()) return fail(s);
      if (Status s = writer->Write(Int8ScaleName(source.name), BytesOf(scale)); !s.ok())
        return fail(s);
      summary.bytes_out += static_cast<uint64_t>(q.byte_size() + scale.byte_size());
      summary.quantized_tensors += 1;
    }
    checkpoint->ReleasePages(source.name);
  }
  if (Status s = writer->Finish(); !s.ok()) return fail(s);
  writer.reset();
  if (Status s = io::WriteModelConfig(stage / "config.json", config); !s.ok()) return fail(s);
  for (const auto& entry : fs::directory_iterator(in, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" || IsTemporaryName(name) ||
        entry.path().extension() == ".safetensors" || name == io::kSafetensorsIndexName)
      continue;
    if (Status s = CopyFileAtomic(entry.path(), stage / name); !s.ok()) return fail(s);
  }
  if (ec) return fail(InvalidArgument("cannot list " + in.string() + ": " + ec.message()));
  if (fs::exists(out, ec)) fs::remove(out, ec);  // the empty folder checked above
  if (Status s = RenameDurably(stage, out); !s.ok()) return fail(s);
  return summary;
}

}  // namespace tlaloc::models
