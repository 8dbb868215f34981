// io::Checkpoint inspection: tensor statistics and the comparison with the config's expectations.
#include "tlaloc/models/inspect.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/models/family.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc::models {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

std::string Grouped(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string HumanBytes(uint64_t bytes) { return FormatBytes(bytes, 2); }

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string Ids(const std::vector<int64_t>& ids) {
  if (ids.size() == 1) return std::to_string(ids[0]);
  return Shape(ids);
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "q4_k blocks of 256, f32 scales, 6 bits per weight (4.5 in GGUF)" from ir/quant_format.h.
std::string FormatText(QuantFormat format, bool gguf) {
  const QuantFormatInfo& f = QuantTraits(format);
  std::string s = std::string(f.name) + " blocks of " + std::to_string(f.block) + ", " +
                  std::string(ShortName(f.scale_type)) + " scales, " + Num(f.bits_per_weight()) +
                  " bits per weight";
  if (gguf && f.ggml_bits_per_weight() != f.bits_per_weight())
    s += " (" + Num(f.ggml_bits_per_weight()) + " in GGUF)";
  return s;
}

// The quantized line(s) of a config: the int8 checkpoint's one format, or a GGUF import's
// matrices counted by format.
std::vector<std::string> QuantizationLines(const io::WeightQuantization& q) {
  const std::string method = " (quantization_config " + q.quant_method + ")";
  if (q.quant_method != kTlalocGgufQuantMethod)
    return {"quantized:    int8 (" + FormatText(QuantFormat::kQ8_0, false) + ")" + method};
  std::map<QuantFormat, int64_t> counts;
  for (const auto& [name, fmt] : q.formats)
    if (auto f = FindQuantFormat(fmt)) ++counts[*f];
  std::string list;
  for (const auto& [f, n] : counts)
    list +=
        (list.empty() ? "" : ", ") + std::string(QuantFormatName(f)) + " x " + std::to_string(n);
  std::vector<std::string> lines{"quantized:    gguf: " + (list.empty() ? "no matrices" : list) +
                                 method};
  for (const auto& [f, n] : counts) lines.push_back("              " + FormatText(f, true));
  return lines;
}

}  // namespace

StatusOr<InspectReport> InspectCheckpoint(const fs::path& path) {
  InspectReport r;
  r.path = path.string();
  TL_ASSIGN_OR_RETURN(io::Checkpoint ckpt, io::Checkpoint::Open(path));
  if (fs::is_directory(path)) {
    if (fs::exists(path / "config.json")) {
      TL_ASSIGN_OR_RETURN(r.config, LoadConfig(path / "config.json"));
    }
    if (fs::exists(path / "generation_config.json")) {
      TL_ASSIGN_OR_RETURN(r.generation, io::LoadGenerationConfig(path / "generation_config.json"));
    }
  }
  for (const auto& shard : ckpt.shards())
    r.shard_files.push_back(fs::path(shard->source()).filename().string());
  if (ckpt.index_path()) r.index_file = ckpt.index_path()->filename().string();
  if (!ckpt.shards().empty()) r.metadata = ckpt.shards()[0]->metadata();

  for (const auto& name : ckpt.names()) {
    const io::SafetensorsTensorInfo* info = ckpt.Find(name);
    auto& d = r.by_dtype[info->dtype];
    d.tensors += 1;
    d.elements += info->num_elements();
    d.bytes += info->byte_size();
    r.num_tensors += 1;
    r.stored_elements += info->num_elements();
    r.stored_bytes += info->byte_size();
  }

  if (r.config) {
    r.parameter_count = ParameterCount(*r.config);
    std::set<std::string> expected_names;
    for (const auto& e : ExpectedTensors(*r.config)) {
      expected_names.insert(e.name);
      const io::SafetensorsTensorInfo* info = ckpt.Find(e.name);
      if (!info) {
        if (!e.optional) r.missing.push_back(e.name);
        continue;
      }
      if (e.optional) r.tied_head_stored = true;
      if (info->shape != e.shape) r.wrong_shape.push_back({e.name, e.shape, info->shape});
    }
    for (const auto& name : ckpt.names())
      if (!expected_names.count(name)) r.unexpected.push_back(name);
  }
  return r;
}

std::string FormatInspectText(const InspectReport& r, size_t max_listed) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  std::string where = r.index_file
                          ? std::to_string(r.shard_files.size()) + " shards via " + *r.index_file
                          : (r.shard_files.empty() ? "" : r.shard_files[0]);
  line("checkpoint:   " + r.path + " (" + where + ")");
  if (r.config) {
    const io::ModelConfig& c = *r.config;
    line("architecture: " + std::string(io::ArchitectureClassName(c.architecture)) + " (" +
         std::string(io::ArchitectureModelType(c.architecture)) + ")");
    line("config:       vocab " + std::to_string(c.vocab_size) + ", hidden " +
         std::to_string(c.hidden_size) + ", layers " + std::to_string(c.num_hidden_layers) +
         ", heads " + std::to_string(c.num_attention_heads) + " (kv " +
         std::to_string(c.num_key_value_heads) + ", head_dim " + std::to_string(c.head_dim) +
         "), intermediate " + std::to_string(c.intermediate_size));
    line("              max positions " + std::to_string(c.max_position_embeddings) +
         ", rope_theta " + Num(c.rope_theta) +
         (c.rope_scaling ? ", rope scaling " + c.rope_scaling->rope_type : std::string()) +
         ", rms_norm_eps " + Num(c.rms_norm_eps) + ", " +
         (c.tie_word_embeddings ? "tied head" : "untied head") +
         (c.dtype ? ", dtype " + std::string(ShortName(*c.dtype)) : std::string()) +
         (c.SlidingWindow() ? ", sliding window " + std::to_string(*c.SlidingWindow())
                            : std::string()));
    if (c.is_moe()) {
      // The sparse layers' block (the first one's: the families so far have one kind).
      int64_t moe_layers = 0;
      io::FeedForward ff;
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const io::FeedForward layer = c.FeedForwardOf(i);
        if (!layer.sparse()) continue;
        if (moe_layers++ == 0) ff = layer;
      }
      line("moe:          " + std::to_string(ff.experts) + " experts, " +
           std::to_string(ff.experts_per_token) + " per token, width " +
           std::to_string(ff.expert_width) + ", " + std::to_string(moe_layers) + " of " +
           std::to_string(c.num_hidden_layers) + " layers sparse, norm_topk_prob " +
           (ff.normalize_top_k ? "true" : "false"));
    }
    if (c.quantization)
      for (const std::string& l : QuantizationLines(*c.quantization)) line(l);
    if (c.bos_token_id || !c.eos_token_ids.empty())
      line("tokens:       bos " + (c.bos_token_id ? std::to_string(*c.bos_token_id) : "none") +
           ", eos " + (c.eos_token_ids.empty() ? "none" : Ids(c.eos_token_ids)));
  } else {
    line("architecture: unknown (no config.json)");
  }
  if (r.generation) {
    const io::GenerationConfig& g = *r.generation;
    line("generation:   " + std::string(g.do_sample ? "sampling" : "greedy") + ", temperature " +
         Num(g.temperature) + ", top_k " + std::to_string(g.top_k) + ", top_p " + Num(g.top_p) +
         (g.eos_token_ids.empty() ? std::string() : ", eos " + Ids(g.eos_token_ids)));
  }
  if (r.parameter_count)
    line("parameters:   " + Grouped(*r.parameter_count) + " (by the config" +
         (r.config && r.config->tie_word_embeddings ? ", head tied" : "") + ")");
  line("stored:       " + Grouped(r.num_tensors) + " tensors, " + Grouped(r.stored_elements) +
       " elements, " + HumanBytes(r.stored_bytes));
  line("by dtype:");
  for (const auto& [et, d] : r.by_dtype) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-5s %8s tensors %16s elements %12s",
                  std::string(io::SafetensorsDtypeName(et)).c_str(), Grouped(d.tensors).c_str(),
                  Grouped(d.elements).c_str(), HumanBytes(d.bytes).c_str());
    line(buf);
  }
  if (!r.config) return out;
  auto list = [&](const std::string& title, size_t count, auto&& item) {
    if (count == 0) return;
    line(title + " (" + std::to_string(count) + "):");
    for (size_t i = 0; i < count && i < max_listed; ++i) line("  " + item(i));
    if (count > max_listed) line("  ... and " + std::to_string(count - max_listed) + " more");
  };
  list("missing", r.missing.size(), [&](size_t i) { return r.missing[i]; });
  list("wrong shape", r.wrong_shape.size(), [&](size_t i) {
    const auto& m = r.wrong_shape[i];
    return m.name + ": expected " + Shape(m.expected) + ", found " + Shape(m.actual);
  });
  list("unexpected", r.unexpected.size(), [&](size_t i) { return r.unexpected[i]; });
  if (r.matches())
    line(std::string("check:        OK, every tensor the architecture expects is present with "
                     "its shape") +
         (r.tied_head_stored ? " (the tied lm_head.weight is stored too)" : ""));
  else
    line("check:        MISMATCH, the checkpoint does not fit its config");
  return out;
}

std::string FormatInspectJson(const InspectReport& r) {
  ordered_json j;
  j["path"] = r.path;
  j["shards"] = r.shard_files;
  j["index"] = r.index_file ? ordered_json(*r.index_file) : ordered_json();
  j["metadata"] = r.metadata;
  if (r.config) {
    j["architecture"] = std::string(io::ArchitectureClassName(r.config->architecture));
    j["config"] = ordered_json::parse(ModelConfigToJson(*r.config));
  } else {
    j["architecture"] = nullptr;
    j["config"] = nullptr;
  }
  j["generation_config"] =
      r.generation ? ordered_json::parse(GenerationConfigToJson(*r.generation)) : ordered_json();
  j["parameter_count"] = r.parameter_count ? ordered_json(*r.parameter_count) : ordered_json();
  j["num_tensors"] = r.num_tensors;
  j["stored_elements"] = r.stored_elements;
  j["stored_bytes"] = r.stored_bytes;
  ordered_json dtypes = ordered_json::object();
  for (const auto& [et, d] : r.by_dtype)
    dtypes[std::string(io::SafetensorsDtypeName(et))] = {
        {"tensors", d.tensors}, {"elements", d.elements}, {"bytes", d.bytes}};
  j["by_dtype"] = dtypes;
  j["missing"] = r.missing;
  ordered_json wrong = ordered_json::array();
  for (const auto& m : r.wrong_shape)
    wrong.push_back({{"name", m.name}, {"expected", m.expected}, {"actual", m.actual}});
  j["wrong_shape"] = wrong;
  j["unexpected"] = r.unexpected;
  j["tied_head_stored"] = r.tied_head_stored;
  j["matches"] = r.config ? ordered_json(r.matches()) : ordered_json();
  return j.dump(2) + "\n";
}

}  // namespace tlaloc::models
