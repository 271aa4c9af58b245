"""The CPU device: LiteRT, ONNX Runtime and torch really run a tiny converted model in a
persistent worker process pinned to cores; crashes restart the worker; bad models fail loudly."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from nagkit.devices.base import LatencyStats, MeasureConfig
from nagkit.devices.registry import get_device
from nagkit.errors import BadInputError, DeviceError, exit_code_for

FAST = MeasureConfig(warmup_runs=2, warmup_s=0.0, min_runs=5, min_time_s=0.0, max_runs=60, max_time_s=0.5)
SHAPE = (1, 3, 16, 16)


def _tiny_net():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4),
    ).eval()


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    import torch

    from nagkit.runtimes.convert import to_onnx

    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
    return to_onnx(_tiny_net(), x, tmp_path_factory.mktemp("onnx") / "tiny.onnx")


@pytest.fixture(scope="module")
def tflite_model(tmp_path_factory):
    import torch

    from nagkit.runtimes.convert import to_tflite

    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
    return to_tflite(_tiny_net(), x, tmp_path_factory.mktemp("tflite") / "tiny.tflite")


@pytest.fixture
def models(onnx_model, request):
    """The same tiny network as ONNX and (only when a test asks for it) TFLite."""
    out = {"onnx": onnx_model}
    if "tflite" in request.node.name or "litert" in request.node.name:
        out["tflite"] = request.getfixturevalue("tflite_model")
    return out


def _check(stats: LatencyStats, cfg: MeasureConfig = FAST) -> None:
    assert isinstance(stats, LatencyStats)
    assert stats.n >= cfg.min_runs and stats.n == len(stats.samples_ms) <= cfg.max_runs
    assert stats.median_ms > 0 and stats.min_ms <= stats.median_ms <= max(stats.samples_ms)


@pytest.mark.slow
def test_litert_measures_tflite(models):
    with get_device("cpu:runtime=litert,threads=1") as dev:
        assert dev.model_format == "tflite"
        _check(dev.measure(models["tflite"], SHAPE, FAST))
        _check(dev.measure(models["tflite"], None, FAST))  # the model's own input shape
        rt = dev.runtime_info()
    assert rt["name"] == "litert" and rt["delegate"] == "xnnpack" and rt["threads"] == 1
    assert rt["xnnpack_seen"] is True  # LiteRT said it applied XNNPACK
    assert rt["version"]


@pytest.mark.slow
def test_onnxruntime_measures_onnx_pinned_to_one_core(models):
    core = sorted(os.sched_getaffinity(0))[-1]
    with get_device(f"cpu:runtime=onnxruntime,threads=1,cores={core}") as dev:
        assert dev.model_format == "onnx"
        _check(dev.measure(models["onnx"], SHAPE, FAST))
        rt = dev.runtime_info()
        pid = dev.worker_pid
        assert os.sched_getaffinity(pid) == {core}  # the worker really is pinned
    assert rt["name"] == "onnxruntime" and rt["cores"] == [core] and rt["inter_op_threads"] == 1


@pytest.mark.slow
def test_torch_measures_a_module_without_changing_it():
    net = _tiny_net().train()
    with get_device("cpu:torch") as dev:
        assert dev.model_format == "torch"
        _check(dev.measure(net, SHAPE, FAST))
        rt = dev.runtime_info()
        assert rt["name"] == "torch" and rt["runtime_threads"] == 1  # torch.get_num_threads() in the worker
    assert net.training  # mode restored


@pytest.mark.slow
def test_measure_many_reuses_one_worker(models):
    seen = []
    with get_device("cpu:onnxruntime") as dev:
        stats = dev.measure_many([(models["onnx"], SHAPE), {"model": models["onnx"], "input_shape": SHAPE}],
                                 FAST, on_result=lambda i, s: seen.append((i, dev.worker_pid)))
    assert [i for i, _ in seen] == [0, 1]
    assert seen[0][1] == seen[1][1]  # same worker process for both
    for s in stats:
        _check(s)


@pytest.mark.slow
def test_crashed_worker_is_restarted_and_reported(models, caplog):
    with get_device("cpu:onnxruntime") as dev:
        _check(dev.measure(models["onnx"], SHAPE, FAST))
        old = dev.worker_pid
        os.kill(old, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="nagkit.devices.cpu"):
            _check(dev.measure(models["onnx"], SHAPE, FAST))
        assert dev.worker_pid != old
        assert dev.runtime_info()["worker_restarts"] == 1
    msgs = [r.getMessage() for r in caplog.records]
    assert any("died" in m and "SIGKILL" in m and "restarting" in m for m in msgs), msgs


@pytest.mark.slow
@pytest.mark.parametrize("runtime, suffix", [("litert", ".tflite"), ("onnxruntime", ".onnx")])
def test_bad_model_file_raises_device_error_quoting_the_runtime(tmp_path, models, runtime, suffix):
    bad = tmp_path / f"broken{suffix}"
    bad.write_bytes(b"this is not a model" * 10)
    with get_device(f"cpu:runtime={runtime}") as dev:
        with pytest.raises(DeviceError) as ei:
            dev.measure(bad, SHAPE, FAST)
        assert f"{runtime} could not load 'broken{suffix}'" in ei.value.message
        assert len(ei.value.message) > len(f"{runtime} could not load 'broken{suffix}': ")  # the runtime's words
        assert exit_code_for(ei.value) == 3
        # the worker survives a load failure and keeps measuring
        good = models["tflite"] if runtime == "litert" else models["onnx"]
        _check(dev.measure(good, SHAPE, FAST))
        assert dev.runtime_info()["worker_restarts"] == 0


@pytest.mark.slow
def test_wrong_input_shape_is_a_device_error(models):
    with get_device("cpu:onnxruntime") as dev, pytest.raises(DeviceError) as ei:
        dev.measure(models["onnx"], (1, 3, 32, 32), FAST)
    assert "could not feed" in ei.value.message and "[1, 3, 32, 32]" in ei.value.message


def test_missing_file_and_wrong_format_are_bad_input(tmp_path):
    onnx_file = tmp_path / "m.onnx"
    onnx_file.write_bytes(b"x")
    with get_device("cpu") as dev:
        with pytest.raises(BadInputError, match="does not exist"):
            dev.measure(tmp_path / "nope.tflite", SHAPE, FAST)
        with pytest.raises(BadInputError) as ei:
            dev.measure(onnx_file, SHAPE, FAST)
        assert "measures .tflite files" in ei.value.message and "cpu:runtime=onnxruntime" in ei.value.hint
        with pytest.raises(BadInputError, match="to_tflite"):
            dev.measure(_tiny_net(), SHAPE, FAST)
        assert dev.worker_pid is None  # refused before any worker started


def test_unavailable_core_is_refused():
    with pytest.raises(BadInputError) as ei:
        get_device("cpu:cores=4096")
    assert "cores 4096 (1 of them)" in ei.value.message and "not available" in ei.value.message


def test_issue35_unavailable_cores_are_echoed_short():
    """`cpu:cores=0-8191` on a 2-core machine printed a 48 KB error line (every core listed)."""
    import os

    n = len(os.sched_getaffinity(0))
    for spec in ("cpu:cores=0-8191", "cpu:cores=" + ",".join(str(c) for c in range(n, 8192, 2))):
        with pytest.raises(BadInputError) as ei:
            get_device(spec)
        text = str(ei.value)
        assert "not available" in text and len(text) < 600, len(text)


def test_profile_measure_settings_become_the_default(tmp_path, onnx_model):
    p = tmp_path / "quick.yaml"
    p.write_text("device: cpu:onnxruntime\nmeasure: {warmup_runs: 1, warmup_s: 0, min_runs: 3, min_time_s: 0,"
                 " max_runs: 3, max_time_s: 1}\n")
    with get_device(str(p)) as dev:
        assert dev.default_cfg.max_runs == 3
        stats = dev.measure(onnx_model, SHAPE)
    assert stats.n == 3


def test_info_reads_the_host():
    with get_device("cpu") as dev:
        info = dev.info()
    assert info["kind"] == "cpu" and info["logical_cores"] >= 1
    assert info["kernel"] and info["python"] and info["affinity"]
    assert "cpu_model" in info or not os.path.exists("/proc/cpuinfo")


def test_cpu_id_tells_apart_cpus_that_a_hypervisor_gives_one_model_name():
    """Two AMD EPYC VMs of this project both say "AMD EPYC": family and model tell the Zen 4 from the Zen 5."""
    from nagkit.devices.cpuinfo import cpu_id

    def x86(family, model):
        core = (f"processor\t: {{n}}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                "model name\t: AMD EPYC\nstepping\t: 1\n")
        return core.format(n=0) + "\n" + core.format(n=1)

    assert cpu_id(x86(25, 17)) == "AuthenticAMD family 25 model 17 stepping 1"
    assert cpu_id(x86(26, 2)) == "AuthenticAMD family 26 model 2 stepping 1"
    arm = ("processor\t: 0\nBogoMIPS\t: 38.40\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\n"
           "CPU part\t: 0xd05\nCPU revision\t: 0\n\nprocessor\t: 4\nCPU implementer\t: 0x41\nCPU part\t: 0xd0d\n")
    assert cpu_id(arm) == "implementer 0x41 architecture 8 part 0xd05 variant 0x1 revision 0"  # the first core's
    assert cpu_id("Hardware\t: Qualcomm\nmodel name\t: AMD EPYC\n") is None  # no identity fields: none claimed
    assert cpu_id("") is None
    if os.path.exists("/proc/cpuinfo") and cpu_id(open("/proc/cpuinfo").read()):
        with get_device("cpu") as dev:
            assert dev.info()["cpu_id"] == cpu_id(open("/proc/cpuinfo").read())


@pytest.mark.slow
def test_cli_measure_bad_model_exits_3_and_good_model_prints_stats(tmp_path, onnx_model, capsys):
    import json

    from nagkit.cli.main import main

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage")
    assert main(["devices", "--device", "cpu:onnxruntime", "--measure", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "onnxruntime could not load 'bad.onnx'" in err and "hint:" in err
    assert main(["devices", "--device", "cpu:onnxruntime", "--measure", str(onnx_model), "--shape", "1,3,16,16",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measurement"]["n"] >= 1 and out["measurement"]["median_ms"] > 0
    assert out["runtime"]["name"] == "onnxruntime" and out["model_format"] == "onnx"


@pytest.mark.slow
def test_worker_killed_mid_measurement_is_restarted_and_the_model_retried(onnx_model, caplog):
    import threading
    import time

    # target 0 never converges, so each measurement runs to max_time_s: long enough to kill it mid-way
    cfg = MeasureConfig(warmup_runs=1, warmup_s=0.0, min_runs=1, min_time_s=0.0, max_runs=10**7, max_time_s=1.5,
                        target_rel_iqr=0.0)
    with get_device("cpu:onnxruntime") as dev:
        dev.runtime_info()  # start the worker
        victim = dev.worker_pid
        killer = threading.Timer(0.7, os.kill, (victim, signal.SIGKILL))
        killer.start()
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="nagkit.devices.cpu"):
            stats = dev.measure(onnx_model, SHAPE, cfg)
        killer.join()
        assert time.monotonic() - t0 > 1.5  # the first attempt was cut short, then retried in full
        assert stats.n > 1 and dev.worker_pid not in (None, victim)
        assert dev.runtime_info()["worker_restarts"] == 1
    assert any("while measuring" in r.getMessage() and "SIGKILL" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_stuck_worker_times_out_and_is_replaced(onnx_model):
    cfg = MeasureConfig(warmup_runs=1, warmup_s=0.0, min_runs=1, min_time_s=0.0, max_runs=10**7, max_time_s=5.0,
                        target_rel_iqr=0.0)
    with get_device("cpu:onnxruntime") as dev:
        dev.runtime_info()
        stuck = dev.worker_pid
        dev.request_timeout_s = 0.5
        with pytest.raises(DeviceError) as ei:
            dev.measure(onnx_model, SHAPE, cfg)
        assert "timed out" in ei.value.message and ei.value.exit_code == 3
        dev.request_timeout_s = None
        _check(dev.measure(onnx_model, SHAPE, FAST))
        assert dev.worker_pid != stuck


def test_thread_count_reaches_the_worker_environment():
    with get_device("cpu:onnxruntime,threads=2") as dev:
        assert dev.runtime_info()["threads"] == 2
        env = open(f"/proc/{dev.worker_pid}/environ", "rb").read().split(b"\0")
    assert b"OMP_NUM_THREADS=2" in env and b"TF_NUM_INTEROP_THREADS=1" in env


def test_litert_falls_back_to_tflite_runtime_only_when_that_is_installed(monkeypatch):
    import importlib.util

    from nagkit.runtimes import versions

    real = importlib.util.find_spec

    def only_tflite_runtime(name, *a, **k):  # test double: ai_edge_litert absent, tflite_runtime present
        if name == "ai_edge_litert":
            return None
        if name == "tflite_runtime":
            return real("json")  # any importable module stands in for the spec
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", only_tflite_runtime)
    row = versions.runtime_status()["litert"]
    assert row["available"] and row["package"] == "tflite-runtime"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name in
                        ("ai_edge_litert", "tflite_runtime") else real(name, *a, **k))
    row = versions.runtime_status()["litert"]
    assert not row["available"] and row["package"] == "ai-edge-litert"
    with pytest.raises(DeviceError) as ei:
        get_device("cpu")
    assert "pip install ai-edge-litert" in ei.value.hint
