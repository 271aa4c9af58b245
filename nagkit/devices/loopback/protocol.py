"""The ADB wire format, device side: 24-byte message headers and the ``sync:`` framing.

A message is ``command, arg0, arg1, data_length, data_checksum, magic`` (six little-endian
uint32) followed by ``data_length`` bytes. ``magic = command ^ 0xffffffff``; the checksum is
the byte sum of the data (clients from protocol version 0x01000001 on no longer check it, but
adb-shell does, so it is always filled in).
"""

from __future__ import annotations

import socket
import struct

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_STLS = 0x534C5453
NAMES = {A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY", A_CLSE: "CLSE", A_WRTE: "WRTE",
         A_STLS: "STLS"}

AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3

VERSION_MIN = 0x01000000
VERSION_SKIP_CHECKSUM = 0x01000001
MAX_PAYLOAD = 256 * 1024
HEADER = struct.Struct("<6I")

# sync: service request/response ids (four ASCII bytes read as a little-endian uint32)
SYNC_DATA_MAX = 64 * 1024


def sync_id(name: bytes) -> int:
    return struct.unpack("<I", name)[0]


ID_STAT, ID_STA2, ID_LST2, ID_LIST, ID_SEND, ID_RECV, ID_QUIT = (
    sync_id(n) for n in (b"STAT", b"STA2", b"LST2", b"LIST", b"SEND", b"RECV", b"QUIT"))
ID_DENT, ID_DNT2, ID_DATA, ID_DONE, ID_OKAY, ID_FAIL = (
    sync_id(n) for n in (b"DENT", b"DNT2", b"DATA", b"DONE", b"OKAY", b"FAIL"))


class ProtocolError(Exception):
    """The peer sent something that is not ADB."""


def pack(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return HEADER.pack(command, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF, command ^ 0xFFFFFFFF) + data


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


def read_message(sock: socket.socket, max_payload: int = 16 * 1024 * 1024) -> tuple[int, int, int, bytes]:
    command, arg0, arg1, length, _check, magic = HEADER.unpack(recv_exact(sock, HEADER.size))
    if magic != command ^ 0xFFFFFFFF or command not in NAMES:
        raise ProtocolError(f"bad ADB header: command=0x{command:08x} magic=0x{magic:08x}")
    if length > max_payload:
        raise ProtocolError(f"ADB payload of {length} bytes exceeds {max_payload}")
    data = recv_exact(sock, length) if length else b""
    return command, arg0, arg1, data
