// One variant of a kernel repository on disk: `build/<variant>/metadata.json` and its payload.
//
// metadata.json (kebab-case keys, as the kernel hub writes them):
//   name, id, version (int), license, backend {type, archs}, kernel-depends [{repo-id, version |
//   revision}], layers {LayerName: {operands, results, attributes, dtypes, has-backward,
//   symbol | function | payload}}, module (universal: the .mlir file), library (cpu/cuda: the
//   .so), digest {algorithm: "sha256", files: {relative path: base64 digest}} (metadata.json
//   itself excluded).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/kernels/variant.h"
#include "tlaloc/support/status.h"

namespace tlaloc::kernels {

// A tpu payload made for one call-site signature (`payloads` in metadata.json): the Mosaic kernel
// was lowered at fixed shapes, so kernelize claims only call sites of exactly these types and
// attribute values. Its custom call may take other shapes of the same elements (Mosaic wants
// 2-D vectors: an RMSNorm weight [H] enters as [1, H]; an i1 mask enters as i32, as jax passes
// it); kernelize reshapes (and converts) around the call, as jax does around a pallas_call.
struct TpuPayload {
  std::string file;
  std::vector<std::string> operand_types, result_types;                // the call site's
  std::vector<std::string> kernel_operand_types, kernel_result_types;  // the custom call's
  std::map<std::string, double> attributes;                            // values baked in
  // A named mapping from the call site's operands onto the kernel's other ones (and back), for a
  // kernel whose signature is not the layer's (docs/kernels.md: "jax-paged-attention").
  std::string adapter;
};

struct LayerSpec {
  std::string name;
  std::vector<std::string> operands, results, attributes;
  std::vector<std::string> dtypes;  // element types accepted, e.g. "f32", "bf16"
  bool has_backward = false;
  std::string symbol;    // cpu/cuda: exported function / FFI handler
  std::string function;  // universal: function in the module
  std::string payload;   // tpu: file holding the serialized Mosaic kernel, any call site
  std::vector<TpuPayload> payloads;  // tpu: one file per call-site signature
};

struct KernelDependency {
  std::string repo_id;
  std::optional<int> version;
  std::string revision;
};

struct VariantMetadata {
  std::string variant;  // folder name
  std::string name, id, license;
  int version = 0;
  Backend backend = Backend::kUniversal;
  std::vector<std::string> archs;
  std::vector<KernelDependency> depends;
  std::map<std::string, LayerSpec> layers;
  std::string module;   // universal
  std::string library;  // cpu, cuda
  std::string digest_algorithm;
  std::map<std::string, std::string> digests;  // relative path -> base64 sha256
};

// Lowercase hex / base64 of the SHA-256 of a byte string (OpenSSL).
std::string Sha256Hex(std::string_view bytes);
std::string Sha256Base64(std::string_view bytes);
StatusOr<std::string> ReadFileBytes(const std::filesystem::path& path);

// The build/<variant> folder names of a repository checkout, sorted.
StatusOr<std::vector<std::string>> ListVariants(const std::filesystem::path& repo_root);

StatusOr<VariantMetadata> ReadMetadata(const std::filesystem::path& variant_dir);
// Parses metadata.json text of the variant folder `variant`; `source` (the file) starts every
// error message.
StatusOr<VariantMetadata> ParseMetadata(std::string_view text, std::string_view variant,
                                        std::string_view source = "metadata.json");
// Every listed file matches its digest, every file of the folder is listed, and the payload
// files the metadata names exist. Errors name the file and both digests.
Status VerifyVariant(const std::filesystem::path& variant_dir, const VariantMetadata& meta);
// Writes the digest of every file into metadata.json (what a kernel builder does on release).
Status SealVariant(const std::filesystem::path& variant_dir);
// "sha256-<hex>" over the sorted relative paths and their file digests (lockfile hash).
StatusOr<std::string> VariantHash(const std::filesystem::path& variant_dir);

}  // namespace tlaloc::kernels
