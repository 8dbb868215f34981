"""Writes the GpuTargetConfigProto (text form) that XLA:CUDA's PJRT plugin carries for one GPU.

XLA:CUDA compiles for a GPU it does not have when PJRT_TopologyDescription_Create gets the
create option `target_config`: the GPU's description as a stream_executor.GpuTargetConfigProto
in text form. The plugin (jax-cuda13-pjrt's xla_cuda_plugin.so) embeds XLA's own specs
(xla/backends/gpu/target_config/specs/*.txtpb, Apache-2.0) as NUL-terminated text; this script
finds the one whose `device_description_str` is NAME and writes it, for
`tlaloc aot --plugin cuda --topology 1x1x1 --target-config FILE` (docs/BRINGUP.md).

Usage: cuda_target_config.py --plugin xla_cuda_plugin.so [--device "NVIDIA H100 80GB HBM3"]
                             [--out FILE]     (default: standard output)
       cuda_target_config.py --plugin xla_cuda_plugin.so --list
"""
import argparse
import re
import sys


def specs(data):
    """Every embedded spec: {device_description_str: text}."""
    out = {}
    for m in re.finditer(rb'\ndevice_description_str: "([^"\n]*)"\n?', data):
        start = data.rfind(b"\x00", 0, m.start()) + 1
        end = data.find(b"\x00", m.end())
        text = data[start:end if end >= 0 else len(data)]
        if b"proto-message: stream_executor.GpuTargetConfigProto" in text:
            out[m.group(1).decode()] = text.decode()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", required=True, help="xla_cuda_plugin.so")
    ap.add_argument("--device", default="NVIDIA H100 80GB HBM3")
    ap.add_argument("--out", help="file to write (default: standard output)")
    ap.add_argument("--list", action="store_true", help="list the devices the plugin describes")
    a = ap.parse_args()
    with open(a.plugin, "rb") as f:
        found = specs(f.read())
    if a.list:
        print("\n".join(sorted(found)))
        return
    if a.device not in found:
        sys.exit(f"{a.plugin} carries no GpuTargetConfigProto for {a.device!r} "
                 f"(it has: {', '.join(sorted(found)) or 'none'})")
    if a.out:
        with open(a.out, "w") as f:
            f.write(found[a.device])
    else:
        sys.stdout.write(found[a.device])


if __name__ == "__main__":
    main()
