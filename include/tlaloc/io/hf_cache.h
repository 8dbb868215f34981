// Model references through the Hugging Face hub cache, offline: `--model Qwen/Qwen3-0.6B` finds
// the snapshot `huggingface-cli download` (or transformers, or Tlaloc's own download,
// tlaloc/io/hub_download.h) left on disk. Nothing here talks to the network.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "tlaloc/support/status.h"

namespace tlaloc::io {

// The hub cache folder, as huggingface_hub chooses it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::filesystem::path HuggingFaceHubCache();

// `org/name` or `org/name@revision` split into the repository and the revision (main when
// absent); nullopt when `ref` is not of that form (repository ids: letters, digits, '-', '_',
// '.', not starting with '.'; revisions: no empty, '.' or '..' path parts).
struct HubReference {
  std::string repo;
  std::string revision;
};
std::optional<HubReference> ParseHubReference(const std::string& ref);

// An existing local path is returned as is (folder or file: the caller checks which it needs).
// Otherwise `org/name` or `org/name@revision` (a branch, tag or commit hash; main when absent)
// is looked up in HuggingFaceHubCache(): models--org--name/refs/<revision> holds a commit hash,
// models--org--name/snapshots/<hash>/ is the folder returned (a revision that is itself a
// snapshot's hash needs no ref). A missing entry is NotFound, naming the paths looked at.
StatusOr<std::filesystem::path> ResolveModelReference(const std::string& ref);

}  // namespace tlaloc::io
