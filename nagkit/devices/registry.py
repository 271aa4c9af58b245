"""The device factory: ``parse_device_spec(text) -> DeviceSpec`` and ``get_device(spec) -> Device``.

A spec is a built-in kind (:mod:`nagkit.devices.kinds`, spec strings in
:mod:`nagkit.devices.spec`), a profile (:mod:`nagkit.devices.profiles`) or a third-party
plugin (:mod:`nagkit.devices.plugins`); ``nagkit devices`` lists them
(:mod:`nagkit.devices.listing`). Nothing heavy is imported here: runtimes, torch and adb-shell
load with their device.
"""

from __future__ import annotations

from typing import Any

from nagkit.devices.base import Device
from nagkit.devices.kinds import KINDS
from nagkit.devices.plugins import load_plugin
from nagkit.devices.profiles import find_profile, load_profile, parse_base_spec
from nagkit.devices.spec import HINT, VALID_FORMS, DeviceSpec
from nagkit.errors import BadInputError, DeviceError, NagkitError

__all__ = ["DeviceSpec", "get_device", "parse_device_spec"]


def parse_device_spec(spec: str) -> DeviceSpec:
    """Parse a spec string (a built-in kind, a profile name or path, or a plugin). Raises
    BadInputError/UnknownNameError with the bad value, the valid forms and the command that
    lists what is available."""
    if not isinstance(spec, str):
        raise BadInputError(f"a device spec must be a string, got {type(spec).__name__} {spec!r}", hint=HINT)
    text = spec.strip()
    if not text:
        raise BadInputError("empty device spec; valid forms: " + ", ".join(VALID_FORMS), hint=HINT)
    head = text.partition(":")[0]
    if head in KINDS:
        return KINDS.get(head).parse(text)
    profile_path = find_profile(text)
    if profile_path is not None:
        return load_profile(profile_path)
    return parse_base_spec(text)


def get_device(spec: str | DeviceSpec, **overrides: Any) -> Device:
    """A ready device for ``spec``. ``overrides`` (e.g. ``threads=4``, ``measure=cfg``) win
    over the spec and profile; ``None`` values are ignored."""
    ds = spec if isinstance(spec, DeviceSpec) else parse_device_spec(spec)
    if ds.kind in KINDS:
        return KINDS.get(ds.kind).create(ds.with_options(**overrides))
    factory = load_plugin(ds.kind)
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        dev = factory(ds.source, **given) if given else factory(ds.source)
    except NagkitError:
        raise
    except Exception as e:
        raise DeviceError(f"device plugin {ds.kind!r} failed for {ds.source!r}: {type(e).__name__}: {e}") from e
    if not isinstance(dev, Device):
        raise DeviceError(f"device plugin {ds.kind!r} returned {type(dev).__name__}, which is not a Device "
                          "(needs spec, kind, model_format, info, runtime_info, measure, close)")
    return dev
