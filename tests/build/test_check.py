"""`nagkit check`: exit codes both ways on the CPU (LiteRT and ONNX Runtime), and bad inputs."""

from __future__ import annotations

import json

import pytest

from ..cli.helpers import run_cli, run_cli_inproc


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import torch

    from nagkit.runtimes.convert import to_onnx, to_tflite

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()
    d = tmp_path_factory.mktemp("models")
    x = torch.randn(1, 3, 32, 32)
    return {"tflite": to_tflite(net, x, d / "m.tflite"), "onnx": to_onnx(net, x, d / "m.onnx")}


@pytest.mark.slow
@pytest.mark.parametrize("fmt, device", [("tflite", "cpu"), ("onnx", "cpu:runtime=onnxruntime")])
def test_check_exit_codes_both_ways(models, cli_env, fmt, device):
    ok = run_cli(["check", str(models[fmt]), "--device", device, "--budget", "10000", "--json"], env=cli_env)
    assert ok.code == 0, ok.err
    r = json.loads(ok.out)
    assert r["passed"] and 0 < r["median_ms"] < 10000 and r["format"] == fmt and r["input_shape"] == [1, 3, 32, 32]
    bad = run_cli(["check", str(models[fmt]), "--device", device, "--budget", "0.00001"], env=cli_env)
    assert bad.code == 1 and bad.out.startswith("FAIL"), bad.out + bad.err


def test_check_bad_inputs(models, cli_env, tmp_path):
    r = run_cli(["check", str(tmp_path / "nope.tflite"), "--device", "cpu", "--budget", "5"], env=cli_env)
    assert r.code == 2 and "does not exist" in r.err and "Traceback" not in r.err
    r = run_cli(["check", str(models["onnx"]), "--device", "cpu", "--budget", "5"], env=cli_env)
    assert r.code == 2 and "runs tflite models, not onnx" in r.err
    r = run_cli(["check", str(models["tflite"]), "--device", "toaster", "--budget", "5"], env=cli_env)
    assert r.code == 2 and "toaster" in r.err and "Traceback" not in r.err
    r = run_cli(["check", str(models["tflite"]), "--device", "cpu", "--budget", "-1"], env=cli_env)
    assert r.code == 2 and "--budget" in r.err


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, tiny_export):
    from nagkit.export.bundle import make_manifest, write_bundle

    sp, arch, _, res = tiny_export
    b = write_bundle(tmp_path_factory.mktemp("cb") / "b", res.paths,
                     make_manifest(sp, arch, export=res, weights_sha256="0" * 64))
    return b.root


def _lying_copy(bundle, tmp_path, **changes):
    """A copy of the bundle whose manifest says other shapes (the model files, hashes intact)."""
    import shutil

    out = tmp_path / "lying"
    shutil.copytree(bundle, out)
    m = json.loads((out / "manifest.json").read_text())
    for where, shape in changes.items():
        m[where]["shape"] = shape
    (out / "manifest.json").write_text(json.dumps(m))
    return out


@pytest.mark.parametrize("where, shape, said", [
    ("input", [1, 3, 40, 40], "takes input [1, 3, 32, 32] but the manifest says [1, 3, 40, 40]"),
    ("output", [1, 11], "gives output [1, 10] but the manifest says [1, 11]"),
])
def test_check_refuses_a_manifest_that_contradicts_its_model(bundle, tmp_path, capsys, where, shape, said):
    """Issue 13 D5 (a lying input shape) and D13 (a contradicting output shape): exit 2, one line,
    before anything is measured; with or without a device."""
    lying = _lying_copy(bundle, tmp_path, **{where: shape})
    for args in (["--device", "cpu", "--budget", "1000"], []):
        r = run_cli_inproc(["check", str(lying), *args], capsys)
        assert r.code == 2 and said in r.err and "Traceback" not in r.err, r.err
        assert r.out == ""


def test_check_without_a_device_verifies_the_bundle(bundle, cli_env, capsys):
    r = run_cli_inproc(["check", str(bundle), "--json"], capsys)
    assert r.code == 0, r.err
    v = json.loads(r.out)
    assert v["verified"] and v["input"] == {"name": "image", "shape": [1, 3, 32, 32], "layout": "NCHW",
                                              "dtype": "float32"}
    assert set(v["files"]) == {"model.onnx", "model.tflite"} and v["cross_runtime"]["passed"]
    assert v["latency_status"] == "unverified"
    r = run_cli(["check", str(bundle), "--device", "cpu"], env=cli_env)  # the exit code end to end
    assert r.code == 2 and "--device and --budget go together" in r.err
