"""A CUDA GPU as a device: torch modules timed with CUDA events.

Two modes (spec option ``mode``):

* ``graph`` (default): after a warm-up on a side stream the forward pass is captured once
  as a CUDA graph; each sample replays the graph ``k`` times between two events and divides
  by ``k``, with ``k`` chosen so a timing window lasts about ``window_ms`` (default 2 ms).
  This removes the kernel-launch overhead that otherwise dominates small blocks.
* ``eager``: each sample is one ordinary forward call between two events; for small blocks
  this mostly measures launch overhead (MobileNetV3-Large at batch 1 on an H200: about
  3.1 ms eager vs 0.52 ms as a graph).

Input lives on the GPU; ``torch.backends.cudnn.benchmark`` is on. ``model_format`` is
``"torch"``: ``measure`` takes an ``nn.Module`` (a copy is moved to the GPU; the caller's
module is left alone) or a TorchScript file. Only torch is imported, and only when a device
is created, so this module works on a GPU machine without LiteRT or adb-shell.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from nagkit.devices.base import LatencyStats, MeasureConfig
from nagkit.devices.measure import run_measurement, validate_config
from nagkit.errors import BadInputError, DeviceError

log = logging.getLogger(__name__)

DEFAULT_WINDOW_MS = 2.0
MAX_REPLAYS = 10_000
PRE_CAPTURE_WARMUP = 3


def list_cuda() -> list[dict[str, Any]]:
    """CUDA devices torch can see (empty when torch or CUDA is missing); never raises."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return []
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        rows = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            rows.append({"spec": f"cuda:{i}", "kind": "cuda", "name": p.name,
                         "memory_gib": round(p.total_memory / 2**30, 1), "capability": f"{p.major}.{p.minor}",
                         "torch": torch.__version__, "cuda": torch.version.cuda})
        return rows
    except Exception as e:  # noqa: BLE001 - a listing must not fail
        log.debug("CUDA listing failed: %s", e)
        return []


def _driver_version(index: int) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader", f"--id={index}"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        return out.splitlines()[0].strip() if out else None
    except (subprocess.SubprocessError, OSError, IndexError):
        return None


class CudaDevice:
    """One CUDA GPU (see the module doc)."""

    kind = "cuda"
    model_format = "torch"
    runs_on_host = True  # the host launches every kernel: nothing else should run meanwhile
    default_time_budget_s = None  # no budget unless told: the CPU's rates say nothing of a GPU (decisions 50)

    def __init__(self, spec: Any = "cuda"):
        from nagkit.devices.spec import DeviceSpec, parse_cuda_spec

        ds: DeviceSpec = parse_cuda_spec(spec) if isinstance(spec, str) else spec
        if ds.kind != "cuda":
            raise BadInputError(f"CudaDevice needs a cuda spec, got {ds.source or ds.kind!r}")
        self.index: int = int(ds.get("index", 0))
        self.mode: str = ds.get("mode", "graph")
        self.window_ms: float = float(ds.get("window_ms", DEFAULT_WINDOW_MS))
        self.default_cfg: MeasureConfig = ds.measure or MeasureConfig()
        self.spec: str = ds.source if ds.profile else str(ds)
        try:
            import torch
        except ImportError as e:
            raise DeviceError("the cuda device needs torch, which is not installed", hint="pip install torch") from e
        self._torch = torch
        if not torch.cuda.is_available():
            raise DeviceError(
                f"CUDA is not available here (torch {torch.__version__}, built for CUDA {torch.version.cuda})",
                hint="run on a machine with an NVIDIA GPU, or use --device cpu; `nagkit devices` lists what is here",
            )
        n = torch.cuda.device_count()
        if not 0 <= self.index < n:
            raise BadInputError(f"cuda:{self.index} does not exist; this machine has {n} GPU(s): "
                                + ", ".join(f"cuda:{i}" for i in range(n)), hint="`nagkit devices` lists them")
        self.device = torch.device("cuda", self.index)
        torch.backends.cudnn.benchmark = True
        self._lock = threading.Lock()
        self.last_replays: int | None = None

    # ------------------------------------------------------------------ protocol surface

    def prepare(self) -> dict[str, Any]:
        """The GPU was checked when this device was made; its facts."""
        return self.info()

    def info(self) -> dict[str, Any]:
        torch = self._torch
        p = torch.cuda.get_device_properties(self.index)
        import platform

        return {"kind": "cuda", "index": self.index, "gpu": p.name, "memory_gib": round(p.total_memory / 2**30, 2),
                "capability": f"{p.major}.{p.minor}", "multiprocessors": p.multi_processor_count,
                "driver": _driver_version(self.index), "cuda_runtime": torch.version.cuda,
                "device_count": torch.cuda.device_count(), "host_machine": platform.machine(),
                "kernel": platform.release(), "python": platform.python_version()}

    def runtime_info(self) -> dict[str, Any]:
        torch = self._torch
        return {"name": "torch-cuda", "version": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(), "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32), "mode": self.mode,
                "window_ms": self.window_ms if self.mode == "graph" else None, "dtype": "float32",
                "threads": None, "delegate": None}

    def measure(self, model: Any, input_shape: Sequence[int] | None = None, cfg: MeasureConfig | None = None,
                *, mode: str | None = None) -> LatencyStats:
        """Time one module (or TorchScript file) at ``input_shape`` (batch included)."""
        cfg = validate_config(cfg or self.default_cfg)
        mode = mode or self.mode
        if mode not in ("graph", "eager"):
            raise BadInputError(f"unknown cuda mode {mode!r}; valid: graph, eager")
        if input_shape is None:
            raise BadInputError("the cuda device needs input_shape, e.g. (1, 3, 224, 224)")
        torch = self._torch
        label = repr(Path(model).name) if isinstance(model, (str, os.PathLike)) else type(model).__name__
        with self._lock, torch.cuda.device(self.device):
            module = self._load(model)
            gen = torch.Generator().manual_seed(0)
            x = torch.randn(tuple(int(d) for d in input_shape), generator=gen).to(self.device)
            try:
                with torch.no_grad():
                    sample = self._graph_sampler(module, x, label) if mode == "graph" else self._eager_sampler(module, x)
                    stats = run_measurement(sample, cfg, label=f"{label} ({mode})")
            except torch.cuda.OutOfMemoryError as e:
                raise DeviceError(f"out of GPU memory measuring {label} at {tuple(input_shape)}: {e}",
                                  hint="use a smaller batch or free the GPU") from e
            finally:
                del module, x
        return stats

    def measure_many(self, items: Iterable[Any], cfg: MeasureConfig | None = None, *,
                     on_result: Callable[[int, LatencyStats], None] | None = None) -> list[LatencyStats]:
        """Like :meth:`nagkit.devices.cpu.CpuDevice.measure_many`."""
        from nagkit.devices.base import measure_items

        return measure_items(self, items, cfg, on_result=on_result)

    def close(self) -> None:
        try:
            self._torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> CudaDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CudaDevice({self.spec!r})"

    # ------------------------------------------------------------------ internals

    def _load(self, model: Any):
        torch = self._torch
        if isinstance(model, (str, os.PathLike)):
            from nagkit.io import input_file

            path = input_file(model, "model file", hint="export it first, e.g. `nagkit export`")
            try:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    return torch.jit.load(str(path), map_location=self.device).eval()
            except Exception as e:
                raise DeviceError(f"could not load TorchScript file {path.name!r}: {e}",
                                  hint="the cuda device takes nn.Modules or TorchScript files") from e
        if not isinstance(model, torch.nn.Module):
            raise BadInputError(f"the cuda device measures torch modules, got {type(model).__name__}",
                                hint="pass an nn.Module or a TorchScript file")
        return copy.deepcopy(model).to(self.device).eval()

    def _eager_sampler(self, module, x) -> Callable[[], float]:
        torch = self._torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        module(x)  # lazy init and cudnn autotuning, outside the loop's warm-up accounting
        torch.cuda.synchronize(self.device)

        def sample() -> float:
            start.record()
            module(x)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))

        return sample

    def _graph_sampler(self, module, x, label: str) -> Callable[[], float]:
        torch = self._torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up (cudnn autotuning, lazy init) off the default stream
            for _ in range(PRE_CAPTURE_WARMUP):
                module(x)
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                module(x)
        except Exception as e:
            raise DeviceError(f"{label} could not be captured as a CUDA graph: {type(e).__name__}: {e}",
                              hint="measure it with mode=eager (e.g. --device cuda:mode=eager)") from e
        torch.cuda.synchronize(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def timed(k: int) -> float:
            start.record()
            for _ in range(k):
                graph.replay()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))

        timed(3)  # first replays upload the graph
        one = min(timed(10) / 10 for _ in range(3))
        k = max(1, min(MAX_REPLAYS, math.ceil(self.window_ms / max(one, 1e-4))))
        log.debug("%s: one graph replay ~%.4f ms, %d replays per %.1f ms window", label, one, k, self.window_ms)

        def sample() -> float:
            return timed(k) / k

        self.last_replays = k  # replays per timing window of the last graph measurement
        return sample
