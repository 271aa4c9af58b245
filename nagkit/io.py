"""File helpers: atomic writes (temp file in the same folder + fsync + rename) and a capped,
safe YAML loader.

Atomic writes create files as ``open()`` would, with mode 0666 less the umask; a file that must
stay private (a key) passes ``mode=0o600``, which is applied exactly before any byte is written.

:func:`load_yaml_file` / :func:`load_yaml_bytes` are the one way nagkit reads YAML from users:
``yaml.SafeLoader`` (no Python tags) with a byte cap, a nesting cap, an alias cap, a cap on the
number of values the document expands to (a "billion laughs" alias bomb is a few hundred bytes
that expand to 10^9 values) and refusal of recursive aliases. Every failure is one
:class:`~nagkit.errors.ArtifactError` line naming the file and the position.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from nagkit.errors import ArtifactError


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically. The file gets 0666 less the umask, like a plain
    ``open()``, unless ``mode`` is given (e.g. ``0o600`` for a key): then exactly ``mode``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path, 0o666 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # exact, whatever the umask; set before any byte is written
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _create_temp(path: Path, mode: int) -> tuple[int, str]:
    """A new, exclusive temp file beside ``path``, created with ``mode`` (the kernel applies the
    umask, as for any new file). ``tempfile.mkstemp`` would always make it 0600."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


def atomic_write_text(path: str | os.PathLike, text: str, *, mode: int | None = None) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 1) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=False) + "\n")


def atomic_torch_save(path: str | os.PathLike, obj: Any) -> Path:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_write_bytes(path, buf.getvalue())


def check_out_path(path: str | os.PathLike, what: str = "--out") -> None:
    """Refuse an output path below an existing file (``--out notes.txt/bundle``) before any work
    is done: every existing ancestor of ``path`` must be a folder (issue 13 D5)."""
    from nagkit.errors import BadInputError

    p = Path(path)
    for anc in p.parents:
        if anc.exists() or anc.is_symlink():
            if not anc.is_dir():
                raise BadInputError(f"{what} {str(p)!r} is below {str(anc)!r}, which is a file, not a folder",
                                    hint=f"choose another {what}, or move {str(anc)!r} away")
            return


class exclusive_lock:
    """An exclusive ``flock`` on ``path`` (a folder, or a file created if missing) for one
    writer. ``wait_s`` = 0 refuses at once when another process holds it; otherwise it waits up
    to ``wait_s`` seconds. Raises :class:`~nagkit.errors.BadInputError` with ``message`` and
    ``hint`` when it cannot get the lock. The kernel releases the lock when the process dies,
    even on ``kill -9``, so a crash never leaves a stale lock behind."""

    def __init__(self, path: str | os.PathLike, *, message: str, hint: str | None = None, wait_s: float = 0.0):
        self.path, self.message, self.hint, self.wait_s = Path(path), message, hint, wait_s
        self.fd: int | None = None

    def __enter__(self) -> exclusive_lock:
        import fcntl
        import time

        from nagkit.errors import BadInputError

        flags = os.O_RDONLY if self.path.is_dir() else os.O_RDWR | os.O_CREAT
        self.fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    raise BadInputError(self.message, hint=self.hint) from None
                time.sleep(0.05)

    def __exit__(self, *exc: Any) -> bool:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None
        return False


def current_umask() -> int:
    """The process's umask, read without changing it (``Umask:`` in /proc/self/status on
    Linux). Elsewhere the set-and-restore idiom is the last resort (it briefly changes a
    process-wide setting, so it is not used where /proc answers)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks (the one hashing helper used everywhere)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


# --------------------------------------------------------------------------- safe YAML

YAML_MAX_BYTES = 4 << 20
YAML_MAX_DEPTH = 64
YAML_MAX_ALIASES = 1000
YAML_MAX_VALUES = 200_000
_YAML_MAX_INT_CHARS = 100  # YAML 1.1 ints (base 60 too) longer than this are refused


def load_yaml_file(path: str | os.PathLike, *, what: str | None = None, hint: str | None = None,
                   max_bytes: int = YAML_MAX_BYTES, max_depth: int = YAML_MAX_DEPTH,
                   max_aliases: int = YAML_MAX_ALIASES, max_values: int = YAML_MAX_VALUES) -> Any:
    """The YAML document in ``path``, read with :func:`load_yaml_bytes`'s caps. ``what`` names
    the file in messages (default: ``YAML file '<path>'``). A missing file raises
    ``FileNotFoundError`` (the CLI maps it to exit 2); a folder or an oversized file,
    :class:`~nagkit.errors.ArtifactError`."""
    p = Path(path)
    what = what or f"YAML file {str(p)!r}"
    if p.is_dir():
        raise ArtifactError(f"{what} is a folder, not a file", hint=hint)
    with open(p, "rb") as f:
        data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            size = os.fstat(f.fileno()).st_size
            raise ArtifactError(f"{what} is {size:,} bytes; nagkit reads YAML files of at most {max_bytes:,} bytes",
                                hint=hint)
    return load_yaml_bytes(data, what=what, hint=hint, max_bytes=max_bytes, max_depth=max_depth,
                           max_aliases=max_aliases, max_values=max_values)


def load_yaml_bytes(data: bytes | str, *, what: str, hint: str | None = None, max_bytes: int = YAML_MAX_BYTES,
                    max_depth: int = YAML_MAX_DEPTH, max_aliases: int = YAML_MAX_ALIASES,
                    max_values: int = YAML_MAX_VALUES) -> Any:
    """Parse one YAML document with ``yaml.SafeLoader``, refusing (with one
    :class:`~nagkit.errors.ArtifactError` line that starts with ``what``) input over
    ``max_bytes``, nesting deeper than ``max_depth``, more than ``max_aliases`` aliases, a
    document that expands to more than ``max_values`` values (aliases counted at every use),
    a recursive alias, an integer of over 100 characters, and anything that is not YAML."""
    import yaml

    size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
    if size > max_bytes:
        raise ArtifactError(f"{what} is {size:,} bytes; nagkit reads YAML of at most {max_bytes:,} bytes",
                            hint=hint)
    loader = None
    try:
        loader = _capped_loader_class()(data, max_depth=max_depth, max_aliases=max_aliases, max_values=max_values)
        return loader.get_single_data()
    except _YamlLimit as e:
        raise ArtifactError(f"{what} is refused: {e}", hint=hint) from None
    except yaml.YAMLError as e:
        raise ArtifactError(f"{what} is not valid YAML: {_yaml_error_line(e)}", hint=hint) from None
    except RecursionError:
        raise ArtifactError(f"{what} is refused: it is nested too deeply", hint=hint) from None
    finally:
        if loader is not None:
            loader.dispose()


class _YamlLimit(Exception):
    """Internal: a cap of the capped loader was hit (turned into ArtifactError)."""


def _yaml_error_line(e: Exception) -> str:
    """One line for a PyYAML error (their ``str`` spans several lines and quotes the input)."""
    from nagkit.errors import short_repr

    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    if problem:
        msg = " ".join(str(problem).split())
        ctx = getattr(e, "context", None)
        if ctx:
            msg = " ".join(str(ctx).split()) + ", " + msg
    else:
        msg = " ".join(str(e).split())
    if len(msg) > 200:
        msg = msg[:200] + "..."
    if mark is not None:
        msg += f" (line {mark.line + 1}, column {mark.column + 1})"
    elif getattr(e, "position", None) is not None:  # yaml.reader.ReaderError
        char, enc = getattr(e, "character", None), getattr(e, "encoding", None)
        if isinstance(char, bytes):
            char = char[0] if char else None
        if enc and enc != "unicode" and isinstance(char, int):
            msg = f"byte 0x{char:02x} at position {e.position} is not valid {enc}"
        elif isinstance(char, int):
            msg = f"character U+{char:04X} at position {e.position} is not allowed in YAML"
        else:
            msg = f"unreadable input at position {e.position} ({short_repr(getattr(e, 'reason', ''))})"
    return msg


_LOADER_CLASS = None


def _capped_loader_class():
    """``yaml.SafeLoader`` with caps (built on first use so that importing nagkit.io stays cheap)."""
    global _LOADER_CLASS
    if _LOADER_CLASS is not None:
        return _LOADER_CLASS
    import yaml

    class CappedSafeLoader(yaml.SafeLoader):
        def __init__(self, stream, *, max_depth: int, max_aliases: int, max_values: int):
            super().__init__(stream)
            self._max_depth, self._max_aliases, self._max_values = max_depth, max_aliases, max_values
            self._depth = self._aliases = 0
            self._sizes: dict[int, int] = {}  # id(node) -> values it expands to; set once composed

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > self._max_aliases:
                    raise _YamlLimit(f"it uses more than {self._max_aliases} aliases (*name)")
                target = self.anchors.get(self.peek_event().anchor)
                if target is not None and id(target) not in self._sizes:
                    mark = self.peek_event().start_mark
                    raise _YamlLimit(f"an alias refers to a value that contains it (line {mark.line + 1})")
                return super().compose_node(parent, index)
            self._depth += 1
            try:
                if self._depth > self._max_depth:
                    mark = self.peek_event().start_mark
                    raise _YamlLimit(f"it is nested more than {self._max_depth} levels deep (line {mark.line + 1})")
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            if isinstance(node, yaml.MappingNode):
                size = 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self._sizes.get(id(v), 1) for v in node.value)
            else:
                size = 1
            if size > self._max_values:
                raise _YamlLimit(f"it expands to more than {self._max_values:,} values "
                                 "(aliases are counted at every use)")
            self._sizes[id(node)] = size
            return node

        def construct_yaml_int(self, node):
            if len(str(node.value)) > _YAML_MAX_INT_CHARS:
                raise _YamlLimit(f"an integer has more than {_YAML_MAX_INT_CHARS} characters "
                                 f"(line {node.start_mark.line + 1})")
            return super().construct_yaml_int(node)

    CappedSafeLoader.add_constructor("tag:yaml.org,2002:int", CappedSafeLoader.construct_yaml_int)
    _LOADER_CLASS = CappedSafeLoader
    return CappedSafeLoader
