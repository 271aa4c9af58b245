"""One adapter per runtime: parity checks and timing open a model with the same settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nagkit.devices.registry import parse_device_spec
from nagkit.export.parity import check_parity
from nagkit.runtimes import litert, ort
from nagkit.runtimes.convert import to_onnx
from nagkit.runtimes.models import RUNNERS
from nagkit.runtimes.threads import DEFAULT_THREADS


def _net() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(4, 3)).eval()


def _timing_runner(spec: str):
    """The runner the CPU worker builds for ``spec`` (nagkit.devices.worker main)."""
    ds = parse_device_spec(spec)
    return RUNNERS[ds.get("runtime")](ds.get("threads"))


def test_default_cpu_device_and_parity_use_the_same_thread_count():
    assert parse_device_spec("cpu").get("threads") == DEFAULT_THREADS
    assert parse_device_spec("cpu:onnxruntime").get("threads") == DEFAULT_THREADS


def test_onnx_runtime_session_options_for_parity_equal_those_for_timing(tmp_path, monkeypatch):
    import onnxruntime

    net = _net()
    path = to_onnx(net, torch.zeros(1, 3, 8, 8), tmp_path / "m.onnx")
    seen: list[tuple[dict, tuple]] = []
    real = onnxruntime.InferenceSession

    def spy(model, sess_options=None, providers=None, **kw):
        seen.append((ort.describe_options(sess_options), tuple(providers)))
        return real(model, sess_options=sess_options, providers=providers, **kw)

    monkeypatch.setattr(onnxruntime, "InferenceSession", spy)
    check_parity(net, path)  # what export_model and bundle verification run
    parity = seen.pop()
    _timing_runner("cpu:onnxruntime").prepare(str(path), None, np.random.default_rng(0))
    timing = seen.pop()
    assert parity == timing
    assert parity[0] == {"intra_op_num_threads": 1, "inter_op_num_threads": 1,
                         "execution_mode": "ExecutionMode.ORT_SEQUENTIAL",
                         "graph_optimization_level": "GraphOptimizationLevel.ORT_ENABLE_ALL",
                         "log_severity_level": 3}
    assert parity[1] == ("CPUExecutionProvider",)
    # a device with more threads times with more, through the same options
    _timing_runner("cpu:onnxruntime,threads=2").prepare(str(path), None, np.random.default_rng(0))
    assert seen.pop()[0] == {**parity[0], "intra_op_num_threads": 2}


@pytest.mark.slow
def test_litert_interpreter_settings_for_parity_equal_those_for_timing(tiny_export, monkeypatch):
    _, _, net, res = tiny_export
    cls, dist = litert.interpreter_class()
    seen: list[dict] = []

    class Spy(cls):
        def __init__(self, **kw):
            seen.append({k: v for k, v in kw.items() if k != "model_path"})
            super().__init__(**kw)

    monkeypatch.setattr(litert, "interpreter_class", lambda: (Spy, dist))
    check_parity(net, res.paths["tflite"])
    parity = seen.pop()
    _timing_runner("cpu").prepare(str(res.paths["tflite"]), None, np.random.default_rng(0))
    assert seen.pop() == parity == {"num_threads": 1}
