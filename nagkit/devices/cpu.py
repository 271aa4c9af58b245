"""The host CPU as a device: LiteRT (XNNPACK), ONNX Runtime or torch, timed in a worker process.

``CpuDevice`` starts one persistent worker (:mod:`nagkit.devices.worker`) pinned to the
spec's cores with the spec's thread count, and feeds it model after model over a pipe, so
profiling hundreds of small blocks pays the process and runtime start-up once. A worker that
dies is restarted (logged, counted in ``runtime_info()["worker_restarts"]``) and the request
is retried once; a model that fails to load raises :class:`DeviceError` quoting the runtime.

``model_format`` is ``"tflite"``, ``"onnx"`` or ``"torch"``. For torch, ``measure`` takes an
``nn.Module`` (traced to a TorchScript file in a private temp folder) or a TorchScript file;
nothing is pickled.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from nagkit.devices.base import CPU_TIME_BUDGET_S, LatencyStats, MeasureConfig
from nagkit.devices.cpuinfo import cpu_id
from nagkit.devices.measure import LoopResult, stats_from_loop, validate_config
from nagkit.devices.spec import DeviceSpec, format_cores, parse_cpu_spec
from nagkit.errors import BadInputError, DeviceError, short_repr, short_text
from nagkit.io import input_file
from nagkit.runtimes import versions
from nagkit.runtimes.threads import thread_env

log = logging.getLogger(__name__)

FORMATS = {"litert": "tflite", "onnxruntime": "onnx", "torch": "torch"}
SUFFIXES = {"litert": (".tflite",), "onnxruntime": (".onnx",), "torch": (".pt", ".ts", ".torchscript")}
START_TIMEOUT_S = 120.0


def host_info(cores: Iterable[int] | None = None) -> dict[str, Any]:
    """CPU model and identity (:func:`nagkit.devices.cpuinfo.cpu_id`), core counts, governor and
    frequencies (for ``cores``), kernel and Python."""
    info: dict[str, Any] = {"kind": "cpu", "machine": platform.machine(), "os": platform.system(),
                            "kernel": platform.release(), "python": platform.python_version(),
                            "logical_cores": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for key in ("model name", "Hardware", "Processor", "cpu model", "uarch"):
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == key and v.strip():
                info.setdefault("cpu_model", v.strip())
                break
    if "cpu_model" not in info and platform.processor():
        info["cpu_model"] = platform.processor()
    ident = cpu_id(text)
    if ident:
        info["cpu_id"] = ident
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = list(range(os.cpu_count() or 1))
    info["affinity"] = allowed
    use = sorted(cores) if cores else allowed
    info["cores_used"] = use
    per_core: dict[str, dict[str, Any]] = {}
    for c in use:
        base = Path(f"/sys/devices/system/cpu/cpu{c}/cpufreq")
        row = {}
        for name, key, scale in (("scaling_governor", "governor", None), ("scaling_cur_freq", "cur_mhz", 1e3),
                                 ("cpuinfo_min_freq", "min_mhz", 1e3), ("cpuinfo_max_freq", "max_mhz", 1e3)):
            try:
                raw = (base / name).read_text().strip()
            except OSError:
                continue
            row[key] = raw if scale is None else round(int(raw) / scale, 1)
        if row:
            per_core[str(c)] = row
    if per_core:
        info["cpufreq"] = per_core
        govs = {r.get("governor") for r in per_core.values() if r.get("governor")}
        if govs:
            info["governor"] = ",".join(sorted(govs))
    else:
        info["cpufreq"] = "not readable (no /sys/devices/system/cpu/*/cpufreq here)"
    return info


class _Worker:
    """One worker process and its pipe. Not thread-safe; CpuDevice holds a lock."""

    def __init__(self, runtime: str, threads: int, cores: Sequence[int] | None):
        self.runtime, self.threads, self.cores = runtime, threads, cores
        self._err = tempfile.TemporaryFile(mode="w+b", prefix="nagkit-worker-", suffix=".log")
        cmd = [sys.executable, "-m", "nagkit.devices.worker", "--runtime", runtime, "--threads", str(threads)]
        if cores:
            cmd += ["--cores", ",".join(str(c) for c in cores)]
        env = dict(os.environ)
        env.update(thread_env(threads))
        # The worker imports nagkit from where this process did (also when it is not installed).
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, bufsize=0, close_fds=True)
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_contains(self, text: str) -> bool:
        try:
            self._err.flush()
            self._err.seek(0)
            return text.encode() in self._err.read()
        except (OSError, ValueError):
            return False

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self._err.flush()
            self._err.seek(0, os.SEEK_END)
            size = self._err.tell()
            self._err.seek(max(0, size - n))
            return self._err.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def request(self, obj: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply. Raises _WorkerDied or TimeoutError."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise _WorkerDied(self._death_note()) from e
        return json.loads(self._readline(timeout_s))

    def _readline(self, timeout_s: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from the worker within {timeout_s:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                if not self.alive():
                    raise _WorkerDied(self._death_note())
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _WorkerDied(self._death_note())
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _death_note(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            import signal

            try:
                what = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"killed by signal {-code}"
        else:
            what = f"exit code {code}"
        tail = self.stderr_tail()
        return what + (f"; its stderr ends with:\n{tail}" if tail else "")

    def kill(self) -> None:
        """Stop a worker that is stuck or failed, without asking it."""
        if self.alive():
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
                pass
        self.stop()

    def stop(self) -> None:
        if self.alive():
            try:
                self.request({"op": "quit"}, timeout_s=5)
            except Exception:  # noqa: BLE001 - best effort, killed below
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        self._err.close()


class _WorkerDied(Exception):
    pass


class CpuDevice:
    """The host CPU (see the module doc). Use as a context manager or call ``close()``."""

    kind = "cpu"
    runs_on_host = True
    default_time_budget_s = CPU_TIME_BUDGET_S  # a profile keeps to 10 minutes unless told (issue 36)

    def __init__(self, spec: DeviceSpec | str = "cpu"):
        if isinstance(spec, str):
            spec = parse_cpu_spec(spec)
        if spec.kind != "cpu":
            raise BadInputError(f"CpuDevice needs a cpu spec, got {spec.source or spec.kind!r}")
        self._spec = spec
        self.runtime: str = spec.get("runtime", "litert")
        self.threads: int = int(spec.get("threads", 1))
        cores = spec.get("cores")
        self.cores: tuple[int, ...] | None = tuple(cores) if cores else None
        self.default_cfg: MeasureConfig = spec.measure or MeasureConfig()
        self.model_format: str = FORMATS[self.runtime]
        self.spec: str = spec.source if spec.profile else str(spec)
        self.worker_restarts = 0
        self.models_measured = 0
        self.request_timeout_s: float | None = None  # None: derived from each MeasureConfig
        self._versions = versions.runtime_status()[self.runtime]
        if not self._versions["available"]:
            pkg = self._versions["package"]
            raise DeviceError(f"CPU runtime {self.runtime!r} is not installed (Python package {pkg})",
                              hint=f"pip install {pkg}, or pick another: cpu:runtime=litert|onnxruntime|torch")
        if self.cores and not hasattr(os, "sched_setaffinity"):
            raise BadInputError(f"core pinning ({self.spec!r}) is not supported on {platform.system()}",
                                hint="drop the cores= option")
        if self.cores:
            allowed = sorted(os.sched_getaffinity(0))
            bad = [c for c in self.cores if c not in allowed]
            if bad:
                raise BadInputError(f"cores {short_text(format_cores(bad), 60)} ({len(bad)} of them) in "
                                    f"{short_repr(self.spec, 80)} are not available here; this process may use cores "
                                    f"{short_text(format_cores(allowed), 200)}",
                                    hint=f"pick cores from that list, e.g. cpu:cores={allowed[0]}")
        self._worker: _Worker | None = None
        self._runtime_reply: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._n_tmp = 0
        self._closed = False

    # ------------------------------------------------------------------ protocol surface

    def info(self) -> dict[str, Any]:
        return host_info(self.cores)

    def prepare(self) -> dict[str, Any]:
        """Start the worker (it imports the runtime): a broken runtime fails here, before any work."""
        with self._lock:
            self._ensure_worker()
        return self.info()

    def runtime_info(self) -> dict[str, Any]:
        if self._runtime_reply is None:
            with self._lock:
                self._ensure_worker()
        rt = dict(self._runtime_reply or {})
        rt.pop("pid", None)
        rt.update({"threads": self.threads, "cores_pinned": list(self.cores) if self.cores else None,
                   "worker_restarts": self.worker_restarts})
        if self.runtime == "litert" and self._worker is not None and self.models_measured:
            # LiteRT logs this line when it applies XNNPACK to a model it loads.
            rt["xnnpack_seen"] = self._worker.stderr_contains("XNNPACK delegate")
        if self.runtime == "onnxruntime":
            rt.update({"provider": "CPUExecutionProvider", "inter_op_threads": 1, "execution_mode": "sequential"})
        if self.runtime == "torch":
            rt.update({"interop_threads": 1, "format": "torchscript"})
        return rt

    def measure(self, model: Path | str | Any, input_shape: Sequence[int] | None = None,
                cfg: MeasureConfig | None = None) -> LatencyStats:
        """Time one model file (``model_format``) or, for torch, an ``nn.Module``."""
        cfg = validate_config(cfg or self.default_cfg)
        path, label = self._model_file(model, input_shape)
        with self._lock:
            reply = self._call({"op": "measure", "model": str(path), "seed": 0, "cfg": cfg.to_dict(),
                                "input_shape": list(input_shape) if input_shape is not None else None},
                               cfg, label)
        if not reply.get("ok"):
            stage, err = reply.get("stage"), reply.get("error", "")
            what = {"load": "could not load", "input": "could not feed", "run": "failed while running"}.get(stage, "failed on")
            raise DeviceError(f"{self.runtime} {what} {label}: {err}",
                              hint="check that the file is a valid model for this runtime (re-export it)"
                              if stage == "load" else "check input_shape against the model's input")
        self.models_measured += 1
        res = LoopResult(samples_ms=tuple(reply["samples_ms"]), warmup_runs=reply["warmup_runs"],
                         warmup_s=reply["warmup_s"], elapsed_s=reply["elapsed_s"], stop_reason=reply["stop_reason"],
                         rel_iqr=reply["rel_iqr"] if reply["rel_iqr"] is not None else float("inf"))
        return stats_from_loop(res, cfg, label)

    def measure_many(self, items: Iterable[Any], cfg: MeasureConfig | None = None, *,
                     on_result: Callable[[int, LatencyStats], None] | None = None) -> list[LatencyStats]:
        """Measure models one after another in the same worker. ``items``: ``(model,
        input_shape)`` pairs or dicts with ``model`` and ``input_shape``. ``on_result(i,
        stats)`` is called as each finishes (so a caller can save durably); the first
        failure raises DeviceError naming the item."""
        from nagkit.devices.base import measure_items

        return measure_items(self, items, cfg, on_result=on_result)

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
            self._closed = True

    def __enter__(self) -> CpuDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._worker is not None and self._worker.alive():
                self._worker.stop()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"CpuDevice({self.spec!r})"

    @property
    def worker_pid(self) -> int | None:
        """The current worker's process id (None before the first measurement)."""
        return self._worker.pid if self._worker is not None and self._worker.alive() else None

    # ------------------------------------------------------------------ internals

    def _model_file(self, model: Any, input_shape: Sequence[int] | None) -> tuple[Path, str]:
        if isinstance(model, (str, os.PathLike)):
            path = input_file(model, "model file", hint="export it first, e.g. `nagkit export`")
            ok = SUFFIXES[self.runtime]
            if path.suffix.lower() not in ok:
                other = {".tflite": "litert", ".onnx": "onnxruntime"}.get(path.suffix.lower())
                hint = f"use --device cpu:runtime={other}" if other else f"give a {'/'.join(ok)} file"
                raise BadInputError(f"cpu:runtime={self.runtime} measures {'/'.join(ok)} files, got {path.name!r}",
                                    hint=hint)
            return path.resolve(), repr(path.name)
        if self.runtime == "torch" and _is_module(model):
            if input_shape is None:
                raise BadInputError("measuring an nn.Module needs input_shape", hint="e.g. (1, 3, 224, 224)")
            return self._script(model, input_shape), type(model).__name__
        fmt = self.model_format
        raise BadInputError(
            f"cpu:runtime={self.runtime} measures {fmt} files, got a {type(model).__name__}",
            hint="convert it with nagkit.runtimes.convert.to_tflite/to_onnx, or use cpu:runtime=torch for modules",
        )

    def _script(self, module: Any, input_shape: Sequence[int]) -> Path:
        import warnings

        import torch

        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="nagkit-cpu-")
        self._n_tmp += 1
        path = Path(self._tmp.name) / f"model{self._n_tmp}.pt"
        gen = torch.Generator().manual_seed(0)
        example = torch.randn(tuple(int(d) for d in input_shape), generator=gen)
        was_training = module.training
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(module.eval(), example, check_trace=False)
                torch.jit.save(traced, str(path))
        except Exception as e:
            raise DeviceError(f"could not trace {type(module).__name__} to TorchScript for the CPU worker: {e}",
                              hint="export it to ONNX and use cpu:runtime=onnxruntime") from e
        finally:
            module.train(was_training)
        # Old files are not needed once measured; keep the folder small.
        for old in Path(self._tmp.name).glob("model*.pt"):
            if old != path:
                old.unlink(missing_ok=True)
        return path

    def _timeout(self, cfg: MeasureConfig) -> float:
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return 60.0 + 4.0 * (cfg.warmup_s + cfg.max_time_s)

    def _ensure_worker(self) -> None:
        if self._closed:
            raise DeviceError(f"{self!r} is closed", hint="create a new device with get_device()")
        if self._worker is not None and self._worker.alive():
            return
        w = _Worker(self.runtime, self.threads, self.cores)
        try:
            hello = w.request({"op": "hello"}, timeout_s=START_TIMEOUT_S)
        except (_WorkerDied, TimeoutError) as e:
            w.stop()
            raise DeviceError(f"the {self.runtime} CPU worker did not start: {e}",
                              hint="check the runtime import: python -c 'import "
                              f"{versions.RUNTIME_PACKAGES[self.runtime][0][0]}'") from e
        if not hello.get("ok"):
            w.stop()
            raise DeviceError(f"the {self.runtime} CPU worker did not start: {hello.get('error')}",
                              hint=f"pip install {versions.RUNTIME_PACKAGES[self.runtime][0][1]}")
        self._worker = w
        self._runtime_reply = hello["runtime"]

    def _call(self, req: dict[str, Any], cfg: MeasureConfig, label: str) -> dict[str, Any]:
        """One request, restarting a dead worker and retrying once."""
        for attempt in (1, 2):
            had_worker = self._worker is not None
            if had_worker and not self._worker.alive():
                note = self._worker._death_note()
                self._restart(note, label, before=True)
            self._ensure_worker()
            assert self._worker is not None
            try:
                return self._worker.request(req, self._timeout(cfg))
            except _WorkerDied as e:
                note = str(e)
                self._restart(note, label, before=False)
                if attempt == 2:
                    raise DeviceError(f"the {self.runtime} CPU worker crashed twice measuring {label} ({note})",
                                      hint="the model likely crashes the runtime; try another runtime or re-export it") from None
            except TimeoutError as e:
                self._restart(str(e), label, before=False)
                raise DeviceError(f"measuring {label} on {self.spec!r} timed out: {e}; the worker was restarted",
                                  hint="lower max_time_s or check the model size") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _restart(self, note: str, label: str, before: bool) -> None:
        when = "before measuring" if before else "while measuring"
        log.warning("the %s CPU worker (pid %s) died %s %s: %s; restarting it",
                    self.runtime, self._worker.pid if self._worker else "?", when, label, note)
        if self._worker is not None:
            try:
                self._worker.kill()
            except Exception:  # noqa: BLE001 - it is being replaced anyway
                pass
        self._worker = None
        self.worker_restarts += 1


def _is_module(obj: Any) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, torch.nn.Module)
