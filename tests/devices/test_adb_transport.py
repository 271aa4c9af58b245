"""AdbTransport (adb-shell) against the loopback adbd: quoting, exit codes, push/pull,
reconnect-and-retry, the RSA key, target parsing, and the sandbox's path rules."""

from __future__ import annotations

import stat

import numpy as np
import pytest

from nagkit.devices.adb import AdbCommandError, AdbTransport, load_or_create_key, parse_target, quote_command
from nagkit.devices.loopback import Sandbox, SandboxError
from nagkit.errors import BadInputError, DeviceError


@pytest.fixture
def transport(loopback, adb_key):
    t = AdbTransport(loopback.serial, key_path=adb_key, timeout_s=5.0, retries=2, retry_wait_s=0.05)
    with t:
        yield t


def test_shell_output_and_exit_codes(transport):
    assert transport.shell(["echo", "hello world"]).output == "hello world\n"
    res = transport.shell(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert res.rc == 3 and res.output.splitlines() == ["out", "err"]
    with pytest.raises(AdbCommandError, match=r"exit 3") as ei:
        transport.shell(["sh", "-c", "exit 3"])
    assert ei.value.rc == 3
    assert transport.shell(["printf", "no newline"]).output == "no newline"


def test_arguments_are_quoted_no_injection(transport, loopback):
    root = loopback.sandbox.root
    evil = "a; touch pwned $(touch pwned2) `touch pwned3` && touch pwned4 | touch pwned5"
    assert transport.shell(["echo", evil]).output == evil + "\n"
    assert not any((root / f"pwned{s}").exists() for s in ("", "2", "3", "4", "5"))
    with pytest.raises(TypeError, match="list of arguments"):
        quote_command("echo hi; touch pwned")


def test_push_pull_round_trip(transport, loopback, tmp_path):
    payload = np.random.default_rng(3).bytes(200_003)
    src = tmp_path / "blob.bin"
    src.write_bytes(payload)
    transport.push(src, "/data/local/tmp/nagkit/sub/blob.bin", mode=0o755)
    on_dev = loopback.sandbox.root / "data/local/tmp/nagkit/sub/blob.bin"
    assert on_dev.read_bytes() == payload and on_dev.stat().st_mode & 0o777 == 0o755
    mode, size, _ = transport.stat("/data/local/tmp/nagkit/sub/blob.bin")
    assert size == len(payload) and stat.S_ISREG(mode)
    assert transport.stat("/data/local/tmp/missing") == (0, 0, 0)
    back = transport.pull("/data/local/tmp/nagkit/sub/blob.bin", tmp_path / "back.bin")
    assert back.read_bytes() == payload


def test_a_silent_long_command_is_not_a_drop(loopback, adb_key):
    """benchmark_model can be silent for longer than the connect timeout."""
    t = AdbTransport(loopback.serial, key_path=adb_key, timeout_s=0.5, retries=1, retry_wait_s=0.05)
    with t:
        assert t.shell(["sh", "-c", "sleep 1.2; echo done"]).output == "done\n"
    assert t.reconnects == 0


def test_reconnects_when_the_device_drops(transport, loopback):
    loopback.drop_on("echo again", times=1)
    assert transport.shell(["echo", "again"]).output == "again\n"
    assert transport.reconnects == 1


def test_gives_up_with_a_hint_after_bounded_retries(transport, loopback):
    loopback.drop_on("echo doomed", times=10)
    with pytest.raises(DeviceError, match="after 2 reconnects") as ei:
        transport.shell(["echo", "doomed"])
    assert "adb connect" in ei.value.hint
    assert transport.reconnects == 3  # first try + 2 retries, each one dropped


def test_unreachable_device_is_a_device_error(adb_key):
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = AdbTransport(f"127.0.0.1:{port}", key_path=adb_key, timeout_s=1.0, retries=1, retry_wait_s=0.01)
    with pytest.raises(DeviceError, match=f"127.0.0.1:{port}"):
        t.shell(["true"])


def test_key_is_created_private(tmp_path):
    key = tmp_path / "android" / "adbkey"
    signer = load_or_create_key(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert (tmp_path / "android" / "adbkey.pub").read_text().startswith(signer.GetPublicKey()[:20])
    before = key.read_bytes()
    load_or_create_key(key)  # read back, not regenerated
    assert key.read_bytes() == before


def test_parse_target():
    assert parse_target("192.168.1.20:5555") == ("tcp", "192.168.1.20", 5555)
    assert parse_target("localhost:5037") == ("tcp", "localhost", 5037)
    assert parse_target("R58M123ABC") == ("usb", "R58M123ABC", None)
    for bad in ("", "serial; reboot", "a b", "host:99999"):
        with pytest.raises(BadInputError):
            parse_target(bad)


def test_usb_without_libusb_says_how_to_fix(adb_key):
    try:
        import usb1  # noqa: F401
    except (ImportError, OSError):
        pass
    else:
        pytest.skip("libusb support is installed here; the missing-libusb message cannot be shown")
    with pytest.raises(DeviceError, match="libusb") as ei:
        AdbTransport("R58M123ABC", key_path=adb_key, retries=0).connect()
    assert "adb tcpip" in ei.value.hint and "adb-shell[usb]" in ei.value.hint


def test_sandbox_paths(tmp_path):
    sb = Sandbox(tmp_path / "sb").prepare()
    assert sb.resolve("/data/local/tmp/x") == str(sb.root / "data/local/tmp/x")
    for bad in ("/data/../../etc/passwd", "/../../x", "/data/local/tmp/../../../../../etc"):
        with pytest.raises(SandboxError, match="leaves the loopback sandbox"):
            sb.resolve(bad)
    (sb.root / "data/link").symlink_to("/etc")
    with pytest.raises(SandboxError):
        sb.resolve("/data/link/passwd")
    assert sb.rewrite_command("ls '/data/local/tmp' --graph=/data/x /database /system") == (
        f"ls '{sb.root}/data/local/tmp' --graph={sb.root}/data/x /database /system")
    with pytest.raises(SandboxError, match=r"'\.\.'"):
        sb.rewrite_command("cat /data/local/../../../etc/passwd")
