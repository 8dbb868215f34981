// StableHLO's own reference interpreter (`stablehlo-translate --interpret`, built from
// openxla/stablehlo beside the project, never part of it) as a Tlaloc Backend, so the very
// programs Tlaloc sends to a plugin (Generator steps, Trainer steps, the sharding plans'
// per-device programs) run on the specification's executable form.
//
// Each execution writes one module: the program as PJRT receives it (PrintProgramText), its
// entry renamed, plus a `main` that feeds the arguments as constants and returns the results;
// several devices go through `interpreter.run_parallel` (one program per process of the grid).
// The results are read back from the text the tool prints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tlaloc/runtime/backend.h"
#include "tlaloc/support/status.h"

namespace tlaloc::refinterp {

// The stablehlo-translate to use: $TLALOC_STABLEHLO_TRANSLATE, else `stablehlo-translate` on
// PATH; empty when neither names an executable file.
std::string FindStablehloTranslate();

struct RefInterpOptions {
  std::string translate;  // the stablehlo-translate binary
  int num_devices = 1;
  // Replace every chlo.ragged_dot by its dense expansion (the reference interpreter registers no
  // chlo dialect).
  bool expand_ragged_dot = false;
  // Replace every chlo.top_k by a call of a stable descending sort and slices (what CHLO's own
  // legalization does), for the same reason.
  bool expand_top_k = false;
  // Give every collective its own channel handle (1, 2, ... in program order). Tlaloc's
  // per-device step reuses handle 1 for two all_reduces; the reference interpreter keys its
  // rendezvous by (process group, channel id) and then mixes their values up.
  bool unique_channels = false;
  // Where the generated modules go (kept for a look after a failure); "" = a fresh temp folder.
  std::string work_dir;
};

// What the backend measured: one entry per execution.
struct RefInterpRun {
  std::string entry;
  int devices = 1;
  double seconds = 0;
  size_t module_bytes = 0;
};

class RefInterpBackend : public Backend {
 public:
  explicit RefInterpBackend(RefInterpOptions options);
  ~RefInterpBackend() override;

  std::string name() const override { return "stablehlo-reference"; }
  std::vector<DeviceInfo> devices() const override;
  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry = "") override;
  StatusOr<std::unique_ptr<CompiledProgram>> CompileForDevices(
      std::shared_ptr<const Module> module, const ProcessGrid& grid,
      const std::string& entry = "") override;
  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& literal, int device) override;
  StatusOr<Literal> ToHost(const DeviceBuffer& buffer) override;
  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& program, const std::vector<ExecuteArg>& args) override;
  StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>> ExecuteOnDevices(
      CompiledProgram& program, const std::vector<std::vector<ExecuteArg>>& args) override;
  StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram&) override {
    return Unimplemented("the StableHLO reference interpreter reports no compiled memory");
  }

  const std::vector<RefInterpRun>& runs() const { return runs_; }

 private:
  // Runs the module text, returning the printed results in order.
  StatusOr<std::vector<Literal>> RunText(const std::string& text, const std::vector<Type>& results,
                                         const std::string& entry, int devices);

  RefInterpOptions options_;
  std::string dir_;
  bool own_dir_ = false;
  int counter_ = 0;
  std::vector<RefInterpRun> runs_;
};

// Replaces each `%r:2 = chlo.top_k(%x, k = K) : T -> (V, I)` line of printed module text by a
// call of a private function (iota, stable sort by value descending, slices of the first K);
// returns the text of those functions, one per distinct (T, K), and the number replaced.
StatusOr<std::pair<std::string, int>> ExpandTopKText(std::string& text);

// Parses what `stablehlo-translate --interpret` prints for its results (`tensor<2x3xf32> {[...]}`
// per result, elements as MLIR attributes) into literals of `types`.
StatusOr<std::vector<Literal>> ParseInterpreterOutput(const std::string& out,
                                                      const std::vector<Type>& types);

}  // namespace tlaloc::refinterp
