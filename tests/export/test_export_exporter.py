"""export_model: conversion to both formats with parity, staging, force, failures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.errors import BadInputError, UnknownNameError, exit_code_for
from nagkit.runtimes.convert import ConversionError
from nagkit.export.exporter import export_model, file_sha256, normalize_formats
from nagkit.export.parity import ParityError, seeded_inputs, tolerance_for
from nagkit.runtimes.models import load_model


@pytest.fixture(scope="module")
def tiny_static():
    from nagkit.space import SearchSpace
    from nagkit.supernet import StaticNet

    sp = SearchSpace(name="tiny-static", width_mult=0.5, base_stage_width=(16, 16, 24, 40, 240, 320),
                     stage_strides=(2, 2), stage_acts=("relu", "h_swish"), stage_se=(False, True),
                     depth_list=(1, 2), resolutions=(32,), n_classes=10, dropout=0.0)
    arch = sp.smallest()
    return sp, arch, StaticNet.from_arch(sp, arch, seed=0)


@pytest.mark.slow
def test_static_net_exports_to_both_formats_with_parity(tiny_export):
    sp, arch, net, res = tiny_export  # exported in tests/export/conftest.py (seed 4, plus 3 given inputs)
    assert set(res.models) == {"onnx", "tflite"}
    assert res.input_shape == [1, 3, 32, 32] and res.input_layout == "NCHW" and res.input_dtype == "float32"
    out = res.paths["onnx"].parent
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "model.tflite"]
    for f, m in res.models.items():
        assert m.path == str(out / f"model.{f}")
        assert m.size_bytes == (out / f"model.{f}").stat().st_size and m.sha256 == file_sha256(m.path)
        assert m.output_shape == [1, 10]
        assert [p.seed for p in m.parity] == [4, None] and all(p.passed for p in m.parity)
        assert m.converter_version and m.runtime_version
        # the written file, run again here, agrees with PyTorch on other inputs too
        x = seeded_inputs((2, 3, 32, 32), seed=123)
        ref = net(torch.from_numpy(x)).detach().numpy()
        assert np.abs(load_model(m.path).run(x) - ref).max() <= tolerance_for(ref)
    assert {"convert_onnx", "parity_onnx", "convert_tflite", "parity_tflite"} <= set(res.durations_s)
    # the versions recorded are the installed distributions' (what a bundle's manifest carries)
    from importlib.metadata import version

    assert res.versions["torch"] == version("torch") and res.versions["torch"].split("+")[0] == \
        torch.__version__.split("+")[0]
    assert (res.versions["onnx"], res.versions["litert-torch"]) == (version("onnx"), version("litert-torch"))
    assert (res.versions["onnxruntime"], res.versions["litert"]) == (version("onnxruntime"), version("ai-edge-litert"))
    assert res.models["onnx"].converter_version == version("torch")
    assert res.models["tflite"].runtime_version == version("ai-edge-litert")
    d = res.to_dict()
    assert d["models"]["tflite"]["parity_max_abs_diff"] <= d["models"]["tflite"]["parity_tolerance"]


def test_batch_is_fixed_at_export(tiny_static, tmp_path):
    _, _, net = tiny_static
    res = export_model(net, (3, 3, 32, 32), "onnx", tmp_path)
    m = load_model(res.paths["onnx"])
    assert m.input_shape == (3, 3, 32, 32) and res.models["onnx"].output_shape == [3, 10]


def test_existing_files_need_force(tiny_static, tmp_path):
    _, _, net = tiny_static
    first = export_model(net, (1, 3, 32, 32), "onnx", tmp_path)
    with pytest.raises(BadInputError, match="already exist.*") as ei:
        export_model(net, (1, 3, 32, 32), "onnx", tmp_path)
    assert "--force" in ei.value.hint
    again = export_model(net, (1, 3, 32, 32), "onnx", tmp_path, force=True, seed=1)
    assert again.models["onnx"].sha256 == first.models["onnx"].sha256  # same module, same file
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]  # no staging folder left


class SignBranch(torch.nn.Module):
    """Data-dependent Python control flow: tracing bakes in the branch of the example input."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x).mean(dim=(2, 3))
        return y if bool(x.sum() > 0) else -y


def test_parity_failure_leaves_nothing_behind(tmp_path):
    net = SignBranch().eval()
    example = seeded_inputs((1, 3, 8, 8), seed=0)
    flipped = -example * 3 if example.sum() > 0 else example * 3 + 0  # takes the other branch
    if np.sign(flipped.sum()) == np.sign(example.sum()):
        flipped = -flipped
    out = tmp_path / "new"
    with pytest.raises(ParityError) as ei:
        export_model(net, (1, 3, 8, 8), "onnx", out, seed=0, parity_inputs=flipped)
    assert exit_code_for(ei.value) == 1 and "given inputs" in ei.value.message
    assert str(out / "model.onnx") in ei.value.message and "nothing was written" in ei.value.message
    assert not out.exists()


def test_converter_crash_is_a_runtime_error(tmp_path):
    class Svd(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.svd(x.flatten(1)[:, :4].reshape(-1, 2, 2))[1].flatten(1)

    with pytest.raises(ConversionError) as ei:
        export_model(Svd(), (1, 3, 4, 4), "onnx", tmp_path / "o")
    assert exit_code_for(ei.value) == 3 and "linalg_svd" in ei.value.message
    assert "\n" not in ei.value.message.split("---")[0].strip()  # one line, not the whole graph
    assert not (tmp_path / "o").exists()


def test_normalize_formats():
    assert normalize_formats("both") == ("onnx", "tflite")
    assert normalize_formats(["tflite"]) == ("tflite",)
    assert normalize_formats("onnx,tflite") == ("onnx", "tflite")
    with pytest.raises(UnknownNameError, match="did you mean 'tflite'"):
        normalize_formats("tflit")
    with pytest.raises(BadInputError, match="4 positive ints"):
        export_model(torch.nn.Identity(), (3, 32, 32), "onnx", ".")


@pytest.mark.gpu
def test_cuda_module_is_exported_from_a_cpu_copy(tmp_path):
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten()).eval().cuda()
    res = export_model(net, (1, 3, 8, 8), "onnx", tmp_path)
    assert res.models["onnx"].worst_parity.passed
    assert next(net.parameters()).device.type == "cuda"  # the caller's module stays where it was


def test_exported_models_describe_themselves(tiny_export):
    """Issue 16 point 2: tensors named image/logits in both formats, the TFLite signature, and
    the nagkit.model metadata (input shape, preprocessing, labels) inside each file."""
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    from nagkit.export.manifest import model_metadata
    from nagkit.runtimes.metadata import read_metadata

    sp, arch, _, res = tiny_export
    want = model_metadata(sp, arch, (1, 3, 32, 32))
    assert res.names == ("image", "logits") and res.metadata == want
    for path in res.paths.values():
        assert read_metadata(path) == want
    assert want["input"]["preprocessing"] == sp.preprocessing(32) and want["output"]["labels"][9] == "class9"
    it = Interpreter(model_path=str(res.paths["tflite"]))
    assert it.get_signature_list() == {"serving_default": {"inputs": ["image"], "outputs": ["logits"]}}
    assert it.get_input_details()[0]["name"] == "image" and it.get_output_details()[0]["name"] == "logits"
    sess = ort.InferenceSession(str(res.paths["onnx"]), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["image"] and [o.name for o in sess.get_outputs()] == ["logits"]
    assert "nagkit.model" in sess.get_modelmeta().custom_metadata_map
