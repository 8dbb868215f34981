"""Dequantises ggml blocks with gguf-py (PyPI's `gguf`, gguf.quants.dequantize): the oracle for
Tlaloc's io::DequantizeGgml, which must give the same f32 values bit for bit.

Reads ROWS rows of raw blocks of ggml type TYPE (a name such as Q4_K) from IN, writes the
dequantised values as little-endian float32 [ROWS, COLS] to OUT.

  python gguf_dequant.py TYPE ROWS COLS IN OUT
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType, quants


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    qtype = GGMLQuantizationType[argv[0]]
    rows, cols = int(argv[1]), int(argv[2])
    data = np.fromfile(argv[3], dtype=np.uint8).reshape(rows, -1)
    values = quants.dequantize(data, qtype)
    if values.shape != (rows, cols):
        sys.exit(f"gguf_dequant: got shape {values.shape}, expected {(rows, cols)}")
    np.ascontiguousarray(values, dtype="<f4").tofile(argv[4])


if __name__ == "__main__":
    main(sys.argv[1:])
