// Model references through the Hugging Face hub cache, offline: `--model Qwen/Qwen3-0.6B` finds
// the snapshot `huggingface-cli download` (or transformers) left on disk. Nothing is downloaded:
// Tlaloc reads files, it does not talk to the network.
#pragma once

#include <filesystem>
#include <string>

#include "tlaloc/support/status.h"

namespace tlaloc::io {

// The hub cache folder, as huggingface_hub chooses it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::filesystem::path HuggingFaceHubCache();

// An existing local path is returned as is (folder or file: the caller checks which it needs).
// Otherwise `org/name` or `org/name@revision` (a branch, tag or commit hash; main when absent)
// is looked up in HuggingFaceHubCache(): models--org--name/refs/<revision> holds a commit hash,
// models--org--name/snapshots/<hash>/ is the folder returned (a revision that is itself a
// snapshot's hash needs no ref). A missing entry is NotFound, naming the paths looked at.
StatusOr<std::filesystem::path> ResolveModelReference(const std::string& ref);

}  // namespace tlaloc::io
