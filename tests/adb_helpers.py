"""What the tests that talk to Debian's `adb` client share: where it is, their marks, a free port."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

ADB = shutil.which("adb") or "/usr/bin/adb"
ADB_MARKS = [
    pytest.mark.adb,
    pytest.mark.skipif(not os.path.exists(ADB), reason="Debian's adb client is not installed (apt-get install adb)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
