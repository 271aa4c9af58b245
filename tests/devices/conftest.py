"""Fixtures for the ADB tests: a loopback adbd in a sandbox, a private ADB key, a tiny
.tflite (converted once per session) and the benchmark_model stand-in."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def adb_key(tmp_path_factory):
    """A private ADB key, so tests never touch ~/.android."""
    return tmp_path_factory.mktemp("adbkey") / "adbkey"


@pytest.fixture
def loopback(tmp_path):
    """A loopback adbd on a free 127.0.0.1 port, sandboxed under tmp_path/sandbox."""
    from nagkit.devices.loopback import LoopbackAdbd

    with LoopbackAdbd(tmp_path / "sandbox", port=0) as adbd:
        yield adbd


@pytest.fixture(scope="session")
def benchmark_runner(tmp_path_factory):
    """The loopback's benchmark_model stand-in (a script), pushed like the real binary."""
    from nagkit.devices.loopback import write_benchmark_runner

    return write_benchmark_runner(tmp_path_factory.mktemp("runner") / "benchmark_model")


@pytest.fixture(scope="session")
def tiny_tflite(tmp_path_factory):
    """A tiny conv net as .tflite (converted with nagkit.runtimes.convert.to_tflite, once)."""
    import torch

    from nagkit.runtimes.convert import to_tflite

    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return to_tflite(net, torch.randn(1, 3, 16, 16, generator=g), tmp_path_factory.mktemp("tflite") / "tiny.tflite")


@pytest.fixture
def adb_profile(benchmark_runner, adb_key):
    """A fast profile for the loopback device (few runs, short times, quick retries)."""
    return {
        "benchmark_binary": str(benchmark_runner),
        "taskset": "f0",
        "threads": 1,
        "num_runs": 5,
        "warmup_runs": 1,
        "min_secs": 0.05,
        "warmup_min_secs": 0.01,
        "adb_key": str(adb_key),
        "cooldown_poll_s": 0.1,
        "cooldown_max_s": 5.0,
        "connect_timeout_s": 5.0,
    }
