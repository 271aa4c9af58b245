"""Device profiles: YAML files with a ``device:`` spec plus options for that kind of device.

A profile is named by its path or by its stem in :func:`profile_dirs` (e.g. ``device: cpu``,
``runtime: litert``, ``threads: 1``, ``measure: {min_runs: 20}``); unknown keys are refused
with a did-you-mean; ``measure:`` sets the device's default MeasureConfig. Profiles do not
nest: the ``device:`` of a profile is a built-in kind or a plugin.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from nagkit.devices.kinds import KINDS, profile_keys
from nagkit.devices.plugins import plugin_for, plugin_names
from nagkit.devices.spec import BUILTIN_KINDS, HINT, VALID_FORMS, DeviceSpec, unknown_key_error
from nagkit.errors import BadInputError, UnknownNameError, short_repr
from nagkit.io import load_yaml_file
from nagkit.resources import DEVICE_PROFILES

PROFILE_ENV = "NAGKIT_PROFILE_PATH"
PROFILE_COMMON_KEYS = ("name", "description", "notes", "device", "measure")


def profile_dirs() -> list[Path]:
    """Where profile names are looked up: $NAGKIT_PROFILE_PATH, ./device_profiles, then the
    profiles shipped in the package (``nagkit/resources/device_profiles``)."""
    dirs = [Path(p) for p in os.environ.get(PROFILE_ENV, "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "device_profiles")
    dirs.append(DEVICE_PROFILES)
    seen, out = set(), []
    for d in dirs:
        key = d.resolve() if d.exists() else d
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text


def find_profile(text: str) -> Path | None:
    """The profile file a spec names (a path, or a name in :func:`profile_dirs`), or None."""
    try:
        if looks_like_path(text):
            p = Path(text).expanduser()
            return p if p.is_file() else None
        if not re.fullmatch(r"[A-Za-z0-9._\-]{1,200}", text):
            return None
        for d in profile_dirs():
            for ext in (".yaml", ".yml"):
                p = d / f"{text}{ext}"
                if p.is_file():
                    return p
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte: not a profile
        return None
    return None


def profile_names() -> list[str]:
    names = set()
    for d in profile_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.iterdir() if p.suffix in (".yaml", ".yml"))
    return sorted(names)


def load_profile(path: str | os.PathLike) -> DeviceSpec:
    """Read and check a profile; returns its spec with the profile's options applied.

    Read with :func:`nagkit.io.load_yaml_file` (safe YAML with caps on size, nesting and
    aliases: an alias bomb, a 20,000-deep or a non-UTF-8 file is one line, exit 2), and only
    bounded values are ever formatted into messages (issue 13 D2, D5)."""
    path = Path(path)
    where = f"profile {short_repr(str(path))}"
    example = f"see {DEVICE_PROFILES / 'cpu-litert-1t.yaml'} for an example"
    try:
        data = load_yaml_file(path, what=where, hint="fix the file; " + example)
    except OSError as e:
        raise BadInputError(f"cannot read {where}: {e.strerror or e}") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{where} must be a YAML mapping with a `device:` key, got {type(data).__name__}",
                            hint=example)
    if "device" not in data or not isinstance(data["device"], str):
        raise BadInputError(f"{where} has no `device:` spec (e.g. `device: cpu` or `device: adb:SERIAL`)",
                            hint=example)
    for key in ("name", "description", "notes"):
        if data.get(key) is not None and not (isinstance(data[key], str) and len(data[key]) <= _TEXT_MAX):
            raise BadInputError(f"{where}: `{key}:` must be a text of at most {_TEXT_MAX:,} characters, got "
                                f"{short_repr(data[key])}", hint=example)
    base_text = data["device"].strip()
    if find_profile(base_text) is not None and base_text.partition(":")[0] not in BUILTIN_KINDS:
        raise BadInputError(f"{where}: `device: {short_repr(base_text)}` names another profile; profiles do not nest",
                            hint="use a spec such as cpu, cuda:0 or adb:SERIAL")
    base = parse_base_spec(base_text)
    allowed = set(PROFILE_COMMON_KEYS) | set(profile_keys(base.kind))
    for key in data:
        if key not in allowed:
            raise unknown_key_error(short_repr(key) if not isinstance(key, str) else key, allowed, "profile key", where)
    extra = {k: v for k, v in data.items() if k not in ("name", "description", "notes", "device")}
    spec = base.with_options(**extra) if extra else base
    desc = data["description"].strip() if data.get("description") else None
    return replace(spec, source=path.stem, profile=str(path), description=desc)


_TEXT_MAX = 10_000


def parse_base_spec(text: str) -> DeviceSpec:
    """A spec that is not a profile: a built-in kind or a plugin (else the errors that list
    what exists)."""
    head, sep, rest = text.partition(":")
    if head in KINDS:
        return KINDS.get(head).parse(text)
    plugin = plugin_for(text)
    if plugin is not None:
        return DeviceSpec(kind=plugin, target=rest if head == plugin and sep else None, source=text)
    if looks_like_path(text):
        raise BadInputError(f"device profile {short_repr(text)} does not exist", hint="check the path; " + HINT)
    options = ["cpu", "cuda", "adb:SERIAL", *profile_names(), *plugin_names()]
    raise UnknownNameError("device", text, options, hint=f"valid forms: {', '.join(VALID_FORMS)}; {HINT}")
