"""Mosaic TPU kernels made from Pallas on a machine without a TPU, as a Tlaloc kernel repository.

jax lowers a Pallas TPU kernel for the `tpu` platform without a TPU device: the result is a
`stablehlo.custom_call @tpu_custom_call` whose backend_config carries the serialized Mosaic
module. This script lowers, at the decode shapes (batch 1, one token) of Tlaloc's Qwen3 presets
`tiny` and `qwen3-0.6b`:

- RMSNorm  (x, weight) -> y, eps 1e-6: the hidden state and the per-head q/k norms;
- SiluAndMul (gate, up) -> y: the fused SwiGLU activation, silu(gate) * up;
- Attention (q, k, v, mask) -> out: decode attention (one token) over the keys and values the
  paged decode step gathers from its KV pages by the block table (pages of 16 positions, a table
  of 2 blocks for tiny, 4 for qwen3-0.6b), scale 1/sqrt(head size), grouped query heads;
- PagedAttention: jax's own `pallas.ops.tpu.paged_attention` decode kernel reading the KV pages
  at qwen3-0.6b's heads (16 query, 8 KV heads of 128; a pool of 12 pages of 16 tokens, 4 per
  sequence). Its custom call takes jax's layout (KV pages [Hkv, N, P, D], scalar-prefetch lengths
  and page indices) and returns three results (o, m, l); the layer entry names kernelize's
  `jax-paged-attention` adapter, which maps nn::PagedAttention's operands onto it and its results
  back (out, lse). jax's lowered wrapper program (`programs/`) is kept as well.

and writes DIR/build/tlaloc-tpu/ in the kernel hub's layout: one `.mosaic` file per kernel and
shape (the backend_config string exactly as jax lowered it) and a metadata.json whose layers
list each payload with the call-site types it was lowered for, its custom call's own types and
the attribute values baked into it, plus the hub's `python-depends` (empty: nothing is imported
at run time), then seals it with `tlaloc kernels seal`. With --check, it also runs every
RMSNorm / SiluAndMul / Attention kernel in Pallas' interpret mode on jax's CPU backend on seeded
inputs and writes DIR/check/<kernel>.{in0,in1,...,out}.npy and check/index.tsv (kernel, layer,
operand count) for Tlaloc's interpreter to be compared against; DIR/programs/ gets jax's lowered
modules as jax printed them. --check also writes check/paged_attention.{layer_in,kernel_in,
kernel_out}N.npy: the layer's inputs, the kernel's (mapped as the adapter maps them) and what the
kernel returns in Pallas' TPU interpret mode.

Usage: pallas_tpu_kernels.py --out DIR [--tlaloc build/apps/tlaloc] [--check]
                             [--presets tiny,qwen3-0.6b]
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # lowering for tpu needs no device; runs on CPU
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

EPS = 1e-6
# Decode shapes of Tlaloc's presets (src/models/init.cc): hidden, query heads, KV heads, head
# size, MLP width; and the block-table length of the paged decode step the kernels are for.
PRESETS = {
    "tiny": dict(hidden=64, hq=4, hkv=2, d=16, inter=128, table_blocks=2),
    "qwen3-0.6b": dict(hidden=1024, hq=16, hkv=8, d=128, inter=3072, table_blocks=4),
}


def rms_norm_kernel(x_ref, w_ref, o_ref):
    # Tlaloc's RmsNorm: y = weight * (x * rsqrt(mean(x^2, last axis) + eps)), in f32.
    x = x_ref[...]
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)
    o_ref[...] = x * r * w_ref[...]


def silu_and_mul_kernel(g_ref, u_ref, o_ref):
    g = g_ref[...]
    o_ref[...] = g * jax.nn.sigmoid(g) * u_ref[...]


def decode_attention_kernel(hkv, groups, d, scale):
    """Qwen3's Attention layer for one decode token over the keys and values gathered from the
    paged KV cache: q [1, 1, Hq, D], k [1, Hkv, S, D], mask [1, 1, S] (as i32: jax passes a bool
    operand of a TPU kernel as i32), v [1, Hkv, S, D] -> [1, 1, Hq, D]; query head h reads KV
    head h / G. The operands come in the order kernelize passes them, their first use in the
    layer's decomposition (the mask is used before v), not the signature's (q, k, v, mask)."""
    def kernel(q_ref, k_ref, m_ref, v_ref, o_ref):
        s_len = k_ref.shape[2]
        q = q_ref[...].reshape(hkv, groups, d)
        k = k_ref[...].reshape(hkv, s_len, d)
        v = v_ref[...].reshape(hkv, s_len, d)
        s = jnp.einsum("kgd,ksd->kgs", q, k, preferred_element_type=jnp.float32) * scale
        # As Tlaloc's GroupedAttention: a large finite negative keeps a fully masked row finite.
        s = jnp.where(m_ref[...].reshape(1, 1, s_len) != 0, s, -1e30)
        p = jnp.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
        o = jnp.einsum("kgs,ksd->kgd", p, v, preferred_element_type=jnp.float32)
        o_ref[...] = o.reshape(o_ref.shape)
    return kernel


def decode_attention(q, k, mask, v, hkv, interpret=False):
    groups, d = q.shape[2] // hkv, q.shape[3]
    kernel = decode_attention_kernel(hkv, groups, d, d ** -0.5)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                          interpret=interpret)(q, k, mask.astype(jnp.int32), v)


def rms_norm(x, w, interpret=False):
    # The weight enters as [1, H]: Mosaic vectors are at least 2-D; the call site's [H] weight is
    # reshaped outside the kernel (kernel-operand-types in metadata.json; kernelize reshapes).
    return pl.pallas_call(rms_norm_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=interpret)(x, w)


def silu_and_mul(g, u, interpret=False):
    return pl.pallas_call(silu_and_mul_kernel, out_shape=jax.ShapeDtypeStruct(g.shape, g.dtype),
                          interpret=interpret)(g, u)


def type_text(shape, dtype="f32"):
    return "tensor<" + "".join(f"{n}x" for n in shape) + dtype + ">"


def lower_custom_call(fn, shapes, bool_operand=None):
    """The lowered module text, the backend_config of its one tpu_custom_call (bytes) and the
    custom call's operand and result types."""
    args = [jax.ShapeDtypeStruct(s, jnp.bool_ if i == bool_operand else jnp.float32)
            for i, s in enumerate(shapes)]
    text = jax.jit(fn).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    lines = [ln for ln in text.splitlines() if "@tpu_custom_call" in ln]
    if len(lines) != 1:
        sys.exit(f"expected one tpu_custom_call in the lowering of {fn}, found {len(lines)}")
    config = re.search(r'backend_config = "((?:[^"\\]|\\.)*)"', lines[0]).group(1)
    types = re.search(r'\} : \((.*)\) -> (.*)$', lines[0])
    results = types.group(2).strip()
    if results.startswith("("):
        results = results[1:-1]
    return text, mlir_string_value(config), types.group(1).split(", "), results.split(", ")


def mlir_string_value(s):
    """An MLIR string literal's bytes: \\XX hex escapes and \\\\ / \\\" (what jax prints)."""
    out, i = bytearray(), 0
    while i < len(s):
        if s[i] == "\\":
            nxt = s[i + 1]
            if nxt in '\\"':
                out.append(ord(nxt))
                i += 2
            elif nxt == "n":
                out.append(10)
                i += 2
            else:
                out.append(int(s[i + 1:i + 3], 16))
                i += 3
        else:
            out += s[i].encode()
            i += 1
    return bytes(out)


def kernels_for(preset):
    p = PRESETS[preset]
    out = []
    # The decoder layers' norms on [B, T, H], the per-head q/k norms, and the final norm, which
    # a decode step applies to the last position only ([B, H]).
    for name, shape in (("hidden", [1, 1, p["hidden"]]), ("q_norm", [1, 1, p["hq"], p["d"]]),
                        ("k_norm", [1, 1, p["hkv"], p["d"]]), ("final", [1, p["hidden"]])):
        h = shape[-1]
        out.append(dict(layer="RMSNorm", file=f"rms_norm_{preset}_{name}.mosaic",
                        fn=lambda x, w: rms_norm(x, w.reshape(1, -1)),
                        reference=lambda x, w: rms_norm(x, w.reshape(1, -1), interpret=True),
                        shapes=[shape, [h]], attributes={"eps": EPS}))
    shape = [1, 1, p["inter"]]
    out.append(dict(layer="SiluAndMul", file=f"silu_and_mul_{preset}.mosaic", fn=silu_and_mul,
                    reference=lambda g, u: silu_and_mul(g, u, interpret=True),
                    shapes=[shape, shape], attributes={}))
    # Decode attention over the paged cache's keys and values, gathered by the block table:
    # pages of 16 positions, a table of 2 blocks (tiny) or 4 (qwen3-0.6b).
    hkv, s_len = p["hkv"], 16 * p["table_blocks"]
    q_shape, kv_shape = [1, 1, p["hq"], p["d"]], [1, hkv, s_len, p["d"]]
    out.append(dict(layer="Attention", file=f"decode_attention_{preset}.mosaic",
                    fn=lambda q, k, m, v, hkv=hkv: decode_attention(q, k, m, v, hkv),
                    reference=lambda q, k, m, v, hkv=hkv: decode_attention(q, k, m, v, hkv,
                                                                           interpret=True),
                    shapes=[q_shape, kv_shape, [1, 1, s_len], kv_shape], bool_operand=2,
                    attributes={"scale": p["d"] ** -0.5}))
    return out


# jax's paged attention at qwen3-0.6b's heads: 16 query and 8 KV heads of 128, a pool of 12 pages
# of 16 positions (not 8: the pool's [N, Hkv] and the kernel's [Hkv, N] must differ to be
# told apart), a table of 4 pages per sequence.
PAGED = dict(hq=16, hkv=8, d=128, page=16, pages=12, per_seq=4)


def paged_attention_call(q, k, v, lengths, table):
    from jax.experimental.pallas.ops.tpu import paged_attention as pa
    return pa.paged_attention(q, k, v, lengths, table, pages_per_compute_block=2)


def paged_attention_program():
    """jax's paged attention lowered for tpu: (module text, payload, the custom call's operand
    and result types)."""
    p = PAGED
    args = [jax.ShapeDtypeStruct((1, p["hq"], p["d"]), jnp.float32),
            jax.ShapeDtypeStruct((p["hkv"], p["pages"], p["page"], p["d"]), jnp.float32),
            jax.ShapeDtypeStruct((p["hkv"], p["pages"], p["page"], p["d"]), jnp.float32),
            jax.ShapeDtypeStruct((1,), jnp.int32),
            jax.ShapeDtypeStruct((1, p["per_seq"]), jnp.int32)]
    text = jax.jit(paged_attention_call).trace(*args).lower(lowering_platforms=("tpu",)).as_text()
    line = [ln for ln in text.splitlines() if "@tpu_custom_call" in ln][0]
    config = re.search(r'backend_config = "((?:[^"\\]|\\.)*)"', line).group(1)
    types = re.search(r'\} : \((.*)\) -> \((.*)\)$', line)
    return text, mlir_string_value(config), types.group(1).split(", "), types.group(2).split(", ")


def paged_attention_layer(kernel_in, kernel_out):
    """The PagedAttention layer entry: jax's kernel claims nn::PagedAttention's decode call sites
    through kernelize's `jax-paged-attention` adapter (docs/kernels.md). Operands in the order of
    their first use in the layer's decomposition."""
    p = PAGED
    pages = type_text([p["pages"], p["hkv"], p["page"], p["d"]])
    q = type_text([1, 1, p["hq"], p["d"]])
    return {"operands": ["k_pages", "block_table", "v_pages", "q", "kv_start", "kv_lengths",
                         "q_positions"],
            "results": ["out", "lse"], "attributes": ["scale"], "dtypes": ["f32"],
            "has-backward": False,
            "payloads": [{"payload": "paged_attention_qwen3-0.6b.mosaic",
                          "adapter": "jax-paged-attention",
                          "operand-types": [pages, type_text([1, p["per_seq"]], "i32"), pages, q,
                                            type_text([1], "i32"), type_text([1], "i32"),
                                            type_text([1, 1], "i32")],
                          "result-types": [q, type_text([1, 1, p["hq"]])],
                          "kernel-operand-types": kernel_in, "kernel-result-types": kernel_out,
                          "attributes": {}}]}


def paged_attention_check(check, rng):
    """Seeded inputs of the PagedAttention layer (one decode query at position 43 of a row whose
    keys start at position 3, 50 written: it sees keys 0..40), the same mapped onto jax's operands
    as kernelize's adapter maps them, and what jax's kernel returns for them in Pallas' TPU
    interpret mode (o, m, l: its pallas_call's own three results). K and V are rounded to bf16
    first: the kernel computes with bf16 keys and values (it casts its VMEM pages to bf16), so
    f32 ones would differ from the f32 decomposition by bf16 rounding rather than by the mapping."""
    from jax.experimental import pallas as pallas
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as pak
    p = PAGED
    bf16 = lambda x: np.asarray(jnp.asarray(x).astype(jnp.bfloat16).astype(jnp.float32))  # noqa
    shape = (p["pages"], p["hkv"], p["page"], p["d"])
    k_pages, v_pages = bf16(rng.standard_normal(shape)), bf16(rng.standard_normal(shape))
    table = np.array([[7, 2, 11, 4]], np.int32)
    q = rng.standard_normal((1, 1, p["hq"], p["d"])).astype(np.float32)
    kv_start, kv_lengths = np.array([3], np.int32), np.array([50], np.int32)
    q_positions = np.array([[43]], np.int32)
    layer_in = [k_pages, table, v_pages, q, kv_start, kv_lengths, q_positions]
    scale = np.float32(p["d"] ** -0.5)
    seen = np.minimum(kv_lengths, q_positions[:, 0] - kv_start + 1)
    lengths = np.clip(seen, 0, p["per_seq"] * p["page"]).astype(np.int32)
    q_kernel = (q * scale).reshape(1, p["hq"], 1, p["d"])
    kernel_in = [lengths, table.reshape(-1), np.zeros(1, np.int32), np.ones(1, np.int32),
                 q_kernel, k_pages.transpose(1, 0, 2, 3).copy(),
                 v_pages.transpose(1, 0, 2, 3).copy()]
    # Run the kernel's own pallas_call in TPU interpret mode and keep its three results (the
    # wrapper returns o only).
    results = {}

    class InterpretPallas:
        def __getattr__(self, name):
            return getattr(pallas, name)

        def pallas_call(self, *args, **kwargs):
            call = pallas.pallas_call(*args, interpret=pltpu.InterpretParams(), **kwargs)

            def run(*operands):
                results["out"] = call(*operands)
                return results["out"]
            return run
    saved, pak.pl = pak.pl, InterpretPallas()
    try:
        pak.paged_attention.__wrapped__(q_kernel.reshape(1, p["hq"], p["d"]),
                                        kernel_in[5], kernel_in[6], lengths, table,
                                        pages_per_compute_block=2)
    finally:
        pak.pl = saved
    kernel_out = [np.asarray(x) for x in results["out"]]
    for name, arrays in (("layer_in", layer_in), ("kernel_in", kernel_in),
                         ("kernel_out", kernel_out)):
        for i, x in enumerate(arrays):
            np.save(check / f"paged_attention.{name}{i}.npy", np.ascontiguousarray(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="repository folder to write")
    ap.add_argument("--tlaloc", default="build/apps/tlaloc", help="tlaloc binary (for seal)")
    ap.add_argument("--presets", default="tiny,qwen3-0.6b")
    ap.add_argument("--check", action="store_true", help="also write interpret-mode references")
    a = ap.parse_args()
    variant = a.out / "build" / "tlaloc-tpu"
    variant.mkdir(parents=True, exist_ok=True)
    programs = a.out / "programs"
    programs.mkdir(exist_ok=True)
    layers = {}
    index = []
    rng = np.random.default_rng(0)
    for preset in a.presets.split(","):
        for k in kernels_for(preset):
            text, payload, kernel_in, kernel_out = lower_custom_call(k["fn"], k["shapes"],
                                                                     k.get("bool_operand"))
            (variant / k["file"]).write_bytes(payload)
            stem = k["file"].removesuffix(".mosaic")
            (programs / f"{stem}.mlir").write_text(text)
            signature = {"RMSNorm": (["x", "weight"], ["y"], ["eps"]),
                         "SiluAndMul": (["gate", "up"], ["y"], []),
                         "Attention": (["q", "k", "v", "mask"], ["out"], ["scale"])}[k["layer"]]
            spec = layers.setdefault(k["layer"], {
                "operands": signature[0], "results": signature[1], "attributes": signature[2],
                "dtypes": ["f32"], "has-backward": False, "payloads": []})
            site_in = [type_text(shape, "i1" if i == k.get("bool_operand") else "f32")
                       for i, shape in enumerate(k["shapes"])]
            spec["payloads"].append({"payload": k["file"], "operand-types": site_in,
                                     "result-types": [site_in[0]],
                                     "kernel-operand-types": kernel_in,
                                     "kernel-result-types": kernel_out,
                                     "attributes": k["attributes"]})
            print(f"{k['layer']:10} {preset:10} ({', '.join(site_in)}) -> {site_in[0]}: "
                  f"{len(payload)} bytes")
            if a.check:
                check = a.out / "check"
                check.mkdir(exist_ok=True)
                # The mask as i32 0/1 (the test compares it with 0): causal-like, the first
                # positions seen.
                ins = [(np.arange(np.prod(s)).reshape(s) % s[-1] < s[-1] - 5).astype(np.int32)
                       if i == k.get("bool_operand") else
                       rng.standard_normal(s).astype(np.float32)
                       for i, s in enumerate(k["shapes"])]
                out = np.asarray(jax.jit(k["reference"])(*ins))
                for i, x in enumerate(ins):
                    np.save(check / f"{stem}.in{i}.npy", x)
                np.save(check / f"{stem}.out.npy", out)
                index.append(f"{stem}\t{k['layer']}\t{len(k['shapes'])}")
    text, payload, kernel_in, kernel_out = paged_attention_program()
    (variant / "paged_attention_qwen3-0.6b.mosaic").write_bytes(payload)
    (programs / "paged_attention_qwen3-0.6b.mlir").write_text(text)
    layers["PagedAttention"] = paged_attention_layer(kernel_in, kernel_out)
    print(f"PagedAttention qwen3-0.6b (jax's kernel, adapter jax-paged-attention) "
          f"{len(payload)} bytes")
    if a.check:
        paged_attention_check(a.out / "check", rng)
    meta = {"name": "pallas-tpu", "id": "tlaloc-examples/pallas-tpu", "version": 1,
            "license": "Apache-2.0", "backend": {"type": "tpu"}, "python-depends": [],
            "layers": layers,
            "made-by": f"scripts/kernels/pallas_tpu_kernels.py, jax {jax.__version__}"}
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    if index:
        (a.out / "check" / "index.tsv").write_text("\n".join(index) + "\n")
    subprocess.run([a.tlaloc, "kernels", "seal", str(variant)], check=True)


if __name__ == "__main__":
    main()
