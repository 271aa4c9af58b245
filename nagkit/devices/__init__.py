"""Devices: the ``Device`` protocol, spec parsing, the registry and the measurement loop.

    from nagkit.devices import get_device, MeasureConfig
    with get_device("cpu:runtime=litert,threads=1") as dev:   # or "cuda", "adb:SERIAL", a profile
        stats = dev.measure("block.tflite", (1, 3, 224, 224), MeasureConfig())

Runtimes, torch and adb-shell are imported only by the device that needs them.
"""

from nagkit.devices.base import Device, LatencyStats, MeasureConfig
from nagkit.devices.registry import DeviceSpec, get_device, list_devices, parse_device_spec

__all__ = ["Device", "DeviceSpec", "LatencyStats", "MeasureConfig", "get_device", "list_devices", "parse_device_spec"]
