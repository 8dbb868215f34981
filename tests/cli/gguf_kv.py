#!/usr/bin/env python3
"""Prints a GGUF file's metadata as one JSON object (arrays as their length, except string
arrays shorter than 8), so shell tests can check keys without a GGUF library.
Usage: gguf_kv.py FILE.gguf"""
import json
import struct
import sys

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file (magic {data[:4]!r})")
    pos = 4
    version, _tensors, kv_count = struct.unpack_from("<IQQ", data, pos)
    pos += 20

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(kind):
        nonlocal pos
        if kind == 8:
            return string()
        if kind == 9:
            inner, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            items = [value(inner) for _ in range(n)]
            return items if inner == 8 and n < 8 else {"array_length": n}
        fmt = SCALARS[kind]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    out = {"gguf.version": version}
    for _ in range(kv_count):
        key = string()
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        out[key] = value(kind)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
