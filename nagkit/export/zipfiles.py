"""Bundle zips: writing them reproducibly, and reading one that may be hostile.

:func:`open_bundle_zip` is how a bundle zip is read: every entry name is checked (no absolute
paths, ``..``, backslashes, symlinks or devices, duplicates, or a file and a folder of the same
name), ``manifest.json`` is read into memory (at most :data:`MAX_MANIFEST_BYTES`), and only the
files the manifest lists are extracted, each refused when it would exceed the size the manifest
gives it. Before anything is extracted (:func:`check_listing`), the zip must hold nothing the
manifest does not list (besides ``manifest.json``, ``README.md`` and its top folder), and each
listed entry's declared size must be the manifest's ``size_bytes``, at most
:data:`MAX_MODEL_BYTES`: a zip bomb is refused from its directory, not after writing and hashing
gigabytes (issue 35). A zip whose data is corrupt (bad CRC, truncated, only an end record) is refused with
an :class:`ArtifactError` (exit 2), never a Python traceback. :func:`safe_extract` extracts a
whole zip under the same name checks.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from nagkit.errors import ArtifactError

MAX_ZIP_ENTRIES = 64
MAX_ZIP_BYTES = 4 << 30
MAX_MANIFEST_BYTES = 1 << 20
MAX_README_BYTES = 1 << 20
#: The largest model file a bundle may hold: a TFLite flatbuffer and an ONNX protobuf (without
#: external data) cannot be larger.
MAX_MODEL_BYTES = (2 << 30) - 1
_DRIVE = re.compile(r"^[A-Za-z]:")
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError)
_HINT = "this zip was not written by nagkit, or it is damaged; rebuild or re-download the bundle"


def write_zip(folder: Path, zip_path: Path, top: str) -> None:
    """Zip every file of ``folder`` under ``top/`` (fixed dates and modes: same files, same bytes)."""
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            info = zipfile.ZipInfo(f"{top}/{p.name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(p, "rb") as src, zf.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def open_zip(zip_path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(zip_path)
    except _READ_ERRORS as e:
        raise ArtifactError(f"{str(zip_path)!r} is not a valid zip: {str(e)[:200]}", hint=_HINT) from None


def _unsafe_reason(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if not name or "\x00" in name:
        return "has an empty or NUL name"
    if len(name) > 512:
        return "has a name over 512 characters"
    if "\\" in name:
        return "uses backslashes"
    if name.startswith("/") or _DRIVE.match(name):
        return "is an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "contains '..'"
    mode = (info.external_attr >> 16) & 0xFFFF
    ftype = stat.S_IFMT(mode)
    if ftype == stat.S_IFLNK:
        return "is a symlink"
    if ftype not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "is not a regular file or folder"
    return None


def checked_entries(zf: zipfile.ZipFile, zip_path: Path) -> dict[str, zipfile.ZipInfo]:
    """``{normalised name: entry}`` after refusing any entry that could escape a folder or clash.

    Refused: unsafe names (:func:`_unsafe_reason`), duplicates, a name that is both a file and a
    folder (``a`` and ``a/b``), more than :data:`MAX_ZIP_ENTRIES` entries or
    :data:`MAX_ZIP_BYTES` in all."""
    infos = zf.infolist()
    where = f"zip {str(zip_path)!r}"
    if len(infos) > MAX_ZIP_ENTRIES:
        raise ArtifactError(f"{where} has {len(infos)} entries; a bundle has at most {MAX_ZIP_ENTRIES}", hint=_HINT)
    total = sum(i.file_size for i in infos)
    if total > MAX_ZIP_BYTES:
        raise ArtifactError(f"{where} would expand to {total} bytes (limit {MAX_ZIP_BYTES})", hint=_HINT)
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        bad = _unsafe_reason(info)
        if bad:
            raise ArtifactError(f"refusing {where}: entry {info.filename[:80]!r} {bad}", hint=_HINT)
        key = str(PurePosixPath(info.filename))
        if key in entries and entries[key].is_dir() != info.is_dir():
            raise ArtifactError(f"refusing {where}: {key[:80]!r} is both a file and a folder", hint=_HINT)
        if key in entries or key == ".":
            raise ArtifactError(f"refusing {where}: entry {info.filename[:80]!r} appears twice", hint=_HINT)
        entries[key] = info
    files = {k for k, i in entries.items() if not i.is_dir()}
    for key in entries:
        for parent in PurePosixPath(key).parents:
            if str(parent) in files:
                raise ArtifactError(f"refusing {where}: {str(parent)[:80]!r} is both a file and a folder", hint=_HINT)
    return entries


def read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, zip_path: Path) -> bytes:
    """The bytes of one entry, refusing more than ``limit`` and corrupt data."""
    if info.file_size > limit:
        raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} is {info.file_size} bytes "
                            f"(limit {limit})", hint=_HINT)
    try:
        with zf.open(info) as src:
            data = src.read(limit + 1)
    except _READ_ERRORS as e:
        raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} is corrupt ({str(e)[:120]})",
                            hint=_HINT) from None
    if len(data) > limit:
        raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} holds more than {limit} bytes",
                            hint=_HINT)
    return data


def check_listing(entries: dict[str, zipfile.ZipInfo], top: str, files: dict[str, int], zip_path: Path) -> None:
    """Refuse a bundle zip, from its directory alone, that holds an entry its manifest does not
    list (``files``: name -> ``size_bytes``; ``manifest.json``, ``README.md`` and the top folder
    are a bundle's own), or whose listed entry is missing, a folder, declared at another size
    than listed, or over :data:`MAX_MODEL_BYTES`."""
    where = f"bundle zip {str(zip_path)[:200]!r}"
    known = {top + "manifest.json", top + "README.md", *(top + n for n in files)}
    for key, info in entries.items():
        if key not in known and not (info.is_dir() and key + "/" == top):
            raise ArtifactError(f"{where} holds {key[:80]!r}, which its manifest does not list; a bundle zip holds "
                                "only manifest.json, README.md and the files the manifest lists", hint=_HINT)
    for name, size in files.items():
        info = entries.get(top + name)
        if info is None or info.is_dir():
            raise ArtifactError(f"{where} lists {name[:80]!r} but the zip does not hold it", hint=_HINT)
        if size > MAX_MODEL_BYTES:
            raise ArtifactError(f"{where}: its manifest lists {name[:80]!r} at {size:,} bytes; a model file has at "
                                f"most {MAX_MODEL_BYTES:,} (TFLite's and ONNX's limit)", hint=_HINT)
        if info.file_size != size:
            raise ArtifactError(f"{where}: {name[:80]!r} is declared {info.file_size:,} bytes in the zip, but its "
                                f"manifest says {size:,}", hint=_HINT)


def extract_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, limit: int, zip_path: Path) -> None:
    """Write one entry to ``target`` (created exclusively), at most ``limit`` bytes, CRC checked."""
    if info.file_size > limit:
        raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} is {info.file_size} bytes, more than "
                            f"its manifest says ({limit})", hint=_HINT)
    written = 0
    try:
        with zf.open(info) as src, open(target, "xb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > limit:
                    raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} holds more than {limit} "
                                        "bytes, more than its manifest says", hint=_HINT)
                dst.write(chunk)
    except _READ_ERRORS as e:
        raise ArtifactError(f"zip {str(zip_path)!r}: {info.filename[:80]!r} is corrupt ({str(e)[:120]})",
                            hint=_HINT) from None


def bundle_top(entries: dict[str, zipfile.ZipInfo], zip_path: Path) -> str:
    """The folder prefix of the bundle in the zip: ``""`` (manifest at the top) or ``"NAME/"``."""
    if "manifest.json" in entries:
        return ""
    tops = {PurePosixPath(k).parts[0] for k in entries}
    if len(tops) == 1:
        (top,) = tops
        if f"{top}/manifest.json" in entries:
            return f"{top}/"
    raise ArtifactError(f"zip {str(zip_path)!r} holds no bundle (no manifest.json at its top or in one top folder)",
                        hint="pass the .zip written by `nagkit build` / `nagkit export --bundle`")


def safe_extract(zip_path: str | os.PathLike, dest: str | os.PathLike) -> list[Path]:
    """Extract a whole zip into ``dest`` under :func:`checked_entries`' rules; nothing is written
    unless every entry passes."""
    dest = Path(dest).resolve()
    zip_path = Path(zip_path)
    with open_zip(zip_path) as zf:
        entries = checked_entries(zf, zip_path)
        written: list[Path] = []
        for key, info in entries.items():
            target = dest / key
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            extract_entry(zf, info, target, MAX_ZIP_BYTES, zip_path)
            written.append(target)
    return written
