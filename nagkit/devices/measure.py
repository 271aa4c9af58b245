"""The measurement loop shared by every runner: warm up, then sample until the timing is stable.

A runner hands :func:`run_measurement` a ``sample`` callable that runs the model once (or one
timing window) and returns its duration in milliseconds. The loop

1. warms up until it has done ``cfg.warmup_runs`` runs **and** spent ``cfg.warmup_s`` seconds;
2. samples until it has ``cfg.min_runs`` samples **and** ``cfg.min_time_s`` seconds **and**
   IQR/median < ``cfg.target_rel_iqr``, or until ``cfg.max_runs`` / ``cfg.max_time_s``;
3. returns :class:`~nagkit.devices.base.LatencyStats`, marked ``noisy`` (with a warning
   logged) when it stopped at a cap with IQR/median still at or above the target.

Wall time for the loop's own bookkeeping comes from ``clock`` (``time.perf_counter`` by
default) so that tests can drive it with a fake clock. :func:`wall_timed` turns a plain
"run once" callable into a ``sample`` callable timed by that clock.

The loop imports nothing heavy, so the CPU worker process can use it before any runtime
is loaded.
"""

from __future__ import annotations

import bisect
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from nagkit.devices.base import LatencyStats, MeasureConfig

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class LoopResult:
    """What the loop did, beside the samples: for logs, tests and provenance."""

    samples_ms: tuple[float, ...]
    warmup_runs: int
    warmup_s: float
    elapsed_s: float
    stop_reason: str  # "converged", "max_runs" or "max_time"
    rel_iqr: float

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"


def quantile_sorted(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted list (numpy's default method)."""
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    frac = pos - lo
    return xs[lo] + (xs[hi] - xs[lo]) * frac


def rel_iqr_sorted(xs: list[float]) -> float:
    """IQR / median of a sorted list; ``inf`` for an empty list or a zero median."""
    if not xs:
        return math.inf
    med = quantile_sorted(xs, 0.5)
    if med <= 0:
        return math.inf
    return (quantile_sorted(xs, 0.75) - quantile_sorted(xs, 0.25)) / med


def validate_config(cfg: MeasureConfig) -> MeasureConfig:
    """Reject settings the loop cannot honour (negative counts, caps below the minimums)."""
    from nagkit.errors import BadInputError, short_repr

    problems = []
    for name in ("warmup_runs", "min_runs", "max_runs"):
        v = getattr(cfg, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            problems.append(f"{name}={short_repr(v)} (must be an integer >= 0)")
    for name in ("warmup_s", "min_time_s", "max_time_s", "target_rel_iqr"):
        v = getattr(cfg, name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            problems.append(f"{name}={short_repr(v)} (must be a finite number >= 0)")
    if not problems:
        if cfg.max_runs < 1:
            problems.append(f"max_runs={cfg.max_runs} (must be >= 1)")
        if cfg.max_runs < cfg.min_runs:
            problems.append(f"max_runs={cfg.max_runs} < min_runs={cfg.min_runs}")
        if cfg.max_time_s < cfg.min_time_s:
            problems.append(f"max_time_s={cfg.max_time_s} < min_time_s={cfg.min_time_s}")
    if problems:
        raise BadInputError(
            "bad measurement settings: " + "; ".join(problems),
            hint="fix the `measure:` block of the device profile or the MeasureConfig you pass",
        )
    return cfg


def wall_timed(run_once: Callable[[], object], clock: Clock = time.perf_counter) -> Callable[[], float]:
    """A ``sample`` callable that times ``run_once`` with ``clock`` (seconds) and returns ms."""

    def sample() -> float:
        t0 = clock()
        run_once()
        return (clock() - t0) * 1e3

    return sample


def run_loop(sample: Callable[[], float], cfg: MeasureConfig | None = None, *, clock: Clock = time.perf_counter) -> LoopResult:
    """Warm up, then sample until the stopping rule holds or a cap is hit (see the module doc)."""
    cfg = validate_config(cfg or MeasureConfig())

    # 1. Warm-up: by count AND by time (whichever takes longer), never past the time cap.
    t0 = clock()
    warm = 0
    while warm < cfg.warmup_runs or (clock() - t0) < cfg.warmup_s:
        sample()
        warm += 1
        if clock() - t0 >= cfg.max_time_s:
            break
    warm_s = clock() - t0

    # 2. Sampling. A sorted copy gives the IQR in O(1) per check, so every run is checked.
    samples: list[float] = []
    ordered: list[float] = []
    start = clock()
    reason = ""
    while True:
        ms = float(sample())
        if not math.isfinite(ms) or ms < 0:
            from nagkit.errors import DeviceError

            raise DeviceError(f"the runner returned an invalid sample: {ms!r} ms (after {len(samples)} good ones)")
        samples.append(ms)
        bisect.insort(ordered, ms)
        n = len(samples)
        elapsed = clock() - start
        if n >= cfg.min_runs and elapsed >= cfg.min_time_s and rel_iqr_sorted(ordered) < cfg.target_rel_iqr:
            reason = "converged"
            break
        if n >= cfg.max_runs:
            reason = "max_runs"
            break
        if elapsed >= cfg.max_time_s:
            reason = "max_time"
            break
    return LoopResult(
        samples_ms=tuple(samples), warmup_runs=warm, warmup_s=warm_s, elapsed_s=clock() - start,
        stop_reason=reason, rel_iqr=rel_iqr_sorted(ordered),
    )


def stats_from_loop(res: LoopResult, cfg: MeasureConfig | None = None, label: str = "") -> LatencyStats:
    """LatencyStats from a loop result; warns when the result stayed noisy."""
    cfg = cfg or MeasureConfig()
    # Noisy means the spread never came under the target. Stopping at max_runs with a tight
    # spread (tiny blocks reach 1000 runs in milliseconds) is not noisy.
    noisy = not (res.rel_iqr < cfg.target_rel_iqr)
    if not noisy and not res.converged:
        log.debug("stopped at %s after %d runs / %.3f s (IQR/median %.1f%%)%s", res.stop_reason,
                  len(res.samples_ms), res.elapsed_s, 100 * res.rel_iqr, f" for {label}" if label else "")
    if noisy:
        what = f" for {label}" if label else ""
        log.warning(
            "noisy latency%s: stopped at %s after %d runs / %.2f s with IQR/median %.1f%% (target %.1f%%);"
            " close other programs, pin cores, or raise max_runs/max_time_s",
            what, res.stop_reason, len(res.samples_ms), res.elapsed_s, 100 * res.rel_iqr, 100 * cfg.target_rel_iqr,
        )
        if len(res.samples_ms) < cfg.min_runs:
            log.warning("only %d of min_runs=%d runs fit in max_time_s=%.2f s%s",
                        len(res.samples_ms), cfg.min_runs, cfg.max_time_s, what)
    return LatencyStats.from_samples(res.samples_ms, noisy=noisy, target_rel_iqr=cfg.target_rel_iqr)


def run_measurement(
    sample: Callable[[], float], cfg: MeasureConfig | None = None, *, clock: Clock = time.perf_counter, label: str = "",
) -> LatencyStats:
    """Measure with ``sample`` (returns one duration in ms) and return the statistics."""
    return stats_from_loop(run_loop(sample, cfg, clock=clock), cfg, label)


def measure_callable(
    run_once: Callable[[], object], cfg: MeasureConfig | None = None, *, clock: Clock = time.perf_counter, label: str = "",
) -> LatencyStats:
    """Measure a plain "run one inference" callable, timed with ``clock``."""
    return run_measurement(wall_timed(run_once, clock), cfg, clock=clock, label=label)
