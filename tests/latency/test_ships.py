"""Predict what ships (issue 17): the networks calibration and validation measure are the files
`nagkit export` / `nagkit build` produce: same converter, input layout, signature; byte for byte
for the same weights, and the same graph with a supernet's weights (what `build` exports)."""

from __future__ import annotations

import hashlib

import pytest

from nagkit.latency.validate import NetworkCache, random_archs
from nagkit.runtimes.graph import model_graph
from tests.latency.conftest import make_tiny_space


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


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
    assert model_graph(measured) == model_graph(built)  # operators, options, shapes; weights aside
    if fmt == "tflite":
        g = model_graph(measured)
        assert g["inputs"][0][:2] == ["image", list(shape)]
        assert [s["key"] for s in g["signatures"]] == ["serving_default"]
