"""Issue 16, "Manifest, end to end": the fmnist default bundle, read as a deployer would.

The 10,000 Fashion-MNIST test images from Debian's package are preprocessed with *only* the
manifest's fields (implemented here with numpy, no nagkit transform), run with LiteRT and with
ONNX Runtime directly, and must give the accuracy the manifest reports (within 0.1 point). The
manifest's provenance is checked on the way: the table and device behind the prediction, the
accuracy's split and size, the weights' source and sha256, "unverified" without a device.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nagkit.images.fmnist import load_split

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


def _interp_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Bilinear resampling n_in -> n_out with half-pixel centres, edges clamped (no antialias)."""
    w = np.zeros((n_out, n_in), dtype=np.float64)
    scale = n_in / n_out
    for i in range(n_out):
        src = max((i + 0.5) * scale - 0.5, 0.0)
        lo = min(int(math.floor(src)), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        frac = src - lo
        w[i, lo] += 1 - frac
        w[i, hi] += frac
    return w


def manifest_preprocess(images: np.ndarray, pre: dict, shape: list[int]) -> np.ndarray:
    """uint8 [N, H, W] grayscale images -> the model input, from the manifest's fields alone."""
    assert pre["color"] == "grayscale" and pre["channels"] == 1 and shape[1] == 1
    assert pre["order"] == ["color", "resize", "center_crop", "scale", "normalize", "layout"]
    assert pre["resize_rule"] == "whole" and pre["center_crop"] is None and pre["interpolation"] == "bilinear"
    x = images.astype(np.float32) * np.float32(pre["scale"])
    size = pre["resize"]
    assert not pre["antialias"] or size >= min(images.shape[1:])  # (no low-pass filter to implement)
    wy = _interp_matrix(images.shape[1], size).astype(np.float32)
    wx = _interp_matrix(images.shape[2], size).astype(np.float32)
    x = wy @ x @ wx.T  # [size, H] @ [N, H, W] @ [W, size]
    x = (x - np.float32(pre["mean"][0])) / np.float32(pre["std"][0])
    assert pre["layout"] == "NCHW" and list(x.shape[1:]) == shape[2:]
    return x[:, None].astype(np.float32)


@pytest.fixture(scope="module")
def fmnist_bundle(tmp_path_factory):
    from nagkit.app.build import BuildOptions, build

    out = tmp_path_factory.mktemp("fm") / "bundle"
    # 0.2 ms: one of the shallowest networks (r32, 11 blocks; ~85% top-1): the manifest's fields are the
    # same for every network, and this one converts and runs its 3 x 10,000 test images soonest
    res = build(0.2, workspace="fmnist", options=BuildOptions(formats="tflite,onnx", out=out))
    return out, res


def _top1_litert(path, x, y):
    from ai_edge_litert.interpreter import Interpreter

    run = Interpreter(model_path=str(path), num_threads=1).get_signature_runner()
    correct = 0
    for i in range(len(x)):
        correct += int(np.argmax(run(image=x[i:i + 1])["logits"][0]) == y[i])
    return correct / len(x)


def _top1_onnx(path, x, y):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    correct = 0
    for i in range(len(x)):
        correct += int(np.argmax(sess.run(["logits"], {"image": x[i:i + 1]})[0][0]) == y[i])
    return correct / len(x)


def test_the_manifest_alone_reproduces_the_reported_accuracy(fmnist_bundle):
    out, _ = fmnist_bundle
    m = json.loads((out / "manifest.json").read_text())
    acc = m["accuracy"]
    assert acc["dataset"] == "fashion-mnist" and acc["split"].startswith("test") and acc["images"] == 10_000
    assert "model.tflite" in acc["evaluated"] and "LiteRT" in acc["evaluated"]
    x, y = load_split("test")
    assert len(x) == 10_000
    inp = manifest_preprocess(x, m["input"]["preprocessing"], m["input"]["shape"])
    litert = _top1_litert(out / "model.tflite", inp, y)
    onnx = _top1_onnx(out / "model.onnx", inp, y)
    assert abs(litert - acc["value"]) <= 0.001, (litert, acc["value"])
    assert abs(onnx - acc["value"]) <= 0.001, (onnx, acc["value"])
    assert acc["value"] > 0.6  # a trained model, not chance


def test_the_manifest_says_where_every_number_came_from(fmnist_bundle):
    from nagkit.app.workspace import load_workspace
    from nagkit.supernet import sha256_file

    out, res = fmnist_bundle
    ws = load_workspace("fmnist")
    m = json.loads((out / "manifest.json").read_text())
    pred = m["latency"]["predicted"]
    assert pred["table"]["spec"] == ws.latency_table_spec and len(pred["table"]["sha256"]) == 64
    assert pred["table"]["device"] and pred["table"]["runtime"]["name"]  # the device the table was measured on
    assert m["device"] is None and m["latency"]["measured"] is None and m["latency"]["status"] == "unverified"
    assert any("unverified" in n for n in m["notes"])
    assert m["weights"]["sha256"] == sha256_file(ws.supernet_path()) and m["weights"]["source"].endswith("supernet.pt")
    assert m["input"]["name"] == "image" and m["output"]["name"] == "logits" and len(m["output"]["labels"]) == 10
    assert m["files"]["model.tflite"]["metadata"] and res.accuracies[0] == {k: v for k, v in m["accuracy"].items()
                                                                         if k != "others"}
    for other in m["accuracy"]["others"]:
        assert other["split"] and other["images"] and other["evaluated"]
    readme = (out / "README.md").read_text()
    assert "def preprocess(path):" in readme and "**Latency: unverified.**" in readme
