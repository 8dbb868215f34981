// Model references fetched from the Hugging Face Hub into its cache, laid out exactly as
// huggingface_hub lays it out, so that either one reads what the other wrote:
//   models--ORG--NAME/blobs/<etag>            the files' contents (an LFS file's etag is its
//                                             sha256, checked after the download)
//   models--ORG--NAME/snapshots/<commit>/FILE relative symlinks to ../../blobs/<etag>
//   models--ORG--NAME/refs/<revision>         the commit a branch or tag named
// The protocol is the Hub's: GET {endpoint}/api/models/{repo}/revision/{rev} gives the commit
// and the file list, HEAD {endpoint}/{repo}/resolve/{commit}/{file} the ETag/X-Linked-Etag and
// X-Repo-Commit headers and the CDN redirect, then a GET (with Range to resume a blob's
// .incomplete file) fetches the bytes. HTTP through libcurl, sha256 through OpenSSL.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::io {

struct HubDownloadOptions {
  // Never touch the network: a reference missing from the cache is an error naming it.
  bool offline = false;
  // Files fetched at once.
  int parallel_files = 4;
  // Extra tries per file after a network failure or a dropped connection; each resumes from
  // the bytes already in blobs/<etag>.incomplete.
  int retries = 3;
  // Progress on stderr: a redrawn bar on a terminal, one line per file otherwise.
  bool progress = true;
};

// $HF_ENDPOINT without a trailing '/', else https://huggingface.co.
std::string HubEndpoint();

// huggingface_hub's order: $HF_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token
// (HF_HOME defaulting to $XDG_CACHE_HOME/huggingface, then ~/.cache/huggingface); blanks and
// newlines trimmed; nullopt when none.
std::optional<std::string> HubToken();

// True when $HF_HUB_OFFLINE (or $TRANSFORMERS_OFFLINE) is 1, ON, YES or TRUE, any case.
bool HubOfflineFromEnv();

// Whether a file of a repository is one a model run reads: top-level config and tokenizer files
// (*.json, *.txt, *.jinja, *.model, *.tiktoken) and *.safetensors. Other weight formats (*.bin,
// *.pt, *.gguf, *.onnx, *.h5, *.msgpack), README, images and sub-folders are skipped.
bool IsModelRunFile(const std::string& filename);

// Downloads what IsModelRunFile selects of `repo` ("org/name") at `revision` (a branch, tag or
// commit) into HuggingFaceHubCache(), reusing blobs already there, and returns the snapshot
// folder. The snapshot's links and refs/<revision> are written only once every file is
// complete, so an interrupted download never leaves a snapshot that looks whole.
StatusOr<std::filesystem::path> DownloadModelSnapshot(const std::string& repo,
                                                      const std::string& revision,
                                                      const HubDownloadOptions& options);

// ResolveModelReference (a local path, or ORG/NAME[@REVISION] already cached), and when the
// cache lacks the reference, DownloadModelSnapshot, unless options.offline or
// HubOfflineFromEnv(): then NotFound naming the reference and how downloads were turned off.
StatusOr<std::filesystem::path> ResolveOrDownloadModel(const std::string& ref,
                                                       const HubDownloadOptions& options);

}  // namespace tlaloc::io
