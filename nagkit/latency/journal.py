"""The profile journal: every measured block, appended as one JSON line, flushed and fsync'd.

``<out>.journal.jsonl`` beside a profile's table (:mod:`nagkit.latency.profiler`). Its first
line is a header naming the device, runtime, model format, precision and space; each further
line is one pass of one block. A torn last line (a crash mid-write) is cut off on reading; a
record with impossible statistics is skipped with a warning (the block is measured again); a
journal made for another device or space is refused. :class:`journal_lock` keeps a second
profile of the same output out.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError, BadInputError, short_repr
from nagkit.latency.table import stats_problem, utc_now
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)

JOURNAL_FORMAT = "nagkit-profile-journal"
JOURNAL_SCHEMA = 1


def journal_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".journal.jsonl")


def device_identity(device, precision: str = "fp32") -> dict[str, Any]:
    """What must match for a journal to be resumed on ``device`` (at ``precision``)."""
    rt = device.runtime_info() or {}
    return {"spec": str(device.spec), "kind": device.kind, "model_format": device.model_format,
            "runtime": rt.get("name"), "threads": rt.get("threads"), "precision": precision}


class Journal:
    """Append-only, fsync'd JSON-lines record of measured blocks."""

    def __init__(self, path: Path, header: dict[str, Any], blocks: dict[str, dict[str, Any]],
                 passes: dict[str, list[dict[str, Any]]] | None = None):
        self.path = path
        self.header = header
        self.blocks = blocks  # key -> its first record (the block has been measured)
        self.passes = passes if passes is not None else {k: [r] for k, r in blocks.items()}  # key -> every record

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> Journal:
        path.parent.mkdir(parents=True, exist_ok=True)
        head = {"type": "header", "format": JOURNAL_FORMAT, "schema": JOURNAL_SCHEMA, **header}
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(head, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(path.parent)
        return cls(path, head, {})

    @classmethod
    def open(cls, path: Path) -> Journal:
        """Read a journal; a torn last line (a crash mid-write) is cut off, anything else
        unreadable raises :class:`ArtifactError`."""
        recs, data, good_len = read_records(path, "profile journal")
        if not recs or not isinstance(recs[0], dict) or recs[0].get("type") != "header" \
                or recs[0].get("format") != JOURNAL_FORMAT:
            raise ArtifactError(f"{str(path)!r} is not a nagkit profile journal (no header line)",
                                hint="delete it, or pick another --out")
        if recs[0].get("schema") != JOURNAL_SCHEMA:
            raise ArtifactError(f"profile journal {str(path)!r} has schema {short_repr(recs[0].get('schema'))}; "
                                f"this nagkit writes schema {JOURNAL_SCHEMA}", hint="delete it and start over")
        blocks: dict[str, dict[str, Any]] = {}
        passes: dict[str, list[dict[str, Any]]] = {}
        for i, r in enumerate(recs[1:], start=2):
            if not isinstance(r, dict) or r.get("type") != "block" or not isinstance(r.get("key"), str) \
                    or not isinstance(r.get("stats"), dict):
                raise ArtifactError(f"profile journal {str(path)!r} has a malformed record: {short_repr(r, 200)}",
                                    hint="delete it and start over")
            problem = stats_problem(r["stats"])
            if problem:
                log.warning("journal %s line %d: block %s %s; it will be measured again", path, i,
                            short_repr(r["key"]), problem)
                continue
            blocks.setdefault(r["key"], r)
            passes.setdefault(r["key"], []).append(r)
        repair_tail(path, data, good_len)
        return cls(path, recs[0], blocks, passes)

    def append(self, key: str, stats: Mapping[str, Any], **extra: Any) -> None:
        rec = {"type": "block", "key": key, "stats": dict(stats), "t": utc_now(), **extra}
        append_record(self.path, rec)
        self.blocks.setdefault(key, rec)
        self.passes.setdefault(key, []).append(rec)


def read_records(path: Path, what: str) -> tuple[list[Any], bytes, int]:
    """(records, the bytes read, the length of their whole lines) of a JSON-lines journal; a torn
    last line (a crash mid-write) is left out with a warning, any other unreadable line raises
    :class:`ArtifactError`. Nothing is written: :func:`repair_tail` cuts the torn line off."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    good_len = len(data) - len(tail)
    if tail.strip():
        try:
            json.loads(tail)
            complete.append(tail)  # a whole record without its newline
            good_len = len(data)
        except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, a 5,000-digit int
            log.warning("journal %s: dropping a half-written last line (%d bytes)", path, len(tail))
    recs = []
    for i, raw in enumerate(complete):
        if not raw.strip():
            continue
        try:
            recs.append(json.loads(raw))
        except (ValueError, RecursionError):
            raise ArtifactError(f"{what} {str(path)!r} is corrupt at line {i + 1}; it cannot be resumed",
                                hint="delete it (and start over) or restore it from a backup") from None
    return recs, data, good_len


def append_record(path: Path, rec: Mapping[str, Any]) -> None:
    """One record appended to a journal as one line, flushed and fsync'd before it counts."""
    line = json.dumps(rec, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def repair_tail(path: Path, data: bytes, good_len: int) -> None:
    """Cut a journal's torn last line off (``good_len``: its whole lines), or end a whole last
    record with its newline, so that the next append starts a line of its own."""
    if good_len < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_len)
            f.flush()
            os.fsync(f.fileno())
    elif data and not data.endswith(b"\n"):
        with open(path, "ab") as f:
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())


class journal_lock:
    """An exclusive ``flock`` on ``<journal>.lock`` for one profile run: a second profile of
    the same output is refused instead of interleaving its measurements. The kernel releases
    the lock when the process dies, even on ``kill -9``."""

    def __init__(self, jpath: Path):
        self.path = jpath.with_name(jpath.name + ".lock")
        self.fd: int | None = None

    def __enter__(self) -> journal_lock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise BadInputError(
                f"another `nagkit profile` is writing {str(self.path.with_suffix(''))!r} right now",
                hint="wait for it to finish (or stop it), then rerun with --resume") from None
        return self

    def __exit__(self, *exc) -> bool:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None
        return False


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_journal_matches(j: Journal, ident: Mapping[str, Any], space: SearchSpace) -> None:
    theirs = j.header.get("device_identity", {})
    theirs = {"precision": "fp32", **theirs}  # journals from before precisions are fp32
    diffs = [f"{k}: journal {short_repr(theirs.get(k))} vs now {short_repr(ident.get(k))}"
             for k in ("spec", "model_format", "runtime", "threads", "precision") if theirs.get(k) != ident.get(k)]
    if diffs:
        raise BadInputError(
            f"profile journal {str(j.path)!r} was made for device {short_repr(theirs.get('spec'))}, not "
            f"{short_repr(ident.get('spec'))} ({'; '.join(diffs)}); refusing to mix measurements",
            hint=_resume_hint("--device", theirs.get("spec")))
    if j.header.get("space_spec") != space.to_dict():
        raise BadInputError(
            f"profile journal {str(j.path)!r} was made for space {short_repr(j.header.get('space'))}, not "
            f"{space.name!r} (or its definition changed); refusing to mix measurements",
            hint=_resume_hint("--space", j.header.get("space")))


def _resume_hint(option: str, value: Any) -> str:
    """The command to resume with the journal's own value, when that value is short and printable."""
    if isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable():
        return f"resume with `{option} {value}`, or write to another --out"
    return "write to another --out"
