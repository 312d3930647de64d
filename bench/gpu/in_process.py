"""Run a Loom CUDA artifact inside the Python process, on PyTorch's tensors, through its C API.

gpu_bench.py times PyTorch with triton.testing.do_bench; tools/loom_run times Loom with its own
loop (cudaMemsetAsync flush, events). To compare by literally the same method, this loads the
artifact's shared object with ctypes and hands do_bench a closure that calls <name>_run_device on
device pointers PyTorch allocated (the artifact shares PyTorch's primary context).
"""
import ctypes
import os

import torch

_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
           "i64": torch.int64, "u8": torch.uint8, "i8": torch.int8, "bool": torch.bool}


def read_manifest(folder, kind="output"):
    """(model name, library file, [(<kind> name, dtype, shape)]) from an artifact's manifest.txt
    (kind "output" or "input")."""
    name, lib, outputs = None, None, []
    with open(os.path.join(folder, "manifest.txt")) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "name":
                name = w[1]
            elif w[0] == "library":
                lib = w[1]
            elif w[0] == kind:
                outputs.append((w[1], _DTYPES[w[2]], [int(d) for d in w[3:]]))
    if not name or not lib:
        raise ValueError(f"{folder}/manifest.txt names no model or library")
    return name, lib, outputs


class Artifact:
    """One loaded artifact: call run(inputs) with CUDA tensors in graph order; returns the outputs."""

    def __init__(self, folder):
        self.name, lib, self.output_specs = read_manifest(folder)
        self.input_specs = read_manifest(folder, "input")[2]
        self.lib = ctypes.CDLL(os.path.join(os.path.abspath(folder), lib))
        fn = lambda s: getattr(self.lib, f"{self.name}_{s}")  # noqa: E731
        self._create, self._run, self._destroy, self._err = (fn("create"), fn("run_device"), fn("destroy"),
                                                             fn("last_error"))
        self._create.restype = ctypes.c_void_p
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._destroy.argtypes = [ctypes.c_void_p]
        self._err.restype = ctypes.c_char_p
        torch.cuda.init()  # the artifact joins the primary context PyTorch made current
        self.model = self._create()
        if not self.model:
            raise RuntimeError(f"{self.name}_create failed: {self._err().decode()}")
        self.outputs = [torch.full(s, float("nan"), dtype=t, device="cuda") if t.is_floating_point
                        else torch.empty(s, dtype=t, device="cuda") for _, t, s in self.output_specs]
        self._argv = None

    def bind(self, inputs):
        """Fix the device pointers of later run() calls (kept alive by self)."""
        self._inputs = [t.contiguous() for t in inputs]
        ins = (ctypes.c_void_p * len(self._inputs))(*[t.data_ptr() for t in self._inputs])
        outs = (ctypes.c_void_p * len(self.outputs))(*[t.data_ptr() for t in self.outputs])
        self._argv = (ins, outs)

    def run(self):
        if self._argv is None:
            raise RuntimeError(f"{self.name}: call bind(inputs) before run()")
        rc = self._run(self.model, self._argv[0], self._argv[1])
        if rc != 0:
            raise RuntimeError(f"{self.name}_run_device returned {rc}: {self._err().decode()}")
        return self.outputs

    def close(self):
        if self.model:
            self._destroy(self.model)
            self.model = None
