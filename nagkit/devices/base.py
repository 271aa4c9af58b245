"""The ``Device`` protocol, latency statistics and measurement settings.

A device is a transport (how models get there), a runner (how they are timed) and a parser
(how the timings are read back). Devices are selected by a spec string through
:func:`nagkit.devices.registry.get_device`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class MeasureConfig:
    """How long to measure. A run stops once it has ``min_runs`` runs *and* ``min_time_s``
    seconds *and* IQR/median < ``target_rel_iqr``, or at ``max_runs`` / ``max_time_s``
    (then the result is marked noisy and a warning is logged)."""

    warmup_runs: int = 3
    warmup_s: float = 0.1
    min_runs: int = 10
    min_time_s: float = 0.2
    max_runs: int = 1000
    max_time_s: float = 5.0
    target_rel_iqr: float = 0.05

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LatencyStats:
    """Latency statistics in milliseconds, with the raw samples."""

    median_ms: float
    mean_ms: float
    std_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    n: int
    samples_ms: tuple[float, ...] = field(default=(), repr=False)
    noisy: bool = False

    @classmethod
    def from_samples(cls, samples_ms, noisy: bool | None = None, target_rel_iqr: float = 0.05) -> LatencyStats:
        import numpy as np

        s = np.asarray(list(samples_ms), dtype=np.float64)
        if s.size == 0 or not np.all(np.isfinite(s)) or np.any(s < 0):
            from nagkit.errors import DeviceError

            raise DeviceError(f"no valid latency samples ({s.size} samples, some non-finite or negative)")
        med = float(np.median(s))
        q25, q75 = np.percentile(s, [25, 75])
        if noisy is None:
            noisy = med > 0 and (q75 - q25) / med > target_rel_iqr
        return cls(
            median_ms=med,
            mean_ms=float(s.mean()),
            std_ms=float(s.std(ddof=1)) if s.size > 1 else 0.0,
            p10_ms=float(np.percentile(s, 10)),
            p90_ms=float(np.percentile(s, 90)),
            min_ms=float(s.min()),
            n=int(s.size),
            samples_ms=tuple(float(x) for x in s),
            noisy=bool(noisy),
        )

    @property
    def rel_iqr(self) -> float:
        import numpy as np

        if not self.samples_ms:
            return math.nan
        q25, q75 = np.percentile(self.samples_ms, [25, 75])
        return float((q75 - q25) / self.median_ms) if self.median_ms else math.nan

    def to_dict(self, samples: bool = False) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "samples_ms"}
        if samples:
            d["samples_ms"] = list(self.samples_ms)
        return d


@runtime_checkable
class Device(Protocol):
    """What every device offers. ``model_format`` is the file format ``measure`` takes:
    ``"tflite"``, ``"onnx"`` or ``"torch"`` (an ``nn.Module``)."""

    spec: str
    kind: str
    model_format: str

    def info(self) -> dict[str, Any]:
        """Facts about the hardware/OS (model, SoC, OS, governor, frequencies, thermal...)."""
        ...

    def runtime_info(self) -> dict[str, Any]:
        """Runtime name, version, threads, delegate."""
        ...

    def measure(self, model: Path | Any, input_shape: tuple[int, ...], cfg: MeasureConfig | None = None) -> LatencyStats:
        """Time one model (a file in ``model_format``, or an ``nn.Module`` for torch/cuda)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Preparable(Protocol):
    """A device that can be contacted and checked before any work (every built-in kind; a
    plugin may add it). ``runs_on_host``: the measurements use this machine's CPU, so nothing
    else may run meanwhile (a phone measures on its own: the host converts models meanwhile).
    ``default_time_budget_s``: a profile's time budget when the user gives none (seconds, or
    None for no budget); a device without it gets :func:`default_time_budget`'s rule."""

    runs_on_host: bool

    def prepare(self) -> dict[str, Any]:
        """Contact the device and check that it can measure; its facts (as ``info()``). Raises
        DeviceError (or BadInputError) within seconds when it cannot."""
        ...


def prepare_device(device: Device) -> tuple[dict[str, Any], bool]:
    """(facts, runs_on_host): the device contacted and checked before any work; a device without
    :class:`Preparable` is asked for its ``info()`` and treated as running on the host."""
    if isinstance(device, Preparable):
        return device.prepare(), bool(device.runs_on_host)
    return device.info(), True


#: The profile's time budget on this machine's CPU when the user gives none (issue 36).
CPU_TIME_BUDGET_S = 600.0


def default_time_budget(device: Any, runs_on_host: bool) -> float | None:
    """A profile's time budget when the user gives none: what the device declares
    (``default_time_budget_s``: the CPU 10 minutes; a phone and a GPU none, their measurements
    being long and unlike the CPU's rates, decisions 50); a device that declares nothing, 10
    minutes when it measures on this machine's CPU, else none."""
    if hasattr(device, "default_time_budget_s"):
        return device.default_time_budget_s
    return CPU_TIME_BUDGET_S if runs_on_host else None


def measure_items(device: Device, items, cfg: MeasureConfig | None = None, *, on_result=None) -> list[LatencyStats]:
    """``device.measure`` over ``items`` in order: ``(model, input_shape)`` pairs or dicts with
    ``model`` and ``input_shape``. ``on_result(i, stats)`` is called as each finishes (so a
    caller can save durably); the first failure raises."""
    from nagkit.errors import BadInputError

    out: list[LatencyStats] = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            model, shape = item["model"], item.get("input_shape")
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            model, shape = item
        else:
            raise BadInputError(f"measure_many item {i} must be (model, input_shape) or a dict, got {item!r}")
        stats = device.measure(model, shape, cfg)
        out.append(stats)
        if on_result is not None:
            on_result(i, stats)
    return out
