"""Writes a tiny random Llama checkpoint with transformers, for Tlaloc's Llama oracle tests.

transformers' own LlamaConfig and LlamaForCausalLM (float32, seeded, weights scaled up so the
logits are of order one and the norms differ from one) saved by save_pretrained as safetensors:
the config.json Tlaloc reads is the one transformers writes. GQA (4 query heads, 2 KV heads).
Also a small byte-level BPE tokenizer.json (the 256 byte tokens, then Llama 3's special
tokens) and a tokenizer_config.json with a Llama 3 chat template, so the folder can be chatted
with and exported to GGUF.

  third_party_py/bin/python llama_checkpoint.py --out DIR [--vocab 512] [--tied]
                                                 [--rope default|llama3] [--seed 0]
"""
import argparse

import json
import os

import tokenizers
import torch
import transformers

SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
           "<|eot_id|>"]
CHAT_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")


def write_tokenizer(out):
    """Byte-level BPE with no merges: ids 0-255 the bytes, 256-260 SPECIAL."""
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": SPECIAL[0], "eos_token": SPECIAL[4], "add_bos_token": True,
                   "chat_template": CHAT_TEMPLATE,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--tied", action="store_true", help="tie the LM head to the embedding")
    p.add_argument("--rope", choices=["default", "llama3"], default="default")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rope = {"rope_type": "default", "rope_theta": 500000.0}
    if args.rope == "llama3":
        # Llama 3.1's scaling, with an original context short enough that the prompt's positions
        # fall in all three bands of the tiny model's frequencies.
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64}
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, tie_word_embeddings=args.tied, rope_parameters=rope,
        bos_token_id=256, eos_token_id=260, pad_token_id=None)
    model = transformers.LlamaForCausalLM(config).to(torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
            else:
                param.normal_(0.0, 0.2)
    model.save_pretrained(args.out, safe_serialization=True)
    write_tokenizer(args.out)


if __name__ == "__main__":
    main()
