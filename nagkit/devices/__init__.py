"""Devices: the ``Device`` protocol, spec parsing, profiles, plugins, the factory, listing and
the measurement loop.

    from nagkit.devices import get_device, MeasureConfig
    with get_device("cpu:runtime=litert,threads=1") as dev:   # or "cuda", "adb:SERIAL", a profile
        stats = dev.measure("block.tflite", (1, 3, 224, 224), MeasureConfig())

Runtimes, torch and adb-shell are imported only by the device that needs them.
"""

from nagkit.devices.base import Device, LatencyStats, MeasureConfig
from nagkit.devices.listing import list_devices
from nagkit.devices.registry import get_device, parse_device_spec
from nagkit.devices.spec import DeviceSpec

__all__ = ["Device", "DeviceSpec", "LatencyStats", "MeasureConfig", "get_device", "list_devices", "parse_device_spec"]
