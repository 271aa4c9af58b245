"""The CUDA device: imports without LiteRT/adb-shell, fails loudly without a GPU, and on a GPU
times modules in graph and eager mode with CUDA events."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nagkit.devices.base import MeasureConfig
from nagkit.errors import BadInputError, DeviceError

FAST = MeasureConfig(warmup_runs=2, warmup_s=0.0, min_runs=5, min_time_s=0.0, max_runs=200, max_time_s=1.0)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return False


def test_cuda_module_imports_without_litert_or_adb_shell():
    # The GPU machine has torch but no LiteRT or adb-shell: block them and import the CUDA path.
    code = (
        "import sys\n"
        "for m in ('ai_edge_litert', 'tflite_runtime', 'adb_shell', 'litert_torch', 'onnxruntime'):\n"
        "    sys.modules[m] = None\n"
        "import nagkit.devices.cuda, nagkit.devices.registry\n"
        "from nagkit.devices.registry import parse_device_spec\n"
        "print(parse_device_spec('cuda:1,mode=eager'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cuda:index=1,mode=eager"


@pytest.mark.skipif(_cuda_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_raises_device_error_with_hint():
    from nagkit.devices.registry import get_device

    with pytest.raises(DeviceError) as ei:
        get_device("cuda")
    assert "CUDA is not available" in ei.value.message
    assert "nagkit devices" in ei.value.hint
    assert ei.value.exit_code == 3


def test_list_cuda_never_raises():
    from nagkit.devices.cuda import list_cuda

    rows = list_cuda()
    assert isinstance(rows, list)
    assert bool(rows) == _cuda_available()


def _tiny_block():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(16, 32, 1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1, groups=32), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 16, 1),
    ).eval()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_cuda_measures_module_in_both_modes(mode):
    from nagkit.devices.registry import get_device

    block = _tiny_block()
    with get_device(f"cuda:mode={mode}") as dev:
        assert dev.model_format == "torch"
        st = dev.measure(block, (1, 16, 28, 28), FAST)
        rt = dev.runtime_info()
        info = dev.info()
    assert st.n >= 5 and st.median_ms > 0 and len(st.samples_ms) == st.n
    assert rt["mode"] == mode and rt["cudnn_benchmark"] is True
    assert info["gpu"] and info["memory_gib"] > 0
    # the caller's module stays where it was
    assert next(block.parameters()).device.type == "cpu"
    if mode == "graph":
        assert dev.last_replays >= 1


@pytest.mark.gpu
def test_cuda_bad_index_lists_the_gpus():
    import torch

    from nagkit.devices.registry import get_device

    n = torch.cuda.device_count()
    with pytest.raises(BadInputError) as ei:
        get_device(f"cuda:{n}")
    assert f"cuda:{n} does not exist" in ei.value.message and "cuda:0" in ei.value.message


@pytest.mark.gpu
def test_cuda_graph_capture_failure_suggests_eager():
    import torch

    from nagkit.devices.registry import get_device

    class SyncsWithHost(torch.nn.Module):  # .item() synchronizes: illegal during capture
        def forward(self, x):
            return x * float(x.sum().item())

    with get_device("cuda") as dev, pytest.raises(DeviceError) as ei:
        dev.measure(SyncsWithHost(), (1, 8), FAST)
    assert "CUDA graph" in ei.value.message and "mode=eager" in ei.value.hint
    with get_device("cuda:mode=eager") as dev:
        assert dev.measure(SyncsWithHost(), (1, 8), FAST).median_ms > 0


@pytest.mark.gpu
def test_cuda_measures_torchscript_file(tmp_path):
    import warnings

    import torch

    from nagkit.devices.registry import get_device

    block = _tiny_block()
    path = tmp_path / "block.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.trace(block, torch.randn(1, 16, 28, 28)), str(path))
    with get_device("cuda") as dev:
        assert dev.measure(path, (1, 16, 28, 28), FAST).n >= 5
