"""Shared pieces of the hostile-input tests (issue 13): a hang guard for regression tests and the
parser checks used by the property tests and by ``benchmarks/fuzz/run_fuzz.py``."""

from __future__ import annotations

import contextlib
import signal
import threading


class Hang(AssertionError):
    """The guarded call ran past its hard limit (it would have hung the CLI)."""


@contextlib.contextmanager
def no_hang(seconds: int = 30):
    """Fail (instead of hanging the suite) if the body runs longer than ``seconds``. A guard
    against a hang, not a timing assertion: the limit is far above the normal milliseconds."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def _raise(signum, frame):
        raise Hang(f"still running after {seconds} s (a hang: exponential or quadratic work)")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
