"""Unique blocks of a space, and the tiny model of each block, converted and cached.

:func:`unique_layers` lists every distinct layer (by block key) that any architecture of a
space can contain at the given resolutions: the stem, the fixed first block, every MBConv
variant (in/out shape, mid channels, kernel, stride, SE, activation, skip), the final expand,
pool, feature mix and classifier. It needs no torch.

:class:`BlockCache` builds one block as a one-layer model (``nagkit.supernet.static.build_layer``),
converts it to the device's model format and keeps the file under
``<cache>/<format>-<converter version>/<key>.<ext>`` so a second profile skips conversion.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import asdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nagkit.errors import BadInputError
from nagkit.latency.keys import block_key
from nagkit.runtimes.convert import IO_NAMES, check_precision_name, convert_module
from nagkit.runtimes.versions import format_versions
from nagkit.space.arch import Arch
from nagkit.space.layers import LayerSpec, layer_input_shape
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)

FORMATS = {"tflite": ".tflite", "onnx": ".onnx", "torch": ".pt"}


def unique_layers(space: SearchSpace, resolutions: Iterable[int] | None = None) -> dict[str, LayerSpec]:
    """Every distinct layer of ``space`` at ``resolutions`` (default: all), keyed by block key,
    in network order (resolution by resolution, first occurrence wins)."""
    res = list(space.resolutions) if resolutions is None else [int(r) for r in resolutions]
    bad = [r for r in res if r not in space.resolutions]
    if bad:
        raise BadInputError(
            f"resolution(s) {', '.join(map(str, bad))} not in space {space.name!r}; allowed: "
            f"{', '.join(map(str, space.resolutions))}")
    md = space.max_depth
    n_head = 2  # stem + fixed first block
    out: dict[str, LayerSpec] = {}
    for r in res:
        per_choice = []
        for k in space.ks_list:
            for e in space.expand_list:
                # Every slot's shape is independent of the other slots' choices, so the
                # deepest arch with one (k, e) everywhere visits every variant of that choice.
                per_choice.append(space.layers(Arch(r, tuple(((k, e),) * md for _ in range(space.n_stages)))))
        first = per_choice[0]
        for layer in first[:n_head]:
            out.setdefault(block_key(layer), layer)
        for slot in range(space.n_block_slots):
            for layers in per_choice:
                layer = layers[n_head + slot]
                out.setdefault(block_key(layer), layer)
        for layer in first[n_head + space.n_block_slots:]:
            out.setdefault(block_key(layer), layer)
    return out


def build_block(layer: LayerSpec, seed: int = 0):
    """The layer as an ``nn.Module`` in eval mode (random init from a fixed seed)."""
    import torch

    from nagkit.supernet.static import build_layer

    with torch.random.fork_rng(devices=[]):  # the caller's RNG state is left alone
        torch.manual_seed(seed)
        mod = build_layer(layer)
    return mod.eval()


def default_cache_dir() -> Path:
    base = os.environ.get("NAGKIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "nagkit")
    return Path(base) / "blocks"


def check_format_precision(fmt: str, precision: str) -> str:
    """``precision`` (see :data:`~nagkit.runtimes.convert.PRECISIONS`) for models of ``fmt``:
    a torch module (what a CUDA device times) has no int8 or fp16 form here, an onnx model no fp16."""
    check_precision_name(precision)
    if precision != "fp32" and fmt not in ("tflite", "onnx"):
        raise BadInputError(f"precision {precision!r} needs a device that runs tflite or onnx models; this one "
                            f"runs {fmt} models", hint="use --precision fp32 on this device, or profile a "
                                                       "--device cpu (LiteRT or ONNX Runtime) or adb:SERIAL one")
    return check_precision_name(precision, fmt)


def precision_dir(fmt: str, precision: str, tag: str) -> str:
    """A cache folder name: ``<fmt>-<tag>`` for fp32 (as before precisions), else ``<fmt>-<precision>-<tag>``."""
    return f"{fmt}-{tag}" if precision == "fp32" else f"{fmt}-{precision}-{tag}"


class BlockCache:
    """Converted one-block models on disk, keyed by block key + format + precision + converter versions."""

    def __init__(self, fmt: str, cache_dir: str | Path | None = None, precision: str = "fp32"):
        if fmt not in FORMATS:
            raise BadInputError(f"model format {fmt!r} is not one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.precision = check_format_precision(fmt, precision)
        self.versions = format_versions(fmt)
        tag = hashlib.sha256(repr(sorted(self.versions.items())).encode()).hexdigest()[:10]
        self.root = Path(cache_dir) if cache_dir else default_cache_dir()
        self.dir = self.root / precision_dir(fmt, precision, tag)
        self.hits = 0
        self.misses = 0

    def path_for(self, key: str) -> Path:
        return self.dir / f"{key}{FORMATS[self.fmt]}"

    def get(self, key: str, layer: LayerSpec) -> Path | Any:
        """The block's model file (converting it on a miss); for ``torch`` the module itself."""
        if self.fmt == "torch":
            return build_block(layer)
        p = self.path_for(key)
        if p.exists() and p.stat().st_size > 0:
            self.hits += 1
            return p
        self.misses += 1
        self.dir.mkdir(parents=True, exist_ok=True)
        return convert_module(build_block(layer), layer_input_shape(layer), self.fmt, p, precision=self.precision)

    def cached(self, key: str) -> bool:
        p = self.path_for(key)
        return self.fmt == "torch" or (p.exists() and p.stat().st_size > 0)

    def tasks(self, layers: dict[str, LayerSpec]) -> list[tuple]:
        """Conversion tasks (for :func:`convert_task`) of the blocks of ``layers`` not cached yet."""
        if self.fmt == "torch":
            return []
        self.dir.mkdir(parents=True, exist_ok=True)
        return [("block", asdict(layer), self.fmt, str(self.path_for(key)), self.precision)
                for key, layer in layers.items() if not self.cached(key)]

    def jobs_for(self, jobs: int | None) -> int | None:
        if jobs is None and self.fmt == "onnx":
            return 1  # torch.onnx exports a block in ~30 ms: worker start-up would dominate
        return jobs

    def converted(self, n: int) -> None:
        """Count ``n`` blocks converted outside :meth:`get` (the measuring loop counts them as hits)."""
        self.misses += n
        self.hits -= n

    def prepare(self, layers: dict[str, LayerSpec], jobs: int | None = None, progress: bool = True,
                on_each: Callable[[], None] | None = None) -> None:
        """Convert every block of ``layers`` that is not cached yet, ``jobs`` processes at once
        (before any timing starts, so conversions never disturb measurements); ``on_each()`` after
        each one (a time budget counts them as they come)."""
        tasks = self.tasks(layers)
        if not tasks:
            return
        convert_many(tasks, jobs=self.jobs_for(jobs), progress=progress, label="convert blocks", on_each=on_each)
        self.converted(len(tasks))

    def info(self) -> dict[str, Any]:
        return {"dir": str(self.dir), "format": self.fmt, "precision": self.precision, "versions": self.versions,
                "hits": self.hits, "misses": self.misses}


def convert_task(task: tuple) -> str:
    """One conversion in a worker process: ``("block", layer_dict, fmt, path[, precision])`` or
    ``("net", (space_dict, arch_str, seed), fmt, path[, precision])`` (precision default fp32)."""
    kind, payload, fmt, path, *rest = task
    precision = rest[0] if rest else "fp32"
    logging.getLogger().setLevel(logging.ERROR)
    if kind == "block":
        layer = LayerSpec(**payload)
        convert_module(build_block(layer), layer_input_shape(layer), fmt, Path(path), precision=precision)
    else:
        from nagkit.supernet.static import StaticNet

        space_d, arch_s, seed = payload
        space = SearchSpace.from_dict(space_d)
        arch = space.parse_arch(arch_s)
        net = StaticNet.from_arch(space, arch, seed=seed)
        convert_module(net, (1, space.in_channels, arch.r, arch.r), fmt, Path(path), names=IO_NAMES,
                       precision=precision)  # as exported
    return path


JOBS_ENV = "NAGKIT_JOBS"


def default_jobs() -> int:
    """Conversion processes when none are asked for (``--jobs``): ``$NAGKIT_JOBS``, else the usable
    cores. One job converts in this process, with no worker to start (each imports torch and
    litert-torch, ~8 s of CPU): what a CI runner that already runs one job per core wants."""
    env = os.environ.get(JOBS_ENV, "").strip()
    if env:
        if not env.isdigit() or not 1 <= int(env) <= 64:
            raise BadInputError(f"${JOBS_ENV} must be a number of conversion processes from 1 to 64, got {env[:40]!r}",
                                hint=f"unset {JOBS_ENV} to use one per usable core")
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def convert_many(tasks: list[tuple], jobs: int | None = None, progress: bool = True,
                 label: str = "convert", on_each: Callable[[], None] | None = None,
                 keep_going: Callable[[], bool] | None = None) -> int:
    """Run conversion tasks in ``jobs`` worker processes (in this process when jobs == 1);
    ``on_each()`` as each one finishes. With ``keep_going``, asked after each one, a ``False``
    stops the rest (the workers are stopped; a model half written is never left under its name).
    Returns how many were converted."""
    from nagkit.latency.convert_pool import ConversionPool
    from nagkit.progress import progress_bar

    jobs = min(jobs or default_jobs(), len(tasks))
    each = on_each or (lambda: None)
    go = keep_going or (lambda: True)
    n = 0
    with progress_bar(progress, len(tasks), 0, label, "convert") as advance:
        if jobs <= 1:
            for t in tasks:
                if n and not go():
                    break
                name = Path(convert_task(t)).name
                n += 1
                each()
                advance(name)
            return n
        with ConversionPool(tasks, jobs) as pool:
            for path in pool:
                n += 1
                each()
                advance(Path(path).name)
                if n < len(tasks) and not go():
                    break
    return n
