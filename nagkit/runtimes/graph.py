"""What a runtime runs of a model file, without its metadata: two files with equal
:func:`model_graph` run the same computation, whatever their tensor names or metadata say.

TFLite (read from the flatbuffer, nothing is run): the signatures, the input and output tensors
(name, shape, type), and each operator in order with its options and the shape, type and (with
``constants=True``) the sha256 of the bytes of every tensor it reads or writes. Tensor names
other than the inputs' and outputs' are left out: they are the converter's debug locations.
ONNX: inputs and outputs (name, dims), the nodes' operator types in order, the opsets, and with
``constants=True`` the initializers' dims, type and the sha256 of their values.
:func:`tflite_float_constants` gives a TFLite file's float constants themselves.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any


def model_graph(path: str | os.PathLike, *, constants: bool = False) -> dict[str, Any]:
    path = Path(path)
    if path.suffix == ".onnx":
        return _onnx_graph(path, constants)
    return _tflite_graph(path, constants)


def _tflite_graph(path: Path, constants: bool) -> dict[str, Any]:
    import numpy as np
    from ai_edge_litert.tools import flatbuffer_utils as fu

    model = fu.read_model_from_bytearray(bytearray(path.read_bytes()))
    sg = model.subgraphs[0]

    def tensor(i: int, named: bool = False):
        if i < 0:
            return None
        t = sg.tensors[i]
        out = [list(map(int, t.shape if t.shape is not None else [])), int(t.type)]
        if named:
            out.insert(0, _text(t.name))
        data = model.buffers[t.buffer].data if t.buffer else None
        if constants and data is not None and len(data):
            out.append(hashlib.sha256(bytes(np.asarray(data, np.uint8))).hexdigest())
        return out

    ops = []
    for op in sg.operators:
        code = model.operatorCodes[op.opcodeIndex]
        options = vars(op.builtinOptions) if op.builtinOptions is not None else None
        ops.append({"op": max(int(code.builtinCode), int(code.deprecatedBuiltinCode)),
                    "options": options, "inputs": [tensor(i) for i in op.inputs],
                    "outputs": [tensor(i) for i in op.outputs]})
    signatures = [{"key": _text(s.signatureKey), "inputs": [_text(x.name) for x in s.inputs or []],
                   "outputs": [_text(x.name) for x in s.outputs or []]} for s in model.signatureDefs or []]
    return {"format": "tflite", "signatures": signatures,
            "inputs": [tensor(i, named=True) for i in sg.inputs],
            "outputs": [tensor(i, named=True) for i in sg.outputs], "ops": ops}


def tflite_float_constants(path: str | os.PathLike) -> list:
    """The float32 constants the operators of a .tflite file read, in operator order (numpy
    arrays): to compare two files' weights element by element."""
    import numpy as np
    from ai_edge_litert.tools import flatbuffer_utils as fu

    model = fu.read_model_from_bytearray(bytearray(Path(path).read_bytes()))
    sg, out = model.subgraphs[0], []
    for op in sg.operators:
        for i in op.inputs:
            t = sg.tensors[i] if i >= 0 else None
            data = model.buffers[t.buffer].data if t is not None and t.buffer else None
            if data is not None and len(data) and t.type == 0:  # TensorType FLOAT32
                out.append(np.asarray(data, np.uint8).view(np.float32))
    return out


def _onnx_graph(path: Path, constants: bool) -> dict[str, Any]:
    import onnx

    m = onnx.load(str(path))

    def dims(v) -> list[int]:
        return [d.dim_value for d in v.type.tensor_type.shape.dim]

    out: dict[str, Any] = {"format": "onnx", "inputs": [(i.name, dims(i)) for i in m.graph.input],
                           "outputs": [(o.name, dims(o)) for o in m.graph.output],
                           "ops": [n.op_type for n in m.graph.node],
                           "opset": [(o.domain, o.version) for o in m.opset_import]}
    if constants:
        from onnx import numpy_helper

        out["initializers"] = [(list(t.dims), t.data_type,
                                 hashlib.sha256(numpy_helper.to_array(t).tobytes()).hexdigest())
                                for t in m.graph.initializer]
    return out


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)
