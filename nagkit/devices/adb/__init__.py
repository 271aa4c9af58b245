"""Android devices over ADB (``adb:SERIAL`` for USB, ``adb:HOST:PORT`` for TCP).

``create_adb_device(target, profile)`` is what the device registry calls; ``adb-shell`` and
(for USB) libusb are imported only when a connection is made.
"""

from nagkit.devices.adb.device import DEFAULTS, PROFILE_KEYS, AdbDevice, create_adb_device, validate_profile
from nagkit.devices.adb.transport import (
    AdbCommandError,
    AdbTransport,
    ShellResult,
    load_or_create_key,
    parse_target,
    quote_command,
)

__all__ = [
    "AdbDevice",
    "AdbTransport",
    "AdbCommandError",
    "ShellResult",
    "DEFAULTS",
    "PROFILE_KEYS",
    "create_adb_device",
    "load_or_create_key",
    "parse_target",
    "quote_command",
    "validate_profile",
]
