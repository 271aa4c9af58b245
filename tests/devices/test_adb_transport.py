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


@pytest.mark.parametrize("content", [b"", b"\n", b"garbage", b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQ",
                                     b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n", b"\xff\xfe"])
def test_d9_empty_or_corrupt_key_names_the_file_and_the_fix(tmp_path, content):
    """D9: an empty adbkey (left by a kill) gave exit 3 with a misleading 'permissions' hint."""
    from nagkit.errors import ArtifactError

    key = tmp_path / "adbkey"
    key.write_bytes(content)
    with pytest.raises(ArtifactError, match="the ADB key .*adbkey' cannot be used: it is") as ei:
        load_or_create_key(key)
    assert "empty" in ei.value.message if not content.strip() else "PEM" in ei.value.message
    assert "delete it (and adbkey.pub)" in ei.value.hint and "\n" not in ei.value.message
    key.unlink()  # the fix the hint names
    load_or_create_key(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_d9_missing_empty_or_stale_public_key_is_rewritten(tmp_path):
    key = tmp_path / "adbkey"
    pub = tmp_path / "adbkey.pub"
    signer = load_or_create_key(key)
    good = pub.read_bytes()
    assert good.split(b" ")[0] == signer.GetPublicKey().encode().split(b" ")[0]
    for bad in (b"", b"junk user@host"):
        pub.write_bytes(bad)
        load_or_create_key(key)
        assert pub.read_bytes().split(b" ")[0] == good.split(b" ")[0]
    pub.unlink()
    assert load_or_create_key(key).GetPublicKey().split(" ")[0] == good.decode().split(" ")[0]


_KILL_CHILD = """
import os, signal, sys
from cryptography.hazmat.primitives.asymmetric import rsa
real = rsa.generate_private_key
def killed_after_generating(*a, **k):
    key = real(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 while the key is being created
rsa.generate_private_key = killed_after_generating
from nagkit.devices.adb import load_or_create_key
load_or_create_key(sys.argv[1])
"""


def test_d9_kill_during_key_creation_leaves_no_empty_key(tmp_path, cli_env):
    """D9: `kill -9` during first-time key creation left an empty adbkey (5 of 5 trials)."""
    import subprocess
    import sys

    key = tmp_path / "android" / "adbkey"
    p = subprocess.run([sys.executable, "-c", _KILL_CHILD, str(key)], env=cli_env, capture_output=True, timeout=120)
    assert p.returncode == -9, p.stderr.decode()[-2000:]
    assert not key.exists() or key.stat().st_size > 0
    signer = load_or_create_key(key)  # the next run just works
    assert key.stat().st_size > 0 and stat.S_IMODE(key.stat().st_mode) == 0o600 and signer.GetPublicKey()


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
