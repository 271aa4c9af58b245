"""ADB transport over the ``adb-shell`` package: TCP (``HOST:PORT``) or USB (a serial).

* RSA key: ``~/.android/adbkey`` (+ ``.pub``), or ``$ANDROID_USER_HOME/adbkey``; created
  when missing, written atomically with mode 0600 (a kill mid-creation leaves no key or a whole
  one, never an empty file). An empty or corrupt key is refused with a message naming the file.
* Commands are argument lists; every argument is quoted with :func:`shlex.quote`. A shell
  on a device returns no exit code over the legacy protocol, so ``; echo __NAGKIT_RC=$?`` is
  appended and read back.
* Files go with the sync protocol; the target folder is created first.
* A connection that drops mid-command is reconnected and the command retried (bounded);
  then :class:`~nagkit.errors.DeviceError` says what to check.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from nagkit.errors import ArtifactError, BadInputError, DeviceError
from nagkit.io import atomic_write_bytes, read_input_file

log = logging.getLogger(__name__)

T = TypeVar("T")
RC_MARK = "__NAGKIT_RC="
_RC_RE = re.compile(r"__NAGKIT_RC=(\d+)\s*\Z")
_TCP_RE = re.compile(r"^(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
_SERIAL_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class AdbCommandError(DeviceError):
    """A device command ran and exited non-zero."""

    def __init__(self, message: str, rc: int, output: str, *, hint: str | None = None):
        tail = output if len(output) <= 2000 else "..." + output[-2000:]
        super().__init__(f"{message} (exit {rc})\n--- device output ---\n{tail}\n--- end ---", hint=hint)
        self.rc, self.output = rc, output


@dataclass(frozen=True)
class ShellResult:
    rc: int
    output: str


def quote_command(argv: Sequence[str | int | os.PathLike]) -> str:
    """One shell command line from an argument list, every argument quoted."""
    if isinstance(argv, (str, bytes)):
        raise TypeError("pass the command as a list of arguments, not a string, so that each is quoted")
    return " ".join(shlex.quote(os.fspath(a) if isinstance(a, os.PathLike) else str(a)) for a in argv)


def parse_target(target: str) -> tuple[str, str, int | None]:
    """``("tcp", host, port)`` or ``("usb", serial, None)``; rejects anything else."""
    target = (target or "").strip()
    m = _TCP_RE.match(target)
    if m:
        port = int(m.group("port"))
        if not 0 < port < 65536:
            raise BadInputError(f"bad ADB port {port} in {target!r}; ports are 1-65535")
        return "tcp", m.group("host").strip("[]"), port
    if _SERIAL_RE.match(target):
        return "usb", target, None
    raise BadInputError(
        f"bad ADB target {target!r}: expected a USB serial (letters, digits, . _ : -) or HOST:PORT",
        hint="list serials with `adb devices`; for Wi-Fi use `adb tcpip 5555` then --device adb:PHONE_IP:5555",
    )


def default_key_path() -> Path:
    base = os.environ.get("ANDROID_USER_HOME") or os.path.join(os.path.expanduser("~"), ".android")
    return Path(base) / "adbkey"


def load_or_create_key(path: str | os.PathLike | None = None):
    """An adb-shell signer for the ADB RSA key at ``path`` (default ``~/.android/adbkey``).

    A missing key pair is created; the private key is written atomically with mode 0600, so a
    kill during creation leaves no key (the next run creates one) rather than an empty file. A
    missing, empty or stale ``.pub`` is rewritten from the private key. An empty or corrupt
    private key raises :class:`~nagkit.errors.ArtifactError` naming the file: deleting it makes
    nagkit create a new key (which the device must then accept again)."""
    from adb_shell.auth.sign_pythonrsa import PythonRSASigner

    path = Path(path) if path else default_key_path()
    pub = Path(str(path) + ".pub")
    try:
        if not path.exists():
            _create_key(path)
            log.info("created ADB key %s", path)
        pem = read_input_file(path, "ADB key", max_bytes=1 << 20, error=ArtifactError)
        try:  # the third-party parsers raise ValueError, IndexError or pyasn1 errors on bad input
            signer = PythonRSASigner(None, pem.decode("ascii"))
            pub_line = _public_key_line(path)
        except Exception as e:  # noqa: BLE001 - any parse failure means a corrupt key file
            why = "it is empty" if not pem.strip() else f"it is not an RSA private key in PEM form ({_first_line(e)})"
            raise ArtifactError(
                f"the ADB key {str(path)!r} cannot be used: {why}",
                hint=f"delete it (and {pub.name}) to have nagkit create a new key on the next run, then "
                     "accept the new key on the device; or point `adb_key:` in the device profile at a good key",
            ) from None
        if not pub.exists() or read_input_file(pub, "ADB public key", max_bytes=1 << 20, error=ArtifactError).split(
                b" ")[0].strip() != pub_line.split(b" ")[0]:
            atomic_write_bytes(pub, pub_line)
        signer.pub_key = pub.read_text()
        return signer
    except OSError as e:
        raise DeviceError(f"cannot read or create the ADB key {path}: {e}",
                          hint="check the folder's permissions, or set ANDROID_USER_HOME to a writable folder") from e


def _create_key(path: Path) -> None:
    """A new 2048-bit RSA key, PKCS#8 PEM (what adb and ``adb_shell.auth.keygen`` write),
    written atomically with mode 0600 from the first byte."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(encoding=serialization.Encoding.PEM, format=serialization.PrivateFormat.PKCS8,
                            encryption_algorithm=serialization.NoEncryption())
    atomic_write_bytes(path, pem, mode=0o600)


def _public_key_line(path: Path) -> bytes:
    """The ``.pub`` content for the private key at ``path``: Android's base64 public key plus
    `` user@host`` (what ``adb_shell.auth.keygen.write_public_keyfile`` writes)."""
    import base64

    from adb_shell.auth.keygen import encode_pubkey, get_user_info

    return base64.b64encode(encode_pubkey(str(path))) + get_user_info().encode()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0][:120] if text else type(e).__name__) or type(e).__name__


def _transient_errors() -> tuple[type[BaseException], ...]:
    from adb_shell import exceptions as ex

    errs: list[type[BaseException]] = [OSError, ConnectionError, ex.TcpTimeoutException, ex.AdbTimeoutError,
                                       ex.InvalidResponseError, ex.InvalidChecksumError, ex.InvalidCommandError,
                                       ex.AdbConnectionError, ex.UsbReadFailedError, ex.UsbWriteFailedError]
    return tuple(errs)


def _tcp_transport(host: str, port: int):
    """adb-shell's TCP transport, except that a closed peer raises at once: the stock one
    returns b'' from recv and spins until the (long) read timeout."""
    from adb_shell.transport.tcp_transport import TcpTransport

    class _EofAwareTcpTransport(TcpTransport):
        def connect(self, transport_timeout_s):
            super().connect(transport_timeout_s)
            # a phone that vanishes from Wi-Fi sends no FIN: let TCP keepalive notice (~25 s)
            sock = self._connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for opt, val in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
                if hasattr(socket, opt):
                    sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)

        def bulk_read(self, numbytes, transport_timeout_s):
            data = super().bulk_read(numbytes, transport_timeout_s)
            if not data:
                raise ConnectionResetError(f"ADB device {host}:{port} closed the connection")
            return data

    return _EofAwareTcpTransport(host, port)


def _command_errors() -> tuple[type[BaseException], ...]:
    from adb_shell import exceptions as ex

    return (ex.PushFailedError, ex.AdbCommandFailureException, ex.DevicePathInvalidError)


class AdbTransport:
    """A connection to one device. Methods reconnect and retry up to ``retries`` times."""

    def __init__(self, target: str, *, key_path: str | os.PathLike | None = None, timeout_s: float = 10.0,
                 retries: int = 3, retry_wait_s: float = 1.0, command_timeout_s: float = 600.0):
        self.kind, self.address, self.port = parse_target(target)
        self.target = target
        self.key_path = key_path
        self.timeout_s, self.retries, self.retry_wait_s = timeout_s, retries, retry_wait_s
        self.command_timeout_s = command_timeout_s
        self._dev = None
        self._signer = None
        self.reconnects = 0

    # ------------------------------------------------------------------ connection
    def _make_device(self):
        if self.kind == "tcp":
            from adb_shell.adb_device import AdbDevice

            return AdbDevice(_tcp_transport(self.address, self.port), default_transport_timeout_s=self.timeout_s)
        try:
            from adb_shell import adb_device  # USB needs the libusb1 package (usb1) and libusb itself

            if adb_device.UsbTransport is None:
                import usb1  # noqa: F401 - raises the ImportError that says what is missing
            AdbDeviceUsb = adb_device.AdbDeviceUsb
        except (ImportError, OSError) as e:
            raise DeviceError(
                f"USB ADB target {self.address!r} needs libusb support, which is missing here ({e})",
                hint="pip install 'adb-shell[usb]' (and apt-get install libusb-1.0-0), or use Wi-Fi: "
                     "`adb tcpip 5555` then --device adb:PHONE_IP:5555") from e
        try:
            return AdbDeviceUsb(serial=self.address, default_transport_timeout_s=self.timeout_s)
        except Exception as e:  # noqa: BLE001 - adb-shell raises its own types or libusb errors
            raise DeviceError(f"no USB ADB device with serial {self.address!r}: {e}",
                              hint="check `adb devices`; stop a running adb server (`adb kill-server`), "
                                   "which holds the USB interface") from e

    def connect(self) -> AdbTransport:
        if self._dev is not None:
            return self
        if self._signer is None:
            self._signer = load_or_create_key(self.key_path)
        dev = self._make_device()
        try:
            ok = dev.connect(rsa_keys=[self._signer], transport_timeout_s=self.timeout_s,
                             auth_timeout_s=max(self.timeout_s, 30.0), read_timeout_s=self.timeout_s)
        except _transient_errors() as e:
            dev.close()
            raise DeviceError(f"cannot connect to ADB device {self.target!r}: {type(e).__name__}: {e}",
                              hint=self._hint()) from e
        except Exception as e:  # adb_shell.exceptions.DeviceAuthError and friends
            dev.close()
            raise DeviceError(f"ADB handshake with {self.target!r} failed: {type(e).__name__}: {e}",
                              hint="accept the 'Allow USB debugging?' prompt on the phone, then retry") from e
        if not ok:
            raise DeviceError(f"ADB device {self.target!r} refused the connection", hint=self._hint())
        self._dev = dev
        return self

    def _hint(self) -> str:
        if self.kind == "tcp":
            return (f"is the device listening on {self.address}:{self.port}? On the phone: `adb tcpip {self.port}`; "
                    "check with `adb connect HOST:PORT` and `adb devices`")
        return "check the cable and `adb devices`; accept the debugging prompt on the phone"

    def close(self) -> None:
        if self._dev is not None:
            try:
                self._dev.close()
            finally:
                self._dev = None

    def __enter__(self) -> AdbTransport:
        return self.connect() if self._dev is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[object], T]) -> T:
        """Run ``fn(adb_device)``; on a dropped connection reconnect and retry (bounded)."""
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            try:
                if self._dev is None:
                    self.connect()
                return fn(self._dev)
            except _transient_errors() as e:
                last = e
            except DeviceError as e:
                if e.__cause__ is None or not isinstance(e.__cause__, _transient_errors()):
                    raise
                last = e
            except _command_errors() as e:
                raise DeviceError(f"ADB {what} on {self.target!r} failed: {type(e).__name__}: {e}",
                                  hint="check the device path and free space: `adb shell df /data/local/tmp`") from e
            log.warning("ADB %s on %s failed (%s: %s); reconnecting (%d/%d)", what, self.target,
                        type(last).__name__, last, attempt + 1, self.retries)
            self.close()
            self.reconnects += 1
            if attempt < self.retries:
                time.sleep(self.retry_wait_s * (2 ** attempt))
        raise DeviceError(f"ADB {what} on {self.target!r} failed after {self.retries} reconnects: "
                          f"{type(last).__name__}: {last}", hint=self._hint()) from last

    # ------------------------------------------------------------------ commands
    def shell(self, argv: Sequence[str | int | os.PathLike], *, timeout_s: float | None = None,
              check: bool = True) -> ShellResult:
        """Run one command (an argument list, each argument quoted) and return exit code and
        output (stdout and stderr merged, as a device's legacy shell sends them)."""
        return self.shell_line(quote_command(argv), timeout_s=timeout_s, check=check)

    def shell_line(self, line: str, *, timeout_s: float | None = None, check: bool = True) -> ShellResult:
        """Run a command line built by the caller from quoted parts (see :func:`quote_command`)."""
        wrapped = f"{line}; echo {RC_MARK}$?"
        timeout = timeout_s or self.command_timeout_s

        def run(dev) -> str:
            # benchmark_model may print nothing for a long while: wait up to the command timeout
            out = dev.shell(wrapped, transport_timeout_s=timeout, timeout_s=timeout, read_timeout_s=timeout,
                            decode=False)
            text = out.decode("utf-8", "replace").replace("\r\n", "\n")
            if not _RC_RE.search(text):
                # the stream closed before the command finished: treat as a drop
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
        return self._call(f"stat {remote}", lambda dev: tuple(dev.stat(remote)))

    def push(self, local: str | os.PathLike, remote: str, *, mode: int = 0o644) -> None:
        local = Path(local)
        if not local.is_file():
            raise BadInputError(f"cannot push {str(local)!r}: not a file")
        parent = remote.rsplit("/", 1)[0] or "/"
        self.shell(["mkdir", "-p", parent])
        size = local.stat().st_size

        def run(dev) -> None:
            dev.push(str(local), remote, st_mode=0o100000 | mode, mtime=int(time.time()),
                     read_timeout_s=max(self.timeout_s, size / 1e6 + 10))
            got = dev.stat(remote)
            if got[1] != size & 0xFFFFFFFF:
                raise ConnectionError(f"pushed {size} bytes but {remote} has {got[1]}")

        self._call(f"push {local.name} -> {remote}", run)

    def pull(self, remote: str, local: str | os.PathLike) -> Path:
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part")
        self._call(f"pull {remote}", lambda dev: dev.pull(remote, str(tmp)))
        os.replace(tmp, local)
        return local
