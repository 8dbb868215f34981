// kernelize: replaces the decomposition of traced layers (nn::LayerTrace) in a built program by
// a kernel from a kernel repository. A mapping says, per kernel-layer name, backend and mode,
// which repository provides the kernel (CUDA entries may carry compute capability ranges; the
// smallest range containing the target's capability wins).
//
//   Kernelizer k = Kernelizer::Create(mapping, options);   // loads, verifies, checks signatures
//   KernelizeResult r = k.Apply(module, trace);             // per program (prefill, decode...)
//   InterpreterOptions io; io.custom_calls = r.custom_calls;
//
// A universal kernel becomes a `func.call` to its instantiated StableHLO function; a cpu kernel
// a `stablehlo.custom_call` run by the interpreter through the library's C ABI; a cuda kernel a
// typed-FFI `custom_call` (api_version 4) for the XLA CUDA plugin; a tpu kernel a
// `tpu_custom_call` carrying its Mosaic payload in backend_config. Layers without a fitting
// kernel keep their decomposition (or, with use_fallback off, fail).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/kernels/native.h"
#include "tlaloc/kernels/source.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::kernels {

enum class Mode { kInference, kTraining };
std::string_view ModeName(Mode m);

// Compute capabilities as 10*major+minor, both ends inclusive.
struct CapabilityRange {
  int min = 0, max = 1000;
  bool Contains(int c) const { return c >= min && c <= max; }
};

struct LayerRepository {
  KernelSource source;
  std::string layer;  // the layer's name in the repository; empty: the mapped name
  std::optional<CapabilityRange> capability;
};

class KernelMapping {
 public:
  void Add(const std::string& layer, Backend backend, Mode mode, LayerRepository repo);
  // Candidates for a layer on a backend in a mode; an inference request also considers
  // training kernels (they work for inference too).
  std::vector<LayerRepository> Candidates(const std::string& layer, Backend backend,
                                          Mode mode) const;
  std::vector<std::string> Layers() const;

 private:
  std::map<std::string, std::map<Backend, std::map<Mode, std::vector<LayerRepository>>>> map_;
};

// A mapping from JSON, the shape of the kernel hub's mapping dictionaries:
//   {"RMSNorm": {"cpu": "URL@v1",
//                "cuda": [{"repo": "URL@v2", "capability": [80, 89]}, "URL@v1"],
//                "tpu": {"inference": "URL", "training": {"repo": "URL", "layer": "Name"}}}}
// A string or {"repo", "layer", "capability"} entry serves inference; a {"inference": ...,
// "training": ...} object names the mode. Errors name the layer and backend.
StatusOr<KernelMapping> ParseKernelMapping(std::string_view json_text);

// The operands, results and attributes of Tlaloc's own layers (what a kernel must match).
struct LayerSignature {
  std::string name;
  std::vector<std::string> operands, results, attributes;
};
const LayerSignature* FindLayerSignature(std::string_view kernel_layer);
// Refuses a kernel whose operands, results or attributes differ from the layer's, by name.
Status CheckSignature(const LayerSignature& layer, const LayerSpec& kernel,
                      const std::string& repo);

// Setting TLALOC_DISABLE_KERNELS=1 makes Kernelizer::Create resolve nothing (every layer keeps
// its decomposition), to rule kernels out when debugging.
struct KernelizeOptions {
  Target target = Target::HostCpu();
  Mode mode = Mode::kInference;
  bool use_fallback = true;
  LoaderOptions loader;
  // Scalar attributes of layers, e.g. {"RMSNorm": {{"eps", 1e-6}}} (from the model config).
  std::map<std::string, std::map<std::string, double>> layer_attributes;
};

struct KernelizeResult {
  std::shared_ptr<Module> module;
  std::map<std::string, CustomCallHandler> custom_calls;  // for InterpreterOptions
  std::vector<std::string> replaced;                      // "RMSNorm model.norm -> variant of repo"
  std::vector<std::string> kept;  // "Attention model.layers.0.self_attn: reason"
};

class Kernelizer {
 public:
  // Loads every mapped kernel that fits the target and mode, verifying digests, trust and
  // signatures; fails here, before any program is touched, on a mismatch.
  static StatusOr<Kernelizer> Create(const KernelMapping& mapping, const KernelizeOptions& options);

  // Rewrites `module` in place (the trace's op ranges are consumed: do not reuse it).
  StatusOr<KernelizeResult> Apply(std::shared_ptr<Module> module,
                                  const nn::LayerTrace& trace) const;

  struct Resolved {
    std::string layer;
    LoadedVariant variant;
    LayerSpec spec;
    std::string module_text;                  // universal
    std::string payload;                      // tpu, `payload`
    std::vector<std::string> payload_texts;   // tpu, one per spec.payloads
    std::shared_ptr<NativeLibrary> library;   // cpu
    std::vector<LoadedVariant> dependencies;  // kernel-depends, verified like the kernel
    std::vector<std::shared_ptr<NativeLibrary>> dependency_libraries;  // cpu, kept loaded
    TlalocKernelFn fn = nullptr;
  };
  const std::map<std::string, Resolved>& resolved() const { return resolved_; }
  // Interpreter handlers of every resolved cpu kernel, with the options' layer attributes (for
  // a backend made before any program exists: MakeInterpreterBackend(options)).
  std::map<std::string, CustomCallHandler> CustomCalls() const;
  // Layers mapped but kept as decompositions, with the reason.
  const std::map<std::string, std::string>& unresolved() const { return unresolved_; }

 private:
  KernelizeOptions options_;
  std::map<std::string, Resolved> resolved_;
  std::map<std::string, std::string> unresolved_;
};

}  // namespace tlaloc::kernels
