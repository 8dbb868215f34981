"""Quantizes a GGUF file with llama.cpp's own quantizer (llama-cpp-python's
llama_cpp.llama_model_quantize, the code behind llama-quantize), so tests run Tlaloc on files
made exactly as people's downloads are. Prints one JSON object: {"types": {tensor: ggml type}},
read back with gguf-py, since llama.cpp falls back to other types where a row does not fit.

  python gguf_quantize.py IN.gguf OUT.gguf FTYPE      (FTYPE: Q8_0, Q4_0, Q4_K_M, Q6_K, ...)
"""

import json
import sys

import gguf
import llama_cpp


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    src, dst, ftype = argv
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + ftype)
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params)
    if rc != 0:
        sys.exit(f"gguf_quantize: llama_model_quantize returned {rc}")
    reader = gguf.GGUFReader(dst)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    sys.stdout.write(json.dumps({"types": types}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
