// The parameter count of a config from its sizes alone, with every product checked, so
// ValidateModelConfig can refuse sizes from a file before anything multiplies them unchecked.
// (The tensor list itself belongs to the model family, models/family.h.)
#include <optional>

#include "io/io_util.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/support/checked_math.h"

namespace tlaloc::io {

std::optional<int64_t> CountParameters(const ModelConfig& c) {
  bool fits = true;
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = fits && CheckedMul(a, b, &r);
    return r;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = fits && CheckedAdd(a, b, &r);
    return r;
  };
  const int64_t h = c.hidden_size, q = mul(c.num_attention_heads, c.head_dim),
                kv = mul(c.num_key_value_heads, c.head_dim);
  // Norms, attention projections (and biases), q/k norms where the family has them: the same in
  // every layer.
  int64_t attention = add(add(mul(2, h), mul(2, mul(q, h))), mul(2, mul(kv, h)));
  if (c.attention_bias) attention = add(attention, add(add(q, mul(2, kv)), h));
  if (c.has_qk_norm()) attention = add(attention, mul(2, c.head_dim));
  const int64_t dense = mul(3, mul(c.intermediate_size, h));
  const int64_t embedding = mul(c.vocab_size, h);
  int64_t total = add(embedding, h);
  if (!c.tie_word_embeddings) total = add(total, embedding);
  for (int64_t i = 0; i < c.num_hidden_layers && fits; ++i) {
    // A sparse layer: its router [experts, h] and experts' three matrices.
    const FeedForward ff = c.FeedForwardOf(i);
    const int64_t moe = add(mul(ff.experts, h), mul(ff.experts, mul(3, mul(ff.expert_width, h))));
    total = add(total, add(attention, ff.sparse() ? moe : dense));
  }
  if (!fits) return std::nullopt;
  return total;
}

}  // namespace tlaloc::io
