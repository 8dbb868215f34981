#include "tlaloc/pjrt/aot.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tlaloc/pjrt/program_recorder.h"
#include "tlaloc/pjrt/program_text.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/atomic_file.h"

namespace tlaloc::pjrt {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, std::string>> CompileOnlyTpuEnvironment(
    const std::string& topology) {
  // "v6e:2x2" -> "v6e-4": the accelerator type libtpu would read from the VM's metadata.
  std::string accelerator;
  if (const size_t colon = topology.find(':'); colon != std::string::npos) {
    int64_t chips = 1;
    std::stringstream dims(topology.substr(colon + 1));
    for (std::string d; std::getline(dims, d, 'x');) {
      chips *= d.empty() || !std::isdigit(static_cast<unsigned char>(d[0])) ? 1 : std::stoll(d);
    }
    accelerator = topology.substr(0, colon) + "-" + std::to_string(chips);
  }
  std::vector<std::pair<std::string, std::string>> env = {
      // Without it libtpu asks the GCE metadata server for the VM's TPU and, off a TPU VM,
      // sleeps and retries for more than ten minutes before PJRT_Plugin_Initialize returns.
      {"TPU_SKIP_MDS_QUERY", "1"},
      // libtpu takes /tmp/libtpu_lockfile so that one process owns the chips; a compile owns
      // none, and without this a second compile (or a TPU session) refuses to initialize.
      {"ALLOW_MULTIPLE_LIBTPU_LOAD", "1"},
      // With the metadata skipped, these two are otherwise warned about on every start.
      {"TPU_WORKER_HOSTNAMES", "localhost"},
  };
  if (!accelerator.empty()) env.emplace_back("TPU_ACCELERATOR_TYPE", accelerator);
  return env;
}

PjrtTopology::~PjrtTopology() {
  if (topology_ != nullptr) {
    TL_PJRT_ARGS(PJRT_TopologyDescription_Destroy_Args, d);
    d.topology = topology_;
    (void)TL_PJRT_CALL(*api_, TopologyDescription_Destroy, &d);
  }
}

StatusOr<std::unique_ptr<PjrtTopology>> PjrtTopology::Create(
    std::shared_ptr<PjrtApi> api, const std::string& name,
    const std::map<std::string, std::string>& options) {
  if (fs::path(api->origin()).filename().string().find("tpu") != std::string::npos) {
    // A compile needs no TPU; what the caller set is kept.
    for (const auto& [key, value] : CompileOnlyTpuEnvironment(name)) {
      ::setenv(key.c_str(), value.c_str(), /*overwrite=*/0);
    }
  }
  TL_PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, Plugin_Initialize, &init));
  // XLA:CUDA reads the shape ("partitions x hosts x devices per host") from its create option
  // `topology`, not from the name ("Cannot create topology without an explicit topology shape
  // or without a client"): a name of that shape is passed as the option too.
  std::map<std::string, std::string> all_options = options;
  if (fs::path(api->origin()).filename().string().find("cuda") != std::string::npos &&
      !all_options.count("topology") && std::count(name.begin(), name.end(), 'x') == 2 &&
      name.find_first_not_of("0123456789x") == std::string::npos) {
    all_options["topology"] = name;
  }
  TL_PJRT_ARGS(PJRT_TopologyDescription_Create_Args, c);
  c.topology_name = name.data();
  c.topology_name_size = name.size();
  std::vector<PJRT_NamedValue> named;
  for (const auto& [key, value] : all_options) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = key.data();
    v.name_size = key.size();
    v.type = PJRT_NamedValue_kString;
    v.string_value = value.data();
    v.value_size = value.size();
    named.push_back(v);
  }
  c.create_options = named.data();
  c.num_options = named.size();
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api, TopologyDescription_Create, &c)
                         .WithContext("topology '" + name + "' of " + api->origin()));
  std::unique_ptr<PjrtTopology> t(new PjrtTopology());
  t->api_ = std::move(api);
  t->topology_ = c.topology;
  t->name_ = name;
  TL_PJRT_ARGS(PJRT_TopologyDescription_PlatformName_Args, pn);
  pn.topology = t->topology_;
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*t->api_, TopologyDescription_PlatformName, &pn));
  t->platform_name_.assign(pn.platform_name, pn.platform_name_size);
  TL_PJRT_ARGS(PJRT_TopologyDescription_GetDeviceDescriptions_Args, dd);
  dd.topology = t->topology_;
  if (TL_PJRT_CALL(*t->api_, TopologyDescription_GetDeviceDescriptions, &dd).ok()) {
    t->num_devices_ = static_cast<int64_t>(dd.num_descriptions);
  }
  return t;
}

StatusOr<CompiledMemoryStats> PjrtTopology::Compile(const std::string& mlir,
                                                    const CompileOptions& options) const {
  TL_ASSIGN_OR_RETURN(std::string serialized, options.Serialize());
  PJRT_Program program = MlirProgram(mlir);
  TL_PJRT_ARGS(PJRT_Compile_Args, c);
  c.topology = topology_;
  c.program = &program;
  c.compile_options = serialized.data();
  c.compile_options_size = serialized.size();
  TL_RETURN_IF_ERROR(TL_PJRT_CALL(*api_, Compile, &c));
  TL_PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args, m);
  // The whole struct, as PjrtExecutable::MemoryStats asks: libtpu 0.0.51 (API 0.116) refuses
  // the 0.60 size ("expected 112, got 104").
  m.struct_size = sizeof(m);
  m.executable = c.executable;
  Status status = TL_PJRT_CALL(*api_, Executable_GetCompiledMemoryStats, &m);
  CompiledMemoryStats stats;
  stats.argument_bytes = m.argument_size_in_bytes;
  stats.output_bytes = m.output_size_in_bytes;
  stats.alias_bytes = m.alias_size_in_bytes;
  stats.temp_bytes = m.temp_size_in_bytes;
  stats.generated_code_bytes = m.generated_code_size_in_bytes;
  if (m.peak_memory_in_bytes > 0) stats.peak_bytes = m.peak_memory_in_bytes;
  TL_PJRT_ARGS(PJRT_Executable_Destroy_Args, d);
  d.executable = c.executable;
  Status destroyed = TL_PJRT_CALL(*api_, Executable_Destroy, &d);
  TL_RETURN_IF_ERROR(status);
  TL_RETURN_IF_ERROR(destroyed);
  return stats;
}

std::string CountCollectives(const std::string& mlir) {
  static const char* kOps[] = {"all_reduce", "all_gather",         "reduce_scatter",
                               "all_to_all", "collective_permute", "collective_broadcast"};
  std::string out;
  for (const char* op : kOps) {
    // Printed as "stablehlo.all_reduce" (pretty) or "\"stablehlo.all_reduce\"" (generic).
    const std::string needle = std::string("stablehlo.") + op;
    int n = 0;
    for (size_t at = mlir.find(needle); at != std::string::npos;
         at = mlir.find(needle, at + needle.size())) {
      const size_t end = at + needle.size();
      // "stablehlo.all_reduce_x" would be another op.
      if (end < mlir.size() &&
          (std::isalnum(static_cast<unsigned char>(mlir[end])) || mlir[end] == '_')) {
        continue;
      }
      ++n;
    }
    if (n > 0) out += (out.empty() ? "" : ",") + std::string(op) + ":" + std::to_string(n);
  }
  return out.empty() ? "-" : out;
}

int AotReport::refused() const {
  int n = 0;
  for (const AotRow& r : rows) n += r.ok ? 0 : 1;
  return n;
}

StatusOr<AotReport> RunAot(std::shared_ptr<PjrtApi> api, const std::string& topology,
                           const std::string& programs_dir, const std::string& out_dir,
                           bool strict_precision, bool tpu_form,
                           const std::map<std::string, std::string>& topology_options) {
  TL_ASSIGN_OR_RETURN(std::vector<RecordedProgram> programs, ReadProgramIndex(programs_dir));
  TL_ASSIGN_OR_RETURN(auto topo, PjrtTopology::Create(std::move(api), topology, topology_options));
  AotReport report;
  report.platform = topo->platform_name();
  std::error_code ec;
  fs::create_directories(fs::path(out_dir) / "errors", ec);
  if (ec) return InvalidArgument("aot output folder " + out_dir + ": " + ec.message());
  for (const RecordedProgram& p : programs) {
    AotRow row;
    row.program = p.file;
    row.module = p.module;
    row.num_replicas = p.num_replicas;
    row.num_partitions = p.num_partitions;
    std::ifstream in(fs::path(programs_dir) / p.file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      row.error = "cannot read " + (fs::path(programs_dir) / p.file).string();
      report.rows.push_back(row);
      continue;
    }
    std::string mlir = text.str();
    if (tpu_form) {
      // Recorded from another platform's session: printed again as a TPU session sends it.
      auto module = ParseModule(mlir, p.file);
      const Function* entry = module.ok() ? (*module)->Entry() : nullptr;
      StatusOr<std::string> printed =
          !module.ok() ? StatusOr<std::string>(module.status())
          : entry == nullptr
              ? StatusOr<std::string>(InvalidArgument(p.file + " has no entry function"))
              : PrintProgramText(**module, *entry, ProgramTextOptions{.f32_dots_highest = true});
      if (!printed.ok()) {
        row.error = "TPU form: " + printed.status().ToString();
        report.rows.push_back(row);
        continue;
      }
      mlir = *printed;
    }
    row.collectives = CountCollectives(mlir);
    // The options the session sent, when recorded; else the index's counts.
    CompileOptions options;
    options.num_replicas = p.num_replicas;
    options.num_partitions = p.num_partitions;
    options.strict_precision = p.strict_precision;
    if (!p.options_file.empty()) {
      std::ifstream oin(fs::path(programs_dir) / p.options_file, std::ios::binary);
      std::stringstream bytes;
      bytes << oin.rdbuf();
      auto parsed = CompileOptions::Parse(bytes.str());
      if (!parsed.ok()) {
        row.error = p.options_file + ": " + parsed.status().message();
        report.rows.push_back(row);
        continue;
      }
      options = *parsed;
    }
    if (strict_precision) options.strict_precision = true;
    // libtpu aborts the process (a CHECK in tpu_topology.cc) on a device id past the topology's
    // devices instead of refusing the compile: refused here, by name, first.
    if (const int64_t n = topo->num_devices(); n > 0) {
      int64_t largest_id = -1;
      for (const auto& replica : options.device_assignment)
        for (int64_t id : replica) largest_id = std::max(largest_id, id);
      if (options.num_replicas * options.num_partitions > n || largest_id >= n) {
        row.error = "PJRT_Compile not called: " + std::to_string(options.num_replicas) +
                    " replica(s) x " + std::to_string(options.num_partitions) + " partition(s)" +
                    (largest_id >= 0 ? " on device ids up to " + std::to_string(largest_id) : "") +
                    " do not fit the topology's " + std::to_string(n) + " device(s)";
        report.rows.push_back(row);
        continue;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    auto stats = topo->Compile(mlir, options);
    row.compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (stats.ok()) {
      row.ok = true;
      row.stats = *stats;
    } else {
      row.error = stats.status().ToString();
    }
    report.rows.push_back(row);
  }
  std::ostringstream tsv;
  tsv << "program\tmodule\treplicas\tpartitions\tcollectives\targument_bytes\toutput_bytes\t"
         "alias_bytes\ttemp_bytes\ttotal_bytes\tstatus\tcompile_s\tpeak_bytes\n";
  for (const AotRow& r : report.rows) {
    tsv << r.program << '\t' << r.module << '\t' << r.num_replicas << '\t' << r.num_partitions
        << '\t' << r.collectives << '\t';
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.2f", r.compile_seconds);
    if (r.ok) {
      tsv << r.stats.argument_bytes << '\t' << r.stats.output_bytes << '\t' << r.stats.alias_bytes
          << '\t' << r.stats.temp_bytes << '\t' << r.total_bytes() << "\tok\t" << seconds << '\t'
          << (r.stats.peak_bytes ? std::to_string(*r.stats.peak_bytes) : "-") << '\n';
    } else {
      const std::string stem = r.program.substr(0, r.program.rfind('.'));
      tsv << "-\t-\t-\t-\t-\trefused (errors/" << stem << ".txt)\t" << seconds << "\t-\n";
      TL_RETURN_IF_ERROR(WriteStringAtomic(fs::path(out_dir) / "errors" / (stem + ".txt"),
                                           "topology " + topology + " (" + report.platform +
                                               ")\nprogram " + r.program + "\n" + r.error + "\n"));
    }
  }
  TL_RETURN_IF_ERROR(WriteStringAtomic(fs::path(out_dir) / "summary.tsv", tsv.str()));
  return report;
}

}  // namespace tlaloc::pjrt
