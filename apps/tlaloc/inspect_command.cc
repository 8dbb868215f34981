// `tlaloc inspect MODEL [--json]`: architecture, config summary, parameter count, tensors by
// dtype, and the tensors the architecture expects but the checkpoint lacks (or has with another
// shape), and the other way round. MODEL is a folder, one .safetensors file, ORG/NAME from the
// Hugging Face cache, or a GGUF file (summarised: header, architecture, metadata, tensors).
// Exit status: 0 when the checkpoint fits its config, 1 when it does not or cannot be read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/io/hf_cache.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/inspect.h"

namespace tlaloc::cli {

namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  size_t max_listed = 20;
};

int Fail(const std::string& message, int code = kExitFailure) {
  std::fprintf(stderr, "tlaloc inspect: %s\n", message.c_str());
  return code;
}

// A read-only mapping of a whole file: GGUF files are gigabytes, and the summary reads only the
// header and the tensor records.
class MappedFile {
 public:
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFound("cannot open " + path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size == 0) {
      ::close(fd);
      return InvalidArgument(path + " is empty or cannot be read");
    }
    void* data = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data == MAP_FAILED) return Internal("cannot map " + path);
    return std::unique_ptr<MappedFile>(new MappedFile(data, static_cast<size_t>(st.st_size)));
  }
  ~MappedFile() { ::munmap(data_, size_); }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

// A metadata value in a line: strings cut short, arrays as their length and first items.
std::string ValueText(const io::GgufValue& v) {
  auto cut = [](const std::string& s) {
    std::string one_line;
    for (char c : s) one_line += c == '\n' ? ' ' : c;
    return one_line.size() > 60 ? "\"" + one_line.substr(0, 57) + "...\"" : "\"" + one_line + "\"";
  };
  if (!v.is_array()) {
    switch (v.type) {
      case io::GgufType::kString:
        return cut(v.text);
      case io::GgufType::kFloat32:
      case io::GgufType::kFloat64:
        return std::to_string(v.real);
      case io::GgufType::kBool:
        return v.integer ? "true" : "false";
      default:
        return std::to_string(v.integer);
    }
  }
  std::string text = "[" + std::to_string(v.array_size()) + " " +
                     std::string(io::GgufTypeName(v.array_type)) + "]";
  const size_t n = std::min<size_t>(v.array_size(), 3);
  std::string items;
  for (size_t i = 0; i < n; ++i) {
    if (!v.texts.empty()) items += (i ? ", " : "") + cut(v.texts[i]);
    if (!v.integers.empty()) items += (i ? ", " : "") + std::to_string(v.integers[i]);
    if (!v.reals.empty()) items += (i ? ", " : "") + std::to_string(v.reals[i]);
  }
  return items.empty() ? text : text + " " + items + (v.array_size() > n ? ", ..." : "");
}

// A metadata value as JSON: scalars as themselves, short arrays whole, long ones (a tokenizer's
// vocabulary) as their type and length.
nlohmann::json ValueJson(const io::GgufValue& v) {
  if (v.is_array()) {
    if (v.array_size() > 16)
      return {{"array_type", io::GgufTypeName(v.array_type)}, {"size", v.array_size()}};
    if (!v.texts.empty()) return v.texts;
    if (!v.reals.empty()) return v.reals;
    return v.integers;
  }
  switch (v.type) {
    case io::GgufType::kString:
      return v.text;
    case io::GgufType::kFloat32:
    case io::GgufType::kFloat64:
      return v.real;
    case io::GgufType::kBool:
      return v.integer != 0;
    default:
      return v.integer;
  }
}

int InspectGguf(const InspectOptions& options) {
  std::string archs;
  for (std::string_view a : models::GgufArchitectures())
    archs += (archs.empty() ? "" : " / ") + std::string(a);
  const std::string note = "generate, chat, serve and bench run " + archs +
                           " GGUF files with -m (imported into a checkpoint folder on first use)";
  auto file = MappedFile::Open(options.path);
  if (!file.ok()) return Fail(file.status().message());
  auto contents = io::ParseGguf((*file)->bytes(), options.path);
  if (!contents.ok())
    return Fail(options.path + " is a GGUF file that cannot be summarised (" +
                contents.status().message() + "). " + note);
  const io::GgufValue* arch = contents->Find("general.architecture");
  const std::string architecture =
      arch != nullptr && arch->type == io::GgufType::kString ? arch->text : "";
  std::map<std::string, std::pair<int64_t, uint64_t>> by_type;  // tensors, bytes
  uint64_t tensor_bytes = 0;
  for (const auto& t : contents->tensors) {
    auto& entry = by_type[std::string(io::GgmlTypeName(t.type))];
    ++entry.first;
    entry.second += t.byte_size;
    tensor_bytes += t.byte_size;
  }
  if (options.json) {
    nlohmann::json j;
    j["path"] = options.path;
    j["format"] = "gguf";
    j["version"] = contents->version;
    j["architecture"] = architecture;
    j["tensors"] = contents->tensors.size();
    j["tensor_bytes"] = tensor_bytes;
    for (const auto& [type, count] : by_type)
      j["by_type"][type] = {{"tensors", count.first}, {"bytes", count.second}};
    for (const auto& kv : contents->metadata) j["metadata"][kv.key] = ValueJson(kv.value);
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s: GGUF v%u, architecture %s\n", options.path.c_str(), contents->version,
              architecture.empty() ? "(not given)" : architecture.c_str());
  std::printf("tensors      %zu (%.2f GB)\n", contents->tensors.size(), tensor_bytes / 1e9);
  for (const auto& [type, count] : by_type)
    std::printf("  %-10s %lld tensors, %.2f GB\n", type.c_str(),
                static_cast<long long>(count.first), count.second / 1e9);
  std::printf("metadata     %zu keys\n", contents->metadata.size());
  size_t listed = 0;
  for (const auto& kv : contents->metadata) {
    if (listed++ == options.max_listed) {
      std::printf("  ... (%zu more; --max-listed or --json for all)\n",
                  contents->metadata.size() - options.max_listed);
      break;
    }
    std::printf("  %s = %s\n", kv.key.c_str(), ValueText(kv.value).c_str());
  }
  std::printf("%s.\n", note.c_str());
  return kExitOk;
}

int RunInspect(InspectOptions options) {
  auto resolved = io::ResolveModelReference(options.path);
  if (!resolved.ok()) return Fail(resolved.status().message());
  options.path = resolved->string();
  if (IsGgufFile(*resolved)) return InspectGguf(options);
  // Besides folders, the library reads a lone .safetensors file or a sharded checkpoint's index.
  const auto ext = resolved->extension();
  if (ext != ".safetensors" && ext != ".json") {
    if (Status s = CheckModelFolder("inspect", *resolved); !s.ok())
      return Fail(s.message(), ExitCodeForFlagError(s));
  }
  auto report = models::InspectCheckpoint(options.path);
  if (!report.ok()) return Fail(report.status().ToString());
  std::string text = options.json ? models::FormatInspectJson(*report)
                                  : models::FormatInspectText(*report, options.max_listed);
  std::fwrite(text.data(), 1, text.size(), stdout);
  // A checkpoint that does not fit its config failed the check: 1, not a usage error.
  return report->matches() ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect",
      "Summarise a Hugging Face checkpoint folder and check it against its config (or "
      "summarise a GGUF file)");
  cmd->add_option("MODEL", options->path,
                  "Checkpoint folder (config.json, *.safetensors), one .safetensors file, "
                  "ORG/NAME[@REVISION] from the Hugging Face cache, or a .gguf file")
      ->required();
  cmd->add_flag("--json", options->json, "Print a machine-readable JSON report");
  cmd->add_option("--max-listed", options->max_listed,
                  "How many missing/unexpected names (or GGUF keys) to list in the text report")
      ->check(CLI::Range(1, 1000000));
  cmd->callback([options] { SetExitCode(RunInspect(*options)); });
}

}  // namespace tlaloc::cli
