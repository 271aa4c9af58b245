"""The ``sync:`` service of the loopback adbd (file transfer), device side.

Requests are ``id(4) length(u32) payload``. Supported: ``STAT``/``STA2``/``LST2`` (stat v1
and v2), ``LIST``/``LIS2`` (directory listing v1 and v2), ``SEND`` (``path,mode`` then
``DATA`` chunks and ``DONE(mtime)``; answered ``OKAY`` or ``FAIL``), ``RECV`` (``DATA``
chunks then ``DONE``, or ``FAIL``) and ``QUIT``. Every path goes through
:meth:`Sandbox.resolve`, which refuses paths that leave the sandbox.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import tempfile

from nagkit.devices.loopback import protocol as P
from nagkit.devices.loopback.sandbox import Sandbox, SandboxError

_HDR = struct.Struct("<II")
_STAT_V1 = struct.Struct("<4I")
_DENT_V1 = struct.Struct("<5I")
_STAT_V2 = struct.Struct("<IIQQIIIIQqqq")
_DENT_V2 = struct.Struct("<IIQQIIIIQqqqI")
_ID_LIS2 = P.sync_id(b"LIS2")
_MAX_PATH = 4096


def _v1_fields(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF, int(st.st_mtime) & 0xFFFFFFFF


def _v2_fields(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_size,
            int(st.st_atime), int(st.st_mtime), int(st.st_ctime))


def _fail(stream, message: str) -> None:
    data = message.encode()
    stream.write(_HDR.pack(P.ID_FAIL, len(data)) + data)


def serve_sync(stream, sandbox: Sandbox) -> None:
    while True:
        hdr = stream.read_exact(_HDR.size)
        if hdr is None:
            return
        ident, length = _HDR.unpack(hdr)
        if ident == P.ID_QUIT:
            return
        if length > _MAX_PATH:
            _fail(stream, f"path too long ({length} bytes)")
            return
        payload = stream.read_exact(length) if length else b""
        if payload is None:
            return
        arg = payload.decode("utf-8", "surrogateescape")
        if ident == P.ID_STAT:
            _stat_v1(stream, sandbox, arg)
        elif ident in (P.ID_STA2, P.ID_LST2):
            _stat_v2(stream, sandbox, arg, follow=ident == P.ID_STA2)
        elif ident in (P.ID_LIST, _ID_LIS2):
            _list(stream, sandbox, arg, v2=ident == _ID_LIS2)
        elif ident == P.ID_SEND:
            if not _send(stream, sandbox, arg):
                return
        elif ident == P.ID_RECV:
            _recv(stream, sandbox, arg)
        else:
            _fail(stream, f"unknown sync command {hdr[:4]!r}")
            return


def _stat_v1(stream, sandbox: Sandbox, path: str) -> None:
    try:
        st = os.stat(sandbox.resolve(path))
        fields = _v1_fields(st)
    except (OSError, SandboxError):
        fields = (0, 0, 0)  # v1 has no error field: all zeros means "does not exist"
    stream.write(_STAT_V1.pack(P.ID_STAT, *fields))


def _stat_v2(stream, sandbox: Sandbox, path: str, follow: bool) -> None:
    ident = P.ID_STA2 if follow else P.ID_LST2
    try:
        real = sandbox.resolve(path)
        st = os.stat(real) if follow else os.lstat(real)
        stream.write(_STAT_V2.pack(ident, 0, *_v2_fields(st)))
    except SandboxError:
        stream.write(_STAT_V2.pack(ident, errno.EACCES, *([0] * 10)))
    except OSError as e:
        stream.write(_STAT_V2.pack(ident, e.errno or errno.EIO, *([0] * 10)))


def _list(stream, sandbox: Sandbox, path: str, v2: bool) -> None:
    try:
        real = sandbox.resolve(path)
        names = sorted(os.listdir(real))
    except (OSError, SandboxError):
        names, real = [], None
    for name in [".", ".."] + names if real else []:
        try:
            st = os.lstat(os.path.join(real, name))
        except OSError:
            continue
        raw = name.encode("utf-8", "surrogateescape")
        if v2:
            stream.write(_DENT_V2.pack(P.sync_id(b"DNT2"), 0, *_v2_fields(st), len(raw)) + raw)
        else:
            stream.write(_DENT_V1.pack(P.ID_DENT, *_v1_fields(st), len(raw)) + raw)
    if v2:
        stream.write(_DENT_V2.pack(P.ID_DONE, *([0] * 12)))
    else:
        stream.write(_DENT_V1.pack(P.ID_DONE, 0, 0, 0, 0))


def _send(stream, sandbox: Sandbox, spec: str) -> bool:
    """Receive a file. Returns False if the stream broke."""
    path, _, mode_s = spec.rpartition(",")
    error = None
    try:
        mode = int(mode_s) if mode_s else 0o644
        if not path:
            raise ValueError("no path")
        real = sandbox.resolve(path)
        if stat.S_ISLNK(mode):
            raise SandboxError("symlinks are not supported by the loopback device")
        os.makedirs(os.path.dirname(real), exist_ok=True)  # fixed_push_mkdir
        fd, tmp = tempfile.mkstemp(prefix=".sync-", dir=os.path.dirname(real))
    except (OSError, ValueError, SandboxError) as e:
        error, fd, tmp = f"cannot write {path!r}: {e}", None, None
    try:
        while True:
            hdr = stream.read_exact(_HDR.size)
            if hdr is None:
                return False
            ident, size = _HDR.unpack(hdr)
            if ident == P.ID_DATA:
                if size > P.SYNC_DATA_MAX:
                    _fail(stream, f"DATA chunk of {size} bytes exceeds {P.SYNC_DATA_MAX}")
                    return False
                data = stream.read_exact(size)
                if data is None:
                    return False
                if fd is not None:
                    os.write(fd, data)
            elif ident == P.ID_DONE:
                if error is None:
                    os.close(fd)
                    fd = None
                    os.chmod(tmp, stat.S_IMODE(mode) or 0o644)
                    os.utime(tmp, (size, size))
                    os.replace(tmp, real)
                    tmp = None
                    stream.write(_HDR.pack(P.ID_OKAY, 0))
                else:
                    _fail(stream, error)
                return True
            else:
                _fail(stream, f"expected DATA or DONE, got {hdr[:4]!r}")
                return False
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _recv(stream, sandbox: Sandbox, path: str) -> None:
    try:
        f = open(sandbox.resolve(path), "rb")  # noqa: SIM115 - closed below
    except (OSError, SandboxError) as e:
        _fail(stream, f"cannot read {path!r}: {getattr(e, 'strerror', None) or e}")
        return
    with f:
        while chunk := f.read(P.SYNC_DATA_MAX):
            if not stream.write(_HDR.pack(P.ID_DATA, len(chunk)) + chunk):
                return
    stream.write(_HDR.pack(P.ID_DONE, 0))
