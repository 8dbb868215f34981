#!/usr/bin/env python3
"""Writes the small valid seed inputs under fuzz/corpus/<target>/ (run from anywhere).

The seeds are hand-made so they stay tiny and license-free: a fuzzer mutates from valid inputs
much faster than from nothing, and the files double as a quick parse smoke test.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# --- GGUF v3: metadata of several types, then F32/F16/BF16 tensors aligned to 32 bytes.
def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, version=3):
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for key, vtype, payload in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + payload
    data = b""
    for name, ne, gtype, raw in tensors:
        data += b"\0" * (-len(data) % 32)
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", gtype, len(data))
        data += raw
    out += b"\0" * (-len(out) % 32)
    return out + data


STR, U32, F32T, ARR, BOOL = 8, 4, 6, 9, 7
kv_basic = [
    ("general.architecture", STR, gguf_str("qwen3")),
    ("qwen3.block_count", U32, struct.pack("<I", 2)),
    ("qwen3.rope.freq_base", F32T, struct.pack("<f", 10000.0)),
    ("general.flag", BOOL, b"\x01"),
    ("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 2) + gguf_str("a") + gguf_str("b")),
]
write("gguf_fuzz", "metadata_only.gguf", gguf(kv_basic, []))
write("gguf_fuzz", "f32_2x3.gguf",
      gguf(kv_basic[:2], [("w", [3, 2], 0, struct.pack("<6f", *range(6)))]))
write("gguf_fuzz", "mixed_types.gguf", gguf(
    [("general.alignment", U32, struct.pack("<I", 32))],
    [("a", [4], 1, struct.pack("<4e", 1, 2, 3, 4)),
     ("b", [2, 2], 30, b"\x80\x3f\x00\x40\x40\x40\x80\x40"),
     ("empty", [0, 3], 0, b"")]))
write("gguf_fuzz", "v2.gguf", gguf([], [("x", [1], 0, struct.pack("<f", 1.5))], version=2))


# --- safetensors: u64 header length, JSON header, raw data.
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


write("safetensors_fuzz", "one_f32.safetensors",
      safetensors([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))]))
write("safetensors_fuzz", "mixed.safetensors", safetensors(
    [("a", "BF16", [3], b"\x80\x3f\x00\x40\x40\x40"), ("b", "I64", [1], struct.pack("<q", -7)),
     ("c", "U8", [2, 1], b"\x01\x02"), ("e", "F16", [0, 4], b"")],
    metadata={"format": "pt"}))
write("safetensors_fuzz", "empty.safetensors", safetensors([]))

# --- StableHLO text.
write("stablehlo_parser_fuzz", "add.mlir", """\
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
""")
write("stablehlo_parser_fuzz", "module_consts.mlir", """\
module @jit_main attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main() -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<2xf32>
    %c = stablehlo.constant dense<[1.5, -2.0]> : tensor<2xf32>
    %h = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
    %1 = stablehlo.multiply %0, %c : tensor<2xf32>
    %2 = stablehlo.add %1, %h : tensor<2xf32>
    return %2 : tensor<2xf32>
  }
  func.func private @inputs() -> tensor<2xf32> {
    %c = stablehlo.constant dense<1.0> : tensor<2xf32>
    return %c : tensor<2xf32>
  }
}
""")
write("stablehlo_parser_fuzz", "reduce_dot.mlir", """\
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<4xf32> {
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%d init: %z) applies stablehlo.add across dimensions = [0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
""")
write("stablehlo_parser_fuzz", "generic_ops.mlir", """\
func.func @main(%x: tensor<2x3xi32>) -> (tensor<3x2xi32>, tensor<6xi32>) {
  %t = "stablehlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xi32>) -> tensor<3x2xi32>
  %r = stablehlo.reshape %x : (tensor<2x3xi32>) -> tensor<6xi32>
  %i = stablehlo.iota dim = 0 : tensor<6xi32>
  %c = stablehlo.compare LT, %r, %i, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
  %s = stablehlo.select %c, %r, %i : tensor<6xi1>, tensor<6xi32>
  return %t, %s : tensor<3x2xi32>, tensor<6xi32>
}
""")
write("stablehlo_parser_fuzz", "ragged_dot.mlir", """\
func.func @main(%arg0: tensor<4x2xf32>, %arg1: tensor<2x2x3xf32>, %arg2: tensor<2xi32>) -> tensor<4x3xf32> {
  %0 = "chlo.ragged_dot"(%arg0, %arg1, %arg2) <{precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>], ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>}> : (tensor<4x2xf32>, tensor<2x2x3xf32>, tensor<2xi32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
""")

# --- tokenizer: first byte even = tokenizer.json, odd = text for the built-in BPE.
def byte_symbols():
    """Byte-level BPE's byte -> symbol map: printable bytes stand for themselves, the others
    take code points from 256 up, in byte order (what Tlaloc's loader requires in the vocab)."""
    out, extra = {}, 256
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE
        out[b] = chr(b) if printable else chr(extra)
        extra += 0 if printable else 1
    return out


vocab = {sym: b for b, sym in byte_symbols().items()}
vocab.update({"ab": 256, "\u0120a": 257})
tok = {
    "added_tokens": [{"id": 300, "content": "<|end|>", "special": True}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "\u0120 a"]},
}
write("tokenizer_fuzz", "json_bpe", b"\x00" + json.dumps(tok).encode())
tok2 = dict(tok, pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})
write("tokenizer_fuzz", "json_split", b"\x00" + json.dumps(tok2).encode())
write("tokenizer_fuzz", "text_ascii", b"\x01the cat sat in the aaaa <|s|> <t>  x")
write("tokenizer_fuzz", "text_utf8", b"\x01caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3\x83\xc2\xa9")

# --- config.json / generation_config.json: first byte even = config.json, odd = generation.
def config_seed(name, obj):
    write("model_config_fuzz", name, b"\x00" + json.dumps(obj, indent=2).encode())


config_seed("qwen3_tiny.json", {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 64,
    "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "hidden_act": "silu", "max_position_embeddings": 128,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": None,
    "transformers_version": "4.51.0", "use_sliding_window": False, "sliding_window": None})
config_seed("qwen3_moe.json", {
    "architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 32, "hidden_size": 8,
    "intermediate_size": 16, "moe_intermediate_size": 4, "num_hidden_layers": 3,
    "num_attention_heads": 2, "num_key_value_heads": 1, "num_experts": 4, "num_experts_per_tok": 2,
    "decoder_sparse_step": 2, "mlp_only_layers": [0], "norm_topk_prob": True, "dtype": "float32",
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}})
# Llama: no q/k norms (the parameter count once took them anyway).
config_seed("llama_tiny.json", {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 24,
    "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "hidden_act": "silu", "max_position_embeddings": 128,
    "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "tie_word_embeddings": True, "mlp_bias": False,
    "attention_bias": False, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": [2, 3]})
config_seed("sliding_rope_parameters.json", {
    "model_type": "qwen3", "vocab_size": 10, "hidden_size": 4, "intermediate_size": 8,
    "num_hidden_layers": 3, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 4,
    "use_sliding_window": True,
    "sliding_window": 16, "max_window_layers": 1, "attention_bias": True,
    "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
    "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}})
write("model_config_fuzz", "generation_qwen3.json", b"\x01" + json.dumps({
    "bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
    "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
    "transformers_version": "4.51.0"}, indent=2).encode())
write("model_config_fuzz", "generation_min.json",
      b"\x01" + json.dumps({"max_new_tokens": 8, "min_p": 0.1, "top_k": None,
                            "repetition_penalty": 1.1, "max_length": 64}).encode())


# --- .npy: magic, version, little-endian header length, Python-dict header, raw data.
def npy(descr, shape, raw, version=1):
    shape_text = "(" + "".join(f"{d}, " for d in shape).rstrip(" ")
    shape_text = shape_text.rstrip(",") + ("," if len(shape) == 1 else "") + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    size_len = 2 if version == 1 else 4
    pad = -(8 + size_len + len(header) + 1) % 64
    header = (header + " " * pad + "\n").encode()
    return (b"\x93NUMPY" + bytes([version, 0]) + len(header).to_bytes(size_len, "little") +
            header + raw)


write("npy_fuzz", "f32_2x3.npy", npy("<f4", [2, 3], struct.pack("<6f", *range(6))))
write("npy_fuzz", "i16_big.npy", npy(">i2", [3], struct.pack(">3h", -1, 2, 300)))
write("npy_fuzz", "bool.npy", npy("|b1", [2, 2], b"\x01\x00\x00\x01"))
write("npy_fuzz", "u8_scalar.npy", npy("|u1", [], b"\x07"))
write("npy_fuzz", "f64_v2.npy", npy("<f8", [1], struct.pack("<d", 2.5), version=2))
write("npy_fuzz", "empty_f16.npy", npy("<f2", [0, 3], b""))


# --- kernel metadata.json (first byte even) and kernels.lock (odd).
write("kernel_metadata_fuzz", "universal.json", b"\x00" + json.dumps({
    "name": "rmsnorm", "id": "tlaloc-examples/rmsnorm", "version": 1, "license": "Apache-2.0",
    "backend": {"type": "universal"}, "module": "rmsnorm.mlir",
    "layers": {"RMSNorm": {"operands": ["x", "weight"], "results": ["y"],
                           "attributes": ["eps"], "dtypes": ["f32", "bf16"],
                           "has-backward": False, "function": "rms_norm"}},
    "digest": {"algorithm": "sha256",
               "files": {"rmsnorm.mlir": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}}},
    indent=2).encode())
write("kernel_metadata_fuzz", "cpu_depends.json", b"\x00" + json.dumps({
    "name": "silu-and-mul", "version": 2, "backend": {"type": "cpu", "archs": ["x86_64"]},
    "library": "libsilu.so",
    "kernel-depends": [{"repo-id": "org/base", "version": 1}, {"repo-id": "org/other",
                                                                "revision": "main"}],
    "layers": {"SiluAndMul": {"operands": ["x"], "results": ["y"], "symbol": "silu_and_mul"},
               "ReLU": {"results": ["y"], "payload": "relu.mosaic"}}}).encode())
write("kernel_metadata_fuzz", "lockfile.json", b"\x01" + json.dumps([
    {"repo": "https://example.com/org/rmsnorm.git", "commit": "0123456789abcdef0123456789abcdef01234567",
     "variants": {"tlaloc-universal": {"hash": "sha256-00ff", "hash-type": "sha256-of-file-digests"},
                  "tlaloc-cpu-x86_64-linux": {"hash": "sha256-11ee"}}},
    {"repo": "/local/silu", "commit": "fedcba9876543210fedcba9876543210fedcba98"}],
    indent=2).encode())

# --- JSONL fine-tuning rows: text rows and chat rows, one per line.
write("jsonl_fuzz", "text.jsonl", "\n".join(json.dumps(r) for r in [
    {"text": "The quick brown fox."}, {"text": "caf\u00e9 \u20ac <|im_end|> not a token"},
    {"text": "x"}]) + "\n")
write("jsonl_fuzz", "chat.jsonl", "\n".join(json.dumps(r) for r in [
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hi?"},
                  {"role": "assistant", "content": "Hello."}]},
    {"messages": [{"role": "user", "content": "2+2"},
                  {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"},
                  {"role": "user", "content": "and 3+3"},
                  {"role": "assistant", "content": "6"}]}]) + "\n")
write("jsonl_fuzz", "mixed_errors.jsonl",
      '{"text": "ok"}\n\n{"messages": []}\n{"text": 3}\nnot json\n'
      '{"messages": [{"role": "user", "content": "no reply"}]}\n')


# --- response_format schemas (json_schema_fuzz): schema text, NUL, choice bytes.
for name, schema in [
        ("person", {"type": "object", "properties": {"name": {"type": "string"},
                    "age": {"type": "integer"}, "tags": {"type": "array",
                    "items": {"enum": ["a", "b"]}}}, "required": ["name"],
                    "additionalProperties": False}),
        ("refs", {"$defs": {"n": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/n"},
                  {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}]}},
                  "$ref": "#/$defs/n"}),
        ("any", {}),
        ("types", {"type": ["number", "boolean", "string"], "const": 1.5}),
        ("refused", {"type": "string", "pattern": "x"})]:
    write("json_schema_fuzz", name, json.dumps(schema).encode() + b"\0" + bytes(range(7, 200, 3)))
