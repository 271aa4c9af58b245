"""Third-party devices: the ``nagkit.devices`` entry-point group.

A plugin's entry point names a factory ``factory(spec_text, **overrides) -> Device``; the spec
text starts with the entry point's name (``echo`` or ``echo:anything``). A plugin cannot
shadow a built-in kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nagkit.devices.base import Device
from nagkit.devices.spec import BUILTIN_KINDS
from nagkit.errors import DeviceError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "nagkit.devices"


def entry_points() -> dict[str, Any]:
    """Installed plugins by name (first one wins), built-in names left out with a warning."""
    from importlib import metadata

    out: dict[str, Any] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN_KINDS:
            log.warning("ignoring the %s entry point %r (%s): it shadows a built-in device",
                        ENTRY_POINT_GROUP, ep.name, ep.value)
            continue
        out.setdefault(ep.name, ep)
    return out


def plugin_names() -> list[str]:
    return sorted(entry_points())


def plugin_for(text: str) -> str | None:
    eps = entry_points()
    head = text.partition(":")[0]
    return head if head in eps else None


def load_plugin(name: str) -> Callable[..., Device]:
    ep = entry_points()[name]
    try:
        return ep.load()
    except Exception as e:
        raise DeviceError(f"device plugin {name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}",
                          hint="reinstall the package that provides it") from e
