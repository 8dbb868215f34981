// kernelize: resolving mapped kernels once, then rewriting per program the layers' named
// composites (RMSNorm, SiluAndMul, RotaryEmbedding: builder/composite.h; PagedAttention:
// nn/paged_attention.h), found by name in the program, and the other layers' traced op ranges
// (the Attention layer's tlaloc.paged_dot products read the gathered pages: kGatheringComposites).
#include "tlaloc/kernels/kernelize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <unordered_map>

#include "kernels/tpu_adapter.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/rewrite.h"
#include "tlaloc/nn/paged_attention.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::kernels {
namespace {

const LayerSignature kSignatures[] = {
    {std::string(nn::kRmsNormLayer), {"x", "weight"}, {"y"}, {"eps"}},
    {std::string(nn::kSiluAndMulLayer), {"gate", "up"}, {"y"}, {}},
    {std::string(nn::kRotaryEmbeddingLayer), {"x", "cos", "sin"}, {"y"}, {}},
    {std::string(nn::kAttentionLayer), {"q", "k", "v", "mask"}, {"out"}, {"scale"}},
    // nn::PagedAttention, its operands in the order of the composite tlaloc.paged_attention's
    // (the order kernelize passes them); a kernel returning out alone serves callers that drop
    // lse.
    {std::string(nn::kPagedAttentionLayer),
     {"k_pages", "block_table", "v_pages", "q", "kv_start", "kv_lengths", "q_positions"},
     {"out", "lse"},
     {"scale"}},
    {std::string(nn::kLinearLayer), {"x", "weight"}, {"y"}, {}},
    {std::string(nn::kEmbeddingLayer), {"table", "ids"}, {"y"}, {}},
    // Not an nn layer of Qwen3; programs built by hand trace it (the TPU example).
    {"ReLU", {"x"}, {"y"}, {}},
};

// Layers whose call is one named composite: kernelize replaces the composite op, wherever it
// is, instead of a traced range (a trace names the call's path when it has one).
const std::pair<std::string_view, std::string_view> kCompositeLayers[] = {
    {nn::kRmsNormLayer, kRmsNormComposite},
    {nn::kSiluAndMulLayer, kSiluAndMulComposite},
    {nn::kRotaryEmbeddingLayer, kRotaryComposite},
    {nn::kPagedAttentionLayer, nn::kPagedAttentionComposite},
};

std::string_view LayerOfComposite(std::string_view composite) {
  for (const auto& [layer, name] : kCompositeLayers)
    if (name == composite) return layer;
  return {};
}

bool IsCompositeLayer(std::string_view layer) {
  for (const auto& [l, name] : kCompositeLayers)
    if (l == layer) return true;
  return false;
}

// One record per composite of a layer in `resolved` in the module's functions (not inside
// decompositions), as op range [i, i + 1) of its block: path and attributes from the trace's
// record of that call when there is one, the composite's numeric attributes otherwise.
// The functions named as some composite's decomposition in `module`.
std::set<std::string> CompositeDecompositions(const Module& module) {
  std::set<std::string> decompositions;
  for (const auto& fn : module.functions())
    for (const auto& op : fn->entry().operations())
      if (op->name() == "stablehlo.composite")
        decompositions.insert(GetStringAttr(op->attrs(), "decomposition"));
  return decompositions;
}

template <typename Resolved>
void AddCompositeRecords(const Module& module, const nn::LayerTrace& trace,
                         const Resolved& resolved, std::vector<nn::LayerRecord>& records) {
  const std::set<std::string> decompositions = CompositeDecompositions(module);
  std::map<std::pair<const Block*, size_t>, const nn::LayerRecord*> traced;
  for (const auto& r : trace.records())
    if (IsCompositeLayer(r.kernel)) traced[{r.block, r.begin_op}] = &r;
  std::function<void(const Block&, const std::string&)> walk = [&](const Block& block,
                                                                   const std::string& fn) {
    const auto& ops = block.operations();
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const auto& region : ops[i]->regions())
        for (const auto& inner : region->blocks()) walk(*inner, fn);
      if (ops[i]->name() != "stablehlo.composite") continue;
      const std::string_view layer = LayerOfComposite(GetStringAttr(ops[i]->attrs(), "name"));
      if (layer.empty() || !resolved.count(std::string(layer))) continue;
      nn::LayerRecord r;
      r.kernel = std::string(layer);
      r.block = &block;
      r.begin_op = i;
      r.end_op = i + 1;
      if (auto it = traced.find({&block, i}); it != traced.end() && it->second->kernel == layer) {
        r.path = it->second->path;
        r.attributes = it->second->attributes;
      } else {
        r.path = "@" + fn + " op " + std::to_string(i);
      }
      if (const Attribute* a = FindAttr(ops[i]->attrs(), "composite_attributes");
          a && a->kind() == Attribute::Kind::kDict)
        for (const auto& [n, v] : a->as_dict()) {
          if (v.kind() == Attribute::Kind::kFloat)
            r.attributes.emplace(n, v.as_float());
          else if (v.kind() == Attribute::Kind::kInt)
            r.attributes.emplace(n, static_cast<double>(v.as_int()));
        }
      records.push_back(std::move(r));
    }
  };
  for (const auto& fn : module.functions())
    if (!decompositions.count(fn->name())) walk(fn->entry(), fn->name());
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return "(" + s + ")";
}

std::string DtypeText(const TensorType& t) {
  std::string s = PrintType(Type(TensorType(t.element_type, {})));  // "tensor<f32>"
  return s.substr(7, s.size() - 8);
}

// Expands {{name}}, {{name.dtype}}, {{name.rows}}, {{name.cols}}, {{attr.NAME}} in a universal
// kernel's StableHLO template for one call site.
StatusOr<std::string> Instantiate(const std::string& text,
                                  const std::map<std::string, TensorType>& values,
                                  const std::map<std::string, double>& attrs) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) return InvalidArgument("unterminated {{ in kernel template");
    out += text.substr(pos, open - pos);
    std::string key = text.substr(open + 2, close - open - 2);
    pos = close + 2;
    if (key.rfind("attr.", 0) == 0) {
      auto it = attrs.find(key.substr(5));
      if (it == attrs.end())
        return InvalidArgument("kernel template uses {{" + key +
                               "}} but the layer has no such "
                               "attribute value (KernelizeOptions::layer_attributes)");
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9e", it->second);
      out += buf;
      continue;
    }
    std::string name = key, field;
    if (size_t dot = key.find('.'); dot != std::string::npos)
      name = key.substr(0, dot), field = key.substr(dot + 1);
    auto it = values.find(name);
    if (it == values.end())
      return InvalidArgument("kernel template uses {{" + key + "}}: no operand or result '" + name +
                             "'");
    const TensorType& t = it->second;
    int64_t cols = t.rank() ? t.dims.back() : 1;
    if (field.empty()) {
      out += PrintType(Type(t));
    } else if (field == "dtype") {
      out += DtypeText(t);
    } else if (field == "cols") {
      out += std::to_string(cols);
    } else if (field == "rows") {
      out += std::to_string(cols ? t.num_elements() / cols : 0);
    } else {
      return InvalidArgument("kernel template field '" + field + "' in {{" + key +
                             "}} (expected dtype, rows or cols)");
    }
  }
  out += text.substr(pos);
  return out;
}

// Composites whose decomposition first works on its other operands alone, then combines the
// result with its first: nn::PagedDot's tlaloc.paged_dot gathers the pages of (pool, table),
// then takes the product with lhs. In a replaced range (the Attention layer over a paged
// cache), kernelize places the gathering ops before the call and passes their result where the
// range read the pool and the table, so the kernel takes the layer's dense operands (q, k, v,
// mask: the gathered keys and values) whether the decoder reads a dense or a paged cache.
const std::string_view kGatheringComposites[] = {nn::kPagedDotComposite};

// For such a composite `op`: appends to `hoisted` a copy, on op's operands, of its
// decomposition's ops that do not depend on its first operand, and sets `reads` to what the
// range reads in op's place: its first operand, then the copies' values that the dependent ops
// read. False (nothing appended) for other ops, a missing decomposition, or ops with regions.
bool HoistGathering(const Module& module, const Operation& op,
                    std::vector<std::unique_ptr<Operation>>& hoisted, std::vector<Value>& reads) {
  if (op.name() != "stablehlo.composite" || op.num_operands() < 1) return false;
  const std::string name = GetStringAttr(op.attrs(), "name");
  if (std::find(std::begin(kGatheringComposites), std::end(kGatheringComposites), name) ==
      std::end(kGatheringComposites))
    return false;
  const Function* fn = module.Find(GetStringAttr(op.attrs(), "decomposition"));
  if (!fn || fn->num_arguments() != op.num_operands()) return false;
  std::unordered_map<ValueImpl*, Value> map;
  for (int i = 0; i < fn->num_arguments(); ++i) map[fn->entry().argument(i).impl()] = op.operand(i);
  std::set<ValueImpl*> dependent = {fn->entry().argument(0).impl()};
  std::vector<std::unique_ptr<Operation>> copies;
  std::vector<Value> read = {op.operand(0)};
  for (const auto& inner : fn->entry().operations()) {
    if (inner->num_regions() > 0) return false;
    if (inner->name() == "func.return") continue;
    const bool depends = std::any_of(inner->operands().begin(), inner->operands().end(),
                                     [&](Value v) { return dependent.count(v.impl()) > 0; });
    if (depends) {
      for (int i = 0; i < inner->num_results(); ++i) dependent.insert(inner->result(i).impl());
      for (Value v : inner->operands())
        if (!dependent.count(v.impl()) &&
            std::find(read.begin(), read.end(), map.at(v.impl())) == read.end())
          read.push_back(map.at(v.impl()));
      continue;
    }
    std::vector<Value> operands;
    for (Value v : inner->operands()) operands.push_back(map.at(v.impl()));
    copies.push_back(
        Operation::Create(inner->def(), operands, inner->result_types(), inner->attrs()));
    for (int i = 0; i < inner->num_results(); ++i)
      map[inner->result(i).impl()] = copies.back()->result(i);
  }
  for (auto& c : copies) hoisted.push_back(std::move(c));
  reads = std::move(read);
  return true;
}

// Whether v is produced by (or inside a region of) one of `ops`.
bool DefinedInside(Value v, const std::set<const Operation*>& ops) {
  const Operation* p = v.producer();
  if (!p) {
    Region* r = v.owner_block() ? v.owner_block()->parent_region() : nullptr;
    p = r ? r->parent_op() : nullptr;
  }
  while (p) {
    if (ops.count(p)) return true;
    Block* b = p->parent_block();
    p = b && b->parent_region() ? b->parent_region()->parent_op() : nullptr;
  }
  return false;
}

template <typename F>
void ForEachOp(const Operation& op, const F& f) {
  f(op);
  for (const auto& r : op.regions())
    for (const auto& b : r->blocks())
      for (const auto& inner : b->operations()) ForEachOp(*inner, f);
}

// A payload's types parse, and each kernel operand/result holds the call site's elements; an
// i1 operand may enter as i32 (jax passes a bool operand of a TPU kernel so; kernelize converts).
Status CheckPayloadTypes(const TpuPayload& p, const std::string& where) {
  auto check = [&](const std::vector<std::string>& site, const std::vector<std::string>& kernel,
                   bool operands) {
    for (size_t i = 0; i < site.size(); ++i) {
      auto a = ParseTypeText(site[i]);
      auto b = ParseTypeText(kernel[i]);
      if (!a.ok() || !b.ok() || !a->is_tensor() || !b->is_tensor())
        return InvalidArgument(where + ": payload " + p.file + ": '" + site[i] + "' / '" +
                               kernel[i] + "' are not tensor types");
      const bool widened_bool = operands && a->tensor.element_type == ElementType::kPred &&
                                b->tensor.element_type == ElementType::kS32;
      if ((a->tensor.element_type != b->tensor.element_type && !widened_bool) ||
          a->tensor.num_elements() != b->tensor.num_elements())
        return InvalidArgument(where + ": payload " + p.file + ": its kernel takes " + kernel[i] +
                               " for the call site's " + site[i] +
                               " (expected the same elements, reshaped at most, or an i1 "
                               "operand as i32)");
    }
    return OkStatus();
  };
  TL_RETURN_IF_ERROR(check(p.operand_types, p.kernel_operand_types, true));
  return check(p.result_types, p.kernel_result_types, false);
}

}  // namespace

std::string_view ModeName(Mode m) { return m == Mode::kTraining ? "training" : "inference"; }

void KernelMapping::Add(const std::string& layer, Backend backend, Mode mode,
                        LayerRepository repo) {
  map_[layer][backend][mode].push_back(std::move(repo));
}

std::vector<LayerRepository> KernelMapping::Candidates(const std::string& layer, Backend backend,
                                                       Mode mode) const {
  std::vector<LayerRepository> out;
  auto l = map_.find(layer);
  if (l == map_.end()) return out;
  auto b = l->second.find(backend);
  if (b == l->second.end()) return out;
  std::vector<Mode> order = {mode};
  if (mode == Mode::kInference) order.push_back(Mode::kTraining);
  for (Mode m : order)
    if (auto e = b->second.find(m); e != b->second.end())
      out.insert(out.end(), e->second.begin(), e->second.end());
  return out;
}

std::vector<std::string> KernelMapping::Layers() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : map_) out.push_back(k);
  return out;
}

const LayerSignature* FindLayerSignature(std::string_view kernel_layer) {
  for (const auto& s : kSignatures)
    if (s.name == kernel_layer) return &s;
  return nullptr;
}

Status CheckSignature(const LayerSignature& layer, const LayerSpec& kernel,
                      const std::string& repo) {
  auto refuse = [&](const std::string& what, const std::vector<std::string>& got,
                    const std::vector<std::string>& want) {
    return FailedPrecondition("kernel " + kernel.name + " from " + repo + " declares " + what +
                              " " + Join(got) + " but Tlaloc's " + layer.name + " layer has " +
                              Join(want) + "; refusing it");
  };
  if (kernel.operands != layer.operands) return refuse("operands", kernel.operands, layer.operands);
  if (kernel.results != layer.results) return refuse("results", kernel.results, layer.results);
  if (kernel.attributes != layer.attributes)
    return refuse("attributes", kernel.attributes, layer.attributes);
  return OkStatus();
}

StatusOr<Kernelizer> Kernelizer::Create(const KernelMapping& mapping,
                                        const KernelizeOptions& options) {
  Kernelizer k;
  k.options_ = options;
  const Target& target = options.target;
  if (const char* off = std::getenv("TLALOC_DISABLE_KERNELS"); off && std::string(off) == "1") {
    for (const std::string& layer : mapping.Layers())
      k.unresolved_[layer] = "TLALOC_DISABLE_KERNELS=1";
    return k;
  }
  for (const std::string& layer : mapping.Layers()) {
    const LayerSignature* sig = FindLayerSignature(layer);
    if (!sig)
      return InvalidArgument("kernel mapping names layer '" + layer +
                             "', which is not a Tlaloc kernel layer");
    auto candidates = mapping.Candidates(layer, target.backend, options.mode);
    // CUDA: the smallest capability range containing the target's capability wins.
    if (target.backend == Backend::kCuda) {
      std::erase_if(candidates, [&](const LayerRepository& r) {
        return r.capability && !r.capability->Contains(target.capability);
      });
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const LayerRepository& a, const LayerRepository& b) {
                         auto w = [](const LayerRepository& r) {
                           return r.capability ? r.capability->max - r.capability->min : 100000;
                         };
                         return w(a) < w(b);
                       });
    }
    std::string why;
    if (candidates.empty())
      why = "no kernel mapped for backend " + std::string(BackendName(target.backend)) + " in " +
            std::string(ModeName(options.mode)) + " mode";
    for (const LayerRepository& repo : candidates) {
      auto loaded = LoadVariant(repo.source, target, options.loader);
      // No fitting variant, or an unreachable repository, is a reason to fall back; tampered
      // files, untrusted native code and bad metadata are always errors.
      if (!loaded.ok() && options.use_fallback &&
          (loaded.status().code() == StatusCode::kNotFound ||
           loaded.status().code() == StatusCode::kUnavailable)) {
        why = loaded.status().message();
        continue;
      }
      if (!loaded.ok()) return loaded.status();
      LoadedVariant v = std::move(*loaded);
      std::string name = repo.layer.empty() ? layer : repo.layer;
      auto spec_it = v.meta.layers.find(name);
      std::string where = repo.source.ToString() + " (" + v.meta.variant + ")";
      if (spec_it == v.meta.layers.end()) {
        why = "kernel repository " + where + " provides no layer " + name;
        if (!options.use_fallback) return NotFound(why);
        continue;
      }
      LayerSpec spec = spec_it->second;
      TL_RETURN_IF_ERROR(CheckSignature(*sig, spec, where));
      // Training keeps the decomposition (and its VJP) unless the kernel has a backward;
      // universal kernels are StableHLO, differentiable like the decomposition.
      if (options.mode == Mode::kTraining && !spec.has_backward &&
          v.meta.backend != Backend::kUniversal) {
        why = "kernel from " + where + " has no backward; training keeps the decomposition";
        continue;
      }
      Resolved r;
      r.layer = layer;
      r.spec = spec;
      TL_ASSIGN_OR_RETURN(r.dependencies, LoadDependencies(v, target, options.loader));
      for (const LoadedVariant& dep : r.dependencies)
        if (dep.meta.backend == Backend::kCpu && !dep.meta.library.empty()) {
          TL_ASSIGN_OR_RETURN(auto lib, NativeLibrary::Open(dep.dir / dep.meta.library, true));
          r.dependency_libraries.push_back(std::move(lib));
        }
      switch (v.meta.backend) {
        case Backend::kUniversal: {
          TL_ASSIGN_OR_RETURN(r.module_text, ReadFileBytes(v.dir / v.meta.module));
          if (spec.function.empty())
            return InvalidArgument(where + ": universal layer " + name + " names no function");
          break;
        }
        case Backend::kCpu: {
          TL_ASSIGN_OR_RETURN(r.library, NativeLibrary::Open(v.dir / v.meta.library));
          TL_ASSIGN_OR_RETURN(r.fn, r.library->Symbol(spec.symbol));
          break;
        }
        case Backend::kTpu: {
          if (spec.payload.empty() && spec.payloads.empty())
            return InvalidArgument(where + ": tpu layer " + name + " names no payload");
          if (!spec.payload.empty()) {
            TL_ASSIGN_OR_RETURN(r.payload, ReadFileBytes(v.dir / spec.payload));
          }
          for (const TpuPayload& p : spec.payloads) {
            TL_RETURN_IF_ERROR(p.adapter.empty()
                                   ? CheckPayloadTypes(p, where + ": tpu layer " + name)
                                   : CheckTpuAdapter(spec, p, where + ": tpu layer " + name));
            TL_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(v.dir / p.file));
            r.payload_texts.push_back(std::move(text));
          }
          break;
        }
        case Backend::kCuda:
          if (spec.symbol.empty())
            return InvalidArgument(where + ": cuda layer " + name + " names no FFI handler symbol");
          break;  // registered with the plugin through PJRT's FFI extension (pjrt/ffi.h)
        default:
          return FailedPrecondition(where + ": Tlaloc cannot run " +
                                    std::string(BackendName(v.meta.backend)) + " kernels");
      }
      r.variant = std::move(v);
      k.resolved_[layer] = std::move(r);
      why.clear();
      break;
    }
    if (!why.empty()) {
      if (!options.use_fallback)
        return FailedPrecondition("kernelize: layer " + layer + ": " + why +
                                  ", and fallback to the decomposition is disabled");
      k.unresolved_[layer] = why;
    }
  }
  return k;
}

std::map<std::string, CustomCallHandler> Kernelizer::CustomCalls() const {
  std::map<std::string, CustomCallHandler> out;
  for (const auto& [layer, r] : resolved_) {
    if (!r.library || !r.fn) continue;
    std::map<std::string, double> attrs;
    if (auto it = options_.layer_attributes.find(layer); it != options_.layer_attributes.end())
      attrs = it->second;
    out[r.spec.symbol] = MakeNativeHandler(r.library, r.fn, r.spec.symbol, attrs);
  }
  return out;
}

StatusOr<KernelizeResult> Kernelizer::Apply(std::shared_ptr<Module> module,
                                            const nn::LayerTrace& trace) const {
  KernelizeResult result;
  result.module = module;
  const OpRegistry& reg = OpRegistry::Global();
  const OpDef* call_def = reg.Find("func.call");
  const OpDef* custom_def = reg.Find("stablehlo.custom_call");
  if (!call_def || !custom_def) return Internal("func.call/custom_call not registered");

  // Innermost-last order per block: descending begin, skip ranges overlapping a rewritten one.
  std::vector<nn::LayerRecord> records;
  for (const auto& r : trace.records()) {
    if (resolved_.count(r.kernel)) {
      if (!IsCompositeLayer(r.kernel)) records.push_back(r);
    } else if (unresolved_.count(r.kernel)) {
      result.kept.push_back(r.kernel + " " + r.path + ": " + unresolved_.at(r.kernel));
    }
  }
  // The replaced composites' decompositions are removed once nothing calls them (below).
  const std::set<std::string> decompositions = CompositeDecompositions(*module);
  AddCompositeRecords(*module, trace, resolved_, records);
  std::stable_sort(records.begin(), records.end(),
                   [](const nn::LayerRecord& a, const nn::LayerRecord& b) {
                     return a.block != b.block ? a.block < b.block : a.begin_op > b.begin_op;
                   });
  std::map<std::pair<std::string, std::string>, std::string> instances;  // (layer, types) -> fn
  std::map<std::string, std::map<std::string, double>> handler_attrs;
  std::map<const Block*, size_t> lowest_rewritten;
  int counter = 0;
  for (const auto& rec : records) {
    const Resolved& k = resolved_.at(rec.kernel);
    std::string label = rec.kernel + " " + rec.path;
    // The private function of this layer's kernel for the call-site types `type_key`: made once,
    // by `add` under a fresh name, and called from every site with those types.
    auto instance =
        [&](const std::string& type_key,
            const std::function<Status(const std::string&)>& add) -> StatusOr<std::string> {
      auto key = std::make_pair(rec.kernel, type_key);
      if (auto it = instances.find(key); it != instances.end()) return it->second;
      std::string name = "kernel." + rec.kernel + "." + std::to_string(counter++);
      while (module->Find(name)) name += "_";
      TL_RETURN_IF_ERROR(add(name));
      instances[key] = name;
      return name;
    };
    Block* block = const_cast<Block*>(rec.block);
    auto& ops = block->mutable_operations();
    if (rec.end_op > ops.size() || rec.begin_op >= rec.end_op) {
      result.kept.push_back(label + ": empty or stale op range");
      continue;
    }
    if (auto it = lowest_rewritten.find(block);
        it != lowest_rewritten.end() && rec.end_op > it->second) {
      result.kept.push_back(label + ": overlaps a layer already replaced");
      continue;
    }
    std::set<const Operation*> inside;
    for (size_t i = rec.begin_op; i < rec.end_op; ++i) inside.insert(ops[i].get());
    // The gathers of the range's tlaloc.paged_dot composites on pools and tables from outside
    // it, placed before the call (kGatheringComposites), and what each composite reads instead.
    std::vector<std::unique_ptr<Operation>> hoisted;
    std::map<const Operation*, std::vector<Value>> reads_of;
    for (size_t i = rec.begin_op; i < rec.end_op; ++i)
      ForEachOp(*ops[i], [&](const Operation& op) {
        const bool outside =
            std::none_of(op.operands().begin() + (op.num_operands() > 0), op.operands().end(),
                         [&](Value v) { return DefinedInside(v, inside); });
        std::vector<Value> reads;
        if (outside && HoistGathering(*module, op, hoisted, reads)) reads_of[&op] = reads;
      });
    std::vector<Value> inputs;
    for (size_t i = rec.begin_op; i < rec.end_op; ++i)
      ForEachOp(*ops[i], [&](const Operation& op) {
        auto r = reads_of.find(&op);
        for (Value v : r != reads_of.end() ? r->second : op.operands())
          if (!DefinedInside(v, inside) &&
              std::find(inputs.begin(), inputs.end(), v) == inputs.end())
            inputs.push_back(v);
      });
    std::vector<Value> outputs;
    for (size_t i = rec.begin_op; i < rec.end_op; ++i)
      for (Value res : ops[i]->results()) {
        bool used = false;
        for (size_t j = rec.end_op; j < ops.size() && !used; ++j)
          ForEachOp(*ops[j], [&](const Operation& op) {
            for (Value v : op.operands()) used = used || v == res;
          });
        if (used) outputs.push_back(res);
      }
    const LayerSpec& spec = k.spec;
    // An adapted kernel also serves a call site that uses only its first result (out, not lse).
    const bool adapted = std::any_of(spec.payloads.begin(), spec.payloads.end(),
                                     [](const TpuPayload& p) { return !p.adapter.empty(); });
    if (inputs.size() != spec.operands.size() ||
        (outputs.size() != spec.results.size() && !(adapted && outputs.size() == 1))) {
      result.kept.push_back(label + ": its decomposition has " + std::to_string(inputs.size()) +
                            " inputs and " + std::to_string(outputs.size()) +
                            " outputs, the kernel " + std::to_string(spec.operands.size()) +
                            " and " + std::to_string(spec.results.size()));
      continue;
    }
    const TensorType& first = inputs[0].tensor_type();
    if (!spec.dtypes.empty() &&
        std::find(spec.dtypes.begin(), spec.dtypes.end(), DtypeText(first)) == spec.dtypes.end()) {
      result.kept.push_back(label + ": kernel takes " + Join(spec.dtypes) + ", layer is " +
                            DtypeText(first));
      continue;
    }
    // The traced call's own settings first; options fill what a hand-built trace lacks.
    std::map<std::string, double> attrs = rec.attributes;
    if (auto it = options_.layer_attributes.find(rec.kernel); it != options_.layer_attributes.end())
      attrs.insert(it->second.begin(), it->second.end());
    for (const auto& a : spec.attributes)
      if (!attrs.count(a))
        return InvalidArgument("kernelize: layer " + label + " needs attribute '" + a +
                               "' (KernelizeOptions::layer_attributes[\"" + rec.kernel + "\"])");
    std::vector<Type> result_types;
    for (Value v : outputs) result_types.push_back(v.type());
    AttrDict config;
    for (const auto& [n, v] : attrs) config[n] = Attribute::Float(v, ElementType::kF32);

    const Backend backend = k.variant.meta.backend;
    // A tpu kernel lowered at fixed shapes takes only call sites of those types and attributes.
    const TpuPayload* payload = nullptr;
    const std::string* payload_text = &k.payload;
    if (backend == Backend::kTpu && !spec.payloads.empty()) {
      std::vector<std::string> site_in, site_out;
      for (Value v : inputs) site_in.push_back(PrintType(v.type()));
      for (Value v : outputs) site_out.push_back(PrintType(v.type()));
      for (size_t i = 0; i < spec.payloads.size() && !payload; ++i) {
        const TpuPayload& p = spec.payloads[i];
        bool same_attrs = true;
        for (const auto& [a, want] : p.attributes) {
          auto it = attrs.find(a);
          same_attrs = same_attrs && it != attrs.end() &&
                       std::abs(it->second - want) <= 1e-12 * std::max(1.0, std::abs(want));
        }
        const bool same_results =
            p.result_types == site_out ||
            (!p.adapter.empty() && site_out.size() == 1 && p.result_types[0] == site_out[0]);
        if (p.operand_types == site_in && same_results && same_attrs)
          payload = &p, payload_text = &k.payload_texts[i];
      }
      if (!payload) {
        std::string have;
        for (const TpuPayload& p : spec.payloads) have += " " + Join(p.operand_types);
        result.kept.push_back(label + ": no tpu payload for operands " + Join(site_in) +
                              " and its attributes (payloads for" + have + ")");
        continue;
      }
    }
    // The hoisted gathers, then reshapes before and after the call.
    std::vector<std::unique_ptr<Operation>> placed_ops = std::move(hoisted);
    std::vector<Value> call_inputs = inputs;
    std::vector<Type> call_result_types = result_types;
    std::unique_ptr<Operation> call;
    if (payload && !payload->adapter.empty()) {
      // The adapter's mapping, the custom call and the mapping back: one private function per
      // payload and call-site types, called where the layer was.
      std::vector<Type> in_types;
      std::string type_key = payload->file + ":";
      for (Value v : inputs) in_types.push_back(v.type()), type_key += PrintType(v.type()) + ",";
      for (const Type& t : result_types) type_key += PrintType(t) + ",";
      for (const auto& [n, v] : attrs) type_key += n + "=" + std::to_string(v) + ",";
      TL_ASSIGN_OR_RETURN(std::string fn_name, instance(type_key, [&](const std::string& name) {
                            return AddTpuAdapterFunction(*module, name, *payload, *payload_text,
                                                         rec.kernel, in_types, result_types, attrs)
                                .WithContext("kernelize: " + label);
                          }));
      AttrDict a;
      a["callee"] = Attribute::Symbol(fn_name);
      call = Operation::Create(*call_def, inputs, result_types, a);
    } else if (payload) {
      const OpDef* reshape_def = reg.Find("stablehlo.reshape");
      if (!reshape_def) return Internal("stablehlo.reshape not registered");
      const OpDef* convert_def = reg.Find("stablehlo.convert");
      if (!convert_def) return Internal("stablehlo.convert not registered");
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (payload->kernel_operand_types[i] == payload->operand_types[i]) continue;
        TL_ASSIGN_OR_RETURN(Type t, ParseTypeText(payload->kernel_operand_types[i]));
        Value v = inputs[i];
        if (t.tensor.element_type != v.tensor_type().element_type) {
          TensorType converted(t.tensor.element_type, v.tensor_type().dims);
          placed_ops.push_back(Operation::Create(*convert_def, {v}, {converted}, AttrDict{}));
          v = placed_ops.back()->result(0);
        }
        if (v.type() != t) {
          placed_ops.push_back(Operation::Create(*reshape_def, {v}, {t}, AttrDict{}));
          v = placed_ops.back()->result(0);
        }
        call_inputs[i] = v;
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        TL_ASSIGN_OR_RETURN(call_result_types[i], ParseTypeText(payload->kernel_result_types[i]));
      }
    }
    if (call) {
      // Built above by the adapter.
    } else if (backend == Backend::kUniversal) {
      std::map<std::string, TensorType> types;
      std::string type_key;
      for (size_t i = 0; i < inputs.size(); ++i) {
        types[spec.operands[i]] = inputs[i].tensor_type();
        type_key += PrintType(inputs[i].type()) + ",";
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        types[spec.results[i]] = outputs[i].tensor_type();
        type_key += PrintType(outputs[i].type()) + ",";
      }
      for (const auto& [n, v] : attrs) type_key += n + "=" + std::to_string(v) + ",";
      TL_ASSIGN_OR_RETURN(
          std::string fn_name, instance(type_key, [&](const std::string& name) -> Status {
            TL_ASSIGN_OR_RETURN(std::string text, Instantiate(k.module_text, types, attrs));
            auto parsed = ParseModule(text, k.variant.meta.variant + "/" + k.variant.meta.module);
            if (!parsed.ok())
              return parsed.status().WithContext("universal kernel " + rec.kernel + " for " +
                                                 label);
            Function* src = (*parsed)->Find(spec.function);
            if (!src) return NotFound("universal kernel module has no function @" + spec.function);
            std::vector<Type> want_args;
            for (Value v : inputs) want_args.push_back(v.type());
            if (src->argument_types() != want_args || src->result_types() != result_types)
              return FailedPrecondition("universal kernel @" + spec.function +
                                        " instantiated for " + label +
                                        " does not take the layer's operand/result types");
            Function* dst = module->AddFunction(name, want_args, result_types);
            dst->set_public(false);
            std::unordered_map<ValueImpl*, Value> map;
            for (int i = 0; i < src->num_arguments(); ++i)
              map[src->entry().argument(i).impl()] = dst->entry().argument(i);
            CloneBlockInto(src->entry(), dst->entry(), map);
            return OkStatus();
          }));
      AttrDict a;
      a["callee"] = Attribute::Symbol(fn_name);
      call = Operation::Create(*call_def, inputs, result_types, a);
    } else {
      AttrDict a;
      if (backend == Backend::kTpu) {
        std::vector<Type> operand_types;
        for (Value v : call_inputs) operand_types.push_back(v.type());
        a = TpuCustomCallAttrs(*payload_text, rec.kernel, operand_types, call_result_types);
      } else {
        a["call_target_name"] = Attribute::String(spec.symbol);
        if (!config.empty()) a["backend_config"] = Attribute::Dict(config);
        if (backend == Backend::kCuda) a["api_version"] = Attribute::Int(4, ElementType::kS32);
      }
      call = Operation::Create(*custom_def, call_inputs, call_result_types, a);
      if (backend == Backend::kCpu) {
        auto prev = handler_attrs.find(spec.symbol);
        if (prev != handler_attrs.end() && prev->second != attrs)
          return Unimplemented("kernelize: cpu kernel " + spec.symbol +
                               " is called with different attributes in one program");
        handler_attrs[spec.symbol] = attrs;
        result.custom_calls[spec.symbol] = MakeNativeHandler(k.library, k.fn, spec.symbol, attrs);
      }
    }
    // Place the call (and its reshapes) where the range ends, redirect the outputs' uses, drop
    // the range.
    Operation* call_op = call.get();
    placed_ops.push_back(std::move(call));
    std::vector<Value> finals;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Value r = call_op->result(static_cast<int>(i));
      if (r.type() != outputs[i].type()) {
        placed_ops.push_back(Operation::Create(*reg.Find("stablehlo.reshape"), {r},
                                               {outputs[i].type()}, AttrDict{}));
        r = placed_ops.back()->result(0);
      }
      finals.push_back(r);
    }
    const size_t n_placed = placed_ops.size();
    for (auto& op : placed_ops) block->Append(std::move(op));
    std::rotate(ops.begin() + rec.end_op, ops.end() - n_placed, ops.end());
    for (size_t i = 0; i < outputs.size(); ++i)
      for (size_t j = rec.end_op + n_placed; j < ops.size(); ++j)
        ReplaceUses(*ops[j], outputs[i].impl(), finals[i]);
    ops.erase(ops.begin() + rec.begin_op, ops.begin() + rec.end_op);
    lowest_rewritten[block] = rec.begin_op;
    result.replaced.push_back(label + " -> " + k.variant.meta.variant + " of " +
                              k.variant.checkout.repo);
  }
  module->RemoveUnreachableFunctions(decompositions);
  TL_RETURN_IF_ERROR(Verify(*module).WithContext("kernelized program"));
  return result;
}

}  // namespace tlaloc::kernels
