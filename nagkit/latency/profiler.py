"""Profile a device block by block into a latency table, resumably.

Every measured block is appended to a journal (:mod:`nagkit.latency.journal`: JSON lines, fsync'd) beside the
output, ``<out>.journal.jsonl``. Its first line is a header naming the device, runtime, model
format and space; each further line is one block's statistics. After a crash or ``kill -9``,
``resume=True`` reads the journal (dropping a half-written last line), refuses a journal made
for another device, runtime or space, and measures only the blocks that are missing. A block
record with impossible statistics (an infinite median, n=0, a negative std, p10 > p90: what a
garbled device output once produced) is skipped with a warning and measured again, instead of
failing the table build on every resume. The final table is written atomically with the device
and runtime facts and the versions used.

The device is contacted and checked first (:func:`nagkit.devices.base.prepare_device`), so an
unreachable phone or a missing ``benchmark_model`` fails in seconds, before any conversion.
Then, on a device that measures on its own (a phone), conversion and measurement run as a
pipeline: worker processes convert blocks while the phone measures those already converted. On
a device that measures on this machine's CPU, every conversion finishes before timing starts,
so conversions never disturb measurements, and every block is measured in several passes over
the list, its best pass recorded (:mod:`nagkit.latency.passes`): other work on a shared machine
only ever slows a run down. With a calibration after it, :func:`spread_block_pass` adds a pass
after the calibration networks' conversions and one after their passes (decisions 29). Under a
time budget (:mod:`nagkit.latency.budget`, decisions 40) every pass after the first, and each of
those spread passes, measures only the blocks the time left allows, most expected error first.
Without ``out``, the table goes to
``latency_tables/<model>-<runtime>-<space>.json`` (:func:`default_table_path`).
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nagkit.devices.base import default_time_budget, prepare_device
from nagkit.errors import ArtifactError, BadInputError, DeviceError, short_repr
from nagkit.io import check_out_path
from nagkit.latency.blocks import BlockCache, check_format_precision, default_jobs, unique_layers
from nagkit.latency.budget import (RATES_FILE, NetworkPlan, TimeBudget, block_priority, block_weights, by_priority,
                                   rates_key, remembered_rates)
from nagkit.latency.budget_probe import probe_conversions
from nagkit.latency.journal import Journal, check_journal_matches, device_identity, journal_lock, journal_path
from nagkit.latency.progress import progress_bar
from nagkit.latency.table import LatencyTable, stats_problem, utc_now
from nagkit.space.layers import LayerSpec, layer_input_shape
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for n in ("nagkit", "torch", "litert-torch", "ai-edge-litert", "onnx", "onnxruntime", "numpy"):
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class ProfileResult:
    table: LatencyTable
    out: Path
    journal: Path
    measured: list[str]
    resumed: list[str]
    elapsed_s: float
    cache: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "journal": str(self.journal), "entries": len(self.table.entries),
                "measured": len(self.measured), "resumed": len(self.resumed),
                "elapsed_s": round(self.elapsed_s, 3), "cache": self.cache,
                "device": self.table.device.get("spec"), "space": self.table.space_name,
                "precision": self.table.precision,
                "resolutions": list(self.table.resolutions),
                "noisy": self.table.provenance.get("noisy_blocks", []),
                "passes": self.table.provenance.get("block_passes"),
                "time_budget": self.table.provenance.get("time_budget")}


Progress = Callable[[str, int, int], None]
TABLES_DIR = "latency_tables"


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-.") or "device"


def default_table_path(device, facts: Mapping[str, Any], space: SearchSpace, folder: str | Path = TABLES_DIR,
                       precision: str = "fp32") -> Path:
    """``<folder>/<model>-<runtime>[-<precision>]-<space>.json`` for a device (``facts`` from
    ``prepare``); fp32 tables carry no precision in the name."""
    model = facts.get("model") or facts.get("gpu") or facts.get("cpu_model") or device.kind
    runtime = (device.runtime_info() or {}).get("name") or device.model_format
    runtime = {"tflite-benchmark_model": "tflite", "torch-cuda": "cuda"}.get(runtime, runtime)
    prec = "" if precision == "fp32" else f"-{precision}"
    return Path(folder) / f"{_slug(model)}-{_slug(runtime)}{prec}-{_slug(space.name)}.json"


def profile(device, space: SearchSpace, resolutions: Iterable[int], out: str | Path | None = None, *,
            resume: bool = False, force: bool = False, cfg=None, cache_dir: str | Path | None = None,
            progress: bool = True, command: str | None = None, jobs: int | None = None,
            on_start: Callable[[Path, Mapping[str, Any]], None] | None = None,
            precision: str = "fp32", passes: int | None = None, extra_passes: int | None = None,
            budget: TimeBudget | None = None, networks: NetworkPlan | None = None) -> ProfileResult:
    """Measure every unique block of ``space`` at ``resolutions`` on ``device`` into ``out``
    (default :func:`default_table_path`); see the module doc. ``on_start(out, facts)`` is
    called once the device has been checked, before any conversion. ``precision="int8"``:
    every block is quantized as an int8 bundle is (``nagkit.runtimes.convert.convert_module``)
    and the table says it is an int8 table; ``"fp16"`` (tflite devices): float16 weights, as an
    fp16 bundle's.

    ``passes``: every block is measured once per pass over the list and the table records its
    best pass (:mod:`nagkit.latency.passes`), with up to ``extra_passes`` more passes over the
    blocks no other pass confirms. Default: :data:`~nagkit.latency.passes.PASSES` (and
    ``BLOCK_EXTRA_PASSES``) on a device that measures on this machine's CPU, which other work shares;
    1 on a phone, which measures alone and whose ``benchmark_model`` runs are long.

    ``budget``: the :class:`~nagkit.latency.budget.TimeBudget` to keep to (None: no budget, every
    pass runs). Its minimum is checked before the journal or any conversion (a budget below it:
    :class:`BadInputError`, nothing written); passes after the first are measured only while the
    time left allows, block by block, largest expected error first (:mod:`nagkit.latency.budget`).
    ``networks``: the calibration that follows (:class:`~nagkit.latency.budget.NetworkPlan`), planned
    into the budget now so that the minimum counts it and the block passes leave it its time."""
    t0 = time.perf_counter()
    budget = budget if budget is not None else TimeBudget(None)
    passes, extra_passes = check_passes(passes, extra_passes)
    check_format_precision(device.model_format, precision)  # before the device is contacted
    facts, on_host = prepare_device(device)  # first: fail in seconds, before any conversion
    out = Path(out) if out is not None else default_table_path(device, facts, space, precision=precision)
    check_out_path(out)  # --out below an existing file: refused before any work (issue 13 D5)
    res = sorted({int(r) for r in resolutions})
    layers = unique_layers(space, res)
    jpath = journal_path(out)
    ident = device_identity(device, precision)
    from nagkit.latency.passes import BLOCK_EXTRA_PASSES, PASSES

    if passes is None:
        passes = PASSES if on_host else 1
    if extra_passes is None:
        extra_passes = BLOCK_EXTRA_PASSES if passes > 1 else 0
    if on_start is not None:
        on_start(out, facts)
    cache = BlockCache(device.model_format, cache_dir, precision)
    budget.memory = (cache.root / RATES_FILE, rates_key(ident, platform.node()))
    budget.resolve(default_time_budget(device, on_host), device.model_format, remembered_rates(*budget.memory))
    if networks is not None:
        budget.plan_networks(networks, len(layers), spread=passes > 1)
    budget.plan_blocks(len(layers), sum(not cache.cached(k) for k in layers),
                       _missing_passes(jpath, layers, passes, resume), extra_passes)
    # a cold cache under a budget the priors refuse: a few conversions timed first (decisions 42)
    with probe_conversions(budget, cache, layers, jobs=jobs, progress=progress) as probe:
        budget.check_minimum()  # before the journal, the lock or a conversion into the cache: a refusal writes nothing
        probe.keep(cache)
    budget.announce()
    with journal_lock(jpath):
        journal, measured, resumed, n_meas = _run(device, space, layers, jpath, ident, resume, force, cfg, cache,
                                                  progress, command, jobs, pipeline=not on_host, passes=passes,
                                                  extra_passes=extra_passes, budget=budget, res=res)
    table = build_table(device, space, res, journal, layers, provenance_extra={
        "journal": str(jpath), "block_cache": cache.info(), "command": command,
        "measure_config": cfg.to_dict() if cfg is not None else "device default",
        "measured_this_run": len(measured), "measurements_this_run": n_meas,
        "resumed_from_journal": len(resumed), "passes_asked": passes, "extra_passes_asked": extra_passes,
        "pipelined": not on_host, "elapsed_s": round(time.perf_counter() - t0, 3),
        "time_budget": budget.record()}, precision=precision)
    table.save(out)
    budget.remember()  # the rates observed, for the next plan of this device here
    from nagkit.latency.calibration import block_noise_warning

    if (warning := block_noise_warning(table.provenance.get("block_passes"))) is not None:
        log.warning("%s", warning)  # now, not after a calibration's quarter of an hour
    return ProfileResult(LatencyTable.load(out), out, jpath, measured, resumed,
                         time.perf_counter() - t0, cache.info())


def _open_journal(jpath: Path, ident, space, resume: bool, force: bool, command) -> Journal:
    if os.path.lexists(jpath):  # a FIFO or a folder where the journal goes: refused, never read
        from nagkit.io import input_file

        input_file(jpath, "profile journal", hint="choose another --out")
    if jpath.exists() and b"\n" not in jpath.read_bytes():
        log.warning("journal %s has no complete line (killed while starting); starting over", jpath)
        jpath.unlink()
    if jpath.exists() and resume:
        journal = Journal.open(jpath)
        check_journal_matches(journal, ident, space)
        return journal
    if jpath.exists() and not force:
        raise BadInputError(
            f"a profile journal already exists at {str(jpath)!r} ({_count_lines(jpath)} lines)",
            hint="pass --resume to continue it (only missing blocks are measured), or --force to start over")
    if resume:
        log.warning("nothing to resume at %s; starting a new profile", jpath)
    return Journal.create(jpath, {
        "device_identity": ident, "space": space.name, "space_spec": space.to_dict(),
        "created": utc_now(), "command": command})


def _missing_passes(jpath: Path, layers, passes: int, resume: bool) -> list[int]:
    """How many blocks lack a pass 1, 2, ... ``passes`` (a journal resumed: its passes count)."""
    have: dict[str, int] = {}
    if resume and jpath.is_file() and b"\n" in jpath.read_bytes():
        try:
            have = {k: len(v) for k, v in Journal.open(jpath).passes.items()}
        except (ArtifactError, OSError):  # refused with its own message when the run opens it
            have = {}
    return [sum(1 for k in layers if have.get(k, 0) < p) for p in range(1, passes + 1)]


def _run(device, space, layers, jpath: Path, ident, resume: bool, force: bool, cfg, cache: BlockCache,
         progress: bool, command, jobs, pipeline: bool = False, passes: int = 1, extra_passes: int = 0,
         budget: TimeBudget | None = None, res=None):
    budget = budget if budget is not None else TimeBudget(None)
    journal = _open_journal(jpath, ident, space, resume, force, command)
    todo = [(k, l) for k, l in layers.items() if k not in journal.blocks]
    resumed = [k for k in layers if k in journal.blocks]
    if resumed:
        log.info("resuming: %d of %d blocks already measured", len(resumed), len(layers))
    measured: list[str] = []
    count = [0]

    def measure(key: str, layer: LayerSpec, advance, note: str = "", pass_no: int = 1,
                phase: str = "block pass 1") -> None:
        t1 = budget.clock()
        _measure_into(journal, device, cache, key, layer, cfg, pass_no)
        budget.done(phase, 1, budget.clock() - t1)
        count[0] += 1
        if pass_no == 1:
            measured.append(key)
        advance(key + note)

    label = device.spec if passes == 1 else f"{device.spec} pass 1 of {passes}"
    if not pipeline:
        uncached = [k for k in layers if not cache.cached(k)]
        cache.prepare({k: layers[k] for k in uncached}, jobs=jobs, progress=progress,
                      on_each=budget.ticker("convert blocks"))
        budget.finish("convert blocks")
        with progress_bar(progress, len(layers), len(resumed), label) as advance:
            for key, layer in todo:
                measure(key, layer, advance)
    else:
        _pipeline(cache, todo, jobs, progress, len(layers), len(resumed), label, measure)
        budget.finish("convert blocks")
    weights = block_weights(space, res or space.resolutions) if budget.limited and passes > 1 else {}
    _more_passes(journal, layers, measure, passes, extra_passes, progress, device.spec, budget, weights)
    return journal, measured, resumed, count[0]


def _more_passes(journal: Journal, layers, measure, passes: int, extra_passes: int, progress: bool,
                 spec, budget: TimeBudget | None = None, weights: dict[str, float] | None = None) -> None:
    """Passes 2..``passes`` over every block (each a full pass over the list, so that a period of
    load elsewhere falls on one pass of a block), then up to ``extra_passes`` passes over the
    blocks whose best pass no other confirms (:mod:`nagkit.latency.passes`). Resumable: a
    block's journalled passes count.

    Under a time budget each block of these passes is measured only if the budget allows it
    (:meth:`~nagkit.latency.budget.TimeBudget.may_start`), and each pass takes its blocks in
    order of expected error in a typical network (:func:`~nagkit.latency.budget.block_priority`:
    weight × latency × gap between its fastest passes), so a pass cut short has done the blocks
    that matter most."""
    from nagkit.latency.passes import confirmed

    budget = budget if budget is not None else TimeBudget(None)

    def done(k: str) -> int:
        return len(journal.passes.get(k, ()))

    def next_pass(k: str) -> int:
        return _next_pass(journal, k)

    def ordered(todo):
        if not weights:
            return todo
        pri = block_priority(weights, {k: [r["stats"]["median_ms"] for r in journal.passes.get(k, ())]
                                       for k, _ in todo})
        return [(k, layers[k]) for k in by_priority([k for k, _ in todo], pri)]

    def run(phase: str, todo, adv) -> bool:
        for key, layer in ordered(todo):
            if not budget.may_start(phase):
                budget.stop(phase)
                return False
            measure(key, layer, adv, pass_no=next_pass(key), phase=phase)
        return True

    cut = False
    for p in range(2, passes + 1):
        todo = [(k, l) for k, l in layers.items() if done(k) < p]
        phase = "block pass 2" if p == 2 else "block pass 3+"
        if todo:
            with progress_bar(progress, len(layers), len(layers) - len(todo), f"{spec} pass {p} of {passes}") as adv:
                cut = not run(phase, todo, adv)
            if cut:
                break
    if cut:  # the passes after a cut one: skipped for time
        for phase in ("block pass 2", "block pass 3+", "block extra passes"):
            budget.stop(phase)
    for e in range(1, extra_passes + 1 if passes > 1 and not cut else 1):
        todo = [(k, l) for k, l in layers.items() if passes <= done(k) < passes + e
                and not confirmed([r["stats"]["median_ms"] for r in journal.passes[k]])]
        if not todo:
            break
        # now the plan knows how many: at most every extra pass left for each of them
        budget.grow("block extra passes", len(todo) * (extra_passes - e + 1))
        log.info("%d block(s) whose best pass is not confirmed within 3%%; measuring them again (%d of %d)",
                 len(todo), e, extra_passes)
        with progress_bar(progress, len(todo), 0, f"{spec} again ({e} of {extra_passes})") as adv:
            if not run("block extra passes", todo, adv):
                break
    for phase in ("block pass 2", "block pass 3+", "block extra passes"):
        budget.finish(phase)


def _pipeline(cache: BlockCache, todo, jobs, progress: bool, total: int, done: int, label: str, measure) -> None:
    """Measure the cached blocks, then each block as soon as a worker has converted it."""
    from nagkit.latency.convert_pool import ConversionPool

    layer_of = dict(todo)
    tasks = cache.tasks(layer_of)
    key_of = {str(cache.path_for(k)): k for k in layer_of}
    converting = {key_of[t[3]] for t in tasks}
    ready = [(k, l) for k, l in todo if k not in converting]
    n_jobs = cache.jobs_for(jobs) or default_jobs()
    log.info("pipeline: %d block(s) cached, %d to convert in %d process(es) while the device measures",
             len(ready), len(tasks), min(n_jobs, len(tasks)))
    with ConversionPool(tasks, n_jobs) as pool, progress_bar(progress, total, done, label) as advance:
        for key, layer in ready:
            measure(key, layer, advance)
        for i, path in enumerate(pool, start=1):
            cache.converted(1)
            key = key_of[path]
            measure(key, layer_of[key], advance, f" (converted {i}/{len(tasks)})")


def _measure_into(journal: Journal, device, cache: BlockCache, key: str, layer: LayerSpec, cfg, pass_no: int) -> None:
    """Measure one block once and journal it as pass ``pass_no``."""
    t1 = time.perf_counter()
    stats = _measure_block(device, cache, key, layer, cfg)
    problem = stats_problem(stats.to_dict())
    if problem:  # never journal what the table build would refuse
        raise DeviceError(f"{device.spec} returned impossible statistics for block {key}: it {problem}",
                          hint="rerun with --resume to measure it again; if it repeats, check the device "
                               "and its benchmark tool")
    journal.append(key, stats.to_dict(), layer=_layer_dict(layer), wall_s=round(time.perf_counter() - t1, 4),
                   **{"pass": pass_no})


def _next_pass(journal: Journal, key: str) -> int:
    """The pass number after the highest journalled for ``key`` (a dropped bad record leaves a gap)."""
    return max((int(r.get("pass", 1)) for r in journal.passes.get(key, ())), default=0) + 1


def spread_block_pass(device, space: SearchSpace, out: str | Path, *, when: str, cfg=None,
                      cache_dir: str | Path | None = None, progress: bool = True,
                      budget: TimeBudget | None = None) -> LatencyTable:
    """One more pass over every block of the table at ``out``, journalled like the others, and the
    table rebuilt from all of its blocks' passes and saved (decisions 29).

    ``nagkit profile --calibrate`` on this machine's CPU calls it twice, after the calibration
    networks' conversions and after their passes, so that each block's passes span the whole
    profile (about 20 minutes at r=224) rather than the few minutes of the block part: on the AMD
    EPYC VM a block's slow state lasted through all of its passes there (decisions 28). ``when``
    (what the pass comes after) is recorded in the table's provenance (``spread_block_passes``).
    The table keeps its other provenance; a calibration is fitted afterwards, on the rebuilt table.
    Under a ``budget`` a block is measured only while it allows (phase ``spread block passes``,
    the least important: decisions 29 calls these passes insurance), blocks of most expected error first."""
    budget = budget if budget is not None else TimeBudget(None)
    out = Path(out)
    old = LatencyTable.load(out)
    res = list(old.resolutions)
    layers = unique_layers(space, res)
    jpath = journal_path(out)
    t0 = time.perf_counter()
    with journal_lock(jpath):
        journal = Journal.open(jpath)
        check_journal_matches(journal, device_identity(device, old.precision), space)
        missing = [k for k in layers if k not in journal.passes]
        if missing:
            raise ArtifactError(f"profile journal {str(jpath)!r} lacks {len(missing)} block(s) of the table "
                                f"(e.g. {missing[0]})", hint="profile again with --resume")
        cache = BlockCache(device.model_format, cache_dir, old.precision)
        cache.prepare(dict(layers), progress=progress)  # a no-op when cached: no conversion while timing
        keys = list(layers)
        if budget.limited:
            keys = by_priority(keys, block_priority(block_weights(space, res), {
                k: [r["stats"]["median_ms"] for r in journal.passes[k]] for k in keys}))
        n_done = 0
        with progress_bar(progress, len(layers), 0, f"{device.spec} block pass {when}") as adv:
            for key in keys:
                if not budget.may_start("spread block passes"):
                    log.info("blocks: the pass %s stopped for time after %d of %d blocks", when, n_done, len(keys))
                    break
                t1 = budget.clock()
                _measure_into(journal, device, cache, key, layers[key], cfg, _next_pass(journal, key))
                budget.done("spread block passes", 1, budget.clock() - t1)
                n_done += 1
                adv(key)
    log.info("blocks: one more pass %s (%.0f s)", when, time.perf_counter() - t0)
    keep = {k: v for k, v in old.provenance.items()
            if k not in ("source", "versions", "host", "argv", "noisy_blocks", "block_passes")}
    keep["spread_block_passes"] = [*old.provenance.get("spread_block_passes", []),
                                   {"after": when, "finished": utc_now(), "blocks": n_done,
                                    "elapsed_s": round(time.perf_counter() - t0, 3)}]
    table = build_table(device, space, res, journal, layers, provenance_extra=keep, precision=old.precision)
    table.save(out)
    return LatencyTable.load(out)


def _measure_block(device, cache: BlockCache, key: str, layer: LayerSpec, cfg):
    model = cache.get(key, layer)
    shape = layer_input_shape(layer)
    return device.measure(model, shape, cfg) if cfg is not None else device.measure(model, shape)


def _layer_dict(layer: LayerSpec) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(layer)


def build_table(device, space: SearchSpace, res: list[int], journal: Journal,
                layers: Mapping[str, LayerSpec], provenance_extra: Mapping[str, Any],
                precision: str = "fp32") -> LatencyTable:
    """The table of every journalled block the space needs at ``res``: each block's best pass,
    confirmed or not (:func:`nagkit.latency.passes.best`; a block measured once is its one
    measurement)."""
    from nagkit.latency.passes import BLOCK_STATISTIC, best, confirmed, pass_noise

    entries, noisy, unconfirmed, per = {}, [], [], []
    for key in layers:
        recs = journal.passes[key]
        meds = [r["stats"]["median_ms"] for r in recs]
        s = recs[best(meds)]["stats"]
        entries[key] = {f: s.get(f) for f in ("median_ms", "mean_ms", "std_ms", "p10_ms", "p90_ms", "n")}
        if len(recs) > 1:
            per.append(meds)
            if not confirmed(meds):
                unconfirmed.append(key)
        if s.get("noisy"):
            noisy.append(key)
    info = dict(device.info() or {})
    info.setdefault("spec", str(device.spec))
    info["spec"] = str(device.spec)
    noise = {**pass_noise(per), "statistic": BLOCK_STATISTIC} if per else None
    passes = {"statistic": BLOCK_STATISTIC if per else "median of one measurement",
              "passes": max(len(journal.passes[k]) for k in layers) if layers else 0,
              "noise": noise, "unconfirmed_blocks": unconfirmed}
    prov = {"source": "nagkit profile", "versions": versions(), "host": platform.node(),
            "argv": sys.argv[1:], "noisy_blocks": noisy, "block_passes": passes, **provenance_extra}
    return LatencyTable.create(space, entries, device=info, runtime=dict(device.runtime_info() or {}),
                               resolutions=res, stat="median_ms", provenance=prov, precision=precision)


def check_passes(passes: int | None, extra_passes: int | None) -> tuple[int | None, int | None]:
    """Refuse pass counts that are not whole numbers in range (``None``: the default)."""
    for name, v, lo in (("passes", passes, 1), ("extra passes", extra_passes, 0)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 20):
            raise BadInputError(f"{name} must be a whole number from {lo} to 20, got {short_repr(v)}",
                                hint="e.g. --block-passes 3 (the default on this machine's CPU), or 1")
    return passes, extra_passes


def _count_lines(p: Path) -> int:
    with open(p, "rb") as f:
        return sum(1 for _ in f)
