"""Issue 14: int8 bundles (`nagkit build --export tflite-int8`), decisions 23.

One int8 bundle of the fmnist workspace is built once (module fixture, ~4-6 min on the shared
2-core machine) and read as a deployer would: the .tflite really holds int8 tensors (the
interpreter's tensor details), its accuracy on the 10,000 test images through LiteRT with only
the manifest's preprocessing and input quantization is the manifest's and within 1.0 point of
fp32, `nagkit check` verifies and measures it unchanged, and the drop rule fails the build.
Bad input (no calibration images, unknown precision, ...) is refused before any work, exit 2.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.cli.helpers import run_cli_inproc

# -- bad input: one error line (+ its hint), exit 2, nothing written (fast: refused before any model work) ------------


@pytest.mark.parametrize("args, says", [
    (["--workspace", "ofa-note10", "--export", "tflite-int8"], ["ofa-note10", "--data DIR", "calibrate"]),
    (["--export", "tflite-int4"], ["'tflite-int4'", "tflite-int8", "onnx"]),
    (["--export", "tflite-fp8,onnx"], ["'tflite-fp8'", "tflite-int8"]),
    (["--export", "onnx-int8,tflite-int8"], ["one model", "one bundle per format"]),
    (["--export", "tflite-int8,onnx"], ["mixes precisions"]),
    (["--export", "tflite-int8", "--random-init"], ["trained weights"]),
    (["--export", "tflite-int8", "--max-int8-drop", "-1"], ["--max-int8-drop", "-1"]),
])
def test_bad_int8_requests_exit_2_and_write_nothing(tmp_path, capsys, args, says):
    out = tmp_path / "b"
    r = run_cli_inproc(["build", "--budget", "0.5", "--out", str(out), *args], capsys)
    assert r.code == 2, r.err
    lines = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and r.out == "", r.err
    for s in says:  # the error line and its hint line (errors.message_for)
        assert s in r.err, r.err
    assert list(tmp_path.iterdir()) == []


# -- one int8 bundle -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def int8_bundle(tmp_path_factory):
    import torch

    from nagkit.app.build import BuildOptions, build

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("int8") / "bundle"
        res = build(0.5, workspace="fmnist", options=BuildOptions(formats="tflite-int8", out=out))
    finally:
        torch.set_num_threads(n)
    return out, res, json.loads((out / "manifest.json").read_text())


@pytest.mark.slow
def test_int8_bundle_holds_a_full_integer_model(int8_bundle):
    from ai_edge_litert.interpreter import Interpreter

    out, res, m = int8_bundle
    assert res.precision == "int8" and m["files"]["model.tflite"]["precision"] == "int8"
    it = Interpreter(model_path=str(out / "model.tflite"))
    it.allocate_tensors()
    (inp,), (outp,) = it.get_input_details(), it.get_output_details()
    assert inp["dtype"] == np.int8 and outp["dtype"] == np.int8
    assert m["input"]["dtype"] == "int8"
    assert inp["quantization"] == pytest.approx((m["quantization"]["input"]["scale"],
                                                 m["quantization"]["input"]["zero_point"]))
    tensors = it.get_tensor_details()
    by_index = {t["index"]: t for t in tensors}
    kinds = Counter(np.dtype(t["dtype"]).name for t in tensors)
    assert kinds["int8"] > kinds["float32"], kinds
    convs = [op for op in it._get_ops_details() if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D",
                                                                     "FULLY_CONNECTED")]
    assert convs
    for op in convs:  # every conv / fc: int8 input and weights, weights per output channel
        x, w = by_index[op["inputs"][0]], by_index[op["inputs"][1]]
        assert x["dtype"] == np.int8 and w["dtype"] == np.int8, op
        scales = w["quantization_parameters"]["scales"]
        assert len(scales) == w["shape"][w["quantization_parameters"]["quantized_dimension"]] > 1, op
    assert any("fp32 latency table" in n for n in m["notes"])


def _manifest_preprocess(images, m):
    from tests.build.test_build_manifest import manifest_preprocess

    x = manifest_preprocess(images, m["input"]["preprocessing"], m["input"]["shape"])
    q = m["quantization"]["input"]  # the full-integer model's input: q = round(x / scale) + zero_point
    info = np.iinfo(q["dtype"])
    return np.clip(np.round(x / q["scale"]) + q["zero_point"], info.min, info.max).astype(q["dtype"])


@pytest.mark.slow
def test_int8_accuracy_from_the_manifest_alone_is_within_a_point_of_fp32(int8_bundle):
    from ai_edge_litert.interpreter import Interpreter

    from nagkit.images.fmnist import load_split

    out, res, m = int8_bundle
    x, y = load_split("test")
    it = Interpreter(model_path=str(out / "model.tflite"), num_threads=1)
    it.allocate_tensors()
    (inp,), (outp,) = it.get_input_details(), it.get_output_details()
    pred = np.empty(len(x), dtype=np.int64)
    for i in range(0, len(x), 1000):
        xq = _manifest_preprocess(x[i:i + 1000], m)
        for j in range(len(xq)):
            it.set_tensor(inp["index"], xq[j:j + 1])
            it.invoke()
            pred[i + j] = int(np.argmax(it.get_tensor(outp["index"])))
    acc = float((pred == y).mean())
    par = m["quantization"]["parity"]
    assert acc == pytest.approx(m["accuracy"]["value"], abs=0.001)  # what the manifest reports
    assert acc == pytest.approx(par["int8_accuracy"], abs=0.001)
    assert par["images"] == len(y) == 10000 and par["passed"] is True
    assert abs(100 * (par["fp32_accuracy"] - acc)) <= 1.0, par  # within 1.0 point of fp32 of the same arch
    assert par["drop_points"] == pytest.approx(100 * (par["fp32_accuracy"] - par["int8_accuracy"]))
    assert 0.9 <= par["top1_agreement"] <= 1.0


@pytest.mark.slow
def test_check_verifies_and_measures_an_int8_bundle_unchanged(int8_bundle, capsys):
    out, _, _ = int8_bundle
    r = run_cli_inproc(["check", str(out)], capsys)
    assert r.code == 0 and r.out.startswith("OK: bundle verified"), r.err
    r = run_cli_inproc(["check", str(out) + ".zip", "--device", "cpu", "--budget", "1000", "--json"], capsys)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["passed"] is True and got["format"] == "tflite" and got["median_ms"] > 0


@pytest.mark.slow
def test_a_drop_over_the_threshold_fails_with_the_figures(int8_bundle):
    """int8_parity, as the build runs it, on the bundle's model and the same recalibrated subnet
    (the first 1,000 test images, to keep the test short): under the threshold it passes; with a
    threshold below the drop it is a failed check (exit 1) that carries the same figures."""
    from nagkit.app.build_inputs import split
    from nagkit.app.int8 import Int8DropError, int8_parity
    from nagkit.app.workspace import load_workspace
    from nagkit.supernet import load_supernet
    from nagkit.supernet.finetune import recalibrate_subnet

    out, res, _ = int8_bundle
    ws = load_workspace("fmnist")
    arch = ws.space.parse_arch(res.arch)
    sub = recalibrate_subnet(load_supernet(ws.supernet_path(), ws.space).extract(arch), ws.space, split(ws))
    model = Path(out) / "model.tflite"
    ok = int8_parity(model, sub, ws.space, arch.r, max_drop=100.0, limit=1000)
    assert ok["passed"] is True and ok["images"] == 1000
    with pytest.raises(Int8DropError) as e:
        int8_parity(model, sub, ws.space, arch.r, max_drop=ok["drop_points"] - 0.5, limit=1000)
    assert e.value.exit_code == 1 and "--max-int8-drop" in e.value.message and "nothing was written" in e.value.message
    assert {k: e.value.record[k] for k in ("int8_accuracy", "fp32_accuracy", "top1_agreement", "drop_points")} == \
        {k: ok[k] for k in ("int8_accuracy", "fp32_accuracy", "top1_agreement", "drop_points")}
    assert e.value.record["passed"] is False


# -- nagkit export --format tflite-int8 -----------------------------------------------------------

FMNIST_CKPT = Path(__file__).resolve().parents[2] / "nagkit/resources/workspaces/fmnist/supernet/supernet.pt"
FMNIST_ARCH = "r28-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3-k3e3.k3e3"


@pytest.mark.parametrize("extra, says", [
    (["--weights", str(FMNIST_CKPT), "--format", "tflite-int8"], ["--data", "fashion-mnist"]),
    (["--random-init", "--format", "tflite-int8", "--data", "fashion-mnist"], ["trained weights"]),
    (["--weights", str(FMNIST_CKPT), "--format", "tflite", "--data", "fashion-mnist"], ["--data", "tflite-int8"]),
    (["--weights", str(FMNIST_CKPT), "--format", "tflite-int4"], ["tflite-int4", "tflite-int8"]),
])
def test_export_int8_bad_input_exit_2_and_write_nothing(tmp_path, capsys, extra, says):
    r = run_cli_inproc(["export", "--space", "fmnist-mbv3-w0.5", "--arch", FMNIST_ARCH, "--out", str(tmp_path / "o"),
                        "--bundle", *extra], capsys)
    assert r.code == 2 and r.out == "", r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error:")]) == 1, r.err
    for s in says:
        assert s in r.err, r.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_export_onnx_int8_bundle_is_quantized_checked_and_says_its_figures(tmp_path, capsys):
    """`nagkit export --format onnx-int8` (onnxruntime's quantize_static, QDQ): int8 weights in the
    graph, float input, the parity figures in --json and the manifest, `nagkit check` passes."""
    import onnx
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = run_cli_inproc(["export", "--weights", str(FMNIST_CKPT), "--space", "fmnist-mbv3-w0.5", "--arch",
                            FMNIST_ARCH, "--format", "onnx-int8", "--data", "fashion-mnist", "--bundle",
                            "--out", str(tmp_path / "o"), "--json"], capsys)
    finally:
        torch.set_num_threads(n)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert got["precision"] == "int8" and m["quantization"]["parity"] == got["int8"]
    par = got["int8"]
    assert par["images"] == 10000 and par["drop_points"] <= 1.0 and par["passed"] is True
    assert par["drop_points"] == pytest.approx(100 * (par["fp32_accuracy"] - par["int8_accuracy"]))
    assert m["files"]["model.onnx"]["precision"] == "int8" and m["input"]["dtype"] == "float32"
    assert m["quantization"]["input"] is None and "onnxruntime" in m["quantization"]["scheme"]["tool"]
    g = onnx.load(str(tmp_path / "o" / "model.onnx")).graph
    ops = Counter(nd.op_type for nd in g.node)
    assert ops["QuantizeLinear"] > 0 and ops["DequantizeLinear"] > 0, ops
    int8_weights = [t for t in g.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4]
    assert len(int8_weights) >= ops["Conv"] > 0  # every convolution's weights stored int8
    assert run_cli_inproc(["check", str(tmp_path / "o.zip")], capsys).code == 0
