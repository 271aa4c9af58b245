"""ADB through a running adb server (the platform-tools or Debian ``adb``): its "smart socket"
protocol, spoken directly over TCP, no ``adb`` binary needed.

Every Android tool reaches phones this way, and a running server holds the phones' USB
interfaces, so when one is running nagkit goes through it (:mod:`.connect` decides). The
server listens on ``$ADB_SERVER_SOCKET`` (``tcp:HOST:PORT``), else on
``localhost:$ANDROID_ADB_SERVER_PORT`` (default 5037), like the ``adb`` client.

Requests are a 4-hex-digit length plus text (``host:version``, ``host:devices-l``,
``host:transport:SERIAL`` then a service on the same socket); the answer is ``OKAY`` or
``FAIL`` + length + message. ``shell:CMD`` streams the command's output until the device
closes it (a legacy shell: no exit code, so the ``__NAGKIT_RC=$?`` marker is appended, as
over adb-shell). ``sync:`` moves files: ``STAT``, ``SEND`` (``DATA`` chunks, ``DONE``) and
``RECV``, each ``id(4) length(u32 LE) payload``.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nagkit.devices.adb.transport import RC_MARK, _RC_RE, AdbCommandError, ShellResult, quote_command
from nagkit.errors import BadInputError, DeviceError

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_PORT = 5037
_SYNC = struct.Struct("<4sI")
_STAT = struct.Struct("<4sIII")
_CHUNK = 64 * 1024


class AdbServerError(DeviceError):
    """The adb server answered FAIL (unknown device, unauthorized, offline...)."""


@dataclass(frozen=True)
class ServerDevice:
    serial: str
    state: str  # device | unauthorized | offline | no permissions ... | recovery ...
    details: dict[str, str]


def server_address() -> tuple[str, int]:
    """Where the adb server listens, read as the ``adb`` client reads it."""
    sock = os.environ.get("ADB_SERVER_SOCKET", "")
    if sock.startswith("tcp:"):
        host, _, port = sock[4:].rpartition(":")
        if not host:  # tcp:PORT
            host, port = "localhost", sock[4:]
        try:
            return host.strip("[]") or "localhost", int(port)
        except ValueError:
            raise BadInputError(f"ADB_SERVER_SOCKET={sock!r} is not tcp:HOST:PORT") from None
    if sock:
        raise BadInputError(f"ADB_SERVER_SOCKET={sock!r}: nagkit speaks to an adb server over tcp:HOST:PORT only")
    port = os.environ.get("ANDROID_ADB_SERVER_PORT", "")
    try:
        return "localhost", int(port) if port else DEFAULT_PORT
    except ValueError:
        raise BadInputError(f"ANDROID_ADB_SERVER_PORT={port!r} is not a port number") from None


def describe_address() -> str:
    host, port = server_address()
    return f"{host}:{port}"


def _connect(timeout_s: float) -> socket.socket:
    host, port = server_address()
    return socket.create_connection((host, port), timeout=timeout_s)


def _send_request(sock: socket.socket, text: str) -> None:
    data = text.encode("utf-8")
    sock.sendall(f"{len(data):04x}".encode() + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionResetError(f"the adb server closed the connection ({len(buf)} of {n} bytes read)")
        buf += part
    return bytes(buf)


def _read_status(sock: socket.socket, request: str) -> None:
    status = _recv_exact(sock, 4)
    if status == b"OKAY":
        return
    if status == b"FAIL":
        n = int(_recv_exact(sock, 4), 16)
        msg = _recv_exact(sock, n).decode("utf-8", "replace")
        raise AdbServerError(f"the adb server at {describe_address()} refused {request[:80]!r}: {msg}",
                             hint=state_hint(msg))
    raise ConnectionError(f"unexpected answer {status!r} from the adb server to {request!r}")


def state_hint(msg: str) -> str:
    """The fix for a device state or FAIL message of the adb server."""
    low = msg.lower()
    if "unauthorized" in low:
        return "accept the 'Allow USB debugging?' prompt on the phone (check `adb devices`), then retry"
    if "offline" in low:
        return "reconnect the phone (cable, or `adb reconnect`), then check `adb devices`"
    if "not found" in low or "no devices" in low:
        return "check `adb devices`; for Wi-Fi run `adb connect PHONE_IP:5555` first"
    if "permission" in low:
        return "add a udev rule for the phone (Debian: apt-get install android-sdk-platform-tools-common) and replug"
    return "check `adb devices`"


def _read_hex_string(sock: socket.socket) -> str:
    n = int(_recv_exact(sock, 4), 16)
    return _recv_exact(sock, n).decode("utf-8", "replace")


def server_version(timeout_s: float = 0.5) -> int | None:
    """The running server's protocol version, or None when no server answers."""
    try:
        with _connect(timeout_s) as s:
            _send_request(s, "host:version")
            _read_status(s, "host:version")
            return int(_read_hex_string(s), 16)
    except (OSError, ValueError, AdbServerError):
        return None


def list_devices(timeout_s: float = 2.0) -> list[ServerDevice]:
    """``adb devices -l`` from the running server (raises OSError when none runs)."""
    with _connect(timeout_s) as s:
        _send_request(s, "host:devices-l")
        _read_status(s, "host:devices-l")
        text = _read_hex_string(s)
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        serial, rest = parts[0], parts[1:]
        state_words = []
        while rest and ":" not in rest[0]:
            state_words.append(rest.pop(0))
        details = {k: v for k, _, v in (f.partition(":") for f in rest)}
        out.append(ServerDevice(serial, " ".join(state_words), details))
    return out


class AdbServerTransport:
    """Commands and files for one device through the adb server; the interface of
    :class:`~nagkit.devices.adb.transport.AdbTransport`. Each command opens its own socket."""

    kind = "adb-server"

    def __init__(self, target: str, *, timeout_s: float = 10.0, retries: int = 3, retry_wait_s: float = 1.0,
                 command_timeout_s: float = 600.0):
        self.target = target
        self.address = describe_address()
        self.timeout_s, self.retries, self.retry_wait_s = timeout_s, retries, retry_wait_s
        self.command_timeout_s = command_timeout_s
        self.reconnects = 0

    def connect(self) -> AdbServerTransport:
        """Check that the server can reach the device (``echo``), or raise saying why not."""
        self.shell(["echo", "ok"])
        return self

    def close(self) -> None:  # nothing held between commands
        pass

    def __enter__(self) -> AdbServerTransport:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self, service: str, timeout_s: float) -> socket.socket:
        s = _connect(self.timeout_s)
        try:
            _send_request(s, f"host:transport:{self.target}")
            _read_status(s, "host:transport:" + self.target)
            _send_request(s, service)
            _read_status(s, service)
            s.settimeout(timeout_s)
            return s
        except BaseException:
            s.close()
            raise

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except (ConnectionError, socket.timeout, OSError) as e:
                last = e
            log.warning("ADB %s on %s via the adb server failed (%s: %s); retrying (%d/%d)", what, self.target,
                        type(last).__name__, last, attempt + 1, self.retries)
            self.reconnects += 1
            if attempt < self.retries:
                time.sleep(self.retry_wait_s * (2 ** attempt))
        raise DeviceError(f"ADB {what} on {self.target!r} via the adb server at {self.address} failed after "
                          f"{self.retries} retries: {type(last).__name__}: {last}",
                          hint="check `adb devices` (is the phone still attached and authorized?)") from last

    def shell(self, argv: Sequence[str | int | os.PathLike], *, timeout_s: float | None = None,
              check: bool = True) -> ShellResult:
        return self.shell_line(quote_command(argv), timeout_s=timeout_s, check=check)

    def shell_line(self, line: str, *, timeout_s: float | None = None, check: bool = True) -> ShellResult:
        timeout = timeout_s or self.command_timeout_s

        def run() -> str:
            with self._open(f"shell:{line}; echo {RC_MARK}$?", timeout) as s:
                chunks = []
                while True:
                    part = s.recv(65536)
                    if not part:
                        break
                    chunks.append(part)
            text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
            if not _RC_RE.search(text):
                raise ConnectionError(f"no exit-code marker in the output of {line[:80]!r} (connection lost?)")
            return text

        text = self._call(f"shell {line[:60]!r}", run)
        m = _RC_RE.search(text)
        rc, output = int(m.group(1)), text[:m.start()]
        if check and rc != 0:
            raise AdbCommandError(f"device command failed: {line[:200]}", rc, output)
        return ShellResult(rc, output)

    def stat(self, remote: str) -> tuple[int, int, int]:
        """(mode, size, mtime) of a device path; all zero when it does not exist."""
        def run() -> tuple[int, int, int]:
            with self._open("sync:", self.timeout_s) as s:
                path = remote.encode()
                s.sendall(_SYNC.pack(b"STAT", len(path)) + path)
                ident, mode, size, mtime = _STAT.unpack(_recv_exact(s, _STAT.size))
                if ident != b"STAT":
                    raise ConnectionError(f"bad sync answer {ident!r} to STAT")
                s.sendall(_SYNC.pack(b"QUIT", 0))
                return mode, size, mtime

        return self._call(f"stat {remote}", run)

    def push(self, local: str | os.PathLike, remote: str, *, mode: int = 0o644) -> None:
        local = Path(local)
        if not local.is_file():
            raise BadInputError(f"cannot push {str(local)!r}: not a file")
        parent = remote.rsplit("/", 1)[0] or "/"
        self.shell(["mkdir", "-p", parent])
        size = local.stat().st_size

        def run() -> None:
            with self._open("sync:", max(self.timeout_s, size / 1e6 + 10)) as s:
                head = f"{remote},{0o100000 | mode}".encode()
                s.sendall(_SYNC.pack(b"SEND", len(head)) + head)
                with open(local, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        s.sendall(_SYNC.pack(b"DATA", len(chunk)) + chunk)
                s.sendall(_SYNC.pack(b"DONE", int(time.time()) & 0xFFFFFFFF))
                ident, n = _SYNC.unpack(_recv_exact(s, _SYNC.size))
                if ident == b"FAIL":
                    msg = _recv_exact(s, n).decode("utf-8", "replace")
                    raise DeviceError(f"ADB push {local.name} -> {remote} on {self.target!r} failed: {msg}",
                                      hint="check the device path and free space: `adb shell df /data/local/tmp`")
                if ident != b"OKAY":
                    raise ConnectionError(f"bad sync answer {ident!r} to SEND")
                s.sendall(_SYNC.pack(b"QUIT", 0))
            got = self.stat(remote)
            if got[1] != size & 0xFFFFFFFF:
                raise ConnectionError(f"pushed {size} bytes but {remote} has {got[1]}")

        self._call(f"push {local.name} -> {remote}", run)

    def pull(self, remote: str, local: str | os.PathLike) -> Path:
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part")

        def run() -> None:
            with self._open("sync:", self.command_timeout_s) as s, open(tmp, "wb") as f:
                path = remote.encode()
                s.sendall(_SYNC.pack(b"RECV", len(path)) + path)
                while True:
                    ident, n = _SYNC.unpack(_recv_exact(s, _SYNC.size))
                    if ident == b"DONE":
                        break
                    data = _recv_exact(s, n)
                    if ident == b"FAIL":
                        raise DeviceError(f"ADB pull {remote} on {self.target!r} failed: "
                                          f"{data.decode('utf-8', 'replace')}", hint="check the device path")
                    if ident != b"DATA":
                        raise ConnectionError(f"bad sync answer {ident!r} to RECV")
                    f.write(data)
                s.sendall(_SYNC.pack(b"QUIT", 0))

        try:
            self._call(f"pull {remote}", run)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, local)
        return local
