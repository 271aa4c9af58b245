"""`nagkit profile --device adb:SERIAL` as the design card writes it, against the loopback ADB
device registered with Debian's `adb connect` (a running adb server, on a private port):
nagkit goes through the server, contacts the device before the first conversion, and with the
benchmark binary missing fails before converting anything, naming the fix.

The space profiled is the default workspace's (`fmnist-mbv3-w0.5`: its stages, widths, strides,
SE and activations, so every kind of block) narrowed to one kernel and one expand ratio at r=28:
16 unique blocks instead of 96, each converted and measured for real; the count does not change
what is checked (the pipeline, the order of contact and conversion, the progress lines)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nagkit.latency.blocks import unique_layers
from nagkit.latency.table import LatencyTable
from nagkit.space.presets import get_space

from tests.adb_helpers import ADB, ADB_MARKS
from tests.adb_helpers import free_port as _free_port

pytestmark = ADB_MARKS


class _Stamped(list):
    """The loopback's list of opened services, with the time each was opened."""

    def __init__(self):
        super().__init__()
        self.times: list[float] = []

    def append(self, item) -> None:
        self.times.append(time.time())
        super().append(item)


@pytest.fixture
def phone(tmp_path, cli_env, request):
    """(serial, adbd, env): a loopback device registered with a private adb server by
    `adb connect`, and the environment that points nagkit (and adb) at that server. Its
    benchmark_model stand-in spends a twentieth of the seconds asked for (96 blocks to time on
    this machine's CPU, which also converts them); nagkit's flags and behaviour are unchanged."""
    from nagkit.devices.loopback import LoopbackAdbd

    install_runner = getattr(request, "param", True)
    env = dict(cli_env, ADB_SERVER_SOCKET=f"tcp:localhost:{_free_port()}", NAGKIT_CACHE=str(tmp_path / "cache"))
    env.pop("ANDROID_SERIAL", None)
    env.pop("NAGKIT_JOBS", None)  # the literal command: as many conversion processes as this machine has cores
    adbd = LoopbackAdbd(tmp_path / "sandbox", port=0, install_runner=install_runner, time_scale=0.05)
    adbd.opened_services = _Stamped()
    with adbd:
        out = subprocess.run([ADB, "connect", adbd.serial], env=env, capture_output=True, text=True, timeout=60)
        assert f"connected to {adbd.serial}" in out.stdout, out.stdout + out.stderr
        try:
            yield adbd.serial, adbd, env
        finally:
            subprocess.run([ADB, "kill-server"], env=env, capture_output=True, timeout=30)


def small_default_space():
    """The default workspace's space with one kernel (3) and one expand ratio (3), at r=28."""
    return get_space("fmnist-mbv3-w0.5").replace(name="fmnist-k3e3", ks_list=(3,), expand_list=(3,),
                                                 resolutions=(28,))


def _profile(serial: str, env: dict, cwd: Path, *extra: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    space = cwd / "fmnist-k3e3.json"
    space.write_text(json.dumps(small_default_space().to_dict()))
    cmd = [sys.executable, "-m", "nagkit", "profile", "--device", f"adb:{serial}", "--space", space.name, *extra]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_profile_literally_through_the_adb_server(phone, tmp_path):
    serial, adbd, env = phone
    work = tmp_path / "work"
    work.mkdir()
    p = _profile(serial, env, work, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    out = work / "latency_tables" / "nagkit-loopback-tflite-fmnist-k3e3.json"
    assert Path(res["out"]) == Path("latency_tables/nagkit-loopback-tflite-fmnist-k3e3.json")
    assert f"table    {res['out']}" in p.stderr  # the default path is printed before the work
    assert "ready to measure" in p.stderr.split("table    ")[0]
    # progress on a pipe: plain lines, the last one the whole count, no bar drawing
    small = unique_layers(small_default_space())
    full = unique_layers(get_space("fmnist-mbv3-w0.5"), [28])
    assert {(b.kind, b.se, b.act) for b in small.values()} == {(b.kind, b.se, b.act) for b in full.values()}
    n = len(small)  # 16 blocks, every kind of the default space's 96 at r=28
    assert re.search(rf"^profile adb:\S+: {n}/{n} \(100%\), \d+ s$", p.stderr, re.M), p.stderr[-3000:]
    assert "\r" not in p.stderr and "\x1b" not in p.stderr
    table = LatencyTable.load(out)
    assert len(table.entries) == res["entries"] == res["measured"] == n and table.resolutions == (28,)
    assert table.device["transport"] == "adb-server" and table.device["model"] == "nagkit-loopback"
    assert table.provenance["pipelined"] is True
    # the device was contacted before the first conversion was written
    first_contact = adbd.opened_services.times[0]
    converted = [f.stat().st_mtime for f in (tmp_path / "cache").rglob("*.tflite")]
    assert len(converted) == n and first_contact < min(converted)
    ran = [s for s in adbd.opened_services if "benchmark_model" in s and "--graph=" in s]
    assert len(ran) == n


@pytest.mark.parametrize("phone", [False], indirect=True)
def test_missing_benchmark_binary_fails_before_any_conversion(phone, tmp_path):
    serial, adbd, env = phone
    p = _profile(serial, env, tmp_path, timeout=120)
    assert p.returncode == 3, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: adb:{serial} has no benchmark_model at /data/local/tmp/nagkit/benchmark_model")
    assert len(lines) == 2 and lines[1].startswith("  hint: ") and "--benchmark-binary PATH" in lines[1]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.tflite"))
    assert not (tmp_path / "latency_tables").exists()


def test_the_placeholder_serial_is_refused_with_the_fix(cli_env, tmp_path):
    p = subprocess.run([sys.executable, "-m", "nagkit", "profile", "--device", "adb:SERIAL"], env=cli_env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "placeholder" in p.stderr and "adb devices" in p.stderr and "Traceback" not in p.stderr
