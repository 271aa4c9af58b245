"""Which way to reach an ``adb:`` device: through a running adb server, or with adb-shell.

A running adb server (the platform-tools or Debian ``adb``) is how every Android tool reaches
phones, and it holds their USB interfaces: while it runs, no other program can claim a phone on
the cable. So (profile key ``adb_transport``, default ``auto``):

- ``auto``: a server answers and lists the device → through the server
  (:class:`~.server.AdbServerTransport`); a server answers but does not list a ``HOST:PORT``
  target → adb-shell over TCP (the server is left as it is); it does not list a USB serial →
  an error naming what it does list; no server → adb-shell (TCP, or USB through libusb).
- ``server``: always through the server (an error when none answers).
- ``adb-shell``: always adb-shell; refused for a USB serial while a server runs (the conflict:
  the server holds the interface), with the two ways out.
"""

from __future__ import annotations

import logging
from typing import Any

from nagkit.devices.adb.server import AdbServerTransport, describe_address, list_devices, server_version, state_hint
from nagkit.devices.adb.transport import AdbTransport, parse_target
from nagkit.errors import DeviceError

log = logging.getLogger(__name__)

MODES = ("auto", "server", "adb-shell")


def _adb_shell(target: str, p: dict[str, Any]) -> AdbTransport:
    return AdbTransport(target, key_path=p["adb_key"], timeout_s=p["connect_timeout_s"],
                        retries=p["reconnect_retries"], command_timeout_s=p["run_timeout_s"])


def _server(target: str, p: dict[str, Any]) -> AdbServerTransport:
    return AdbServerTransport(target, timeout_s=p["connect_timeout_s"], retries=p["reconnect_retries"],
                              command_timeout_s=p["run_timeout_s"])


def open_transport(target: str, profile: dict[str, Any]):
    """The transport for ``target`` under ``profile`` (validated), chosen as the module doc says."""
    kind, _, _ = parse_target(target)
    mode = profile.get("adb_transport") or "auto"
    running = server_version() is not None
    if mode == "adb-shell":
        if kind == "usb" and running:
            raise DeviceError(
                f"an adb server is running ({describe_address()}) and holds the phones' USB interfaces, so adb-shell "
                f"cannot claim {target!r} (the profile says adb_transport: adb-shell)",
                hint="drop `adb_transport: adb-shell` from the profile (nagkit then goes through the server), or stop "
                     "the server first: `adb kill-server`")
        return _adb_shell(target, profile)
    if not running:
        if mode == "server":
            raise DeviceError(f"no adb server answers at {describe_address()} (the profile says adb_transport: server)",
                              hint="start one: `adb start-server` (then `adb devices`), or set adb_transport: auto")
        log.info("no adb server running; reaching %s with adb-shell (%s)", target, kind)
        return _adb_shell(target, profile)
    try:
        devices = {d.serial: d for d in list_devices(profile["connect_timeout_s"])}
    except OSError as e:
        raise DeviceError(f"the adb server at {describe_address()} did not answer `host:devices`: {e}",
                          hint="restart it: `adb kill-server && adb start-server`") from e
    dev = devices.get(target)
    if dev is None:
        if kind == "tcp" and mode == "auto":
            log.warning("the adb server at %s does not list %s; reaching it directly over TCP (adb-shell); "
                        "`adb connect %s` would let the server carry it", describe_address(), target, target)
            return _adb_shell(target, profile)
        seen = ", ".join(f"{d.serial} ({d.state})" for d in devices.values()) or "none"
        raise DeviceError(
            f"the adb server at {describe_address()} does not see {target!r} (it sees: {seen})",
            hint="check the cable and `adb devices`" + ("; for Wi-Fi: `adb connect " + target + "`"
                                                         if kind == "tcp" else ""))
    if dev.state != "device":
        raise DeviceError(f"{target!r} is {dev.state!r} for the adb server at {describe_address()}",
                          hint=state_hint(dev.state))
    return _server(target, profile)
