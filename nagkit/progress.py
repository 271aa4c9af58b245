"""Progress on stderr, readable in a terminal and in a CI log alike.

When stderr is a terminal, :class:`progress_bar` draws a rich bar with ETA; otherwise (a CI log,
a pipe, a file) it writes plain lines: the first and last step and at most one line every few
seconds in between, each with the count, the percentage, the elapsed time and an ETA.
:func:`phase_progress` is the same plain-line writer as a ``(phase, done, total)`` callback.
Inside ``with progress_note(fn):`` every line (and a terminal bar) also shows ``fn()``: a long
job's place against its whole time budget (``nagkit profile --time-budget``), not only the phase's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextvars import ContextVar

EVERY_S = 5.0  # at most one plain progress line per phase this often


_NOTE: ContextVar[Callable[[], str] | None] = ContextVar("nagkit_progress_note", default=None)


class progress_note:
    """``with progress_note(fn):`` every progress line written inside ends with ``fn()``."""

    def __init__(self, fn: Callable[[], str] | None):
        self.fn = fn
        self._token = None

    def __enter__(self) -> progress_note:
        self._token = _NOTE.set(self.fn)
        return self

    def __exit__(self, *exc) -> bool:
        _NOTE.reset(self._token)
        return False


def current_note() -> str:
    """The note of the enclosing :class:`progress_note` (empty outside one)."""
    fn = _NOTE.get()
    return fn() if fn is not None else ""


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


say = _log  # a line on stderr, beside the progress lines (a plan, a phase that ends early)


def _eta(elapsed: float, done: int, total: int) -> str:
    if done <= 0 or total <= done:
        return ""
    return f", eta {elapsed / done * (total - done):.0f} s"


def phase_progress(every_s: float = EVERY_S, write: Callable[[str], None] = _log) -> Callable[[str, int, int], None]:
    """A ``(phase, done, total)`` callback that writes plain progress lines: the first and last
    step of each phase and at most one line per ``every_s`` seconds in between."""
    state: dict[str, float] = {}

    def update(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        first = phase not in state
        if first:
            state[phase] = now
            state[phase + "/t0"] = now
        if first or done >= total or now - state[phase] >= every_s:
            state[phase] = now
            elapsed = now - state[phase + "/t0"]
            pct = f" ({100 * done / total:.0f}%)" if total else ""
            note = current_note()
            write(f"{phase}: {done}/{total}{pct}, {elapsed:.0f} s{_eta(elapsed, done, total)}"
                  + (f"; {note}" if note else ""))

    return update


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class progress_bar:
    """``with progress_bar(enabled, total, done, label, verb) as advance: advance(key)`` once
    per finished item. A rich bar on a terminal, plain lines elsewhere, nothing when disabled."""

    def __init__(self, enabled: bool, total: int, done: int, label: str, verb: str = "profile"):
        self.enabled, self.total, self.done, self.label, self.verb = enabled, total, done, label, verb
        self._p = None

    def __enter__(self) -> Callable[[str], None]:
        if not self.enabled:
            return lambda key: None
        if not stderr_is_terminal():
            return self._plain()
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._p = Progress(TextColumn(f"[bold]{self.verb}[/] {{task.description}}"), BarColumn(),
                           MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                           TimeRemainingColumn(), TextColumn("{task.fields[key]}"), TextColumn("{task.fields[note]}"),
                           console=Console(stderr=True), transient=False)
        self._p.__enter__()
        task = self._p.add_task(str(self.label), total=self.total, completed=self.done, key="", note=current_note())

        def advance(key: str) -> None:
            self._p.update(task, advance=1, key=key[:60], note=current_note())

        return advance

    def _plain(self) -> Callable[[str], None]:
        update = phase_progress()
        phase = f"{self.verb} {self.label}"
        count = {"done": self.done}
        update(phase, count["done"], self.total)

        def advance(key: str) -> None:
            count["done"] += 1
            update(phase, count["done"], self.total)

        return advance

    def __exit__(self, *exc) -> bool:
        if self._p is not None:
            self._p.__exit__(*exc)
        return False
