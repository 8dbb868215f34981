// Qwen3 and Qwen3-MoE as model families: what Tlaloc supports of their configs, their weights,
// and their registry entries.
#include "models/qwen3/qwen3_family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models::qwen3 {

Status CheckSupported(const ModelConfig& c) {
  TL_RETURN_IF_ERROR(io::ValidateModelConfig(c));
  // ValidateModelConfig admits what transformers' Qwen3Config accepts; this is what Tlaloc's
  // layer implements.
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    return InvalidArgument("config hidden_act \"" + c.hidden_act +
                           "\": Tlaloc's Qwen3 expects silu (or its alias swish)");
  if (c.attention_bias)
    return InvalidArgument("config attention_bias true: Tlaloc's Qwen3 has no projection biases");
  if (SlidingWindow(c).use_sliding_window)
    return InvalidArgument(
        "config use_sliding_window true: sliding-window attention is not implemented");
  if (c.rope_scaling && c.rope_scaling->rope_type != "default")
    return InvalidArgument("config rope_scaling type \"" + c.rope_scaling->rope_type +
                           "\": only the default rotary embedding is implemented");
  if (c.quantization) {
    // Every matrix's inputs in whole blocks: the experts' too (the router stays float).
    const int64_t block = c.quantization->group_size;
    bool dense_mlp = false;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) dense_mlp |= !c.IsMoeLayer(l);
    std::vector<std::pair<const char*, int64_t>> widths{
        {"hidden_size", c.hidden_size},
        {"num_attention_heads * head_dim", c.num_attention_heads * c.head_dim}};
    if (dense_mlp) widths.push_back({"intermediate_size", c.intermediate_size});
    if (c.is_moe()) widths.push_back({"moe_intermediate_size", Moe(c).moe_intermediate_size});
    for (const auto& [what, width] : widths)
      if (width % block != 0)
        return InvalidArgument("config quantization_config: " + std::string(what) + " " +
                               std::to_string(width) + " is not a multiple of the int8 block of " +
                               std::to_string(block));
  }
  return OkStatus();
}

const decoder::DecoderKind& Qwen3Decoder() {
  static const decoder::DecoderKind kind{"Qwen3",     "qwen3", CheckSupported,
                                         WeightSpecs, true,    nullptr};
  return kind;
}

StatusOr<ModelProgram> BuildStep(const ModelConfig& c, const StepShape& shape,
                                 nn::LayerTrace* trace, const ParallelHooks* parallel) {
  return decoder::BuildDecoderStep(Qwen3Decoder(), c, shape, trace, parallel);
}

StatusOr<TrainForward> BuildTrainForward(const ModelConfig& c, const WeightTensors& w,
                                         const Tensor& input_ids, const Tensor* positions,
                                         autodiff::Marks* remat, const ParallelHooks* parallel) {
  // transformers' Qwen3MoeForCausalLM adds router_aux_loss_coef times its load-balancing loss
  // when output_router_logits is set; training without it would optimise another objective.
  if (c.is_moe() && Moe(c).num_experts > 0 && Moe(c).output_router_logits)
    return Unimplemented(
        "Qwen3-MoE training forward: config.json sets output_router_logits, which asks for the "
        "router's load-balancing loss (router_aux_loss_coef " +
        std::to_string(Moe(c).router_aux_loss_coef) +
        "); tlaloc does not compute it: set output_router_logits to false to train without it");
  return decoder::BuildDecoderTrainForward(Qwen3Decoder(), c, w, input_ids, positions, remat,
                                           parallel);
}

void Register(std::vector<ModelFamily>& registry) {
  for (bool moe : {false, true}) {
    ModelFamily f;
    // Views of the global kQwen3 / kQwen3Moe's names (f's own copy moves with f).
    const io::ModelArchitecture& arch = moe ? kQwen3Moe : kQwen3;
    f.model_type = arch.model_type;
    f.architecture = arch.class_name;
    f.config = ConfigFamilyOf(moe);
    f.embedding_weight = "model.embed_tokens.weight";
    f.check_supported = CheckSupported;
    f.checkpoint_tensors = ExpectedTensors;
    f.weight_specs = WeightSpecs;
    f.build_step = BuildStep;
    f.train_forward = BuildTrainForward;
    f.document_end_token = "<|endoftext|>";
    f.chat_template_jinja = Qwen3ChatTemplate;
    f.tokenizer_config_json = Qwen3TokenizerConfigJson;
    f.tokenizer_note = "Qwen3's tokenizer_config.json and chat template";
    f.export_gguf = ExportGguf;  // qwen3, or qwen3moe for Qwen3-MoE
    f.gguf_architecture = moe ? "qwen3moe" : "qwen3";
    if (moe) f.gguf_import_config = Qwen3MoeImportConfig;
    // The real Qwen3 tokenizer.json the repository carries (and installs).
    f.tokenizer_search = {"TLALOC_QWEN3_TOKENIZER", "data/qwen3/tokenizer.json",
                          "tlaloc/qwen3-tokenizer.json", "the Qwen3 tokenizer.json"};
    registry.push_back(f);
  }
}

}  // namespace tlaloc::models::qwen3
