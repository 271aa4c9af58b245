"""Exception types and the one table that maps them to CLI messages and exit codes.

Every error a user can cause derives from :class:`NagkitError`. It carries a message that
names the bad value, optionally the valid options and a ``hint`` with the command that fixes
it. The CLI prints ``error: <message>`` (plus the hint) on one line and exits with the code
from :data:`EXIT_CODES`; ``NAGKIT_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 3


class NagkitError(Exception):
    """Base class. ``hint`` is the next command or action for the user."""

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class BadInputError(NagkitError, ValueError):
    """The user gave a value nagkit cannot use (exit 2)."""

    exit_code = EXIT_BAD_INPUT


def close_matches(name: object, options: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``options`` that look like ``name``, best first (the one place nagkit
    asks :mod:`difflib`)."""
    return difflib.get_close_matches(str(name), [str(o) for o in options], n=n, cutoff=cutoff)


def did_you_mean(name: object, options: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> str:
    """``"did you mean 'a' or 'b'?"`` for the options close to ``name``, or ``""`` when none is.

    Every did-you-mean in nagkit's messages comes from here::

        msg = f"unknown key {key!r}" + (f"; {dym}" if (dym := did_you_mean(key, valid)) else "")
    """
    close = close_matches(name, options, n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class UnknownNameError(BadInputError, KeyError):
    """A name missing from a registry; the message lists close matches and the options."""

    def __init__(self, kind: str, name: str, options: Iterable[str], *, hint: str | None = None):
        options = sorted(options)
        close = close_matches(name, options, n=3, cutoff=0.5)
        msg = f"unknown {kind} {short_repr(name)}"
        if close:
            msg += f"; {did_you_mean(name, options, n=3, cutoff=0.5)}"
        msg += f" Valid {kind}s: {', '.join(options) if options else '(none registered)'}"
        super().__init__(msg, hint=hint)
        self.name = name
        self.options = options
        self.close_matches = close

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return NagkitError.__str__(self)


class ArchError(BadInputError):
    """A malformed or out-of-space architecture; names the field and the allowed values."""


class CheckpointError(BadInputError):
    """A weights file that is missing, truncated, not a checkpoint, or for another space."""


class CheckFailedError(NagkitError):
    """A check ran and failed: over budget, parity mismatch (exit 1)."""

    exit_code = EXIT_CHECK_FAILED


class DeviceError(NagkitError):
    """A device or runtime failed: unreachable, crashed, unparseable output (exit 3)."""

    exit_code = EXIT_RUNTIME


class ProfileParseError(DeviceError):
    """Profiler output that could not be parsed. Quotes (the tail of) the output."""

    def __init__(self, message: str, output: str = "", *, hint: str | None = None):
        tail = output if len(output) <= 2000 else "..." + output[-2000:]
        full = f"{message}\n--- device output ---\n{tail}\n--- end ---" if output else message
        super().__init__(full, hint=hint)
        self.output = output


class ArtifactError(BadInputError):
    """A truncated, corrupt or incompatible artifact (table, dataset, checkpoint, workspace)."""


def exit_code_for(exc: BaseException) -> int:
    """The CLI exit code of an exception (the single mapping used by the CLI)."""
    if isinstance(exc, NagkitError):
        return exc.exit_code
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        return EXIT_BAD_INPUT
    return EXIT_RUNTIME


def message_for(exc: BaseException) -> str:
    """One-line user message for any exception."""
    if isinstance(exc, NagkitError):
        msg = exc.message
        if exc.hint:
            msg += f"\n  hint: {exc.hint}"
        return msg
    if isinstance(exc, FileNotFoundError):
        return f"file not found: {exc.filename or exc}"
    return f"{type(exc).__name__}: {exc} (run with NAGKIT_DEBUG=1 for the traceback)"


def reject_unknown_keys(given: Iterable[str], valid: Iterable[str], where: str) -> None:
    """Raise :class:`BadInputError` for keys not in ``valid``, with a did-you-mean for each."""
    valid = list(valid)
    unknown = [k for k in given if k not in valid]
    if unknown:
        parts = []
        for u in unknown[:5]:  # a bounded message, whatever the input
            dym = did_you_mean(u, valid)
            parts.append(short_repr(u, 60) + (f" ({dym})" if dym else ""))
        raise BadInputError(f"unknown key(s) {', '.join(parts)} in {where}; valid keys: {', '.join(valid)}")


#: The seeds nagkit accepts everywhere (``--seed``, ``seed`` in nagkit.toml, the Python API's
#: ``seed=``): 0..2**32-1. numpy's ``RandomState`` takes no more, and torch's ``manual_seed`` and
#: ``default_rng`` take every seed derived from one in this range (``seed + 7``, hashes).
SEED_MAX = 2**32 - 1


def check_int(value: object, lo: int, hi: int, what: str, *, hint: str | None = None) -> int:
    """``value`` when it is an int (not a bool) in ``lo..hi``; otherwise one
    :class:`BadInputError` line naming ``what``, the value (shortened) and the range."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInputError(f"{what} must be an integer in {lo}..{hi}, got {short_repr(value)}", hint=hint)
    if not lo <= value <= hi:
        raise BadInputError(f"{what} {short_repr(value)} is not in {lo}..{hi}", hint=hint)
    return value


def check_seed(value: object, what: str = "--seed", *, hint: str | None = None) -> int:
    """A seed in 0..:data:`SEED_MAX` (the one seed range of nagkit), else one error line."""
    return check_int(value, 0, SEED_MAX, what, hint=hint)


def short_text(text: str, limit: int = 80) -> str:
    """``text`` cut in the middle to about ``limit`` characters (``[...]`` marks the cut), for
    echoing long user input (a path, a spec) without quotes."""
    if len(text) <= limit:
        return text
    keep = max(limit - 5, 8)
    return text[: keep - keep // 3] + "[...]" + text[len(text) - keep // 3:]


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for echoing user input in messages.

    Bounded in time and memory for any input: nested containers are summarised a few levels
    and items deep (a YAML alias bomb shares one object a billion times), and integers too
    long for ``repr`` (over 4,300 digits) are described by their size instead."""
    return short_text(_SHORT_REPR.repr(value), limit)


class _ShortRepr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 4
        self.maxstring = self.maxother = 120

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:  # over 60 digits: repr would be long (or raise past 4,300 digits)
            sign = "negative " if x < 0 else ""
            return f"<{sign}int of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return repr(x)


_SHORT_REPR = _ShortRepr()
