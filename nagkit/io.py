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
    """Refuse an output path below an existing file (``--out notes.txt/bundle``), or one the OS
    cannot take (too long, a NUL: :func:`path_problem`), before any work is done: every existing
    ancestor of ``path`` must be a folder (issue 13 D5, issue 35)."""
    from nagkit.errors import BadInputError

    p = check_path_text(path, what, hint=f"choose a shorter {what}")
    for anc in p.parents:
        if anc.exists() or anc.is_symlink():
            if not anc.is_dir():
                raise BadInputError(f"{what} {str(p)!r} is below {str(anc)!r}, which is a file, not a folder",
                                    hint=f"choose another {what}, or move {str(anc)!r} away")
            return


# --------------------------------------------------------------------------- user paths

#: Linux's limits: a path of at most PATH_MAX bytes, each name in it at most NAME_MAX bytes.
MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255
_SHOWN = 120  # a path echoed in a message is cut to about this many characters


def shown_path(path: str | os.PathLike) -> str:
    """A path as messages echo it: quoted, and cut in the middle when long (a 100 KB name is
    never echoed whole)."""
    from nagkit.errors import short_repr

    return short_repr(os.fsdecode(path), _SHOWN)


def path_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot name a file on this system (a NUL, too long, a name in it over 255
    bytes, text that is not UTF-8), or None. Checked before the path reaches the OS, whose
    answer would be a raw ``OSError`` (``File name too long``)."""
    text = os.fsdecode(path)
    if "\x00" in text:
        return "holds a NUL character"
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(text)  # bytes that are not UTF-8 (surrogate-escaped): still a path
    if len(raw) > MAX_PATH_BYTES:
        return f"is {len(raw):,} bytes long; a path has at most {MAX_PATH_BYTES:,}"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        return f"has a name of {len(longest):,} bytes; a file or folder name has at most {MAX_NAME_BYTES}"
    return None


def check_path_text(path: str | os.PathLike, what: str, *, hint: str | None = None, error: type | None = None) -> Path:
    """``Path(path)``, or one error line (``error``, default :class:`~nagkit.errors.BadInputError`)
    naming ``what`` and a shortened ``path`` when :func:`path_problem` finds one."""
    from nagkit.errors import BadInputError

    if (problem := path_problem(path)) is not None:
        raise (error or BadInputError)(f"{what} {shown_path(path)} {problem}", hint=hint)
    return Path(path)


def file_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (for "is a FIFO (named pipe), not a regular file")."""
    import stat

    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def input_file(path: str | os.PathLike, what: str, *, hint: str | None = None, error: type | None = None,
               label: str | None = None) -> Path:
    """``path`` when it names a regular file (links followed); otherwise one error line (``error``,
    default :class:`~nagkit.errors.BadInputError`) naming ``what``, the shortened path and what
    it is instead: missing, a folder, a FIFO, a device, unreadable. The one check of every path a
    user hands nagkit to read (a FIFO would hang the reader, ``/dev/zero`` never ends).
    ``label`` replaces ``"<what> '<path>'"`` in the messages when the caller already names it."""
    import stat

    from nagkit.errors import BadInputError

    err = error or BadInputError
    if (problem := path_problem(path)) is not None:
        raise err(f"{label or what + ' ' + shown_path(path)} {problem}", hint=hint)
    p = Path(path)
    name = label or f"{what} {shown_path(p)}"
    try:
        st = os.stat(p)
    except FileNotFoundError:
        broken = " (a link to nowhere)" if os.path.islink(p) else ""
        raise err(f"{name} does not exist{broken}", hint=hint) from None
    except OSError as e:
        raise err(f"{name} cannot be read: {e.strerror or e}", hint=hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise err(f"{name} {_not_regular(st.st_mode)}", hint=hint)
    return p


def _not_regular(mode: int) -> str:
    kind = file_kind(mode)
    return f"is {kind}" if kind.startswith("not ") else f"is {kind}, not a regular file"


def read_input_file(path: str | os.PathLike, what: str, *, max_bytes: int, hint: str | None = None,
                    error: type | None = None, label: str | None = None) -> bytes:
    """The bytes of a user's file, read through :func:`input_file`'s checks and capped: a file
    over ``max_bytes`` is refused from its size before a byte is read. The file is opened
    without blocking and checked again once open (a FIFO swapped in meanwhile is refused, not
    waited on)."""
    import stat

    from nagkit.errors import BadInputError

    err = error or BadInputError
    p = input_file(path, what, hint=hint, error=err, label=label)
    name = label or f"{what} {shown_path(p)}"
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise err(f"{name} cannot be read: {e.strerror or e}", hint=hint) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise err(f"{name} {_not_regular(st.st_mode)}", hint=hint)
        if st.st_size > max_bytes:
            raise err(f"{name} is {st.st_size:,} bytes; nagkit reads at most {max_bytes:,}", hint=hint)
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise err(f"{name} cannot be read: {e.strerror or e}", hint=hint) from None
    if len(data) > max_bytes:  # grew while being read
        raise err(f"{name} is over {max_bytes:,} bytes; nagkit reads at most {max_bytes:,}", hint=hint)
    return data


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
    the file in messages (default: ``YAML file '<path>'``). A missing file, a folder, a FIFO or
    device, or an oversized file is one :class:`~nagkit.errors.ArtifactError` line
    (:func:`read_input_file`)."""
    what = what or f"YAML file {shown_path(path)}"
    data = read_input_file(path, "YAML file", max_bytes=max_bytes, hint=hint, error=ArtifactError, label=what)
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
