"""Issue 14's `tflite-fp16` (decisions 27): float16 weights, float32 compute and input/output.

The file is checked against PyTorch with the same rounding (BatchNorm folded, conv and linear
weights rounded to float16) at the fp32 tolerance, and the rounding's own effect against the fp32
module is recorded apart. ONNX has no fp16 form here: a clear error.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from nagkit.errors import CheckFailedError
from nagkit.export.parity import float16_reference
from tests.cli.helpers import assert_refused, run_cli_inproc

FMNIST_CKPT = Path(__file__).resolve().parents[2] / "nagkit/resources/workspaces/fmnist/supernet/supernet.pt"
FMNIST_ARCH = "r28-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3"


def _net(bn_first: bool = False) -> torch.nn.Module:
    g = torch.Generator().manual_seed(0)
    conv, bn = torch.nn.Conv2d(2, 4, 3, bias=False), torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) / 3)
        bn.running_mean.copy_(torch.randn(4, generator=g))
        bn.running_var.copy_(torch.rand(4, generator=g) + 0.5)
        bn.weight.copy_(torch.randn(4, generator=g))
    layers = [torch.nn.BatchNorm2d(2), conv] if bn_first else [conv, bn]
    return torch.nn.Sequential(*layers, torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3)).eval()


def test_the_float16_reference_folds_batchnorm_and_rounds_the_weights():
    net = _net()
    ref = float16_reference(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in ref.modules())
    assert isinstance(net[1], torch.nn.BatchNorm2d)  # the caller's module is left as it was
    for m in ref.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            assert torch.equal(m.weight, m.weight.half().float())  # exactly float16 values
    inv = torch.rsqrt(net[1].running_var + net[1].eps).view(-1, 1, 1, 1)
    folded = (net[0].weight * inv) * net[1].weight.view(-1, 1, 1, 1)  # the converter's order (decisions 34)
    assert torch.equal(ref.get_submodule("0").weight, folded.detach().half().float())
    x = torch.randn(5, 2, 6, 6, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y, y16 = net(x), ref(x)
    assert 0 < float((y - y16).abs().max()) < 1e-2 * float(y.abs().max())  # rounded, not another model


def test_a_batchnorm_that_follows_no_convolution_cannot_be_referenced():
    with pytest.raises(CheckFailedError, match="does not follow a convolution"):
        float16_reference(_net(bn_first=True))


@pytest.mark.parametrize("fmt, says", [
    ("onnx-fp16", ["'fp16' is not built for onnx", "tflite-fp16"]),
    ("tflite-fp16,onnx", ["mixes precisions"]),
    ("tflite-fp8", ["'tflite-fp8'", "tflite-fp16", "onnx-int8"]),
])
def test_bad_fp16_exports_exit_2_and_write_nothing(tmp_path, capsys, fmt, says):
    r = run_cli_inproc(["export", "--weights", str(FMNIST_CKPT), "--space", "fmnist-mbv3-w0.5", "--arch", FMNIST_ARCH,
                        "--format", fmt, "--out", str(tmp_path / "o"), "--bundle"], capsys)
    assert_refused(r, says, tmp_path)


@pytest.mark.slow
def test_an_fp16_bundle_stores_float16_weights_and_matches_its_reference(tmp_path, capsys):
    from ai_edge_litert.interpreter import Interpreter

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = run_cli_inproc(["export", "--weights", str(FMNIST_CKPT), "--space", "fmnist-mbv3-w0.5", "--arch",
                            FMNIST_ARCH, "--format", "tflite-fp16", "--bundle", "--out", str(tmp_path / "o"),
                            "--json"], capsys)
    finally:
        torch.set_num_threads(n)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["precision"] == "fp16" and got["input"]["dtype"] == "float32"
    f = got["files"]["tflite"]
    assert f["size_bytes"] < 3 * got["params_module"]  # two bytes a weight; fp32 needs four

    it = Interpreter(model_path=str(tmp_path / "o" / "model.tflite"))
    it.allocate_tensors()
    ops = Counter(op["op_name"] for op in it._get_ops_details())
    weighted = ops["CONV_2D"] + ops["DEPTHWISE_CONV_2D"] + ops["FULLY_CONNECTED"]
    halves = [t for t in it.get_tensor_details() if t["dtype"] == np.float16]
    assert weighted > 0 and len(halves) == ops["DEQUANTIZE"] == weighted, ops  # every weight float16, dequantized
    assert it.get_input_details()[0]["dtype"] == np.float32 and it.get_output_details()[0]["dtype"] == np.float32

    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    q = m["quantization"]
    assert m["files"]["model.tflite"]["precision"] == "fp16" and q["precision"] == "fp16"
    assert q["parity"]["max_abs_diff"] == f["parity_max_abs_diff"] <= q["parity"]["tolerance"] == f["parity_tolerance"]
    # fp32's rtol, on the reference's logits (within the rounding of the fp32 module's)
    assert f["parity_tolerance"] == pytest.approx(1e-4 * max(1.0, q["parity"]["fp32"]["max_abs_ref"]), rel=1e-2)
    # the file is the rounded model: far closer to the reference than to the fp32 weights it came from
    assert q["parity"]["fp32"] == f["fp16_vs_fp32"] and f["fp16_vs_fp32"]["max_abs_diff"] > 3 * f["parity_max_abs_diff"]
    assert "## fp16" in (tmp_path / "o" / "README.md").read_text()
    assert got["bundle_check"]["models"]["tflite"]["parity"]["passed"] is True
    assert run_cli_inproc(["check", str(tmp_path / "o.zip")], capsys).code == 0
