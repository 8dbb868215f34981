// Ahead-of-time compiles: the programs a session recorded (program_recorder.h) compiled for a
// target's topology through PJRT_TopologyDescription_Create and PJRT_Compile, with no client and
// no device, so a program the target's compiler refuses fails on the development machine.
// libtpu takes "v6e:1x1" / "v6e:2x2"; Tlaloc's own plugin takes the compile-only "cpu:N".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/pjrt/api.h"
#include "tlaloc/pjrt/compile_options.h"
#include "tlaloc/pjrt/session.h"

namespace tlaloc::pjrt {

// The environment libtpu needs to create a topology and compile on a machine without a TPU
// (TPU_SKIP_MDS_QUERY=1, ALLOW_MULTIPLE_LIBTPU_LOAD=1, TPU_WORKER_HOSTNAMES, TPU_ACCELERATOR_TYPE
// from the topology's name, "v6e:2x2" -> "v6e-4"). PjrtTopology::Create sets each one the process
// has not set when the plugin's file name contains "tpu".
std::vector<std::pair<std::string, std::string>> CompileOnlyTpuEnvironment(
    const std::string& topology);

// A topology of one plugin. Destroys its PJRT_TopologyDescription.
class PjrtTopology {
 public:
  ~PjrtTopology();
  // `options` become PJRT_TopologyDescription_Create's create_options, as strings (XLA:CUDA
  // takes "target_config", a GpuTargetConfigProto in text form, and then needs no GPU).
  static StatusOr<std::unique_ptr<PjrtTopology>> Create(
      std::shared_ptr<PjrtApi> api, const std::string& name,
      const std::map<std::string, std::string>& options = {});
  const std::string& name() const { return name_; }
  const std::string& platform_name() const { return platform_name_; }
  // PJRT_TopologyDescription_GetDeviceDescriptions' count; 0 when the plugin gives none.
  int64_t num_devices() const { return num_devices_; }
  // Compiles MLIR text for this topology (PJRT_Compile) and returns the executable's compiled
  // memory statistics; the executable is destroyed.
  StatusOr<CompiledMemoryStats> Compile(const std::string& mlir,
                                        const CompileOptions& options) const;

 private:
  PjrtTopology() = default;
  std::shared_ptr<PjrtApi> api_;
  PJRT_TopologyDescription* topology_ = nullptr;
  std::string name_, platform_name_;
  int64_t num_devices_ = 0;
};

// The collective ops of a program's text, "all_reduce:2,all_gather:1", or "-" for none.
std::string CountCollectives(const std::string& mlir);

struct AotRow {
  std::string program;  // the recorded .mlir file
  std::string module;
  int64_t num_replicas = 1, num_partitions = 1;
  std::string collectives;  // CountCollectives
  bool ok = false;
  std::string error;  // the refusal, when !ok
  CompiledMemoryStats stats;
  double compile_seconds = 0;  // PJRT_Compile's wall time, refusals included
  // What a run needs at most: arguments + outputs + temporaries, an output aliased to a donated
  // argument counted once.
  int64_t total_bytes() const {
    return stats.argument_bytes + stats.output_bytes + stats.temp_bytes - stats.alias_bytes;
  }
};

struct AotReport {
  std::string platform;
  std::vector<AotRow> rows;
  int refused() const;
};

// Compiles every program recorded in `programs_dir` for `topology` and writes
// out_dir/summary.tsv (a header line, then one row a program: program, module, replicas,
// partitions, collectives, argument_bytes, output_bytes, alias_bytes, temp_bytes, total_bytes,
// status, compile_s, peak_bytes ("-" when the plugin reports none)) and
// out_dir/errors/<program>.txt for each refusal. `strict_precision` compiles every program in the
// STRICT_PRECISION form whatever it was recorded with; `tpu_form` prints every program again as a
// TPU session sends it (program_text.h: f32 dots at HIGHEST) before compiling.
// `topology_options` are the topology's create options (PjrtTopology::Create).
StatusOr<AotReport> RunAot(std::shared_ptr<PjrtApi> api, const std::string& topology,
                           const std::string& programs_dir, const std::string& out_dir,
                           bool strict_precision = false, bool tpu_form = false,
                           const std::map<std::string, std::string>& topology_options = {});

}  // namespace tlaloc::pjrt
