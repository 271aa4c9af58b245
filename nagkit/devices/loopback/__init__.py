"""A loopback ADB device for tests: a minimal adbd of our own, in Python.

Without a phone, tests talk to this device over real ADB (TCP on 127.0.0.1). Commands run on
this machine inside a sandbox folder; ``getprop``, ``taskset``, ``dumpsys`` and
``benchmark_model`` there are **mocks of the phone's tools** (see
:mod:`nagkit.devices.loopback.sandbox` and :mod:`nagkit.devices.loopback.runner`).

Use it as a context manager::

    with LoopbackAdbd(tmp_path / "sandbox") as adbd:
        device = create_adb_device(adbd.serial, profile)

or from the command line: ``python -m nagkit.devices.loopback --port 5555 --sandbox DIR``.
"""

from nagkit.devices.loopback.sandbox import Sandbox, SandboxError, write_benchmark_runner
from nagkit.devices.loopback.server import FEATURES, LoopbackAdbd

__all__ = ["LoopbackAdbd", "Sandbox", "SandboxError", "write_benchmark_runner", "FEATURES"]
