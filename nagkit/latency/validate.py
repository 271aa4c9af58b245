"""Whole-network measurements: calibration of a table and end-to-end validation.

Both measure random static networks and compare them with the table's prediction. The networks
are what ships: ``StaticNet.from_arch`` (seed 0) converted by :mod:`nagkit.runtimes.convert`, the
converter ``nagkit export``/``nagkit build`` use, with the same NCHW float32 input of batch 1 and
the same signature; a file here is byte for byte the one ``nagkit export --random-init --seed 0``
writes (``tests/latency/test_ships.py``). They are cached by arch + converter versions.

Every network is measured in interleaved passes, and its best pass is what counts, confirmed
by another pass or measured again (:func:`measure_networks`, :mod:`nagkit.latency.passes`); the
spread between passes is this machine's measurement noise, which the verdict on ±5% takes into
account. ``calibrate`` fits, holds out and adopts (or not)
the calibration of :mod:`nagkit.latency.calibration`; ``validate`` reports, per arch and in
aggregate, the raw and calibrated errors: MAPE, the fraction within ±5% and ±10%, Spearman ρ.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError
from nagkit.latency.blocks import FORMATS, check_format_precision, default_cache_dir, precision_dir
from nagkit.latency.passes import EXTRA_PASSES, PASSES, STATISTIC, confirmed, pass_noise, pick
from nagkit.runtimes.convert import IO_NAMES, TFLITE_RECIPE
from nagkit.runtimes.versions import format_versions
from nagkit.latency.progress import progress_bar
from nagkit.latency.table import LatencyTable
from nagkit.latency.validate_plot import plot_scatter  # noqa: F401 (re-exported)
from nagkit.latency.validate_report import fidelity, report_text, validation_report  # noqa: F401 (re-exported)
from nagkit.space.arch import Arch
from nagkit.space.sampling import sample
from nagkit.space.space import SearchSpace

log = logging.getLogger(__name__)


def random_archs(space: SearchSpace, n: int, seed: int, resolutions: Sequence[int] | None = None,
                 exclude: Sequence[Arch] = ()) -> list[Arch]:
    """``n`` distinct uniformly random archs (seeded), restricted to ``resolutions``, none of
    them in ``exclude`` (e.g. the validation set, so calibration and validation are disjoint)."""
    if n < 1:
        raise BadInputError(f"--samples must be >= 1, got {n}")
    sp = space
    if resolutions:
        bad = [r for r in resolutions if r not in space.resolutions]
        if bad:
            raise BadInputError(f"resolution(s) {bad} not in space {space.name!r}; allowed: "
                                f"{', '.join(map(str, space.resolutions))}")
        sp = space.replace(resolutions=tuple(resolutions))
    size = sp.size
    excl = {a for a in exclude if a.r in sp.resolutions}
    if n > size - len(excl):
        raise BadInputError(f"cannot draw {n} distinct archs from space {sp.name!r}: it has {size} "
                            f"({len(exclude)} excluded)")
    rng = np.random.default_rng(seed)
    seen, out = set(exclude), []
    while len(out) < n:
        a = sample(sp, rng)
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


class NetworkCache:
    """Converted whole networks on disk, keyed by space, arch and converter versions."""

    def __init__(self, fmt: str, cache_dir: str | Path | None = None, precision: str = "fp32"):
        self.fmt = fmt
        self.precision = check_format_precision(fmt, precision)
        self.versions = format_versions(fmt) if fmt != "torch" else {}
        # the recipe: files converted before BatchNorm was folded first differ in tensor names (decisions 34)
        recipe = repr(IO_NAMES) + (f" {TFLITE_RECIPE}" if fmt == "tflite" else "")
        tag = hashlib.sha256((repr(sorted(self.versions.items())) + recipe).encode()).hexdigest()[:10]
        root = Path(cache_dir) if cache_dir else default_cache_dir().parent
        self.dir = root / "nets" / precision_dir(fmt, precision, tag)
        self.hits = self.misses = 0

    def path_for(self, space: SearchSpace, arch: Arch) -> Path:
        sh = hashlib.sha256(repr(sorted(space.to_dict().items())).encode()).hexdigest()[:8]
        return self.dir / f"{space.name}-{sh}" / f"{arch}{FORMATS[self.fmt]}"

    def prepare(self, space: SearchSpace, archs: Sequence[Arch], seed: int = 0, jobs: int | None = None,
                progress: bool = True, on_each: Callable[[], None] | None = None,
                keep_going: Callable[[], bool] | None = None) -> None:
        """Convert the networks not cached yet, ``jobs`` processes at once, before any timing;
        ``on_each()`` after each one; ``keep_going()`` False stops the rest (:func:`convert_many`)."""
        from nagkit.latency.blocks import convert_many

        if self.fmt == "torch":
            return
        todo = self.uncached(space, archs)
        if not todo:
            return
        self.path_for(space, todo[0]).parent.mkdir(parents=True, exist_ok=True)
        tasks = [("net", (space.to_dict(), str(a), seed), self.fmt, str(self.path_for(space, a)), self.precision)
                 for a in todo]
        n = convert_many(tasks, jobs=jobs, progress=progress, label="convert networks", on_each=on_each,
                         keep_going=keep_going)
        self.misses += n
        self.hits -= n

    def uncached(self, space: SearchSpace, archs: Sequence[Arch]) -> list[Arch]:
        """The distinct archs of ``archs`` not converted yet (none for torch: nothing to convert)."""
        if self.fmt == "torch":
            return []
        return [a for a in dict.fromkeys(archs) if not self._cached(self.path_for(space, a))]

    @staticmethod
    def _cached(p: Path) -> bool:
        return p.exists() and p.stat().st_size > 0

    def get(self, space: SearchSpace, arch: Arch, seed: int = 0):
        from nagkit.supernet.static import StaticNet

        if self.fmt == "torch":
            return StaticNet.from_arch(space, arch, seed=seed)
        p = self.path_for(space, arch)
        if self._cached(p):
            self.hits += 1
            return p
        self.misses += 1
        from nagkit.runtimes.convert import IO_NAMES, convert_module

        net = StaticNet.from_arch(space, arch, seed=seed)
        return convert_module(net, (1, space.in_channels, arch.r, arch.r), self.fmt, p, names=IO_NAMES,
                              precision=self.precision)


NETWORK_PASSES = PASSES  # every network is measured once per pass over the whole list
# (EXTRA_PASSES: at most this many more passes over the networks whose best pass is not confirmed)


def measure_networks(device, space: SearchSpace, archs: Sequence[Arch], *, cfg=None,
                     cache_dir: str | Path | None = None, progress: bool = True, label: str = "measure",
                     jobs: int | None = None, passes: int = NETWORK_PASSES, extra_passes: int = EXTRA_PASSES,
                     precision: str = "fp32", budget=None, journal=None):
    """(LatencyStats per arch, info): every arch measured end to end on ``device``, the way the
    latency benchmark does it, converted at ``precision`` (a table's own: int8 networks for an int8 table).

    Networks are converted first (all of them, before any timing). Then every arch is measured
    once per pass over the whole list, so a burst of load elsewhere hits one pass of an arch, not
    all of them. Its ``median_ms`` is its best pass's median (:mod:`nagkit.latency.passes`); an
    arch whose best pass is not confirmed by another within 3% is measured again, once per extra
    pass, in up to ``extra_passes`` more passes, and is marked noisy if it still is not (then its
    lowest confirmed pass counts, if any: :func:`~nagkit.latency.passes.pick`). The other
    statistics are the recorded pass's. ``info["noise"]``: :func:`network_noise` of the passes.

    ``budget`` (a :class:`~nagkit.latency.budget.TimeBudget`): the conversions and pass 1 are
    timed into it (phases ``convert networks``, ``network pass 1``); a measurement of a later pass
    (``network passes 2+``) or an extra pass (``network extra passes``) starts only while it allows,
    so a network may end with fewer passes than the others. ``journal`` (a
    :class:`~nagkit.latency.net_journal.NetworkJournal`): every measurement is appended to it as it
    is made, and the passes it holds already (a resumed profile's) are taken, not measured again."""
    from nagkit.latency.budget import TimeBudget

    if passes < 1 or extra_passes < 0:
        raise BadInputError(f"passes must be >= 1 and extra passes >= 0, got {passes} and {extra_passes}")
    budget = budget if budget is not None else TimeBudget(None)
    cache = NetworkCache(device.model_format, cache_dir, precision)
    cache.prepare(space, archs, jobs=jobs, progress=progress, on_each=budget.ticker("convert networks"))
    budget.finish("convert networks")
    had = [journal.stats(a, passes) if journal is not None else ([], []) for a in archs]
    reg, ext = [list(r) for r, _ in had], [list(e) for _, e in had]  # each arch's passes, and its extra passes

    def one(i: int, phase: str, advance, pass_no: int | None = None, extra: int | None = None) -> bool:
        """Measure arch ``i`` once (False: the budget stops ``phase`` here)."""
        if phase != "network pass 1" and not budget.may_start(phase):
            budget.stop(phase)
            return False
        a = archs[i]
        model, shape = cache.get(space, a), (1, space.in_channels, a.r, a.r)
        t1 = budget.clock()
        st = device.measure(model, shape, cfg) if cfg is not None else device.measure(model, shape)
        budget.done(phase, 1, budget.clock() - t1)
        if journal is not None:
            journal.append(a, st, pass_no=pass_no, extra=extra)
        (reg if extra is None else ext)[i].append(st)
        advance(str(a))
        return True

    cut = False
    with progress_bar(progress, len(archs) * passes, sum(map(len, reg)), str(device.spec), label) as advance:
        for p in range(passes):  # (all() stops at the first measurement the budget stops)
            phase = "network pass 1" if p == 0 else "network passes 2+"
            if not all(one(i, phase, advance, pass_no=p + 1) for i in range(len(archs)) if len(reg[i]) <= p):
                cut = True
                break
    per = [reg[i] + ext[i] for i in range(len(archs))]
    remeasured: set[int] = set()
    for k in range(0 if cut else extra_passes):
        noisy = [i for i, st in enumerate(per) if not _confirmed(st)]
        if not noisy:
            break
        todo = [i for i in noisy if len(ext[i]) <= k]  # those a resumed profile has of this extra pass are kept
        log.info("%s: %d network(s) whose best pass is not confirmed; measuring them again (%d of %d)", label,
                 len(todo), k + 1, extra_passes)
        remeasured.update(noisy)
        budget.grow("network extra passes", len(todo) + len(noisy) * (extra_passes - k - 1))  # at most
        with progress_bar(progress, len(todo), 0, str(device.spec), f"{label} again") as advance:
            stopped = not all(one(i, "network extra passes", advance, extra=k + 1) for i in todo)
        per = [reg[i] + ext[i] for i in range(len(archs))]
        if stopped:
            break
    for phase in ("network passes 2+", "network extra passes"):
        (budget.stop if cut else budget.finish)(phase)
    out, noise = _summarise(archs, per, remeasured, label, extra_passes)
    return out, {"dir": str(cache.dir), "precision": precision, "hits": cache.hits, "misses": cache.misses,
                 "passes": passes, "extra_passes": extra_passes, "statistic": STATISTIC, "noise": noise,
                 "journalled": sum(len(r) + len(e) for r, e in had)}


def _summarise(archs: Sequence[Arch], per: list[list], remeasured: set[int], label: str, extra_passes: int):
    """(each arch's recorded statistics, the noise record) from every arch's passes."""
    out = [st[0] if len(st) == 1 else _combine_passes(st) for st in per]
    still = [i for i, st in enumerate(per) if not _confirmed(st)]
    noise = {**network_noise(per), "networks": len(archs), "remeasured": len(remeasured), "still_noisy": len(still),
             "still_noisy_archs": [str(archs[i]) for i in still]}
    if still:
        log.warning("%s: %d of %d network(s) stayed noisy (best pass not confirmed within 3%%) after %d extra "
                    "pass(es)", label, len(still), len(archs), extra_passes)
    return out, noise


def _confirmed(stats: Sequence[Any]) -> bool:
    """A single measurement (``passes=1``) stands as it is; several need a confirmed best pass."""
    return len(stats) < 2 or confirmed([s.median_ms for s in stats])


def network_noise(per: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """:func:`nagkit.latency.passes.pass_noise` of each network's pass medians."""
    return pass_noise([[s.median_ms for s in st] for st in per])


def _combine_passes(stats: Sequence[Any]):
    """The recorded pass's statistics (:func:`nagkit.latency.passes.pick`: the best, once confirmed),
    marked noisy when no other pass confirms the best."""
    from dataclasses import replace as dc_replace

    return dc_replace(stats[pick([s.median_ms for s in stats])], noisy=not _confirmed(stats))


def calibrate(table: LatencyTable, device, space: SearchSpace, n: int | None = None, seed: int = 1, *,
              resolutions: Sequence[int] | None = None, cfg=None, cache_dir=None,
              progress: bool = True, jobs: int | None = None, exclude: Sequence[Arch] = (),
              group_by: str | None = None, shrinkage: float | None = None, passes: int = NETWORK_PASSES,
              extra_passes: int = EXTRA_PASSES,
              block_pass: Callable[[str], LatencyTable] | None = None, budget=None, journal=None):
    """Measure ``n`` random networks (none of ``exclude``; ``None``: the default count, what the
    default scheme needs) and fit, hold out and adopt-or-not the calibration
    (:func:`nagkit.latency.calibration.calibrate_measured`). Returns the
    :class:`~nagkit.latency.calibration.CalibrationResult`; ``result.apply(table)`` is the table
    to save. Too few networks for the scheme are refused before anything is measured.

    ``block_pass(when)``, when given, measures the table's blocks once more and returns the table
    rebuilt (:func:`nagkit.latency.profiler.spread_block_pass`); it is called after the networks'
    conversions and again after their passes, and the fit is made on the table it last returned
    (apply the result to that table, not to ``table``). ``budget``: the
    :class:`~nagkit.latency.budget.TimeBudget` the measurements keep to; ``journal``: the
    :class:`~nagkit.latency.net_journal.NetworkJournal` they are kept in (:func:`measure_networks`)."""
    from nagkit.latency.calibration import DEFAULT_GROUP_BY, DEFAULT_SHRINKAGE, calibrate_measured, plan_calibration
    from nagkit.latency.table import utc_now

    res = resolutions or _table_res(table, space)
    plan = plan_calibration(table, space, n, group_by or DEFAULT_GROUP_BY, res)
    archs = random_archs(space, plan.n, seed, res, exclude=exclude)
    table.predict_many(space, archs, calibrated=False)  # fail on a missing key before measuring
    if budget is not None:  # converted while the budget allows (never fewer than the minimum), then measured
        archs = budget.convert_networks(NetworkCache(device.model_format, cache_dir, table.precision), space, archs,
                                        jobs=jobs, progress=progress, passes=passes)
        if len(archs) < plan.n:
            plan = plan_calibration(table, space, len(archs), group_by or DEFAULT_GROUP_BY, res)
    for note in plan.notes:
        log.warning("calibration: %s", note)
    if block_pass is not None:
        NetworkCache(device.model_format, cache_dir, table.precision).prepare(space, archs, jobs=jobs,
                                                                              progress=progress)
        table = block_pass("after the calibration networks' conversions")
    stats, cinfo = measure_networks(device, space, archs, cfg=cfg, cache_dir=cache_dir, progress=progress,
                                    label="calibrate", jobs=jobs, passes=passes, extra_passes=extra_passes,
                                    precision=table.precision, budget=budget, journal=journal)
    meas = np.array([s.median_ms for s in stats])
    if block_pass is not None:
        table = block_pass("after the calibration networks' passes")
    result = calibrate_measured(
        table, space, archs, meas, plan=plan, shrinkage=DEFAULT_SHRINKAGE if shrinkage is None else shrinkage,
        noise=cinfo["noise"], resolutions=res, seed=seed, device=str(device.spec), measured_when=utc_now(),
        noisy_measurements=int(sum(bool(s.noisy) for s in stats)), passes=passes,
        measure_config=cfg.to_dict() if cfg is not None else "device default")
    log.info("%s", result.summary())
    return result


def _table_res(table: LatencyTable, space: SearchSpace) -> list[int]:
    res = [r for r in table.resolutions if r in space.resolutions]
    if not res:
        raise BadInputError(f"the table's resolutions {list(table.resolutions)} are not in space {space.name!r}")
    return res


LEVEL_ANCHORS = 10  # the table's own calibration networks `lut validate` measures again (decisions 32)
LEVEL_LIMIT_PCT = 2.5  # a shift of the machine's level beyond this alone moves networks out of ±5%


def level_anchors(table: LatencyTable, space: SearchSpace, n: int,
                  exclude: Sequence[Arch] = ()) -> tuple[list[Arch], list[float], str | None]:
    """The first ``n`` networks the table's calibration measured (none of ``exclude``), their
    recorded medians and when they were measured; empty for a table that records none."""
    from nagkit.latency.calibration import recorded_fit

    rec = recorded_fit(table) if n > 0 else None
    if rec is None:
        return [], [], None
    skip = {str(a) for a in exclude}  # a recorded time that is not a positive number is no reference
    pairs = [(space.parse_arch(a), ms) for a, ms in zip(rec[0], rec[1])
             if a not in skip and math.isfinite(ms) and ms > 0][:n]
    return [a for a, _ in pairs], [ms for _, ms in pairs], rec[2]


def level_shift(now_ms: Sequence[float], recorded_ms: Sequence[float], recorded_when: str | None = None
                ) -> dict[str, Any] | None:
    """How much slower (+) or faster (-) the same networks run now than when they were recorded:
    the median of their ratios, in %, and whether it exceeds :data:`LEVEL_LIMIT_PCT`."""
    if not len(now_ms):
        return None
    r = (np.asarray(now_ms, dtype=float) / np.asarray(recorded_ms, dtype=float) - 1) * 100
    med = float(np.median(r))
    return {"anchors": len(r), "median_pct": med, "min_pct": float(r.min()), "max_pct": float(r.max()),
            "limit_pct": LEVEL_LIMIT_PCT, "shifted": abs(med) > LEVEL_LIMIT_PCT, "recorded_when": recorded_when}


def validate(table: LatencyTable, device, space: SearchSpace, n: int, seed: int = 0, *,
             resolutions: Sequence[int] | None = None, cfg=None, cache_dir=None,
             progress: bool = True, jobs: int | None = None, passes: int = NETWORK_PASSES,
             extra_passes: int = EXTRA_PASSES, anchors: int = LEVEL_ANCHORS, budget=None) -> dict[str, Any]:
    """Measure ``n`` random networks end to end (as :func:`measure_networks`: interleaved passes,
    noisy ones measured again) and compare them with the table's predictions.

    In the same passes, the first ``anchors`` of the networks the table's calibration measured
    are measured again: their ratio to what was recorded (:func:`level_shift`) says whether the
    machine runs at the level the table was made at. A machine whose host changes state (a VM)
    can move by more than ±5% allows between profiling and validation; the verdict names it. The
    noise record counts the anchors among the networks measured.

    ``budget`` (a :class:`~nagkit.latency.budget.TimeBudget`, ``--time-budget``; None: no limit):
    the plan is said before any work, with its estimate (no budget: the estimate alone). Converting
    every network and measuring each once is the minimum: a budget below it is refused before any
    conversion (exit 2, naming it). When the conversions run slower than planned, they stop where
    the networks converted so far still get their first pass, and the report validates on those
    (``samples`` against ``samples_asked``, a note, and the verdict on fewer networks); further
    passes and extra passes run while the time left allows (decisions 47)."""
    from nagkit.latency.budget import TimeBudget

    if anchors < 0:
        raise BadInputError(f"anchors must be >= 0, got {anchors}", hint="--anchors 0 measures none")
    archs = random_archs(space, n, seed, resolutions or _table_res(table, space))
    table.predict_many(space, archs, calibrated=False)  # fail on a missing key before measuring
    ref, ref_ms, ref_when = level_anchors(table, space, anchors, exclude=archs)
    budget = budget if budget is not None else TimeBudget(None)
    cache = NetworkCache(device.model_format, cache_dir, table.precision)
    nets = [*archs, *ref]
    _plan_validation(budget, device, cache, cache_dir, space, nets, passes, extra_passes, table.precision)
    budget.check_minimum("validation", "validate fewer --samples")  # before any conversion: nothing written
    budget.announce()

    ready = set(budget.convert_while_time_allows(cache, space, nets, jobs=jobs, progress=progress,
                                                 measures_for=lambda k: k, label="validate"))  # pass 1 each
    if len(ready) < len(nets):
        budget.notes.append(f"the conversions were stopped for time: {len(ready)} of {len(nets)} networks "
                            "converted and measured")
        keep_r = [(a, ms) for a, ms in zip(ref, ref_ms) if a in ready]
        archs, ref, ref_ms = [a for a in archs if a in ready], [a for a, _ in keep_r], [ms for _, ms in keep_r]
        nets = [*archs, *ref]
        budget.grow("network pass 1", len(nets))
        budget.grow("network passes 2+", len(nets) * (passes - 1))
        if not archs:
            from nagkit.latency.budget_text import suggest

            raise BadInputError("the time budget ran out before any network to validate was converted",
                                hint=f"give --time-budget {suggest(2 * budget.minimum_s())} or more, "
                                     "or fewer --samples")
    else:
        budget.finish("convert networks")
    stats, cinfo = measure_networks(device, space, nets, cfg=cfg, cache_dir=cache_dir, progress=progress,
                                    label="validate", jobs=jobs, passes=passes, extra_passes=extra_passes,
                                    precision=table.precision, budget=budget)
    budget.remember()
    level = level_shift([s.median_ms for s in stats[len(archs):]], ref_ms, ref_when)
    rep = validation_report(table, space, archs, stats[:len(archs)], device=str(device.spec), seed=seed,
                            network_cache=cinfo, level=level, other_cpu=other_cpu(table, device))
    rep["samples_asked"] = n
    rep["time_budget"] = _record(budget)
    return rep


def _record(budget) -> dict[str, Any]:
    """The budget's record, its advice in a validation's terms (a validation does not resume:
    a rerun with more time measures again, from the cached conversions)."""
    from nagkit.latency.budget_text import fmt_s, suggest

    rec = budget.record()
    miss = rec["skipped_for_time"]
    if miss:
        extra = sum(m["estimate_s"] for m in miss)
        what = ", ".join(f"{m['phase']} ({m['items']})" for m in miss)
        rec["more_time"] = (f"about {fmt_s(extra)} more would add: {what}: rerun with "
                            f"--time-budget {suggest(rec['elapsed_s'] + extra)}")
    else:
        rec["more_time"] = None
    rec["resume_with"] = None
    return rec


def _plan_validation(budget, device, cache: NetworkCache, cache_dir, space: SearchSpace, nets: Sequence[Arch],
                     passes: int, extra_passes: int, precision: str) -> None:
    """The phases of a validation: conversions and pass 1 required; passes 2+ (priority 1) and the
    extra passes (2) while the time allows. Rates: those the last profile or validation of this
    device on this host observed (kept beside the block cache, as a profile keeps them)."""
    import platform

    from nagkit.latency.budget_rates import RATES_FILE, rates_key, remembered_rates
    from nagkit.latency.journal import device_identity

    root = Path(cache_dir) if cache_dir else default_cache_dir()  # a BlockCache's root
    budget.memory = (root / RATES_FILE, rates_key(device_identity(device, precision), platform.node()))
    # validation has no default budget: it measures what it is asked (with its estimate)
    budget.resolve(None, device.model_format, remembered_rates(*budget.memory))
    uncached = len(cache.uncached(space, nets))
    k = len(nets)
    budget.add("convert networks", "convert_net_s", uncached, 0)
    budget.add("network pass 1", "measure_net_s", k, 0)
    budget.add("network passes 2+", "measure_net_s", k * (passes - 1), 1)
    extra = 0 if passes < 2 else math.ceil(0.2 * k) * min(extra_passes, 2)
    budget.add("network extra passes", "measure_net_s", extra, 2)


def other_cpu(table: LatencyTable, device) -> str | None:
    """For a CPU device whose table was measured on another CPU (:func:`nagkit.devices.cpuinfo.same_cpu`):
    words that name both; else None."""
    from nagkit.devices.cpuinfo import describe_cpu, same_cpu

    if getattr(device, "kind", None) != "cpu":
        return None
    theirs, mine = table.device or {}, device.info() or {}
    return None if same_cpu(theirs, mine) else f"the table was measured on {describe_cpu(theirs)}, this is {describe_cpu(mine)}"
