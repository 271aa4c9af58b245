"""Predict what ships (issue 17): the networks calibration and validation measure are the files
`nagkit export` / `nagkit build` produce: same converter, input layout, signature; byte for byte
for the same weights, and the same graph with a supernet's weights (what `build` exports)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from nagkit.latency.validate import NetworkCache, random_archs
from tests.latency.conftest import make_tiny_space


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tflite_graph(path):
    """Input/output details, signatures and the operator sequence of a .tflite file."""
    from nagkit.runtimes.litert import open_interpreter

    it = open_interpreter(path, 1)
    it.allocate_tensors()
    io = [(d["name"], list(map(int, d["shape"])), np.dtype(d["dtype"]).str)
          for d in (*it.get_input_details(), *it.get_output_details())]
    ops = [(o["op_name"], tuple(int(i) for i in o["inputs"] if i >= 0)) for o in it._get_ops_details()]
    shapes = [list(map(int, t["shape"])) for t in it.get_tensor_details()]
    return {"io": io, "signatures": it.get_signature_list(), "ops": ops, "shapes": shapes}


def _onnx_graph(path):
    import onnx

    m = onnx.load(str(path))
    dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    return {"inputs": [(i.name, dims(i)) for i in m.graph.input], "outputs": [(o.name, dims(o)) for o in m.graph.output],
            "ops": [n.op_type for n in m.graph.node], "opset": [(o.domain, o.version) for o in m.opset_import]}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
def test_calibration_networks_are_the_exported_files(tmp_path, fmt):
    from nagkit.export.exporter import export_model
    from nagkit.supernet import OFAMobileNetV3, StaticNet

    space = make_tiny_space(resolutions=(32,))
    arch = random_archs(space, 1, seed=3)[0]
    cache = NetworkCache(fmt, tmp_path / "cache")
    cache.prepare(space, [arch], jobs=1, progress=False)
    measured = cache.path_for(space, arch)
    shape = (1, space.in_channels, arch.r, arch.r)
    # `nagkit export --random-init --seed 0` (app.export.load_subnet + export_model)
    shipped = export_model(StaticNet.from_arch(space, arch, seed=0), shape, fmt, tmp_path / "export").paths[fmt]
    assert _sha(measured) == _sha(shipped)
    # `nagkit build` exports a supernet's subnet: other weights, the same graph
    built = export_model(OFAMobileNetV3(space).eval().extract(arch), shape, fmt, tmp_path / "build").paths[fmt]
    graph = _tflite_graph if fmt == "tflite" else _onnx_graph
    assert graph(measured) == graph(built)
    if fmt == "tflite":
        g = graph(measured)
        assert g["io"][0][1] == list(shape) and list(g["signatures"]) == ["serving_default"]
