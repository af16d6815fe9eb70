"""Calls an exported entry point through ctypes, once per argument list given as JSON in argv[1],
printing one JSON line per call: its CUresult, its error string and how many lines the
recording driver's log had after it (run by tests/export/recording.py with that driver on
LD_LIBRARY_PATH)."""

import ctypes
import json
import os
import sys

from dsl.export.build import _C_TYPES, KdslTensor
from dsl.export.c_types import DTYPE_CODES

spec = json.loads(sys.argv[1])
lib = ctypes.CDLL(spec["library"])
entry = getattr(lib, spec["entry"])
entry.restype = ctypes.c_int
entry.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(KdslTensor) if p["kind"] == "tensor" else _C_TYPES[p["ctype"]]
                                      for p in spec["params"]]
error = getattr(lib, spec["error"])
error.restype = ctypes.c_char_p
log = os.environ["RECORDING_CUDA_LOG"]
for call in spec["calls"]:
    args = []
    for p, value in zip(spec["params"], call):
        if p["kind"] == "tensor":
            t = KdslTensor(value["ptr"], DTYPE_CODES[value["dtype"]], len(value["shape"]), value["device"], 0)
            for k, (s, st) in enumerate(zip(value["shape"], value["strides"])):
                t.shape[k], t.strides[k] = s, st
            args.append(ctypes.byref(t))
        else:
            args.append(value)
    code = entry(None, *args)
    with open(log) as f:
        logged = len(f.read().splitlines())
    print(json.dumps({"code": code, "error": error().decode() if code else None, "logged": logged}), flush=True)
