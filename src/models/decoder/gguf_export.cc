// A Llama-style decoder folder (Qwen3, Qwen3-MoE, Llama) -> GGUF for llama.cpp: the shared
// part of every family's export (decoder/gguf.h), whose hooks add the family's architecture
// name, keys and tensors. The metadata keys, tensor names and tokenizer rules follow what
// llama.cpp's own converter writes, so the file loads there (and in Ollama) like one converted
// by llama.cpp.
#include "tlaloc/models/gguf_export.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "models/decoder/gguf.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"

namespace tlaloc::models::decoder {

using io::GgmlType;
using io::GgmlTypeFor;
using io::GgufKeyValue;
using io::GgufTensorToWrite;
using io::GgufValue;
using io::ReadFileToString;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// llama.cpp's token types.
enum TokenType : int64_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

// The pre-tokenizer split pattern of Qwen2/Qwen3's tokenizer.json; llama.cpp calls this
// pre-tokenizer "qwen2" and applies its own copy of the pattern.
constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

StatusOr<json> ReadJson(const fs::path& path) {
  TL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument(path.string() + ": not a JSON object");
  return j;
}

// A special token named in tokenizer_config.json: a string, or an object with "content".
std::optional<std::string> SpecialTokenText(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

bool LooksSpecial(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.rfind(open, 0) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

// A ByteLevel pre-tokenizer, alone or inside a Sequence: the vocabulary then spells bytes the
// way llama.cpp's "gpt2" tokenizer does.
bool IsByteLevel(const json& pre) {
  if (!pre.is_object()) return false;
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
    return false;
  for (const json& p : pre["pretokenizers"])
    if (IsByteLevel(p)) return true;
  return false;
}

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<std::string> merges;
  std::map<std::string, int64_t> ids;
};

// tokenizer.json's byte-level BPE as llama.cpp's "gpt2" tokenizer: one token per id up to the
// embedding rows (ids the tokenizer leaves unused become "[PAD<id>]"), added tokens typed
// control or user-defined, merges as "left right".
StatusOr<Vocabulary> ReadVocabulary(const fs::path& path, int64_t rows) {
  TL_ASSIGN_OR_RETURN(json tok, ReadJson(path));
  const std::string src = path.string();
  const json* model = tok.contains("model") ? &tok["model"] : nullptr;
  if (!model || !model->is_object() || model->value("type", "") != "BPE")
    return InvalidArgument(src + ": expected a BPE tokenizer (\"model\": {\"type\": \"BPE\"})");
  if (!model->contains("vocab") || !(*model)["vocab"].is_object())
    return InvalidArgument(src + ": model.vocab is missing or not an object");
  Vocabulary v;
  v.tokens.assign(static_cast<size_t>(rows), "");
  v.types.assign(static_cast<size_t>(rows), kUnused);
  std::vector<bool> seen(static_cast<size_t>(rows), false);
  auto place = [&](const std::string& text, const json& id, int64_t type) -> Status {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= rows)
      return InvalidArgument(src + ": token \"" + text + "\" has id " + id.dump() +
                             ", outside the model's " + std::to_string(rows) + " embedding rows");
    const auto i = static_cast<size_t>(id.get<int64_t>());
    v.tokens[i] = text;
    v.types[i] = type;
    seen[i] = true;
    v.ids[text] = static_cast<int64_t>(i);
    return OkStatus();
  };
  for (const auto& [text, id] : (*model)["vocab"].items())
    TL_RETURN_IF_ERROR(place(text, id, kNormal));
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
          !a.contains("id"))
        return InvalidArgument(src + ": an added_tokens entry lacks \"content\" or \"id\"");
      std::string text = a["content"].get<std::string>();
      const bool control = a.value("special", false) || LooksSpecial(text);
      if (!control) {
        // llama.cpp stores user-defined tokens with real spaces instead of SentencePiece's U+2581.
        for (size_t p; (p = text.find("\xE2\x96\x81")) != std::string::npos;)
          text.replace(p, 3, " ");
      }
      TL_RETURN_IF_ERROR(place(text, a["id"], control ? kControl : kUserDefined));
    }
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) v.tokens[i] = "[PAD" + std::to_string(i) + "]";

  if (model->contains("merges") && (*model)["merges"].is_array()) {
    for (const auto& m : (*model)["merges"]) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return InvalidArgument(src + ": model.merges entry " + m.dump() +
                               " is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }
  // llama.cpp splits text with the pre-tokenizer's regex, then applies merges within each
  // piece. Qwen2/Qwen3's split pattern is its "qwen2". A byte-level vocabulary without merges
  // (finetune-demo's) makes one token per byte whatever the split, so "qwen2" tokenizes it
  // exactly too, and unlike "default" it leaves spaces before punctuation alone when decoding,
  // as the tokenizer.json's ByteLevel decoder does.
  const json& pre = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json();
  const bool qwen2_split =
      pre.dump().find(json(std::string(kQwen2SplitPattern)).dump()) != std::string::npos;
  const bool bytes_only = v.merges.empty() && IsByteLevel(pre);
  if (!qwen2_split && !bytes_only)
    return InvalidArgument(
        src +
        ": the pre-tokenizer is neither Qwen2/Qwen3's split pattern nor byte-level without "
        "merges, so llama.cpp would tokenize text differently (exported: Qwen3 checkpoints and "
        "init-model's, finetune-demo's byte-level ones, and fine-tunes of either)");
  return v;
}

// Stored f32/f16/bf16 stay as they are unless a dtype is asked for; 1-D norms stay f32, as
// llama.cpp's converter keeps them.
GgmlType ChooseType(const Literal& value, const std::optional<ElementType>& dtype) {
  if (value.dims().size() <= 1) return GgmlType::kF32;
  auto stored = GgmlTypeFor(dtype.value_or(value.element_type()));
  return stored.ok() ? *stored : GgmlType::kF32;
}

}  // namespace

StatusOr<std::string> GgufTensorName(const std::string& hf) {
  static const std::map<std::string, std::string> kLayerNames = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (hf == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (hf == "model.norm.weight") return std::string("output_norm.weight");
  if (hf == "lm_head.weight") return std::string("output.weight");
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    const size_t dot = hf.find('.', prefix.size());
    if (dot != std::string::npos) {
      auto it = kLayerNames.find(hf.substr(dot + 1));
      if (it != kLayerNames.end())
        return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + it->second;
    }
  }
  return InvalidArgument("GGUF export: no llama.cpp name for tensor \"" + hf + "\"");
}

std::vector<std::byte> PermuteRows(std::span<const std::byte> in,
                                   const std::vector<int64_t>& order) {
  if (order.empty()) return {in.begin(), in.end()};
  const size_t row = in.size() / order.size();
  std::vector<std::byte> out(in.size());
  for (size_t r = 0; r < order.size(); ++r)
    std::memcpy(out.data() + r * row, in.data() + static_cast<size_t>(order[r]) * row, row);
  return out;
}

std::vector<int64_t> InverseOrder(const std::vector<int64_t>& order) {
  std::vector<int64_t> inverse(order.size());
  for (size_t r = 0; r < order.size(); ++r)
    inverse[static_cast<size_t>(order[r])] = static_cast<int64_t>(r);
  return inverse;
}

StatusOr<GgufExportSummary> ExportDecoderGguf(const fs::path& dir, const fs::path& out,
                                              const GgufExportOptions& options,
                                              const ModelConfig& config, GgufExportHooks hooks) {
  const std::string where = "GGUF export of " + dir.string();
  const std::string& arch = hooks.arch;
  if (options.dtype && !GgmlTypeFor(*options.dtype).ok())
    return InvalidArgument(where + ": dtype " + std::string(ShortName(*options.dtype)) +
                           " (expected f32, f16 or bf16)");
  TL_ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(config));
  if (config.rope_scaling)
    return Unimplemented(where + ": rope_scaling \"" + config.rope_scaling->rope_type +
                         "\" is not exported");
  if (config.attention_bias)
    return Unimplemented(where + ": attention_bias is not part of llama.cpp's " + arch + " model");
  if (!fs::exists(dir / "tokenizer.json"))
    return NotFound(where + ": no tokenizer.json (llama.cpp needs the tokenizer in the file)");

  auto checkpoint = io::Checkpoint::Open(dir);
  if (!checkpoint.ok()) return checkpoint.status().WithContext(where);
  std::vector<GgufTensorToWrite> tensors;
  GgufExportSummary summary;
  summary.tied_output = config.tie_word_embeddings;
  if (config.quantization && options.dtype)
    return InvalidArgument(where + ": --dtype " + std::string(ShortName(*options.dtype)) +
                           " with an int8 checkpoint (its matrices are exported as Q8_0 as they "
                           "are; export the float checkpoint it was made from instead)");
  // The family's tensors.
  for (const auto& expected : family->checkpoint_tensors(config)) {
    if (expected.optional) continue;  // a tied head's stored copy is not exported
    // Those the family writes itself (Qwen3-MoE's routers and experts).
    std::optional<std::vector<GgufTensorToWrite>> own;
    if (hooks.own_tensor) {
      TL_ASSIGN_OR_RETURN(own, hooks.own_tensor(*checkpoint, expected));
    }
    if (own) {
      for (auto& t : *own) {
        if (t.type == GgmlType::kQ8_0) {
          summary.tensor_bytes += io::GgmlBytes(GgmlType::kQ8_0, t.value.num_elements());
        } else {
          t.type = ChooseType(t.value, options.dtype);
          summary.tensor_bytes +=
              static_cast<uint64_t>(t.value.num_elements()) * (t.type == GgmlType::kF32 ? 4 : 2);
        }
        tensors.push_back(std::move(t));
      }
      continue;
    }
    if (expected.fixed_type == ElementType::kF16) continue;  // int8 scales: with their matrix
    if (expected.fixed_type == ElementType::kS8) {
      // An int8 matrix and its f16 block scales are GGUF Q8_0's blocks as they are.
      Literal q, scales;
      for (const auto& [name, out_value] :
           {std::pair<std::string, Literal*>{expected.name, &q},
            std::pair<std::string, Literal*>{Int8ScaleName(expected.name), &scales}}) {
        const io::SafetensorsTensorInfo* info = checkpoint->Find(name);
        if (!info) return NotFound(where + ": missing tensor \"" + name + "\"");
        TL_ASSIGN_OR_RETURN(*out_value, checkpoint->Get(name));
      }
      const std::vector<int64_t> scale_shape{expected.shape[0],
                                             expected.shape[1] / kQ8_0BlockElements};
      if (q.element_type() != ElementType::kS8 || q.dims() != expected.shape ||
          scales.element_type() != ElementType::kF16 || scales.dims() != scale_shape)
        return InvalidArgument(where + ": int8 tensor \"" + expected.name + "\" is " +
                               q.type().ToString() + " with scales " + scales.type().ToString() +
                               ", expected s8 " + ShapeString(expected.shape) + " with f16 " +
                               ShapeString(scale_shape));
      TL_ASSIGN_OR_RETURN(std::string name, GgufTensorName(expected.name));
      summary.tensor_bytes += io::GgmlBytes(GgmlType::kQ8_0, q.num_elements());
      tensors.push_back({std::move(name), std::move(q), GgmlType::kQ8_0, std::move(scales)});
      continue;
    }
    const io::SafetensorsTensorInfo* info = checkpoint->Find(expected.name);
    if (!info) return NotFound(where + ": missing tensor \"" + expected.name + "\"");
    if (info->shape != expected.shape)
      return InvalidArgument(where + ": tensor \"" + expected.name + "\" has shape " +
                             ShapeString(info->shape) + ", expected " +
                             ShapeString(expected.shape));
    TL_ASSIGN_OR_RETURN(Literal value, checkpoint->Get(expected.name));
    if (!IsFloat(value.element_type()))
      return InvalidArgument(where + ": tensor \"" + expected.name + "\" is " +
                             std::string(ShortName(value.element_type())) +
                             " (expected a float type)");
    TL_ASSIGN_OR_RETURN(std::string name, GgufTensorName(expected.name));
    // Rows in llama.cpp's order where the family's differs (Llama's q and k).
    if (family->gguf_row_order) {
      const std::vector<int64_t> order = family->gguf_row_order(config, expected.name);
      if (!order.empty()) {
        const std::vector<std::byte> rows = PermuteRows(
            std::span<const std::byte>(value.data(), static_cast<size_t>(value.byte_size())),
            order);
        std::memcpy(value.data(), rows.data(), rows.size());
      }
    }
    GgmlType type = ChooseType(value, options.dtype);
    summary.tensor_bytes +=
        static_cast<uint64_t>(value.num_elements()) * (type == GgmlType::kF32 ? 4 : 2);
    tensors.push_back({std::move(name), std::move(value), type});
  }
  for (GgufTensorToWrite& t : hooks.extra_tensors) {
    summary.tensor_bytes +=
        static_cast<uint64_t>(t.value.num_elements()) * (t.type == GgmlType::kF32 ? 4 : 2);
    tensors.push_back(std::move(t));
  }
  summary.tensors = static_cast<int64_t>(tensors.size());

  TL_ASSIGN_OR_RETURN(Vocabulary vocab, ReadVocabulary(dir / "tokenizer.json", config.vocab_size));
  summary.vocab_tokens = static_cast<int64_t>(vocab.tokens.size());
  json tok_config = json::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    TL_ASSIGN_OR_RETURN(tok_config, ReadJson(dir / "tokenizer_config.json"));
  }
  TL_ASSIGN_OR_RETURN(io::GenerationConfig generation,
                      io::LoadGenerationConfigOrDefault(dir, config));

  // Special ids: tokenizer_config.json's tokens first, then config.json's and
  // generation_config.json's ids, the order llama.cpp's converter looks in.
  auto special_id =
      [&](const char* key,
          std::initializer_list<std::optional<int64_t>> fallbacks) -> std::optional<int64_t> {
    if (auto text = SpecialTokenText(tok_config, key)) {
      auto it = vocab.ids.find(*text);
      if (it != vocab.ids.end()) return it->second;
    }
    for (const auto& id : fallbacks)
      if (id && *id >= 0 && *id < config.vocab_size) return id;
    return std::nullopt;
  };
  auto first = [](const std::vector<int64_t>& ids) -> std::optional<int64_t> {
    return ids.empty() ? std::nullopt : std::optional<int64_t>(ids.front());
  };
  const auto eos =
      special_id("eos_token", {first(config.eos_token_ids), first(generation.eos_token_ids)});
  const auto bos = special_id("bos_token", {config.bos_token_id, generation.bos_token_id});
  const auto pad = special_id("pad_token", {config.pad_token_id, generation.pad_token_id});

  std::optional<std::string> chat_template;
  if (auto it = tok_config.find("chat_template"); it != tok_config.end() && it->is_string()) {
    chat_template = it->get<std::string>();
  } else if (fs::exists(dir / "chat_template.jinja")) {
    TL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir / "chat_template.jinja"));
    chat_template = std::move(text);
  }
  summary.chat_template = chat_template.has_value();

  // llama.cpp's file types, named by the matrices' type: all f32 = 0, mostly f16 = 1, mostly
  // bf16 = 32, mostly Q8_0 = 7 (the embedding is the first matrix).
  const GgmlType matrix_type = tensors.front().type;
  const uint32_t file_type = matrix_type == GgmlType::kF16    ? 1
                             : matrix_type == GgmlType::kBF16 ? 32
                             : matrix_type == GgmlType::kQ8_0 ? 7
                                                              : 0;
  auto u32 = [](int64_t v) { return GgufValue::U32(static_cast<uint32_t>(v)); };
  std::vector<GgufKeyValue> kv = {
      {"general.architecture", GgufValue::String(arch)},
      {"general.name",
       GgufValue::String(options.name.empty()
                             ? fs::absolute(dir).lexically_normal().filename().string()
                             : options.name)},
      {"general.file_type", GgufValue::U32(file_type)},
      {arch + ".context_length", u32(config.max_position_embeddings)},
      {arch + ".embedding_length", u32(config.hidden_size)},
      {arch + ".block_count", u32(config.num_hidden_layers)},
      {arch + ".feed_forward_length", u32(config.intermediate_size)},
      {arch + ".attention.head_count", u32(config.num_attention_heads)},
      {arch + ".attention.head_count_kv", u32(config.num_key_value_heads)},
      {arch + ".attention.key_length", u32(config.head_dim)},
      {arch + ".attention.value_length", u32(config.head_dim)},
      {arch + ".attention.layer_norm_rms_epsilon",
       GgufValue::F32(static_cast<float>(config.rms_norm_eps))},
      {arch + ".rope.freq_base", GgufValue::F32(static_cast<float>(config.rope_theta))},
      {"tokenizer.ggml.model", GgufValue::String("gpt2")},
      {"tokenizer.ggml.pre", GgufValue::String("qwen2")},
      {"tokenizer.ggml.tokens", GgufValue::StringArray(std::move(vocab.tokens))},
      {"tokenizer.ggml.token_type", GgufValue::I32Array(std::move(vocab.types))},
      {"tokenizer.ggml.merges", GgufValue::StringArray(std::move(vocab.merges))},
  };
  for (auto& key : hooks.keys) kv.push_back(std::move(key));
  if (eos) kv.push_back({"tokenizer.ggml.eos_token_id", u32(*eos)});
  if (pad) kv.push_back({"tokenizer.ggml.padding_token_id", u32(*pad)});
  if (bos) kv.push_back({"tokenizer.ggml.bos_token_id", u32(*bos)});
  bool add_bos = false;  // Qwen never prepends a BOS token; others say so in tokenizer_config
  if (auto it = tok_config.find("add_bos_token"); it != tok_config.end() && it->is_boolean())
    add_bos = it->get<bool>();
  kv.push_back({"tokenizer.ggml.add_bos_token", GgufValue::Bool(add_bos)});
  if (chat_template) kv.push_back({"tokenizer.chat_template", GgufValue::String(*chat_template)});

  TL_RETURN_IF_ERROR(io::WriteGguf(out, kv, tensors));
  return summary;
}

}  // namespace tlaloc::models::decoder
