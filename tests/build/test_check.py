"""`nagkit check`: exit codes both ways on the CPU (LiteRT and ONNX Runtime), and bad inputs."""

from __future__ import annotations

import json

import pytest

from ..cli.helpers import run_cli


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
