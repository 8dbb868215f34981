// The tensors of a quantized checkpoint (`tlaloc quantize`'s int8, a GGUF import's formats;
// io::WeightQuantization) of a decoder whose float tensors a family lists: what `quantize` and
// the import write and loading expects.
#include "models/decoder/decoder.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::models::decoder {

std::vector<ExpectedTensor> Int8CheckpointTensors(const ModelConfig& c,
                                                  std::vector<ExpectedTensor> float_tensors,
                                                  bool (*keep_float)(const ExpectedTensor& t)) {
  if (!c.quantization) return float_tensors;
  const int64_t block = c.quantization->group_size;
  std::vector<ExpectedTensor> out;
  for (ExpectedTensor& t : float_tensors) {
    // Matrices whose rows are whole blocks (the embedding, the projections, the head); norms
    // and other vectors stay float, and those the family keeps float (an MoE router).
    if (t.shape.size() != 2 || t.shape[1] % block != 0 || (keep_float && keep_float(t))) {
      out.push_back(std::move(t));
      continue;
    }
    // A GGUF import (tlaloc_gguf) lists each matrix's storage; one not listed is float.
    const auto& formats = c.quantization->formats;
    const auto fmt = formats.find(t.name);
    const auto format = fmt == formats.end() ? std::nullopt : FindQuantFormat(fmt->second);
    if (!formats.empty() && format != QuantFormat::kQ8_0) {
      // Not listed (or rows of no whole blocks, which loading then names): float.
      std::optional<std::pair<TensorType, TensorType>> types;
      if (format)
        if (auto stored = QuantStorageTypes(*format, t.shape); stored.ok()) types = *stored;
      if (!types) {
        out.push_back(std::move(t));
        continue;
      }
      const auto& [qt, st] = *types;
      out.push_back({t.name, qt.dims, t.optional, qt.element_type});
      out.push_back({Int8ScaleName(t.name), st.dims, t.optional, st.element_type});
      continue;
    }
    ExpectedTensor scale{
        Int8ScaleName(t.name), {t.shape[0], t.shape[1] / block}, t.optional, ElementType::kF16};
    t.fixed_type = ElementType::kS8;
    out.push_back(std::move(t));
    out.push_back(std::move(scale));
  }
  return out;
}

}  // namespace tlaloc::models::decoder
