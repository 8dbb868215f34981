// Options several subcommands share, parsed one way: where programs run (--target), the
// floating-point type a model runs or is stored in (--dtype), the model (-m/--model: a folder or
// ORG/NAME from the Hugging Face cache or the Hub) and the interpreter's threads (-t/--threads).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/generate/engine.h"
#include "tlaloc/ir/element_type.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cli {

// Adds --target with the help text every command shares.
void AddTargetOption(CLI::App* cmd, std::string* target);

// The backend a --target value names; an empty value means $TLALOC_TARGET, else the interpreter.
StatusOr<BackendChoice> BackendChoiceFromFlag(const std::string& target);

// "f32"/"float32", "f16"/"float16" (when allowed), "bf16"/"bfloat16"; empty gives nullopt. The
// error names `flag`, the value and the accepted spellings.
StatusOr<std::optional<ElementType>> ParseDtypeFlag(
    const std::string& text,
    const std::vector<ElementType>& allowed = {ElementType::kF32, ElementType::kBF16},
    const std::string& flag = "--dtype");

// Adds --kv-dtype: the KV cache's type. Parse it with ParseKvDtypeFlag before loading and apply
// it to the loaded engine with ApplyKvDtype.
void AddKvDtypeOption(CLI::App* cmd, std::string* kv_dtype);
StatusOr<std::optional<ElementType>> ParseKvDtypeFlag(const std::string& text);
// Sets the engine's KV cache type (nothing when unset); the error names --kv-dtype and the
// model's type (an f32 model may keep bf16, others only their own type).
Status ApplyKvDtype(std::optional<ElementType> kv_dtype, generate::Engine& engine);

// Adds -m,--model (required; call ->required(false) on the result where another flag can stand
// in for it) and --offline (no download). Resolve the value with ResolveModelFlag before loading.
CLI::Option* AddModelOption(CLI::App* cmd, std::string* model);

// Adds -t,--threads: the interpreter's threads, 0 for one per core; unset leaves the choice to
// $TLALOC_NUM_THREADS, else all cores. Call ApplyThreads with the value before anything runs.
CLI::Option* AddThreadsOption(CLI::App* cmd, std::optional<int>* threads);

// Sizes the interpreter's process-wide thread pool from --threads (nothing when unset). Fails
// (InvalidArgument) for a negative count, and (FailedPrecondition) when the pool already runs.
Status ApplyThreads(std::optional<int> threads);

// OK for a folder. A GGUF file (the "GGUF" magic, or a .gguf name) is refused, saying which
// commands run one (ResolveModelFlag imports it); another file or a missing path says that a
// checkpoint folder was expected. `flag` ("--model") starts the message. InvalidArgument for a
// path of the wrong kind, NotFound for a missing one.
Status CheckModelFolder(const std::string& flag, const std::filesystem::path& path);

// True when `path` is a regular file starting with the GGUF magic or named *.gguf.
bool IsGgufFile(const std::filesystem::path& path);

// A --model value made a checkpoint folder: a local folder as is, ORG/NAME[@REVISION] through
// the Hugging Face cache, downloaded from the Hub when missing unless --offline or
// HF_HUB_OFFLINE (io::ResolveOrDownloadModel), then CheckModelFolder; a GGUF file becomes the
// checkpoint folder imported from it (models::GgufModelFolder, cached). Errors start with
// "--model".
StatusOr<std::filesystem::path> ResolveModelFlag(const std::string& value);

// The exit code for a failed flag check: kExitUsage for a value of the wrong form or kind
// (InvalidArgument, OutOfRange), kExitFailure otherwise (a missing file, a cache without the
// model).
int ExitCodeForFlagError(const Status& status);

}  // namespace tlaloc::cli
