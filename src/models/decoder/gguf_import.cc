// GGUF file (llama.cpp's architecture of any registered family: qwen3, qwen3moe, llama) ->
// Tlaloc checkpoint folder: the inverse of gguf_export.cc's names and keys, with the family's
// own keys and row orders through its ModelFamily hooks (models/gguf_import.h says what is
// copied, what becomes int8 and what is dequantised). The tokenizer files:
// gguf_import_tokenizer.cc.
#include "tlaloc/models/gguf_import.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "models/decoder/gguf.h"
#include "models/decoder/gguf_import_internal.h"
#include "models/families.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/models/family.h"

namespace tlaloc::models {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using decoder::GgufInt;
using io::GgmlType;
using io::GgufContents;
using io::GgufTensorInfo;

namespace {

// The file mapped read-only for the import's duration.
class MappedFile {
 public:
  static StatusOr<MappedFile> Open(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io::ErrnoStatus(errno, "cannot open GGUF file " + path.string());
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return io::ErrnoStatus(err, "cannot stat GGUF file " + path.string());
    }
    MappedFile m;
    m.size_ = static_cast<size_t>(st.st_size);
    if (m.size_ > 0) {
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return io::ErrnoStatus(err, "cannot map GGUF file " + path.string());
      }
      m.data_ = p;
    }
    ::close(fd);
    return m;
  }
  MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  MappedFile(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  MappedFile() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
};

StatusOr<double> GgufReal(const GgufContents& c, const std::string& key, const std::string& src,
                          double fallback) {
  const io::GgufValue* v = c.Find(key);
  if (!v) return fallback;
  if (v->type != io::GgufType::kFloat32 && v->type != io::GgufType::kFloat64)
    return InvalidArgument(src + ": metadata key \"" + key + "\" is " +
                           std::string(io::GgufTypeName(v->type)) + ", expected a float");
  // float32 values widened exactly; written back into config.json as the shortest decimal of
  // the float, so 1e-6 stays 1e-6 rather than 9.99999997e-07.
  if (v->type == io::GgufType::kFloat32) {
    const auto f = static_cast<float>(v->real);
    char buf[32] = "0";
    for (int digits = 1; digits <= 9; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
      if (std::strtof(buf, nullptr) == f) break;
    }
    return std::strtod(buf, nullptr);
  }
  return v->real;
}

// One transformers tensor made from (part of) a GGUF tensor.
struct Part {
  std::string name;
  std::vector<int64_t> dims;
};

// transformers' names for GGUF tensor `gguf` (one per expert for stacked experts).
StatusOr<std::vector<Part>> HfParts(const GgufTensorInfo& t, const std::string& arch,
                                    const std::string& src) {
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
  };
  static const std::map<std::string, std::string> kExperts = {
      {"ffn_gate_exps.weight", "gate_proj.weight"},
      {"ffn_up_exps.weight", "up_proj.weight"},
      {"ffn_down_exps.weight", "down_proj.weight"},
  };
  const std::vector<int64_t> dims = t.dims();
  if (t.name == "token_embd.weight") return std::vector<Part>{{"model.embed_tokens.weight", dims}};
  if (t.name == "output_norm.weight") return std::vector<Part>{{"model.norm.weight", dims}};
  if (t.name == "output.weight") return std::vector<Part>{{"lm_head.weight", dims}};
  if (t.name == "rope_freqs.weight")
    return Unimplemented(src +
                         ": tensor \"rope_freqs.weight\" (a \"llama3\" rope_scaling as llama.cpp "
                         "stores it) is not imported yet: Tlaloc imports GGUF files without rope "
                         "scaling");
  const std::string blk = "blk.";
  if (t.name.rfind(blk, 0) == 0) {
    const size_t dot = t.name.find('.', blk.size());
    const std::string layer = t.name.substr(blk.size(), dot - blk.size());
    const bool digits =
        !layer.empty() && layer.find_first_not_of("0123456789") == std::string::npos;
    if (dot != std::string::npos && digits) {
      const std::string rest = t.name.substr(dot + 1);
      const std::string l = "model.layers." + layer + ".";
      if (auto it = kLayer.find(rest); it != kLayer.end())
        return std::vector<Part>{{l + it->second, dims}};
      if (auto it = kExperts.find(rest); it != kExperts.end()) {
        if (dims.size() != 3)
          return InvalidArgument(src + ": tensor \"" + t.name + "\" has " +
                                 std::to_string(dims.size()) +
                                 " dims (expected 3: experts, out, in)");
        std::vector<Part> parts;
        for (int64_t e = 0; e < dims[0]; ++e)
          parts.push_back(
              {l + "mlp.experts." + std::to_string(e) + "." + it->second, {dims[1], dims[2]}});
        return parts;
      }
    }
  }
  return InvalidArgument(src + ": tensor \"" + t.name + "\" is not part of llama.cpp's " + arch +
                         " model");
}

bool IsRouter(const GgufTensorInfo& t) {
  return t.name.find(".ffn_gate_inp.") != std::string::npos;
}

std::string TorchDtype(ElementType t) {
  return t == ElementType::kF16 ? "float16" : t == ElementType::kBF16 ? "bfloat16" : "float32";
}

// config.json (the family's config class's fields) from the shared hyperparameters and the
// family's own (`family_fields`, from its gguf_import_config).
StatusOr<io::ModelConfig> ImportConfig(const GgufContents& c, const ModelFamily& family,
                                       const std::string& src, int64_t vocab_rows, bool tied,
                                       bool int8, ElementType dtype,
                                       const decoder::GgufTokenizer& tok,
                                       const std::map<std::string, std::string>& formats,
                                       const json& family_fields) {
  const std::string a = std::string(family.gguf_architecture) + ".";
  json j;
  j["architectures"] = {std::string(family.architecture)};
  j["model_type"] = std::string(family.model_type);
  j["vocab_size"] = vocab_rows;
  TL_ASSIGN_OR_RETURN(const int64_t hidden, GgufInt(c, a + "embedding_length", src));
  TL_ASSIGN_OR_RETURN(const int64_t heads, GgufInt(c, a + "attention.head_count", src));
  j["hidden_size"] = hidden;
  TL_ASSIGN_OR_RETURN(j["num_hidden_layers"], GgufInt(c, a + "block_count", src));
  j["num_attention_heads"] = heads;
  TL_ASSIGN_OR_RETURN(j["num_key_value_heads"],
                      GgufInt(c, a + "attention.head_count_kv", src, heads));
  TL_ASSIGN_OR_RETURN(const int64_t head_dim,
                      GgufInt(c, a + "attention.key_length", src, heads > 0 ? hidden / heads : 0));
  TL_ASSIGN_OR_RETURN(const int64_t value_dim,
                      GgufInt(c, a + "attention.value_length", src, head_dim));
  if (value_dim != head_dim)
    return Unimplemented(src + ": " + a + "attention.value_length " + std::to_string(value_dim) +
                         " differs from key_length " + std::to_string(head_dim) +
                         " (Tlaloc's decoders use one head_dim for both)");
  j["head_dim"] = head_dim;
  TL_ASSIGN_OR_RETURN(j["max_position_embeddings"], GgufInt(c, a + "context_length", src));
  TL_ASSIGN_OR_RETURN(j["rms_norm_eps"],
                      GgufReal(c, a + "attention.layer_norm_rms_epsilon", src, 1e-6));
  // llama.cpp's default base when the key is absent.
  TL_ASSIGN_OR_RETURN(j["rope_theta"], GgufReal(c, a + "rope.freq_base", src, 10000.0));
  if (const io::GgufValue* s = c.Find(a + "rope.scaling.type");
      s && !(s->type == io::GgufType::kString && s->text == "none"))
    return Unimplemented(src + ": " + a + "rope.scaling.type \"" + s->text +
                         "\" (Tlaloc imports GGUF files without rope scaling)");
  // The family's fields (Qwen3-MoE's experts, and its intermediate_size fallback).
  for (const auto& [key, value] : family_fields.items()) j[key] = value;
  if (!j.contains("intermediate_size")) {
    TL_ASSIGN_OR_RETURN(j["intermediate_size"], GgufInt(c, a + "feed_forward_length", src));
  }
  j["tie_word_embeddings"] = tied;
  j["torch_dtype"] = TorchDtype(dtype);
  if (tok.bos) j["bos_token_id"] = *tok.bos;
  if (!tok.end_ids.empty()) j["eos_token_id"] = tok.end_ids;
  if (tok.pad) j["pad_token_id"] = *tok.pad;
  if (int8)
    j["quantization_config"] = {{"quant_method", std::string(kTlalocInt8QuantMethod)},
                                {"bits", 8},
                                {"group_size", kQ8_0BlockElements}};
  else if (!formats.empty())
    j["quantization_config"] = {{"quant_method", std::string(kTlalocGgufQuantMethod)},
                                {"group_size", kQ8_0BlockElements},
                                {"formats", formats}};
  return ParseConfig(j.dump(), src + " (its hyperparameters as config.json)");
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

StatusOr<GgufImportSummary> ImportGguf(const fs::path& gguf, const fs::path& out,
                                       const GgufImportOptions& import_options) {
  const std::string src = gguf.string();
  TL_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(gguf));
  auto parsed = io::ParseGguf(file.bytes(), src);
  if (!parsed.ok()) return Status(parsed.status().code(), "GGUF file " + parsed.status().message());
  GgufContents c = std::move(*parsed);
  TL_ASSIGN_OR_RETURN(std::string arch, decoder::GgufString(c, "general.architecture", src));
  // The family whose export writes this architecture.
  const ModelFamily* family = nullptr;
  for (const ModelFamily& f : Registry())
    if (!f.gguf_architecture.empty() && f.gguf_architecture == arch) family = &f;
  if (!family) {
    std::string known;
    for (std::string_view a : GgufArchitectures())
      known += (known.empty() ? "" : ", ") + std::string(a);
    return Unimplemented(src + ": architecture \"" + arch +
                         "\" (Tlaloc runs GGUF files of llama.cpp's " + known + ")");
  }
  // The hyperparameters first: a file without them is no model, whatever its tokenizer.
  for (const char* key :
       {"block_count", "embedding_length", "attention.head_count", "context_length"})
    TL_RETURN_IF_ERROR(GgufInt(c, arch + "." + key, src).status());
  json family_fields = json::object();
  if (family->gguf_import_config)
    TL_RETURN_IF_ERROR(family->gguf_import_config(c, src, family_fields));
  if (!family_fields.contains("intermediate_size"))
    TL_RETURN_IF_ERROR(GgufInt(c, arch + ".feed_forward_length", src).status());
  GgufImportSummary summary;
  summary.architecture = arch;
  const GgufTensorInfo* embedding = c.FindTensor("token_embd.weight");
  if (!embedding || embedding->ne.size() != 2)
    return NotFound(src + ": no 2-D tensor \"token_embd.weight\" (the token embedding)");
  const bool tied = c.FindTensor("output.weight") == nullptr;

  // int8 checkpoint when every matrix but a router is Q8_0 (the routers stay float, as in
  // `tlaloc quantize`'s checkpoints and llama.cpp's files).
  bool int8 = true;
  for (const auto& t : c.tensors) {
    ++summary.types[std::string(io::GgmlTypeName(t.type))];
    if (t.ne.size() >= 2 && !IsRouter(t) && t.type != GgmlType::kQ8_0) int8 = false;
  }
  summary.int8 = int8;
  // Otherwise Q4_0, Q4_K and Q6_K matrices stay packed (nn/gguf_linear.h) and Q8_0 ones int8,
  // each listed in config.json's quantization_config.formats; MoE experts (3-D) and the other
  // types are dequantised to f32.
  auto packed_format = [&](const GgufTensorInfo& t) -> std::optional<QuantFormat> {
    if (int8 || !import_options.keep_packed || t.ne.size() != 2 || IsRouter(t)) return std::nullopt;
    if (t.type == GgmlType::kQ8_0) return QuantFormat::kQ8_0;
    return decoder::PackedFormatOf(t.type);
  };
  std::map<std::string, std::string> formats;
  bool any_packed = false;
  for (const auto& t : c.tensors)
    if (auto f = packed_format(t)) any_packed |= *f != QuantFormat::kQ8_0;
  if (any_packed)
    for (const auto& t : c.tensors)
      if (auto f = packed_format(t)) {
        TL_ASSIGN_OR_RETURN(std::vector<Part> parts, HfParts(t, arch, src));
        for (const Part& p : parts) formats[p.name] = std::string(QuantFormatName(*f));
      }
  summary.tensors = static_cast<int64_t>(c.tensors.size());
  const ElementType dtype =
      int8 || IsQuantized(embedding->type) ? ElementType::kF32 : ElementTypeOf(embedding->type);

  TL_ASSIGN_OR_RETURN(decoder::GgufTokenizer tok, decoder::ImportGgufTokenizer(c, src));
  const auto vocab_rows = static_cast<int64_t>(embedding->ne[1]);
  if (tok.num_tokens > vocab_rows)
    return InvalidArgument(src + ": " + std::to_string(tok.num_tokens) +
                           " tokens but token_embd.weight has " + std::to_string(vocab_rows) +
                           " rows");
  TL_ASSIGN_OR_RETURN(io::ModelConfig config, ImportConfig(c, *family, src, vocab_rows, tied, int8,
                                                           dtype, tok, formats, family_fields));

  // Plan: each GGUF tensor's parts (experts) as one group, so they stay one run in the shard;
  // an int8 matrix's scales as a second group.
  struct Job {
    const GgufTensorInfo* info;
    std::vector<Part> parts;
    bool as_int8 = false;
    std::optional<QuantFormat> packed;  // a q4_0 / q4_k / q6_k matrix kept packed
  };
  std::vector<Job> jobs;
  std::vector<std::vector<io::PlannedTensor>> groups;
  for (const auto& t : c.tensors) {
    TL_ASSIGN_OR_RETURN(std::vector<Part> parts, HfParts(t, arch, src));
    const auto fmt = any_packed ? packed_format(t) : std::nullopt;
    Job job{&t, std::move(parts),
            (int8 && t.type == GgmlType::kQ8_0 && !IsRouter(t)) || fmt == QuantFormat::kQ8_0,
            std::nullopt};
    if (fmt && *fmt != QuantFormat::kQ8_0) job.packed = fmt;
    std::vector<io::PlannedTensor> values, scales;
    for (const Part& p : job.parts) {
      if (job.packed || job.as_int8) {
        auto types = QuantStorageTypes(job.packed.value_or(QuantFormat::kQ8_0), p.dims);
        if (!types.ok()) return types.status().WithContext(src + ": tensor \"" + t.name + "\"");
        values.push_back({p.name, types->first});
        scales.push_back({QuantScaleName(p.name), types->second});
      } else {
        const ElementType et = IsQuantized(t.type) ? ElementType::kF32 : ElementTypeOf(t.type);
        values.push_back({p.name, TensorType(et, p.dims)});
      }
    }
    groups.push_back(std::move(values));
    if (!scales.empty()) groups.push_back(std::move(scales));
    jobs.push_back(std::move(job));
  }

  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return io::ErrnoStatus(ec.value(), "cannot create " + out.string());
  io::CheckpointWriteOptions options;
  options.layout = io::SafetensorsLayout::kGivenOrder;
  options.metadata["source"] = "gguf";
  TL_ASSIGN_OR_RETURN(auto writer, io::CheckpointStreamWriter::Create(out, groups, options));
  const std::span<const std::byte> bytes = file.bytes();
  for (const Job& job : jobs) {
    const GgufTensorInfo& t = *job.info;
    const auto n = static_cast<uint64_t>(job.parts.size());
    const uint64_t part_bytes = t.byte_size / n;
    if (IsQuantized(t.type) && !job.as_int8 && !job.packed) ++summary.dequantised;
    if (job.packed) ++summary.packed;
    for (size_t p = 0; p < job.parts.size(); ++p) {
      auto slice = bytes.subspan(c.data_offset + t.offset + p * part_bytes, part_bytes);
      const std::string& name = job.parts[p].name;
      // Rows back in the checkpoint's order where llama.cpp's differs (Llama's q and k): whole
      // rows of whatever blocks the type has.
      std::vector<std::byte> reordered;
      if (family->gguf_row_order) {
        const std::vector<int64_t> order = family->gguf_row_order(config, name);
        if (!order.empty()) {
          if (job.parts[p].dims.empty() || job.parts[p].dims[0] != std::ssize(order))
            return InvalidArgument(
                src + ": tensor \"" + t.name + "\" has " +
                std::to_string(job.parts[p].dims.empty() ? 0 : job.parts[p].dims[0]) +
                " rows, expected " + std::to_string(order.size()));
          reordered = decoder::PermuteRows(slice, decoder::InverseOrder(order));
          slice = reordered;
        }
      }
      if (!IsQuantized(t.type)) {
        TL_RETURN_IF_ERROR(writer->Write(name, slice));
      } else if (job.packed) {
        std::vector<std::byte> q, d;
        Status s = decoder::RepackGgml(t.type, slice, q, d);
        if (!s.ok()) return s.WithContext(src + ": tensor \"" + t.name + "\"");
        TL_RETURN_IF_ERROR(writer->Write(name, q));
        TL_RETURN_IF_ERROR(writer->Write(QuantScaleName(name), d));
      } else if (job.as_int8) {
        // Q8_0 block = f16 scale + 32 int8 values: the int8 checkpoint's two tensors as they are.
        const uint64_t blocks = part_bytes / io::kQ8_0BlockBytes;
        std::vector<std::byte> q(blocks * kQ8_0BlockElements), d(blocks * 2);
        for (uint64_t b = 0; b < blocks; ++b) {
          const std::byte* block = slice.data() + b * io::kQ8_0BlockBytes;
          std::memcpy(d.data() + b * 2, block, 2);
          std::memcpy(q.data() + b * kQ8_0BlockElements, block + 2, kQ8_0BlockElements);
        }
        TL_RETURN_IF_ERROR(writer->Write(name, q));
        TL_RETURN_IF_ERROR(writer->Write(QuantScaleName(name), d));
      } else {
        // The first step for 4-bit (and mixed) files: dequantised to f32 at import.
        const auto elements = static_cast<size_t>(part_bytes / io::GgmlBlockBytes(t.type) *
                                                  io::GgmlBlockElements(t.type));
        std::vector<float> values(elements);
        Status s = io::DequantizeGgml(t.type, slice, values);
        if (!s.ok()) return s.WithContext(src + ": tensor \"" + t.name + "\"");
        TL_RETURN_IF_ERROR(writer->Write(
            name, std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.data()),
                                             values.size() * sizeof(float))));
      }
    }
  }
  TL_RETURN_IF_ERROR(writer->Finish());
  TL_RETURN_IF_ERROR(io::WriteModelConfig(out / "config.json", config));
  TL_RETURN_IF_ERROR(io::WriteStringAtomically(out / "tokenizer.json", tok.tokenizer_json));
  TL_RETURN_IF_ERROR(
      io::WriteStringAtomically(out / "tokenizer_config.json", tok.tokenizer_config_json));
  return summary;
}

StatusOr<fs::path> GgufModelFolder(const fs::path& gguf,
                                   const std::function<void(const fs::path&)>& on_import) {
  std::error_code ec;
  const fs::path abs = fs::absolute(gguf, ec).lexically_normal();
  const auto size = fs::file_size(abs, ec);
  if (ec) return NotFound("GGUF file " + gguf.string() + " cannot be read: " + ec.message());
  const auto mtime = fs::last_write_time(abs, ec).time_since_epoch().count();
  fs::path cache;
  if (const char* d = std::getenv("TLALOC_GGUF_CACHE"); d && *d) {
    cache = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    cache = fs::path(x) / "tlaloc" / "gguf";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    cache = fs::path(h) / ".cache" / "tlaloc" / "gguf";
  } else {
    return FailedPrecondition("no cache folder for the import of " + gguf.string() +
                              " (set TLALOC_GGUF_CACHE, XDG_CACHE_HOME or HOME)");
  }
  // The source's identity: a changed file (size or time) is imported again; so is one imported
  // by an older import (the version line: 2 keeps Q4_0 / Q4_K / Q6_K packed).
  const std::string key =
      abs.string() + "\n" + std::to_string(size) + "\n" + std::to_string(mtime) + "\nimport 2";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv1a(key)));
  const fs::path dir = cache / (abs.stem().string() + "-" + hex);
  const fs::path stamp = dir / "gguf_source.txt";
  if (auto text = io::ReadFileToString(stamp); text.ok() && *text == key) return dir;
  const fs::path tmp = cache / (abs.stem().string() + "-" + hex + ".tmp-" +
                                std::to_string(static_cast<long>(::getpid())));
  fs::remove_all(tmp, ec);
  if (on_import) on_import(dir);
  auto imported = ImportGguf(abs, tmp);
  if (!imported.ok()) {
    fs::remove_all(tmp, ec);
    return imported.status();
  }
  TL_RETURN_IF_ERROR(io::WriteStringAtomically(tmp / "gguf_source.txt", key));
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    // Another process may have finished the same import first.
    if (auto text = io::ReadFileToString(stamp); text.ok() && *text == key) return dir;
    return io::ErrnoStatus(ec.value(),
                           "cannot move the import of " + gguf.string() + " to " + dir.string());
  }
  return dir;
}

}  // namespace tlaloc::models
