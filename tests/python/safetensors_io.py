"""An independent safetensors writer for the tests (struct + json + numpy).

dtypes maps a tensor name to another dtype code for its raw bytes (uint8 codes as F8_E4M3,
uint16 codes as BF16).
"""
import json
import struct

import numpy as np

CODES = {np.float32: "F32", np.float16: "F16", np.int64: "I64", np.int32: "I32", np.uint8: "U8", np.int8: "I8", np.uint16: "U16"}


def write(path, tensors, metadata=None, header_override=None, pad=0, extra=b"", dtypes=None):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": (dtypes or {}).get(name, CODES[a.dtype.type]), "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    if metadata:
        header["__metadata__"] = metadata
    if header_override:
        header_override(header)
    h = json.dumps(header).encode() + b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs) + extra)
