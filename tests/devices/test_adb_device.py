"""AdbDevice end to end on the loopback device: push, benchmark_model (the LiteRT stand-in),
parse, LatencyStats; the model cache, injection, a drop mid-run, thermal cool-down, errors."""

from __future__ import annotations

import shutil
import threading

import pytest

from nagkit.devices.adb import AdbDevice, create_adb_device, validate_profile
from nagkit.devices.base import Device, MeasureConfig
from nagkit.errors import BadInputError, DeviceError, ProfileParseError

pytestmark = pytest.mark.slow  # converts a model once and starts LiteRT per measurement


def _sync_opens(adbd) -> int:
    return sum(s == "sync:" for s in adbd.opened_services)


def test_measure_on_loopback(loopback, adb_profile, tiny_tflite):
    dev = create_adb_device(f"adb:{loopback.serial}", adb_profile)
    assert isinstance(dev, Device) and dev.model_format == "tflite" and dev.spec == f"adb:{loopback.serial}"
    with dev:
        stats = dev.measure(tiny_tflite, (1, 3, 16, 16))
        assert stats.n >= 5 and stats.median_ms > 0 and stats.min_ms <= stats.median_ms
        assert dev.last_result.inference.count == stats.n
        assert dev.last_result.params["Num threads"] == "1"
        pushes = _sync_opens(loopback)
        again = dev.measure(tiny_tflite, (1, 3, 16, 16))  # cached: no second push
        assert again.n >= 5 and _sync_opens(loopback) == pushes
        ran = [s for s in loopback.opened_services if "benchmark_model" in s and "--graph=" in s]
        assert ran and ran[-1].startswith("shell:taskset f0 /data/local/tmp/nagkit/benchmark_model ")
        info = dev.info()
        assert info["model"] == "nagkit-loopback" and info["android"] == "loopback"
        assert info["thermal_status"] == 0 and info["soc"]
        rt = dev.runtime_info()
        assert rt["threads"] == 1 and rt["taskset"] == "f0" and len(rt["binary_sha256"]) == 64


def test_model_cache_survives_a_new_session(loopback, adb_profile, tiny_tflite):
    with AdbDevice(loopback.serial, adb_profile) as dev:
        dev.measure(tiny_tflite, (1, 3, 16, 16))
    pushes = _sync_opens(loopback)
    with AdbDevice(loopback.serial, adb_profile) as dev:  # files already on the device
        dev.measure(tiny_tflite, (1, 3, 16, 16), MeasureConfig(warmup_runs=1, warmup_s=0.01, min_runs=3,
                                                                min_time_s=0.01))
    stat_only = _sync_opens(loopback) - pushes
    assert stat_only == 2  # one stat for the binary, one for the model; nothing pushed
    assert dev.last_result.inference.count >= 3


def test_no_injection_through_paths(loopback, adb_profile, tiny_tflite, tmp_path):
    evil_model = tmp_path / "m; touch pwned.tflite"
    shutil.copy(tiny_tflite, evil_model)
    profile = {**adb_profile, "remote_dir": "/data/local/tmp/nag kit; touch pwned2",
               "benchmark_remote": "/data/local/tmp/bm; touch pwned3"}
    with AdbDevice(loopback.serial, profile) as dev:
        assert dev.measure(evil_model, (1, 3, 16, 16)).median_ms > 0
    root = loopback.sandbox.root
    assert not any(p.name.startswith("pwned") for p in root.rglob("*"))
    assert (root / "data/local/tmp/nag kit; touch pwned2/models").is_dir()


def test_reconnects_when_the_phone_drops_mid_run(loopback, adb_profile, tiny_tflite):
    with AdbDevice(loopback.serial, {**adb_profile, "reconnect_retries": 2}) as dev:
        loopback.drop_on("--graph=", times=1)  # cut the connection as the benchmark starts
        stats = dev.measure(tiny_tflite, (1, 3, 16, 16))
        assert stats.n >= 5 and dev.transport.reconnects == 1
    runs = [s for s in loopback.opened_services if "--graph=" in s]
    assert len(runs) == 2  # the dropped one and the retry


def test_reconnects_when_the_phone_drops_during_the_benchmark(loopback, adb_profile, tiny_tflite):
    """The connection dies while benchmark_model is running (its process is killed with it)."""
    profile = {**adb_profile, "min_secs": 1.0, "reconnect_retries": 2}
    with AdbDevice(loopback.serial, profile) as dev:
        dev.push_model(tiny_tflite)
        loopback.drop_on("--graph=", times=1, after_s=0.8)
        stats = dev.measure(tiny_tflite, (1, 3, 16, 16), MeasureConfig(warmup_runs=1, warmup_s=0.01, min_runs=5,
                                                                        min_time_s=1.0))
        assert stats.n >= 5 and dev.transport.reconnects == 1
    assert len([s for s in loopback.opened_services if "--graph=" in s]) == 2


def test_cools_down_when_hot(loopback, adb_profile, tiny_tflite):
    with AdbDevice(loopback.serial, adb_profile) as dev:
        dev.measure(tiny_tflite, (1, 3, 16, 16))  # files pushed; now heat up
        assert dev.cooldowns == []
        loopback.sandbox.set_thermal_status(3)  # SEVERE
        timer = threading.Timer(0.6, loopback.sandbox.set_thermal_status, args=(0,))
        timer.start()
        try:
            assert dev.measure(tiny_tflite, (1, 3, 16, 16)).n >= 5
        finally:
            timer.cancel()
        assert len(dev.cooldowns) == 1 and dev.cooldowns[0] >= 0.5


def test_stays_hot_raises(loopback, adb_profile, tiny_tflite):
    loopback.sandbox.set_thermal_status(4)
    with AdbDevice(loopback.serial, {**adb_profile, "cooldown_max_s": 0.3}) as dev:
        with pytest.raises(DeviceError, match="thermal status 4") as ei:
            dev.measure(tiny_tflite, (1, 3, 16, 16))
    assert "thermal_max_status" in ei.value.hint


def test_error_output_raises_not_zero(loopback, adb_profile, tiny_tflite):
    profile = {**adb_profile, "extra_args": ["--graph=/data/local/tmp/missing.tflite"]}
    with AdbDevice(loopback.serial, profile) as dev:
        with pytest.raises(ProfileParseError, match="Could not open") as ei:
            dev.measure(tiny_tflite, (1, 3, 16, 16))
    assert "Benchmarking failed" in str(ei.value)


def test_missing_binary_and_bad_model(loopback, adb_profile, tmp_path):
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"x")
    nowhere = {**adb_profile, "benchmark_binary": None, "benchmark_remote": "/data/local/tmp/elsewhere/benchmark_model"}
    with AdbDevice(loopback.serial, nowhere) as dev:
        with pytest.raises(DeviceError, match="has no benchmark_model at /data/local/tmp/elsewhere") as ei:
            dev.measure(onnx, (1, 3, 16, 16))
        assert "--benchmark-binary" in ei.value.hint
    with AdbDevice(loopback.serial, adb_profile) as dev:
        with pytest.raises(BadInputError, match="TFLite"):
            dev.measure(onnx, (1, 3, 16, 16))


def test_preinstalled_stand_in_needs_no_binary(loopback, adb_profile, tiny_tflite):
    """`--device adb:127.0.0.1:PORT` with no profile: the loopback pre-places its runner."""
    with AdbDevice(loopback.serial, {**adb_profile, "benchmark_binary": None}) as dev:
        assert dev.measure(tiny_tflite, (1, 3, 16, 16)).median_ms > 0
    assert not any("benchmark_model.sha256" in s for s in loopback.opened_services)


def test_profile_validation():
    with pytest.raises(BadInputError, match="did you mean 'taskset'"):
        validate_profile({"tasket": "f0"})
    with pytest.raises(BadInputError, match="bad taskset mask"):
        validate_profile({"taskset": "f0; reboot"})
    with pytest.raises(BadInputError, match="absolute device path"):
        validate_profile({"remote_dir": "tmp/nagkit"})
    p = validate_profile({"taskset": "0xF0", "threads": "2", "use_xnnpack": "false", "name": "x",
                          "measure": {"min_runs": 7}})
    assert (p["taskset"], p["threads"], p["use_xnnpack"], p["measure"].min_runs) == ("f0", 2, False, 7)
