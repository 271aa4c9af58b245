"""A minimal adbd: the device side of the ADB protocol over TCP, for tests without a phone.

It speaks to Debian's ``adb`` client and to the ``adb-shell`` package alike:

* handshake: ``CNXN``; ``AUTH`` with a random token, accepting any ``SIGNATURE`` or
  ``RSAPUBLICKEY`` (this is a loopback test device, not a security boundary);
* streams: ``OPEN``/``OKAY``/``WRTE``/``CLSE`` with one-``WRTE``-in-flight flow control;
* services: ``shell:CMD`` and ``exec:CMD`` (legacy shell: stdout and stderr merged, no exit
  code, exactly like a real device without the ``shell_v2`` feature, which is therefore not
  advertised), ``shell:`` (interactive, stdin from the client) and ``sync:`` (``STAT``,
  ``STA2``, ``LST2``, ``LIST``, ``SEND``, ``RECV``, ``QUIT``).

Commands run on this machine with ``/bin/sh`` inside the sandbox folder
(see :mod:`nagkit.devices.loopback.sandbox`). It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import struct
import subprocess
import threading
from pathlib import Path

from nagkit.devices.loopback import protocol as P
from nagkit.devices.loopback.sandbox import Sandbox, SandboxError

log = logging.getLogger(__name__)

FEATURES = ("cmd", "stat_v2", "ls_v2", "fixed_push_mkdir")


class _Stream:
    """One open service stream; ``write`` honours the protocol's one-WRTE-in-flight rule."""

    def __init__(self, conn: _Connection, device_id: int, client_id: int):
        self.conn, self.device_id, self.client_id = conn, device_id, client_id
        self._cv = threading.Condition()
        self._inbox = bytearray()
        self._ready = True
        self.closed = False
        self._sent_close = False

    # -- from the connection thread
    def on_okay(self) -> None:
        with self._cv:
            self._ready = True
            self._cv.notify_all()

    def on_data(self, data: bytes) -> None:
        with self._cv:
            self._inbox += data
            self._cv.notify_all()

    def on_close(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()

    # -- from the service thread
    def write(self, data: bytes) -> bool:
        step = self.conn.max_payload
        for i in range(0, len(data), step):
            with self._cv:
                while not self._ready and not self.closed and self.conn.alive:
                    self._cv.wait(0.5)
                if self.closed or not self.conn.alive:
                    return False
                self._ready = False
            self.conn.send(P.A_WRTE, self.device_id, self.client_id, data[i:i + step])
        return True

    def read_exact(self, n: int) -> bytes | None:
        with self._cv:
            while len(self._inbox) < n and not self.closed and self.conn.alive:
                self._cv.wait(0.5)
            if len(self._inbox) < n:
                return None
            out = bytes(self._inbox[:n])
            del self._inbox[:n]
            return out

    def read_some(self, timeout: float = 0.5) -> bytes | None:
        """Whatever arrived (b'' on timeout), None once closed and drained."""
        with self._cv:
            if not self._inbox and not self.closed and self.conn.alive:
                self._cv.wait(timeout)
            if self._inbox:
                out = bytes(self._inbox)
                self._inbox.clear()
                return out
            return None if (self.closed or not self.conn.alive) else b""

    def close(self) -> None:
        if not self._sent_close:
            self._sent_close = True
            self.conn.send(P.A_CLSE, self.device_id, self.client_id)
        self.conn.forget(self.device_id)


class _Connection(threading.Thread):
    def __init__(self, server: LoopbackAdbd, sock: socket.socket, addr):
        super().__init__(name=f"adbd-conn-{addr[1]}", daemon=True)
        self.server, self.sock, self.addr = server, sock, addr
        self._send_lock = threading.Lock()
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self.max_payload = 4096
        self.alive = True
        self.procs: set[subprocess.Popen] = set()

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        msg = P.pack(cmd, arg0, arg1, data)
        try:
            with self._send_lock:
                self.sock.sendall(msg)
        except OSError:
            self.alive = False

    def forget(self, device_id: int) -> None:
        self._streams.pop(device_id, None)

    def drop(self) -> None:
        """Cut the TCP connection abruptly, as a phone that goes away would."""
        self.alive = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for proc in list(self.procs):
            _kill(proc)

    def run(self) -> None:
        try:
            self._handshake()
            while self.alive:
                cmd, arg0, arg1, data = P.read_message(self.sock)
                self._dispatch(cmd, arg0, arg1, data)
        except (ConnectionError, OSError, P.ProtocolError, struct.error) as e:
            log.debug("connection %s ended: %s", self.addr, e)
        finally:
            self.alive = False
            for s in list(self._streams.values()):
                s.on_close()
            for proc in list(self.procs):
                _kill(proc)
            try:
                self.sock.close()
            except OSError:
                pass
            self.server._connections.discard(self)

    def _handshake(self) -> None:
        cmd, version, maxdata, banner = P.read_message(self.sock)
        if cmd != P.A_CNXN:
            raise P.ProtocolError(f"expected CNXN, got {P.NAMES.get(cmd, cmd)}")
        log.debug("client CNXN version=0x%08x maxdata=%d banner=%r", version, maxdata, banner)
        self.version = min(max(version, P.VERSION_MIN), P.VERSION_SKIP_CHECKSUM)
        self.max_payload = max(4096, min(maxdata, P.MAX_PAYLOAD))
        if self.server.auth:
            self.send(P.A_AUTH, P.AUTH_TOKEN, 0, os.urandom(20))
            while True:
                cmd, kind, _, _ = P.read_message(self.sock)
                if cmd == P.A_CNXN:  # some clients restart the handshake; ask again
                    self.send(P.A_AUTH, P.AUTH_TOKEN, 0, os.urandom(20))
                    continue
                if cmd == P.A_AUTH and kind in (P.AUTH_SIGNATURE, P.AUTH_RSAPUBLICKEY):
                    break  # any key is welcome on a loopback test device
                raise P.ProtocolError(f"unexpected {P.NAMES.get(cmd, cmd)} during AUTH")
        self.send(P.A_CNXN, self.version, self.max_payload, self.server.banner())

    def _dispatch(self, cmd: int, arg0: int, arg1: int, data: bytes) -> None:
        if cmd == P.A_OPEN:
            service = data.rstrip(b"\0").decode("utf-8", "replace")
            self._open(arg0, service)
        elif cmd == P.A_OKAY:
            s = self._streams.get(arg1)
            if s:
                s.on_okay()
        elif cmd == P.A_WRTE:
            s = self._streams.get(arg1)
            if s is None:
                self.send(P.A_CLSE, 0, arg0)
                return
            s.on_data(data)
            self.send(P.A_OKAY, arg1, arg0)
        elif cmd == P.A_CLSE:
            s = self._streams.pop(arg1, None)
            if s:
                s.on_close()
        elif cmd == P.A_CNXN:
            raise P.ProtocolError("client restarted the connection")
        else:
            log.debug("ignoring %s", P.NAMES.get(cmd, cmd))

    def _open(self, client_id: int, service: str) -> None:
        log.debug("OPEN %r", service)
        delay = self.server._drop_delay(service)
        if delay == 0.0:
            log.info("fault injection: dropping the connection on %r", service)
            self.drop()
            return
        if delay is not None:
            log.info("fault injection: dropping the connection %.2f s into %r", delay, service)
            timer = threading.Timer(delay, self.drop)
            timer.daemon = True
            timer.start()
        handler = self.server.handler_for(service)
        if handler is None:
            log.info("refusing unsupported service %r", service)
            self.send(P.A_CLSE, 0, client_id)
            return
        device_id = self._next_id
        self._next_id += 1
        stream = _Stream(self, device_id, client_id)
        self._streams[device_id] = stream
        self.send(P.A_OKAY, device_id, client_id)
        threading.Thread(target=_run_service, args=(handler, stream, service), daemon=True,
                         name=f"adbd-{service[:20]}").start()


def _run_service(handler, stream: _Stream, service: str) -> None:
    try:
        handler(stream, service)
    except Exception:  # pragma: no cover - logged for debugging the test device itself
        log.exception("service %r failed", service)
    finally:
        if stream.conn.alive:
            stream.close()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class LoopbackAdbd:
    """The loopback device. ``with LoopbackAdbd(sandbox_dir) as d: d.port`` or
    ``start()``/``stop()``. ``serial`` is ``127.0.0.1:PORT``, what ``adb connect`` shows."""

    def __init__(self, sandbox: str | os.PathLike, port: int = 0, *, host: str = "127.0.0.1", auth: bool = True,
                 install_runner: bool = True, time_scale: float = 1.0):
        self.sandbox = Sandbox(Path(sandbox))
        self.install_runner = install_runner
        self.time_scale = time_scale
        self.host, self._port, self.auth = host, port, auth
        self._listener: socket.socket | None = None
        self._connections: set[_Connection] = set()
        self._drops: list[list] = []
        self._lock = threading.Lock()
        self.opened_services: list[str] = []

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("loopback adbd is not started")
        return self._listener.getsockname()[1]

    @property
    def serial(self) -> str:
        return f"{self.host}:{self.port}"

    def banner(self) -> bytes:
        props = self.sandbox.props()
        fields = [f"{k}={props.get(k, '')}" for k in ("ro.product.name", "ro.product.model", "ro.product.device")]
        return ("device::" + ";".join(fields) + ";features=" + ",".join(FEATURES)).encode()

    # -- fault injection for tests (a phone that drops off the bus mid-run)
    def drop_on(self, substring: str, times: int = 1, after_s: float = 0.0) -> None:
        """Cut the connection the next ``times`` times a service containing ``substring`` opens:
        at once (``after_s=0``) or ``after_s`` seconds into the running service."""
        with self._lock:
            self._drops.append([substring, times, float(after_s)])

    def _drop_delay(self, service: str) -> float | None:
        with self._lock:
            self.opened_services.append(service)
            for rule in self._drops:
                if rule[1] > 0 and rule[0] in service:
                    rule[1] -= 1
                    return rule[2]
        return None

    def drop_all(self) -> None:
        for c in list(self._connections):
            c.drop()

    # -- services
    def handler_for(self, service: str):
        if service.startswith(("shell:", "exec:")):
            return self._shell
        if service.startswith("sync:"):
            return self._sync
        return None

    def _shell(self, stream: _Stream, service: str) -> None:
        command = service.split(":", 1)[1]
        interactive = service.startswith("shell:") and not command.strip()
        try:
            argv = ["/bin/sh"] if interactive else ["/bin/sh", "-c", self.sandbox.rewrite_command(command)]
        except SandboxError as e:
            stream.write(f"/system/bin/sh: {e}\n".encode())
            return
        proc = subprocess.Popen(argv, cwd=self.sandbox.root, env=self.sandbox.env(),
                                stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        stream.conn.procs.add(proc)
        try:
            if interactive:
                threading.Thread(target=_pump_stdin, args=(stream, proc), daemon=True).start()
            fd = proc.stdout.fileno()
            while True:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if stream.closed or not stream.conn.alive:
                    _kill(proc)
                    break
                if not ready:
                    continue
                chunk = os.read(fd, 64 * 1024)
                if not chunk:
                    break
                if not stream.write(chunk):
                    _kill(proc)
                    break
            proc.wait()
        finally:
            proc.stdout.close()
            stream.conn.procs.discard(proc)

    def _sync(self, stream: _Stream, service: str) -> None:
        from nagkit.devices.loopback.sync import serve_sync

        serve_sync(stream, self.sandbox)

    # -- lifecycle
    def start(self) -> LoopbackAdbd:
        self.sandbox.prepare(install_runner=self.install_runner)
        self.sandbox.set_time_scale(self.time_scale)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        sock.listen(16)
        self._listener = sock
        threading.Thread(target=self._accept_loop, name="adbd-accept", daemon=True).start()
        log.info("loopback adbd on %s, sandbox %s", self.serial, self.sandbox.root)
        return self

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, addr = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, sock, addr)
            self._connections.add(conn)
            conn.start()

    def stop(self) -> None:
        if self._listener is not None:
            try:
                self._listener.close()
            finally:
                self.drop_all()

    def __enter__(self) -> LoopbackAdbd:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _pump_stdin(stream: _Stream, proc: subprocess.Popen) -> None:
    try:
        while True:
            data = stream.read_some()
            if data is None:
                break
            if data:
                proc.stdin.write(data)
                proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
