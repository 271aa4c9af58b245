"""Writing a workspace: its name, its folder, the copy and the ``nagkit.toml`` text (split out of
:mod:`nagkit.app.workspace`, which reads them; issue 35).

Rules (one line, exit 2, and nothing written when one fails):

* A workspace **name** (``nagkit init NAME``, kept under the user's workspaces) is 1 to
  :data:`MAX_NAME_CHARS` letters (of any script), digits and ``- _ . @ +``, not starting with
  ``.`` or ``-``. Anything else (``😀``, a space, a control character) is refused up front; a
  folder path (``./😀``) may hold any name the file system takes, within its limits
  (:func:`nagkit.io.path_problem`).
* Every string written into ``nagkit.toml`` goes through :func:`toml_string`, which writes valid
  TOML for any text (``json.dumps`` wrote ``\\ud83d\\ude00`` for ``😀``, which TOML refuses); the
  text is parsed and the workspace loaded from the temporary copy before it is renamed into
  place, so a broken workspace is never left behind.
* The copy is made with the user's umask: files ``0666 & ~umask``, folders ``0777 & ~umask``
  (``shutil.copytree`` copied the package's modes).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from nagkit.errors import BadInputError
from nagkit.io import check_path_text, current_umask, shown_path

CONFIG_NAME = "nagkit.toml"
MAX_NAME_CHARS = 100
_NAME_RULE = f"a name is 1 to {MAX_NAME_CHARS} letters, digits, '-', '_', '.', '@' or '+', not starting with '.' or '-'"


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a workspace name (see the module doc), or None."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name):,} characters long"
    if name[0] in ".-":
        return f"starts with {name[0]!r}"
    bad = sorted({c for c in name if not (c.isalnum() or c in "-_.@+")})
    if bad:
        return "holds " + ", ".join(repr(c) for c in bad[:5]) + (", ..." if len(bad) > 5 else "")
    return None


def dest_folder(dest: str | os.PathLike, workspaces_dir: Path) -> Path:
    """The folder ``nagkit init DEST`` makes: a path (it holds a ``/``, or is ``.``/``..``) as
    given, resolved; else a name under ``workspaces_dir``, checked against the name rule."""
    text = os.fspath(dest)
    if "/" in text or os.sep in text or text in (".", ".."):
        check_path_text(text, "destination", hint="pick a shorter path")
        return Path(text).expanduser().resolve()
    if (problem := name_problem(text)) is not None:
        raise BadInputError(f"workspace name {shown_path(text)} {problem}; {_NAME_RULE}",
                            hint="pick another name (e.g. `nagkit init my-workspace`), or give a folder path "
                                 "(`nagkit init ./FOLDER`)")
    return workspaces_dir / text


def check_init_target(target: Path) -> None:
    """Refuse (exit 2, with or without --force) a destination that is not a workspace and not an
    empty folder, the folder the user is in (or one above it), or one below a file: ``--force``
    replaces a workspace nagkit wrote, never a user's files (issue 35)."""
    for anc in target.parents:
        if os.path.lexists(anc):
            if not anc.is_dir():
                raise BadInputError(f"destination {shown_path(target)} is below {shown_path(anc)}, which is a file, "
                                    "not a folder", hint="pick another destination")
            break
    try:
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise BadInputError(f"{shown_path(target)} exists and is not a folder; a workspace is a folder",
                                hint="pick another destination")
        names = [] if not target.is_dir() or (target / CONFIG_NAME).is_file() else sorted(
            p.name for p in target.iterdir())
    except OSError as e:
        raise BadInputError(f"{shown_path(target)} cannot be read: {e.strerror or e}",
                            hint="pick another destination") from None
    if names:
        shown = ", ".join(shown_path(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        raise BadInputError(f"{shown_path(target)} is a folder with {len(names)} entr{'y' if len(names) == 1 else 'ies'} "
                            f"({shown}) and no {CONFIG_NAME}: not a workspace, so nagkit does not write into it "
                            "or replace it (not even with --force)",
                            hint="pick a new folder or name, e.g. `nagkit init my-workspace`")
    here = Path.cwd().resolve()
    if target == here or target in here.parents:  # the rename would pull the folder from under the user
        raise BadInputError(f"{shown_path(target)} is the folder you are in" + ("" if target == here else " (or above it)")
                            + "; `nagkit init` makes a new folder and would replace this one",
                            hint="give a new folder or name, e.g. `nagkit init my-workspace`")


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (``"..."``), valid for any text: ``"`` and ``\\`` escaped,
    control characters (and DEL) as ``\\uXXXX``, everything else as is (UTF-8). Text that cannot
    be UTF-8 (a path with undecodable bytes) is refused in one line."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInputError(f"{shown_path(value)} is not valid UTF-8 text; nagkit.toml is UTF-8",
                            hint="rename it with UTF-8 characters") from None
    out = []
    for c in value:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\u{ord(c):04X}"))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def set_key(text: str, key: str, value: str) -> str:
    """``text`` (a nagkit.toml) with the top-level ``key = value`` set (replaced or added first)."""
    line = f"{key} = {toml_string(value)}"
    pat = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    first_table = re.search(r"^\[", text, re.M)
    head = text[:first_table.start()] if first_table else text
    if pat.search(head):
        return pat.sub(lambda _m: line, head, count=1) + text[len(head):]
    m = re.search(r"^name\s*=.*$", head, re.M)
    at = m.end() + 1 if m else 0
    return text[:at] + line + "\n" + text[at:]


def set_resolutions(text: str, space_name: str, resolutions: list[int]) -> str:
    """``text`` (a nagkit.toml) with the space narrowed to ``resolutions``."""
    line = f"resolutions = [{', '.join(str(int(r)) for r in resolutions)}]"
    sec = re.search(r"^\[space\]\s*$", text, re.M)
    if sec is None:  # space = "NAME": becomes a [space] table on that preset
        text = re.sub(r"^space\s*=.*$\n?", "", text, count=1, flags=re.M)
        return text.rstrip("\n") + f"\n\n[space]\npreset = {toml_string(space_name)}\n{line}\n"
    nxt = re.search(r"^\[", text[sec.end():], re.M)
    end = sec.end() + nxt.start() if nxt else len(text)
    body = text[sec.end():end]
    if re.search(r"^resolutions\s*=", body, re.M):
        body = re.sub(r"^resolutions\s*=.*$", line, body, count=1, flags=re.M)
    else:
        body = "\n" + line + body
    return text[:sec.end()] + body + text[end:]


def copy_workspace(src: Path, dest: Path, skip: set[Path], force: bool, config: str,
                   check: Callable[[Path], object]) -> None:
    """Copy ``src`` to ``dest`` (files in ``skip`` left out) with ``config`` as its nagkit.toml,
    through a temporary folder: ``check`` (the loader) is run on the temporary copy's config
    before it is renamed into place, so a failure leaves nothing behind. When another process
    made ``dest`` meanwhile (ranks under torchrun), its copy is kept. Modes follow the umask."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        _copy_with_umask(src, tmp, skip)
        (tmp / CONFIG_NAME).write_text(config, encoding="utf-8")
        check(tmp / CONFIG_NAME)
        if dest.exists() and force:
            shutil.rmtree(dest)
        try:
            os.replace(tmp, dest)
        except OSError:
            if not (dest / CONFIG_NAME).is_file():
                raise
    except OSError as e:
        raise BadInputError(f"cannot make the workspace {shown_path(dest)}: {e.strerror or e}",
                            hint="pick another destination (one you can write to)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy_with_umask(src: Path, tmp: Path, skip: set[Path]) -> None:
    """``shutil.copytree`` that makes new files (``copyfile``: ``0666 & ~umask``, never the
    package's read-only modes) and then gives every folder ``0777 & ~umask``."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if (Path(folder) / n).resolve() in skip or n.endswith((".lock", ".part"))]

    shutil.copytree(src, tmp, ignore=ignore, copy_function=shutil.copyfile)
    mode = 0o777 & ~current_umask()
    for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir() and not p.is_symlink())]:
        d.chmod(mode)
