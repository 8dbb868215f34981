// `tlaloc generate --mesh model=N` (see generate_mesh.h). Greedy only: the tensor-parallel path
// has no sampling yet, so a positive --temp is refused rather than ignored.
#include "generate_mesh.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/generate/tensor_parallel.h"
#include "tlaloc/interp/multi_device.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::cli {

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

int RunMeshGenerate(const MeshGenerateArgs& a) {
  // Under mpirun every rank runs its share of the mesh's devices; only rank 0 prints, and a
  // failing rank says which it is and ends the job (no rank left waiting at a collective).
  ProcessWorld* world = &SingleProcessWorld();
  auto fail = [&world](const std::string& msg, int code = kExitFailure) {
    if (world->size() > 1) {
      std::fprintf(stderr, "tlaloc generate: rank %d of %d: %s\n", world->rank(), world->size(),
                   msg.c_str());
      std::fflush(stderr);
      world->Abort(code);
    }
    std::fprintf(stderr, "tlaloc generate: %s\n", msg.c_str());
    return code;
  };
  auto current = CurrentWorld();
  if (!current.ok()) return fail(current.status().message());
  world = *current;
  if (a.prompt.empty() && a.chat.empty())
    return fail("--mesh needs --prompt or --chat (no stdin prompt)", kExitUsage);
  auto mesh = Mesh::Parse(a.mesh);
  if (!mesh.ok()) return fail("--mesh: " + mesh.status().message(), kExitUsage);
  if (a.temperature && *a.temperature > 0)
    return fail("--mesh generates greedily; --temp " + std::to_string(*a.temperature) +
                    " asks for sampling (drop --temp or --mesh)",
                kExitUsage);
  auto config = io::LoadModelConfig(a.model_dir + "/config.json");
  if (!config.ok()) return fail(config.status().message());
  auto checkpoint = io::Checkpoint::Open(a.model_dir);
  if (!checkpoint.ok()) return fail(checkpoint.status().message());
  auto weights = models::LoadWeights(*config, *checkpoint, ElementType::kF32);
  if (!weights.ok()) return fail(weights.status().message());
  auto tokenizer = Tokenizer::FromFile(a.model_dir + "/tokenizer.json");
  if (!tokenizer.ok()) return fail(tokenizer.status().message());
  std::string text = a.prompt;
  if (!a.chat.empty()) {
    std::vector<ChatMessage> messages{{"user", a.chat, std::nullopt}};
    auto rendered = RenderQwen3Chat(messages, ChatOptions{});
    if (!rendered.ok()) return fail(rendered.status().message());
    text = *rendered;
  }
  const std::vector<int32_t> prompt = tokenizer->Encode(text);
  const int64_t budget = a.max_new_tokens.value_or(64);
  const int64_t max_len = std::min<int64_t>(config->max_position_embeddings,
                                            static_cast<int64_t>(prompt.size()) + budget);
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return fail(choice.status().message(), kExitUsage);
  // The interpreter, or a CPU-family plugin, gets the mesh's devices unless TLALOC_CPU_DEVICES
  // says otherwise.
  const char* env = std::getenv("TLALOC_CPU_DEVICES");
  std::unique_ptr<Backend> backend;
  if (world->size() > 1) {
    if (!choice->interpreter)
      return fail("--target " + choice->ToString() + " across " + std::to_string(world->size()) +
                      " processes: multi-process runs use the interpreter (--target interp)",
                  kExitUsage);
    auto local = CpuDevicesFromEnvironment();
    if (!local.ok()) return fail(local.status().message(), kExitUsage);
    if (!(env && *env) && mesh->num_devices() % world->size() != 0)
      return fail("--mesh " + a.mesh + " does not split evenly over " +
                      std::to_string(world->size()) + " processes",
                  kExitUsage);
    const int per_rank =
        env && *env ? *local : static_cast<int>(mesh->num_devices() / world->size());
    backend = MakeInterpreterBackend({}, per_rank, *world);
    // Every rank must generate from the same model, mesh and prompt.
    Status same =
        CheckSameOnAllRanks(*world,
                            {{"model config", Digest(Slurp(a.model_dir + "/config.json"))},
                             {"mesh", a.mesh},
                             {"prompt", Digest(text)},
                             {"max new tokens", std::to_string(budget)}},
                            CollectiveTimeout());
    if (!same.ok()) return fail(same.message());
  } else {
    auto made = MakeBackend(*choice, static_cast<int>(mesh->num_devices()));
    if (!made.ok()) return fail("target " + choice->ToString() + ": " + made.status().message());
    backend = std::move(*made);
  }
  auto tp = generate::TensorParallelGreedy::Create(*config, std::move(*weights), *backend, *mesh,
                                                   max_len, tokenizer->vocab_size());
  if (!tp.ok()) return fail("--mesh " + a.mesh + ": " + tp.status().message(), kExitUsage);
  auto ids = (*tp)->Generate(prompt, budget, config->eos_token_ids);
  if (!ids.ok()) return fail(ids.status().message());
  DecodeOptions decode;
  decode.skip_special_tokens = true;
  auto out = tokenizer->Decode(*ids, decode);
  if (!out.ok()) return fail(out.status().message());
  if (world->rank() != 0) return kExitOk;
  std::printf("%s\n", out->c_str());
  std::fprintf(stderr,
               "tlaloc generate: %zu tokens, tensor parallel over mesh %s (%lld devices; the "
               "prefix is recomputed each token)\n",
               ids->size(), a.mesh.c_str(), static_cast<long long>(mesh->num_devices()));
  return kExitOk;
}

}  // namespace tlaloc::cli
