// The tensors of an int8 checkpoint (`tlaloc quantize`, io::WeightQuantization) of a decoder
// whose float tensors a family lists: what `quantize` writes and loading expects.
#include "models/decoder/decoder.h"

namespace tlaloc::models::decoder {

std::vector<ExpectedTensor> Int8CheckpointTensors(const ModelConfig& c,
                                                  std::vector<ExpectedTensor> float_tensors) {
  if (!c.quantization) return float_tensors;
  const int64_t block = c.quantization->group_size;
  std::vector<ExpectedTensor> out;
  for (ExpectedTensor& t : float_tensors) {
    // Matrices whose rows are whole blocks (the embedding, the projections, the head); norms
    // and other vectors stay float.
    if (t.shape.size() != 2 || t.shape[1] % block != 0) {
      out.push_back(std::move(t));
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
