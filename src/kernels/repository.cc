// metadata.json parsing, file digests and their verification.
#include "tlaloc/kernels/repository.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc::kernels {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kMetadataFile = "metadata.json";

std::string Digest(std::string_view bytes) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), md);
  return std::string(reinterpret_cast<const char*>(md), SHA256_DIGEST_LENGTH);
}

// Files of a variant folder relative to it, sorted; metadata.json excluded.
StatusOr<std::vector<std::string>> VariantFiles(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::string rel = it->path().lexically_relative(dir).generic_string();
    // A link could make a digest cover a file outside the repository.
    if (it->is_symlink())
      return DataLoss("kernel variant folder " + dir.string() + " holds a symbolic link (" + rel +
                      "); variants must hold plain files");
    if (!it->is_regular_file()) continue;
    if (rel != kMetadataFile) out.push_back(rel);
  }
  if (ec)
    return NotFound("cannot list kernel variant folder " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> StringList(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& e : j[key])
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string d = Digest(bytes), out;
  for (unsigned char c : d) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string Sha256Base64(std::string_view bytes) {
  std::string d = Digest(bytes);
  unsigned char out[64];
  int n = EVP_EncodeBlock(out, reinterpret_cast<const unsigned char*>(d.data()),
                          static_cast<int>(d.size()));
  return std::string(reinterpret_cast<char*>(out), n);
}

StatusOr<std::string> ReadFileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<std::vector<std::string>> ListVariants(const fs::path& repo_root) {
  fs::path build = repo_root / "build";
  std::error_code ec;
  if (!fs::is_directory(build, ec))
    return NotFound("kernel repository " + repo_root.string() +
                    " has no build/ folder (a repository holds build/<variant>/ folders; the "
                    "checkout's examples/kernels/ are sources, assembled into "
                    "BUILD_DIR/examples/kernels/ by `cmake --build BUILD_DIR --target "
                    "kernel_examples`)");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(build, ec))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<VariantMetadata> ReadMetadata(const fs::path& variant_dir) {
  fs::path file = variant_dir / kMetadataFile;
  TL_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(file));
  return ParseMetadata(text, variant_dir.filename().string(), file.string());
}

StatusOr<VariantMetadata> ParseMetadata(std::string_view text, std::string_view variant,
                                        std::string_view source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(source) + ": " + why);
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  VariantMetadata m;
  m.variant = std::string(variant);
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  m.name = str("name"), m.id = str("id"), m.license = str("license");
  m.module = str("module"), m.library = str("library");
  if (m.name.empty()) return bad("missing \"name\"");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return bad("\"version\" must be an integer");
  m.version = j["version"].get<int>();
  if (!j.contains("backend") || !j["backend"].is_object() || !j["backend"].contains("type") ||
      !j["backend"]["type"].is_string())
    return bad("missing \"backend\": {\"type\": ...}");
  auto backend = ParseBackend(j["backend"]["type"].get<std::string>());
  if (!backend.ok()) return bad(backend.status().message());
  m.backend = *backend;
  m.archs = StringList(j["backend"], "archs");
  if (j.contains("kernel-depends")) {
    if (!j["kernel-depends"].is_array()) return bad("\"kernel-depends\" must be a list");
    for (const auto& d : j["kernel-depends"]) {
      KernelDependency dep;
      if (!d.is_object() || !d.contains("repo-id") || !d["repo-id"].is_string())
        return bad("each kernel dependency needs a \"repo-id\"");
      dep.repo_id = d["repo-id"].get<std::string>();
      if (d.contains("version") && d["version"].is_number_integer())
        dep.version = d["version"].get<int>();
      if (d.contains("revision") && d["revision"].is_string())
        dep.revision = d["revision"].get<std::string>();
      m.depends.push_back(dep);
    }
  }
  if (!j.contains("layers") || !j["layers"].is_object() || j["layers"].empty())
    return bad("\"layers\" must name at least one layer");
  for (const auto& [name, l] : j["layers"].items()) {
    if (!l.is_object()) return bad("layer " + name + " must be an object");
    LayerSpec s;
    s.name = name;
    s.operands = StringList(l, "operands");
    s.results = StringList(l, "results");
    s.attributes = StringList(l, "attributes");
    s.dtypes = StringList(l, "dtypes");
    if (l.contains("has-backward")) {
      if (!l["has-backward"].is_boolean())
        return bad("layer " + name + ": \"has-backward\" must be true or false");
      s.has_backward = l["has-backward"].get<bool>();
    }
    for (auto [key, field] : {std::pair{"symbol", &s.symbol}, std::pair{"function", &s.function},
                              std::pair{"payload", &s.payload}}) {
      if (!l.contains(key)) continue;
      if (!l[key].is_string()) return bad("layer " + name + ": \"" + key + "\" must be a string");
      *field = l[key].get<std::string>();
    }
    if (l.contains("payloads")) {
      if (!l["payloads"].is_array()) return bad("layer " + name + ": \"payloads\" must be a list");
      for (const auto& p : l["payloads"]) {
        if (!p.is_object() || !p.contains("payload") || !p["payload"].is_string())
          return bad("layer " + name + ": each of \"payloads\" needs a \"payload\" file");
        TpuPayload t;
        t.file = p["payload"].get<std::string>();
        t.operand_types = StringList(p, "operand-types");
        t.result_types = StringList(p, "result-types");
        t.kernel_operand_types = StringList(p, "kernel-operand-types");
        t.kernel_result_types = StringList(p, "kernel-result-types");
        if (t.kernel_operand_types.empty()) t.kernel_operand_types = t.operand_types;
        if (t.kernel_result_types.empty()) t.kernel_result_types = t.result_types;
        if (p.contains("adapter")) {
          if (!p["adapter"].is_string())
            return bad("layer " + name + ": payload " + t.file + ": \"adapter\" must be a name");
          t.adapter = p["adapter"].get<std::string>();
        }
        // An adapter maps the operands onto the kernel's own (kernelize checks them by name).
        if (t.operand_types.size() != s.operands.size() ||
            t.result_types.size() != s.results.size() ||
            (t.adapter.empty() && (t.kernel_operand_types.size() != t.operand_types.size() ||
                                   t.kernel_result_types.size() != t.result_types.size())))
          return bad("layer " + name + ": payload " + t.file +
                     " needs one operand type per operand and one result type per result "
                     "(operand-types, result-types; kernel-* likewise when given)");
        if (p.contains("attributes")) {
          if (!p["attributes"].is_object())
            return bad("layer " + name + ": payload " + t.file +
                       ": \"attributes\" must map "
                       "names to numbers");
          for (const auto& [a, v] : p["attributes"].items()) {
            if (!v.is_number())
              return bad("layer " + name + ": payload " + t.file + ": attribute " + a +
                         " must be a number");
            t.attributes[a] = v.get<double>();
          }
        }
        s.payloads.push_back(std::move(t));
      }
    }
    if (s.results.empty()) return bad("layer " + name + " declares no results");
    m.layers[name] = s;
  }
  if (j.contains("digest")) {
    const json& d = j["digest"];
    if (!d.is_object()) return bad("\"digest\" must be an object");
    if (d.contains("algorithm")) {
      if (!d["algorithm"].is_string()) return bad("\"digest\".\"algorithm\" must be a string");
      m.digest_algorithm = d["algorithm"].get<std::string>();
    }
    if (d.contains("files") && d["files"].is_object())
      for (const auto& [path, v] : d["files"].items())
        if (v.is_string()) m.digests[path] = v.get<std::string>();
  }
  return m;
}

Status VerifyVariant(const fs::path& variant_dir, const VariantMetadata& meta) {
  const std::string where = "kernel variant " + variant_dir.string();
  if (meta.digest_algorithm != "sha256")
    return DataLoss(where + ": metadata.json has no sha256 digest (found algorithm '" +
                    meta.digest_algorithm + "'); it cannot be verified");
  TL_ASSIGN_OR_RETURN(std::vector<std::string> files, VariantFiles(variant_dir));
  for (const auto& f : files)
    if (!meta.digests.count(f))
      return DataLoss(where + ": file " + f + " is not listed in metadata.json's digest");
  for (const auto& [path, expected] : meta.digests) {
    if (path.find("..") != std::string::npos || (!path.empty() && path[0] == '/'))
      return DataLoss(where + ": digest path '" + path + "' leaves the variant folder");
    auto bytes = ReadFileBytes(variant_dir / path);
    if (!bytes.ok()) return DataLoss(where + ": listed file " + path + " is missing");
    std::string got = Sha256Base64(*bytes);
    if (got != expected)
      return DataLoss(where + ": file " + path + " has sha256 " + got + " but metadata.json says " +
                      expected + " (tampered or corrupted)");
  }
  std::vector<std::string> needed;
  if (!meta.module.empty()) needed.push_back(meta.module);
  if (!meta.library.empty()) needed.push_back(meta.library);
  for (const auto& [_, l] : meta.layers)
    if (!l.payload.empty()) needed.push_back(l.payload);
  for (const auto& f : needed)
    if (!meta.digests.count(f))
      return DataLoss(where + ": payload " + f + " named in metadata.json is not in the folder");
  return OkStatus();
}

Status SealVariant(const fs::path& variant_dir) {
  fs::path file = variant_dir / kMetadataFile;
  TL_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(file));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(file.string() + ": not JSON");
  TL_ASSIGN_OR_RETURN(std::vector<std::string> files, VariantFiles(variant_dir));
  json digests = json::object();
  for (const auto& f : files) {
    TL_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(variant_dir / f));
    digests[f] = Sha256Base64(bytes);
  }
  j["digest"] = {{"algorithm", "sha256"}, {"files", digests}};
  return WriteStringAtomic(file, j.dump(2) + "\n");
}

StatusOr<std::string> VariantHash(const fs::path& variant_dir) {
  TL_ASSIGN_OR_RETURN(std::vector<std::string> files, VariantFiles(variant_dir));
  files.push_back(std::string(kMetadataFile));
  std::sort(files.begin(), files.end());
  std::string acc;
  for (const auto& f : files) {
    TL_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(variant_dir / f));
    acc += f + '\0' + Sha256Hex(bytes) + '\n';
  }
  return "sha256-" + Sha256Hex(acc);
}

}  // namespace tlaloc::kernels
