#include "refinterp/refinterp_backend.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tlaloc/pjrt/program_text.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::refinterp {
namespace {

namespace fs = std::filesystem;

// The entry's name in the generated module: the wrapper is the module's `main`.
constexpr const char* kEntry = "tlaloc_entry";

bool IsExecutable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0 && fs::is_regular_file(path);
}

class RefBuffer : public DeviceBuffer {
 public:
  RefBuffer(Literal l, int device) : literal_(std::move(l)), device_(device) {}
  const TensorType& type() const override { return literal_.type(); }
  int device() const override { return device_; }
  bool is_deleted() const override { return deleted_; }
  const Literal& literal() const { return literal_; }
  void MarkDeleted() {
    literal_ = Literal();
    deleted_ = true;
  }

 private:
  Literal literal_;
  int device_;
  bool deleted_ = false;
};

class RefProgram : public CompiledProgram {
 public:
  RefProgram(std::string text, std::vector<Type> args, std::vector<Type> results, ProcessGrid grid,
             std::string entry)
      : text_(std::move(text)),
        args_(std::move(args)),
        results_(std::move(results)),
        grid_(grid),
        entry_(std::move(entry)) {}
  const std::vector<Type>& argument_types() const override { return args_; }
  const std::vector<Type>& result_types() const override { return results_; }
  const std::string& text() const { return text_; }
  const ProcessGrid& grid() const { return grid_; }
  const std::string& entry() const { return entry_; }

 private:
  std::string text_;  // the program's functions, entry renamed kEntry, without the module braces
  std::vector<Type> args_, results_;
  ProcessGrid grid_;
  std::string entry_;
};

std::string TypeList(const std::vector<Type>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + PrintType(types[i]);
  return s + ")";
}

// The body of the printed module (between its outer braces): functions only.
StatusOr<std::string> ModuleBody(const std::string& text) {
  const size_t open = text.find('{');
  const size_t close = text.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return Internal("the printed module has no body braces: " + text.substr(0, 200));
  // A module attribute dictionary would open the first brace: `module @m attributes {...} {`.
  const std::string head = text.substr(0, open);
  if (head.find("attributes") != std::string::npos) {
    const size_t body = text.find('{', text.find('}', open) + 1);
    return text.substr(body + 1, close - body - 1);
  }
  return text.substr(open + 1, close - open - 1);
}

// One element as the tool prints it: `1.500000e+00 : f32`, `7 : i32`, `true`, `0x7FC00000 : f32`.
Status SetElement(Literal& l, int64_t i, std::string token) {
  const size_t colon = token.find(" : ");
  if (colon != std::string::npos) token.resize(colon);
  const char* s = token.c_str();
  char* end = nullptr;
  const ElementType et = l.element_type();
  const bool hex = token.size() > 2 && token[0] == '0' && (token[1] == 'x' || token[1] == 'X');
  switch (et) {
    case ElementType::kPred:
      if (token != "true" && token != "false")
        return InvalidArgument("expected true or false, got '" + token + "'");
      l.span<uint8_t>()[i] = token == "true";
      return OkStatus();
    case ElementType::kF32:
      if (hex) {
        const uint32_t bits = static_cast<uint32_t>(std::strtoull(s, &end, 16));
        std::memcpy(&l.span<float>()[i], &bits, 4);
      } else {
        l.span<float>()[i] = std::strtof(s, &end);
      }
      break;
    case ElementType::kF64:
      if (hex) {
        const uint64_t bits = std::strtoull(s, &end, 16);
        std::memcpy(&l.span<double>()[i], &bits, 8);
      } else {
        l.span<double>()[i] = std::strtod(s, &end);
      }
      break;
    case ElementType::kF16:
    case ElementType::kBF16:
      if (hex) {
        const uint16_t bits = static_cast<uint16_t>(std::strtoull(s, &end, 16));
        std::memcpy(l.data() + 2 * i, &bits, 2);
      } else {
        l.SetFromDouble(i, std::strtod(s, &end));
      }
      break;
    case ElementType::kU64:
      l.span<uint64_t>()[i] = std::strtoull(s, &end, 10);
      break;
    case ElementType::kS64:
      l.span<int64_t>()[i] = std::strtoll(s, &end, 10);
      break;
    default:
      l.SetFromDouble(i, static_cast<double>(std::strtoll(s, &end, 10)));
      break;
  }
  if (end == s || *end != '\0')
    return InvalidArgument("cannot read '" + token + "' as " + PrintType(Type(l.type())));
  return OkStatus();
}

// The dims and element type of `tensor<16x8xf32>`.
StatusOr<std::pair<std::vector<int64_t>, std::string>> ShapeOf(const std::string& type) {
  if (type.rfind("tensor<", 0) != 0 || type.back() != '>')
    return InvalidArgument("not a ranked tensor type: " + type);
  std::stringstream parts(type.substr(7, type.size() - 8));
  std::vector<std::string> items;
  std::string item;
  while (std::getline(parts, item, 'x')) items.push_back(item);
  if (items.empty()) return InvalidArgument("no element type in " + type);
  std::vector<int64_t> dims;
  for (size_t i = 0; i + 1 < items.size(); ++i) dims.push_back(std::stoll(items[i]));
  return std::make_pair(dims, items.back());
}

std::string IntArray(const std::vector<int64_t>& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}

}  // namespace

StatusOr<std::pair<std::string, int>> ExpandTopKText(std::string& text) {
  static const std::regex line(
      R"((%[A-Za-z0-9_]+):2 = chlo\.top_k\((%[A-Za-z0-9_#]+), k = (\d+)\) : )"
      R"((tensor<[^>]*>) -> \((tensor<[^>]*>), (tensor<[^>]*>)\))");
  std::map<std::string, std::string> made;  // "type k" -> function name
  std::string functions, out;
  int replaced = 0;
  auto begin = std::sregex_iterator(text.begin(), text.end(), line);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string in = m[4], values = m[5], indices = m[6];
    const int64_t k = std::stoll(m[3]);
    std::string& name = made[in + " " + std::to_string(k)];
    if (name.empty()) {
      name = "tlaloc_top_k_" + std::to_string(made.size() - 1);
      TL_ASSIGN_OR_RETURN(auto shape, ShapeOf(in));
      auto [dims, et] = shape;
      if (dims.empty()) return InvalidArgument("chlo.top_k of a scalar: " + in);
      const int64_t last_dim = static_cast<int64_t>(dims.size()) - 1;
      std::vector<int64_t> iota_dims = dims;
      std::string iota_type = "tensor<";
      for (int64_t d : dims) iota_type += std::to_string(d) + "x";
      iota_type += "i32>";
      std::vector<int64_t> start(dims.size(), 0), limit = dims, strides(dims.size(), 1);
      limit[last_dim] = k;
      const std::string slice_attrs = "{limit_indices = " + IntArray(limit) +
                                      ", start_indices = " + IntArray(start) +
                                      ", strides = " + IntArray(strides) + "}";
      const std::string scalar = "tensor<" + et + ">";
      functions +=
          "  func.func private @" + name + "(%x: " + in + ") -> (" + values + ", " + indices +
          ") {\n" + "    %i = \"stablehlo.iota\"() {iota_dimension = " + std::to_string(last_dim) +
          " : i64} : () -> " + iota_type + "\n" + "    %s:2 = \"stablehlo.sort\"(%x, %i) ({\n" +
          "    ^bb0(%a: " + scalar + ", %b: " + scalar + ", %c: tensor<i32>, %d: tensor<i32>):\n" +
          "      %g = \"stablehlo.compare\"(%a, %b) {comparison_direction = "
          "#stablehlo<comparison_direction GT>, compare_type = "
          "#stablehlo<comparison_type TOTALORDER>} : (" +
          scalar + ", " + scalar + ") -> tensor<i1>\n" +
          "      \"stablehlo.return\"(%g) : (tensor<i1>) -> ()\n" +
          "    }) {dimension = " + std::to_string(last_dim) + " : i64, is_stable = true} : (" + in +
          ", " + iota_type + ") -> (" + in + ", " + iota_type + ")\n" +
          "    %v = \"stablehlo.slice\"(%s#0) " + slice_attrs + " : (" + in + ") -> " + values +
          "\n" + "    %j = \"stablehlo.slice\"(%s#1) " + slice_attrs + " : (" + iota_type +
          ") -> " + indices + "\n" + "    \"func.return\"(%v, %j) : (" + values + ", " + indices +
          ") -> ()\n  }\n";
    }
    out += text.substr(last, m.position(0) - last);
    out += std::string(m[1]) + ":2 = \"func.call\"(" + std::string(m[2]) + ") {callee = @" + name +
           "} : (" + in + ") -> (" + values + ", " + indices + ")";
    last = m.position(0) + m.length(0);
    ++replaced;
  }
  out += text.substr(last);
  text = std::move(out);
  return std::make_pair(functions, replaced);
}

std::string FindStablehloTranslate() {
  if (const char* env = std::getenv("TLALOC_STABLEHLO_TRANSLATE"); env && *env)
    return IsExecutable(env) ? std::string(env) : std::string();
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/stablehlo-translate";
      if (IsExecutable(candidate)) return candidate;
    }
  }
  return "";
}

StatusOr<std::vector<Literal>> ParseInterpreterOutput(const std::string& out,
                                                      const std::vector<Type>& types) {
  std::vector<Literal> results;
  size_t pos = 0;
  for (size_t r = 0; r < types.size(); ++r) {
    if (!types[r].is_tensor()) return Unimplemented("a token result cannot be read back");
    const size_t start = out.find("tensor<", pos);
    if (start == std::string::npos)
      return InvalidArgument("the interpreter printed " + std::to_string(r) + " result(s), " +
                             std::to_string(types.size()) + " expected");
    const size_t open = out.find('{', start);
    const size_t close = out.find('}', open);
    if (open == std::string::npos || close == std::string::npos)
      return InvalidArgument("result " + std::to_string(r) + " is not `tensor<...> {...}`");
    const std::string printed_type = out.substr(start, open - start);
    const std::string want_type = PrintType(types[r]);
    if (printed_type.find(want_type) != 0)
      return InvalidArgument("result " + std::to_string(r) + " printed as " + printed_type +
                             ", expected " + want_type);
    Literal l(types[r].tensor);
    std::string body = out.substr(open + 1, close - open - 1);
    for (char& c : body)
      if (c == '[' || c == ']' || c == '\n') c = ' ';
    std::stringstream items(body);
    std::string item;
    int64_t i = 0;
    while (std::getline(items, item, ',')) {
      const size_t a = item.find_first_not_of(' ');
      if (a == std::string::npos) continue;
      const size_t b = item.find_last_not_of(' ');
      if (i >= l.num_elements())
        return InvalidArgument("result " + std::to_string(r) + " has more elements than " +
                               want_type);
      TL_RETURN_IF_ERROR(SetElement(l, i++, item.substr(a, b - a + 1)));
    }
    if (i != l.num_elements())
      return InvalidArgument("result " + std::to_string(r) + " has " + std::to_string(i) +
                             " elements, " + want_type + " has " +
                             std::to_string(l.num_elements()));
    results.push_back(std::move(l));
    pos = close + 1;
  }
  return results;
}

RefInterpBackend::RefInterpBackend(RefInterpOptions options) : options_(std::move(options)) {
  if (options_.work_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "tlaloc_refinterp_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) {
      dir_ = tmpl;
      own_dir_ = true;
    }
  } else {
    dir_ = options_.work_dir;
    std::error_code ec;
    fs::create_directories(dir_, ec);
  }
}

RefInterpBackend::~RefInterpBackend() {
  if (own_dir_ && !std::getenv("TLALOC_REFINTERP_KEEP")) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::vector<DeviceInfo> RefInterpBackend::devices() const {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < options_.num_devices; ++i) out.push_back(DeviceInfo{i, "reference", 0});
  return out;
}

StatusOr<std::unique_ptr<CompiledProgram>> RefInterpBackend::Compile(
    std::shared_ptr<const Module> module, const std::string& entry) {
  return CompileForDevices(std::move(module), ProcessGrid{}, entry);
}

StatusOr<std::unique_ptr<CompiledProgram>> RefInterpBackend::CompileForDevices(
    std::shared_ptr<const Module> module, const ProcessGrid& grid, const std::string& entry) {
  if (grid.num_processes() > options_.num_devices)
    return InvalidArgument("a grid of " + std::to_string(grid.num_processes()) +
                           " processes does not fit " + std::to_string(options_.num_devices) +
                           " reference devices");
  const Function* fn = entry.empty() ? module->Entry() : module->Find(entry);
  if (fn == nullptr) return NotFound("no entry function '" + entry + "' in the module");
  pjrt::ProgramTextOptions o;
  o.expand_ragged_dot = options_.expand_ragged_dot;
  TL_ASSIGN_OR_RETURN(std::string text, pjrt::PrintProgramText(*module, *fn, o));
  // PrintProgramText names the entry main (XLA's rule); the wrapper needs that name.
  text = std::regex_replace(text, std::regex("@main([^A-Za-z0-9_$.])"),
                            std::string("@") + kEntry + "$1");
  TL_ASSIGN_OR_RETURN(std::string body, ModuleBody(text));
  if (options_.unique_channels) {
    static const std::regex handle(R"(channel_handle<handle = \d+,)");
    std::string out;
    int next = 1;
    size_t last = 0;
    for (auto it = std::sregex_iterator(body.begin(), body.end(), handle);
         it != std::sregex_iterator(); ++it) {
      out += body.substr(last, it->position(0) - last);
      out += "channel_handle<handle = " + std::to_string(next++) + ",";
      last = it->position(0) + it->length(0);
    }
    body = out + body.substr(last);
  }
  if (options_.expand_top_k) {
    TL_ASSIGN_OR_RETURN(auto expanded, ExpandTopKText(body));
    body += expanded.first;
  }
  return std::unique_ptr<CompiledProgram>(
      new RefProgram(std::move(body), fn->argument_types(), fn->result_types(), grid, fn->name()));
}

StatusOr<std::unique_ptr<DeviceBuffer>> RefInterpBackend::ToDevice(const Literal& literal,
                                                                   int device) {
  if (device < 0 || device >= options_.num_devices)
    return InvalidArgument("reference backend has " + std::to_string(options_.num_devices) +
                           " device(s); got device " + std::to_string(device));
  return std::unique_ptr<DeviceBuffer>(new RefBuffer(literal.Clone(), device));
}

StatusOr<Literal> RefInterpBackend::ToHost(const DeviceBuffer& buffer) {
  if (buffer.is_deleted()) return FailedPrecondition("buffer was donated or deleted");
  return static_cast<const RefBuffer&>(buffer).literal().Clone();
}

StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> RefInterpBackend::Execute(
    CompiledProgram& program, const std::vector<ExecuteArg>& args) {
  TL_ASSIGN_OR_RETURN(auto outs, ExecuteOnDevices(program, {args}));
  return std::move(outs[0]);
}

StatusOr<std::vector<std::vector<std::unique_ptr<DeviceBuffer>>>>
RefInterpBackend::ExecuteOnDevices(CompiledProgram& program,
                                   const std::vector<std::vector<ExecuteArg>>& args) {
  auto& p = static_cast<RefProgram&>(program);
  const ProcessGrid& grid = p.grid();
  const int n = static_cast<int>(grid.num_processes());
  if (static_cast<int>(args.size()) != n)
    return InvalidArgument("the program was compiled for " + std::to_string(n) +
                           " device(s), got " + std::to_string(args.size()) + " argument list(s)");
  // main(): every argument a constant, then the call (one device) or run_parallel (several).
  std::string main = "  func.func @main() -> ";
  std::vector<Type> all_results;
  for (int d = 0; d < n; ++d)
    all_results.insert(all_results.end(), p.result_types().begin(), p.result_types().end());
  main += TypeList(all_results) + " {\n";
  std::vector<Type> all_args;
  std::string operands;
  int k = 0;
  for (int d = 0; d < n; ++d) {
    if (args[d].size() != p.argument_types().size())
      return InvalidArgument("device " + std::to_string(d) + " got " +
                             std::to_string(args[d].size()) + " arguments, the program takes " +
                             std::to_string(p.argument_types().size()));
    for (size_t i = 0; i < args[d].size(); ++i) {
      const auto* b = static_cast<const RefBuffer*>(args[d][i].buffer);
      if (b == nullptr || b->is_deleted())
        return InvalidArgument("argument " + std::to_string(i) + " of device " + std::to_string(d) +
                               " is null, donated or deleted");
      const std::string t = PrintType(Type(b->type()));
      main += "    %a" + std::to_string(k) +
              " = \"stablehlo.constant\"() {value = " + PrintDenseElements(b->literal()) +
              "} : () -> " + t + "\n";
      operands += (k ? ", %a" : "%a") + std::to_string(k);
      all_args.push_back(Type(b->type()));
      ++k;
    }
  }
  const size_t nr = all_results.size();
  const std::string results = nr == 1 ? "%r" : "%r:" + std::to_string(nr);
  if (n == 1) {
    main += "    " + results + " = \"func.call\"(" + operands + ") {callee = @" + kEntry +
            "} : " + TypeList(all_args) + " -> " + TypeList(all_results) + "\n";
  } else {
    std::string programs = "[";
    for (int64_t r = 0; r < grid.num_replicas; ++r) {
      programs += r ? ", [" : "[";
      for (int64_t q = 0; q < grid.num_partitions; ++q)
        programs += std::string(q ? ", @" : "@") + kEntry;
      programs += "]";
    }
    main += "    " + results + " = \"interpreter.run_parallel\"(" + operands +
            ") {programs = " + programs + "]} : " + TypeList(all_args) + " -> " +
            TypeList(all_results) + "\n";
  }
  std::string ret;
  for (size_t i = 0; i < nr; ++i)
    ret += (i ? ", " : "") + (nr == 1 ? std::string("%r") : "%r#" + std::to_string(i));
  main += "    \"func.return\"(" + ret + ") : " + TypeList(all_results) + " -> ()\n  }\n";

  const std::string text = "module {\n" + p.text() + "\n" + main + "}\n";
  TL_ASSIGN_OR_RETURN(std::vector<Literal> outs, RunText(text, all_results, p.entry(), n));

  for (const auto& list : args)
    for (const ExecuteArg& a : list)
      if (a.donate) static_cast<RefBuffer*>(a.buffer)->MarkDeleted();
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> result(n);
  const size_t per = p.result_types().size();
  for (int d = 0; d < n; ++d)
    for (size_t i = 0; i < per; ++i)
      result[d].push_back(std::make_unique<RefBuffer>(std::move(outs[d * per + i]), d));
  return result;
}

StatusOr<std::vector<Literal>> RefInterpBackend::RunText(const std::string& text,
                                                         const std::vector<Type>& results,
                                                         const std::string& entry, int devices) {
  if (dir_.empty()) return Internal("no folder for the reference interpreter's modules");
  if (!IsExecutable(options_.translate))
    return NotFound("stablehlo-translate '" + options_.translate + "' is not an executable");
  const std::string stem = dir_ + "/run" + std::to_string(counter_++);
  {
    std::ofstream f(stem + ".mlir");
    f << text;
    if (!f) return Internal("cannot write " + stem + ".mlir");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cmd = "'" + options_.translate + "' --interpret '" + stem + ".mlir' > '" +
                          stem + ".out' 2> '" + stem + ".err'";
  const int rc = std::system(cmd.c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  runs_.push_back({entry, devices, seconds, text.size()});
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  if (rc != 0) {
    std::string err = slurp(stem + ".err");
    if (err.size() > 4000) err = err.substr(0, 4000) + "...";
    return Internal("stablehlo-translate --interpret failed on " + stem + ".mlir (entry " + entry +
                    ", exit " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) + "): " + err);
  }
  return ParseInterpreterOutput(slurp(stem + ".out"), results);
}

}  // namespace tlaloc::refinterp
