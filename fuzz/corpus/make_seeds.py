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
