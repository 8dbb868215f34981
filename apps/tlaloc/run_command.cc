// `tlaloc run FILE.mlir [--input NAME=FILE.npy ...] [--print] [--entry NAME] [--target T]
//  [-t THREADS]`:
// parses and verifies a StableHLO program, runs its entry function on the interpreter (or a
// PJRT plugin), and prints each result, or PASS/FAIL per check for self-checking programs
// (@check.expect_*), and the peak live bytes of the run (a plugin's compiled memory statistics).
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/stablehlo/conformance.h"
#include "tlaloc/stablehlo/npy.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::cli {

namespace {

struct RunArgs {
  std::string file;
  std::vector<std::string> inputs;
  bool print = false;
  std::string entry;
  std::string target;
  int64_t max_elements = 64;
  std::optional<int> threads;
};

// Exit kExitFailure for what failed to load or run, kExitUsage for flags that do not fit.
int Fail(const std::string& message, int code = kExitFailure) {
  std::fprintf(stderr, "tlaloc run: %s\n", message.c_str());
  return code;
}

// "arg0", "%arg0" or "0" -> 0.
std::optional<int> ArgumentIndex(std::string name) {
  if (!name.empty() && name[0] == '%') name = name.substr(1);
  if (name.rfind("arg", 0) == 0) name = name.substr(3);
  if (name.empty() || name.size() > 6) return std::nullopt;
  for (char c : name)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoi(name);
}

void PrintResults(const std::vector<Literal>& results, int64_t max_elements) {
  for (size_t i = 0; i < results.size(); ++i)
    std::printf("result %zu: %s\n", i, results[i].ToString(max_elements).c_str());
}

// Prints each check's outcome; the exit code: 0 when all passed.
int ReportChecks(const std::vector<CheckResult>& checks) {
  int failed = 0;
  for (const auto& c : checks) {
    std::printf("%s @%s%s%s\n", c.passed ? "PASS" : "FAIL", c.target.c_str(), c.passed ? "" : ": ",
                c.message.c_str());
    failed += c.passed ? 0 : 1;
  }
  return failed == 0 ? kExitOk : kExitFailure;
}

// A PJRT plugin compiles the printed module. Self-checks cannot run inside a plugin that does
// not know the check targets (XLA's), so MoveChecksToHost made the checked values extra results
// and the comparisons run here, after the run, for every plugin alike.
int RunOnBackend(const BackendChoice& choice, std::shared_ptr<const Module> module,
                 const Function& fn, std::vector<Literal> call_args, int64_t max_elements,
                 const HostChecks& host_checks) {
  auto backend = MakeBackend(choice);
  if (!backend.ok()) return Fail("target " + choice.ToString() + ": " + backend.status().message());
  if (&fn != module->Entry())
    return Fail("--target " + choice.ToString() + " runs the module's entry function; @" +
                    fn.name() + " is not it",
                kExitUsage);
  auto program = (*backend)->Compile(module, fn.name());
  if (!program.ok()) return Fail((*backend)->name() + ": " + program.status().message());
  auto results = (*backend)->Run(**program, call_args);
  if (!results.ok()) return Fail((*backend)->name() + ": " + results.status().message());
  int exit_code = kExitOk;
  if (!host_checks.checks.empty()) {
    exit_code = ReportChecks(RunHostChecks(host_checks, *results));
  } else {
    PrintResults(*results, max_elements);
  }
  std::printf("target: %s\n", (*backend)->name().c_str());
  if (auto stats = (*backend)->MemoryStats(**program); stats.ok()) {
    std::printf(
        "compiled memory: arguments %lld, outputs %lld, temporaries %lld, aliased %lld bytes\n",
        static_cast<long long>(stats->argument_bytes), static_cast<long long>(stats->output_bytes),
        static_cast<long long>(stats->temp_bytes), static_cast<long long>(stats->alias_bytes));
  }
  return exit_code;
}

int RunProgramFile(const RunArgs& args) {
  auto choice = BackendChoiceFromFlag(args.target);
  if (!choice.ok()) return Fail(choice.status().message(), kExitUsage);
  if (Status s = ApplyThreads(args.threads); !s.ok())
    return Fail(s.message(), ExitCodeForFlagError(s));
  std::ifstream in(args.file, std::ios::binary);
  if (!in) return Fail("cannot open " + args.file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseModule(ss.str(), args.file);
  if (!parsed.ok()) return Fail(parsed.status().message());
  if (args.print) std::printf("%s", PrintModule(**parsed).c_str());
  HostChecks host_checks;
  if (!choice->interpreter) {
    const Function* entry = (*parsed)->Entry();
    if (entry && (args.entry.empty() || args.entry == entry->name())) {
      auto moved = MoveChecksToHost(**parsed, entry->name());
      if (!moved.ok()) return Fail(moved.status().message());
      host_checks = std::move(*moved);
    }
  }
  std::shared_ptr<const Module> module(std::move(*parsed));

  const Function* fn = args.entry.empty() ? module->Entry() : module->Find(args.entry);
  if (!fn)
    return Fail(args.entry.empty() ? "the module has no public function to run"
                                   : "no function @" + args.entry + " in " + args.file,
                args.entry.empty() ? kExitFailure : kExitUsage);
  std::vector<Literal> call_args(fn->num_arguments());
  std::vector<bool> given(fn->num_arguments(), false);
  for (const std::string& spec : args.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return Fail("--input " + spec + ": expected NAME=FILE.npy (NAME: arg0, arg1, ...)",
                  kExitUsage);
    auto idx = ArgumentIndex(spec.substr(0, eq));
    if (!idx || *idx >= fn->num_arguments())
      return Fail("--input " + spec + ": @" + fn->name() + " has no argument '" +
                      spec.substr(0, eq) + "' (it takes " + std::to_string(fn->num_arguments()) +
                      ": arg0..)",
                  kExitUsage);
    auto lit = ReadNpyFile(spec.substr(eq + 1));
    if (!lit.ok()) return Fail("--input " + spec + ": " + lit.status().message());
    const Type& want = fn->entry().argument(*idx).type();
    if (!want.is_tensor() || !(lit->type() == want.tensor))
      return Fail("--input " + spec + ": the file holds " + lit->type().ToString() + ", arg" +
                      std::to_string(*idx) + " is " + want.ToString(),
                  kExitUsage);
    call_args[*idx] = std::move(*lit);
    given[*idx] = true;
  }
  for (int i = 0; i < fn->num_arguments(); ++i)
    if (!given[i])
      return Fail("missing --input arg" + std::to_string(i) + "=FILE.npy (" +
                      fn->entry().argument(i).type().ToString() + ")",
                  kExitUsage);

  if (!choice->interpreter)
    return RunOnBackend(*choice, module, *fn, std::move(call_args), args.max_elements, host_checks);

  auto recorder = std::make_shared<CheckRecorder>();
  InterpreterOptions options;
  AddConformanceChecks(options, recorder);
  auto exe = Executable::Prepare(module, fn->name(), options);
  if (!exe.ok()) return Fail(exe.status().message());
  ExecutionStats stats;
  auto results = (*exe)->Execute(std::move(call_args), &stats);
  if (!results.ok()) return Fail(results.status().message());

  auto checks = recorder->results();
  const int exit_code = checks.empty() ? kExitOk : ReportChecks(checks);
  if (checks.empty()) PrintResults(*results, args.max_elements);
  std::printf("peak live bytes: %lld\n", static_cast<long long>(stats.peak_live_bytes));
  return exit_code;
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Parse, verify and run a StableHLO program (.mlir)");
  cmd->add_option("file", args->file, "StableHLO text file")->required();
  cmd->add_option("--input", args->inputs, "Entry argument from a .npy file: arg0=FILE.npy");
  cmd->add_flag("--print", args->print, "Print the parsed module back as StableHLO");
  cmd->add_option("--entry", args->entry, "Function to run (default: main)");
  AddTargetOption(cmd, &args->target);
  cmd->add_option("--max-elements", args->max_elements, "Elements shown per result")
      ->check(CLI::Range(1, 1000000));
  AddThreadsOption(cmd, &args->threads);
  cmd->callback([args] { SetExitCode(RunProgramFile(*args)); });
}

}  // namespace tlaloc::cli
