"""The loopback adbd against Debian's real `adb` client: connect, shell, push, pull, exit
codes. A private ADB server port and HOME keep these tests off any real ADB setup."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.adb_helpers import ADB, ADB_MARKS
from tests.adb_helpers import free_port as _free_port

pytestmark = ADB_MARKS


@pytest.fixture(scope="module")
def adbd(tmp_path_factory):
    """The loopback started the way a user would: `python -m nagkit.devices.loopback`."""
    sandbox = tmp_path_factory.mktemp("client") / "sandbox"
    proc = subprocess.Popen([sys.executable, "-m", "nagkit.devices.loopback", "--port", "0", "--sandbox", str(sandbox)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    serial = proc.stdout.readline().strip()
    if not serial:
        proc.kill()
        pytest.fail(f"loopback adbd did not start: {proc.stderr.read()}")
    yield serial, sandbox
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def adb(adbd, tmp_path_factory):
    """Run the real adb client against a private server; kill that server at the end."""
    home = tmp_path_factory.mktemp("adbhome")
    env = {**os.environ, "HOME": str(home), "ADB_SERVER_SOCKET": f"tcp:localhost:{_free_port()}"}
    env.pop("ANDROID_SERIAL", None)

    def run(*args, check=True, timeout=30):
        res = subprocess.run([ADB, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"adb {' '.join(args)} exited {res.returncode}: {res.stdout}{res.stderr}")
        return res

    serial, _ = adbd
    out = run("connect", serial).stdout
    assert f"connected to {serial}" in out
    yield run
    run("kill-server", check=False)


def test_connect_lists_the_device(adbd, adb):
    serial, _ = adbd
    out = adb("devices", "-l").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(serial))
    assert line.split()[1] == "device"
    assert "product:nagkit_loopback" in line


def test_shell_echo(adbd, adb):
    serial, _ = adbd
    assert adb("-s", serial, "shell", "echo", "hi").stdout == "hi\n"


def test_shell_runs_in_the_sandbox_with_stand_ins(adbd, adb):
    serial, sandbox = adbd
    out = adb("-s", serial, "shell", "getprop ro.product.model; ls /data/local").stdout
    assert out.splitlines() == ["nagkit-loopback", "tmp"]
    adb("-s", serial, "shell", "mkdir -p /data/local/tmp/made && touch /data/local/tmp/made/x")
    assert (sandbox / "data/local/tmp/made/x").is_file()


def test_exit_codes(adbd, adb):
    """No shell_v2 is advertised, so like a real legacy device the client gets no exit code;
    the `; echo __NAGKIT_RC=$?` suffix that nagkit appends recovers it."""
    serial, _ = adbd
    assert adb("-s", serial, "shell", "exit 3", check=False).returncode == 0
    out = adb("-s", serial, "shell", "sh -c 'exit 3'; echo __NAGKIT_RC=$?").stdout
    assert out.strip() == "__NAGKIT_RC=3"


def test_push_pull_round_trip(adbd, adb, tmp_path):
    serial, sandbox = adbd
    payload = np.random.default_rng(7).bytes(300_001)  # several sync DATA chunks, odd size
    src = tmp_path / "payload.bin"
    src.write_bytes(payload)
    res = adb("-s", serial, "push", str(src), "/data/local/tmp/rt/payload.bin")
    assert "1 file pushed" in res.stdout
    assert (sandbox / "data/local/tmp/rt/payload.bin").read_bytes() == payload
    back = tmp_path / "back.bin"
    adb("-s", serial, "pull", "/data/local/tmp/rt/payload.bin", str(back))
    assert back.read_bytes() == payload


def test_pull_of_a_missing_file_fails(adbd, adb, tmp_path):
    serial, _ = adbd
    res = adb("-s", serial, "pull", "/data/local/tmp/nope.bin", str(tmp_path / "x"), check=False)
    assert res.returncode != 0
    assert "nope.bin" in res.stdout + res.stderr
    assert not (tmp_path / "x").exists()


def test_push_cannot_leave_the_sandbox(adbd, adb, tmp_path):
    serial, sandbox = adbd
    src = tmp_path / "evil.txt"
    src.write_text("x")
    res = adb("-s", serial, "push", str(src), "/data/../../../escaped.txt", check=False)
    assert res.returncode != 0
    assert not (sandbox.parent / "escaped.txt").exists() and not (sandbox.parent.parent / "escaped.txt").exists()
