"""The built-in kinds of device, as entries of one table: how each parses its spec, which
profile keys it takes and how it is made. Devices are imported only when one is made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nagkit.devices.base import Device
from nagkit.devices.spec import KIND_KEYS, DeviceSpec, parse_adb_spec, parse_cpu_spec, parse_cuda_spec
from nagkit.errors import DeviceError
from nagkit.registry import Registry

# Keys an adb profile may hold unless nagkit.devices.adb exports its own PROFILE_KEYS.
ADB_DEFAULT_KEYS = (
    "threads", "taskset", "cpu_mask", "benchmark_binary", "remote_dir", "use_xnnpack", "runtime",
    "cooldown_s", "max_thermal_status", "retries", "adbkey", "extra_args", "timeout_s",
)


@dataclass(frozen=True)
class DeviceKind:
    """A built-in kind: ``parse(text)`` reads its spec strings, ``create(spec)`` makes the
    device (options already applied), ``profile_keys()`` lists the options a profile may set."""

    name: str
    parse: Callable[[str], DeviceSpec]
    create: Callable[[DeviceSpec], Device]
    profile_keys: Callable[[], tuple[str, ...]]


def _create_cpu(ds: DeviceSpec) -> Device:
    from nagkit.devices.cpu import CpuDevice

    return CpuDevice(ds)


def _create_cuda(ds: DeviceSpec) -> Device:
    from nagkit.devices.cuda import CudaDevice

    return CudaDevice(ds)


def _create_adb(ds: DeviceSpec) -> Device:
    try:
        from nagkit.devices.adb import create_adb_device
    except ImportError as e:
        raise DeviceError(f"the adb device is not available in this build: {e}",
                          hint="pip install adb-shell (make setup installs it)") from e
    opts = {k: list(v) if isinstance(v, tuple) else v for k, v in ds.opts.items()}  # e.g. extra_args
    return create_adb_device(ds.target, opts or None)


def _adb_profile_keys() -> tuple[str, ...]:
    try:
        from nagkit.devices.adb import PROFILE_KEYS
    except ImportError:
        return ADB_DEFAULT_KEYS
    return tuple(PROFILE_KEYS)


KINDS: Registry[DeviceKind] = Registry("device kind")
KINDS.register("cpu", DeviceKind("cpu", parse_cpu_spec, _create_cpu, lambda: KIND_KEYS["cpu"]))
KINDS.register("cuda", DeviceKind("cuda", parse_cuda_spec, _create_cuda, lambda: KIND_KEYS["cuda"]))
KINDS.register("adb", DeviceKind("adb", parse_adb_spec, _create_adb, _adb_profile_keys))


def profile_keys(kind: str) -> tuple[str, ...]:
    """The options a profile of ``kind`` may set (none for plugins)."""
    return KINDS.get(kind).profile_keys() if kind in KINDS else ()
