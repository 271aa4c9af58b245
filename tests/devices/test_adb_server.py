"""ADB through a running adb server (Debian's `adb`, on a private port) to the loopback device:
the server's socket protocol (shell, exit codes, push/stat/pull), and which way nagkit picks
(server, adb-shell, or an error naming the fix)."""

from __future__ import annotations

import os
import stat
import subprocess

import numpy as np
import pytest

from nagkit.devices.adb import AdbDevice, AdbTransport
from nagkit.devices.adb.connect import open_transport
from nagkit.devices.adb.device import validate_profile
from nagkit.devices.adb.server import AdbServerTransport, list_devices, server_version
from nagkit.errors import DeviceError

from tests.adb_helpers import ADB, ADB_MARKS
from tests.adb_helpers import free_port as _free_port

pytestmark = ADB_MARKS


@pytest.fixture
def no_server(monkeypatch):
    """Point nagkit at a port where no adb server listens."""
    monkeypatch.setenv("ADB_SERVER_SOCKET", f"tcp:127.0.0.1:{_free_port()}")


@pytest.fixture
def server(loopback, tmp_path, monkeypatch):
    """A private adb server that knows the loopback device (`adb connect`)."""
    env = {**os.environ, "HOME": str(tmp_path / "adbhome"), "ADB_SERVER_SOCKET": f"tcp:localhost:{_free_port()}"}
    (tmp_path / "adbhome").mkdir()
    env.pop("ANDROID_SERIAL", None)
    out = subprocess.run([ADB, "connect", loopback.serial], env=env, capture_output=True, text=True, timeout=60)
    assert f"connected to {loopback.serial}" in out.stdout, out.stdout + out.stderr
    monkeypatch.setenv("ADB_SERVER_SOCKET", env["ADB_SERVER_SOCKET"])
    yield env
    subprocess.run([ADB, "kill-server"], env=env, capture_output=True, timeout=30)


def test_the_server_lists_the_device(server, loopback):
    assert server_version() is not None
    devs = {d.serial: d for d in list_devices()}
    assert devs[loopback.serial].state == "device"
    assert devs[loopback.serial].details.get("product") == "nagkit_loopback"


def test_shell_exit_codes_and_files_through_the_server(server, loopback, tmp_path):
    t = AdbServerTransport(loopback.serial, timeout_s=5.0, retries=1, retry_wait_s=0.05).connect()
    res = t.shell(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert res.rc == 3 and res.output.splitlines() == ["out", "err"]
    assert t.shell(["echo", "a; touch pwned"]).output == "a; touch pwned\n"
    assert not (loopback.sandbox.root / "pwned").exists()
    payload = np.random.default_rng(5).bytes(150_001)  # several sync DATA chunks, odd size
    src = tmp_path / "blob.bin"
    src.write_bytes(payload)
    t.push(src, "/data/local/tmp/nagkit/srv/blob.bin", mode=0o755)
    on_dev = loopback.sandbox.root / "data/local/tmp/nagkit/srv/blob.bin"
    assert on_dev.read_bytes() == payload and on_dev.stat().st_mode & 0o777 == 0o755
    mode, size, _ = t.stat("/data/local/tmp/nagkit/srv/blob.bin")
    assert stat.S_ISREG(mode) and size == len(payload)
    assert t.stat("/data/local/tmp/missing") == (0, 0, 0)
    assert t.pull("/data/local/tmp/nagkit/srv/blob.bin", tmp_path / "back.bin").read_bytes() == payload


def test_auto_goes_through_a_server_that_lists_the_device(server, loopback, adb_profile, tiny_tflite):
    with AdbDevice(loopback.serial, adb_profile) as dev:
        assert isinstance(dev.transport, AdbServerTransport)
        facts = dev.prepare()
        assert facts["transport"] == "adb-server" and facts["model"] == "nagkit-loopback"
        assert dev.measure(tiny_tflite, (1, 3, 16, 16)).median_ms > 0


def test_a_server_that_does_not_list_a_usb_serial_is_an_error_naming_what_it_sees(server, loopback):
    with pytest.raises(DeviceError) as ei:
        open_transport("R58M123ABC", validate_profile({}))
    assert "does not see 'R58M123ABC'" in ei.value.message and loopback.serial in ei.value.message
    assert "adb devices" in ei.value.hint


def test_tcp_targets_the_server_does_not_list_go_direct(server, loopback):
    other = f"127.0.0.1:{_free_port()}"
    assert isinstance(open_transport(other, validate_profile({})), AdbTransport)


def test_adb_shell_over_usb_while_a_server_runs_is_the_conflict_with_its_fix(server):
    with pytest.raises(DeviceError) as ei:
        open_transport("R58M123ABC", validate_profile({"adb_transport": "adb-shell"}))
    assert "holds the phones' USB interfaces" in ei.value.message
    assert "adb kill-server" in ei.value.hint and "adb_transport" in ei.value.hint


def test_without_a_server(no_server, loopback, adb_profile):
    assert isinstance(open_transport(loopback.serial, validate_profile({})), AdbTransport)
    with pytest.raises(DeviceError, match="no adb server answers") as ei:
        open_transport(loopback.serial, validate_profile({"adb_transport": "server"}))
    assert "adb start-server" in ei.value.hint
    with AdbDevice(loopback.serial, adb_profile) as dev:
        assert dev.prepare()["transport"] == "tcp"


def test_an_unreachable_device_fails_fast_with_the_fix(no_server, adb_profile):
    port = _free_port()
    dev = AdbDevice(f"127.0.0.1:{port}", {**adb_profile, "connect_timeout_s": 2.0, "reconnect_retries": 0})
    with pytest.raises(DeviceError) as ei:
        dev.prepare()
    assert f"127.0.0.1:{port}" in ei.value.message and "adb connect" in ei.value.hint
