"""Native libraries' console chatter, kept off the console unless asked for (``-v``).

TensorFlow/absl ("All log messages before absl::InitializeLog()", "oneDNN custom operations are
on"), torch's pytree deprecation warning and LiteRT ("Created TensorFlow Lite XNNPACK delegate")
write to file descriptor 2 from native code, where Python's own redirection cannot reach.
:func:`native_stderr_captured` points descriptor 2 at a temporary file for the duration and
hands what was written to a sink (an error message may quote it); it is written back to stderr
when nagkit's log is at INFO or lower (``-v``). Nested and concurrent uses share one redirection.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()
_STATE: dict = {"depth": 0, "saved": -1, "file": None}


def verbose() -> bool:
    """Whether the user asked for more output (``-v``: nagkit's log at INFO or lower)."""
    return logging.getLogger("nagkit").isEnabledFor(logging.INFO)


def _flush() -> None:
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001 - a closed or odd stream
            pass


@contextlib.contextmanager
def native_stderr_captured(sink: io.StringIO | None = None) -> Iterator[None]:
    """Descriptor 2 into a temporary file for the duration; see the module doc."""
    with _LOCK:
        if _STATE["depth"] == 0:
            _flush()
            f = tempfile.TemporaryFile(mode="a+b", prefix="nagkit-native-", suffix=".log")  # O_APPEND
            try:
                saved = os.dup(2)
                os.dup2(f.fileno(), 2)
            except OSError:  # pragma: no cover - no descriptor 2
                f.close()
                saved, f = -1, None
            _STATE.update(saved=saved, file=f)
        _STATE["depth"] += 1
        f = _STATE["file"]
        start = os.fstat(f.fileno()).st_size if f is not None else 0
    text = ""
    try:
        yield
    finally:
        with _LOCK:
            if f is not None:
                _flush()
                end = os.fstat(f.fileno()).st_size
                text = os.pread(f.fileno(), end - start, start).decode("utf-8", "replace")
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["saved"] >= 0:
                os.dup2(_STATE["saved"], 2)
                os.close(_STATE["saved"])
                _STATE["file"].close()
                _STATE.update(saved=-1, file=None)
        if sink is not None:
            sink.write(text)
        if text.strip() and verbose():
            sys.stderr.write(text)
            _flush()
