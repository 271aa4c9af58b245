"""Whole-network measurements: calibration of a table and end-to-end validation.

Both measure random static networks (``StaticNet.from_arch``, converted to the device's model
format and cached by arch + converter versions) and compare them with the table's prediction.
``calibrate`` fits the grouped calibration of :mod:`nagkit.latency.calibration` (per-group
multipliers of the block latencies plus a per-network term); ``validate`` reports, per arch and in
aggregate, the raw and calibrated errors: MAPE, the fraction within ±5% and ±10%, Spearman ρ.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError
from nagkit.latency.blocks import FORMATS, default_cache_dir
from nagkit.runtimes.versions import format_versions
from nagkit.latency.progress import progress_bar
from nagkit.latency.table import LatencyTable
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

    def __init__(self, fmt: str, cache_dir: str | Path | None = None):
        self.fmt = fmt
        self.versions = format_versions(fmt) if fmt != "torch" else {}
        tag = hashlib.sha256(repr(sorted(self.versions.items())).encode()).hexdigest()[:10]
        root = Path(cache_dir) if cache_dir else default_cache_dir().parent
        self.dir = root / "nets" / f"{fmt}-{tag}"
        self.hits = self.misses = 0

    def path_for(self, space: SearchSpace, arch: Arch) -> Path:
        sh = hashlib.sha256(repr(sorted(space.to_dict().items())).encode()).hexdigest()[:8]
        return self.dir / f"{space.name}-{sh}" / f"{arch}{FORMATS[self.fmt]}"

    def prepare(self, space: SearchSpace, archs: Sequence[Arch], seed: int = 0, jobs: int | None = None,
                progress: bool = True) -> None:
        """Convert the networks not cached yet, ``jobs`` processes at once, before any timing."""
        from nagkit.latency.blocks import convert_many

        if self.fmt == "torch":
            return
        todo = [a for a in dict.fromkeys(archs) if not self._cached(self.path_for(space, a))]
        if not todo:
            return
        self.path_for(space, todo[0]).parent.mkdir(parents=True, exist_ok=True)
        tasks = [("net", (space.to_dict(), str(a), seed), self.fmt, str(self.path_for(space, a))) for a in todo]
        convert_many(tasks, jobs=jobs, progress=progress, label="convert networks")
        self.misses += len(todo)
        self.hits -= len(todo)

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
        from nagkit.latency.blocks import convert

        net = StaticNet.from_arch(space, arch, seed=seed)
        return convert(net, (1, space.in_channels, arch.r, arch.r), self.fmt, p)


def measure_networks(device, space: SearchSpace, archs: Sequence[Arch], *, cfg=None,
                     cache_dir: str | Path | None = None, progress: bool = True, label: str = "measure",
                     jobs: int | None = None, passes: int = 1):
    """LatencyStats of each arch measured end to end on ``device``.

    With ``passes`` > 1 every arch is measured once per pass over the whole list (so a burst of
    load elsewhere hits one pass of an arch, not all of them); its ``median_ms`` is then the
    median of its per-pass medians, the other statistics come from the pooled samples."""
    if passes < 1:
        raise BadInputError(f"passes must be >= 1, got {passes}")
    cache = NetworkCache(device.model_format, cache_dir)
    cache.prepare(space, archs, jobs=jobs, progress=progress)
    per: list[list] = [[] for _ in archs]
    with progress_bar(progress, len(archs) * passes, 0, str(device.spec), label) as advance:
        for _ in range(passes):
            for i, a in enumerate(archs):
                model = cache.get(space, a)
                shape = (1, space.in_channels, a.r, a.r)
                per[i].append(device.measure(model, shape, cfg) if cfg is not None else device.measure(model, shape))
                advance(str(a))
    out = [st[0] if len(st) == 1 else _combine_passes(st) for st in per]
    return out, {"dir": str(cache.dir), "hits": cache.hits, "misses": cache.misses, "passes": passes}


def _combine_passes(stats: Sequence[Any]):
    """One LatencyStats from several passes: median of the pass medians, pooled spread."""
    from dataclasses import replace as dc_replace

    from nagkit.devices.base import LatencyStats

    pooled = [x for s in stats for x in s.samples_ms] or [s.median_ms for s in stats]
    st = LatencyStats.from_samples(pooled)
    return dc_replace(st, median_ms=float(np.median([s.median_ms for s in stats])),
                      noisy=sum(bool(s.noisy) for s in stats) * 2 > len(stats))


def calibrate(table: LatencyTable, device, space: SearchSpace, n: int, seed: int = 1, *,
              resolutions: Sequence[int] | None = None, cfg=None, cache_dir=None,
              progress: bool = True, jobs: int | None = None, exclude: Sequence[Arch] = (),
              group_by: str | None = None, shrinkage: float | None = None, passes: int = 1) -> LatencyTable:
    """Measure ``n`` random networks (none of ``exclude``) and return the table with a fitted
    grouped calibration (:func:`nagkit.latency.calibration.fit_grouped`)."""
    from nagkit.latency.calibration import DEFAULT_GROUP_BY, DEFAULT_SHRINKAGE, fit_grouped
    from nagkit.latency.table import utc_now

    archs = random_archs(space, n, seed, resolutions or _table_res(table, space), exclude=exclude)
    table.predict_many(space, archs, calibrated=False)  # fail on a missing key before measuring
    stats, cinfo = measure_networks(device, space, archs, cfg=cfg, cache_dir=cache_dir,
                                    progress=progress, label="calibrate", jobs=jobs, passes=passes)
    meas = np.array([s.median_ms for s in stats])
    cal = fit_grouped(table, space, archs, meas, group_by=group_by or DEFAULT_GROUP_BY,
                      shrinkage=DEFAULT_SHRINKAGE if shrinkage is None else shrinkage, seed=seed,
                      device=str(device.spec), measured_when=utc_now(),
                      noisy_measurements=int(sum(bool(s.noisy) for s in stats)), passes=passes)
    log.info("calibration (%s, %d groups): fit MAPE %.2f%%, leave-one-out MAPE %s, raw MAPE %.2f%%",
             cal.group_by, len(cal.group_scales), cal.fit_error,
             f"{cal.details['loo_mape']:.2f}%" if "loo_mape" in cal.details else "n/a", cal.details["raw_mape"])
    return table.with_calibration(cal)


def _table_res(table: LatencyTable, space: SearchSpace) -> list[int]:
    res = [r for r in table.resolutions if r in space.resolutions]
    if not res:
        raise BadInputError(f"the table's resolutions {list(table.resolutions)} are not in space {space.name!r}")
    return res


def fidelity(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """MAPE, fraction within ±5%/±10%, Spearman ρ, mean signed and max absolute error (%)."""
    from scipy.stats import spearmanr

    err = (pred - meas) / meas * 100.0
    rho = float(spearmanr(pred, meas).statistic) if len(pred) > 2 else math.nan
    return {"mape": float(np.mean(np.abs(err))), "within_5pct": float(np.mean(np.abs(err) <= 5)),
            "within_10pct": float(np.mean(np.abs(err) <= 10)), "spearman": rho,
            "mean_signed_error_pct": float(np.mean(err)), "max_abs_error_pct": float(np.max(np.abs(err)))}


def validate(table: LatencyTable, device, space: SearchSpace, n: int, seed: int = 0, *,
             resolutions: Sequence[int] | None = None, cfg=None, cache_dir=None,
             progress: bool = True, jobs: int | None = None, passes: int = 1) -> dict[str, Any]:
    """Measure ``n`` random networks end to end and compare with the table's predictions."""
    archs = random_archs(space, n, seed, resolutions or _table_res(table, space))
    table.predict_many(space, archs, calibrated=False)  # fail on a missing key before measuring
    stats, cinfo = measure_networks(device, space, archs, cfg=cfg, cache_dir=cache_dir,
                                    progress=progress, label="validate", jobs=jobs, passes=passes)
    return validation_report(table, space, archs, stats, device=str(device.spec), seed=seed, network_cache=cinfo)


def validation_report(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], stats: Sequence[Any], *,
                      device: str, seed: int | None = None, network_cache: dict | None = None) -> dict[str, Any]:
    """Compare measured ``stats`` (one LatencyStats per arch) with the table's predictions."""
    n = len(archs)
    cinfo = network_cache
    raw = table.predict_many(space, archs, calibrated=False)
    meas = np.array([s.median_ms for s in stats])
    cal = table.calibration
    calp = table.predict_many(space, archs, calibrated=True) if cal is not None else None
    rows = []
    for i, a in enumerate(archs):
        row = {"arch": str(a), "raw_ms": float(raw[i]), "measured_ms": float(meas[i]),
               "measured_p10_ms": stats[i].p10_ms, "measured_p90_ms": stats[i].p90_ms,
               "noisy": stats[i].noisy, "raw_error_pct": float((raw[i] - meas[i]) / meas[i] * 100)}
        if calp is not None:
            row["calibrated_ms"] = float(calp[i])
            row["calibrated_error_pct"] = float((calp[i] - meas[i]) / meas[i] * 100)
        rows.append(row)
    overlap = None
    if cal is not None and "fit_archs" in cal.details:
        overlap = len(set(cal.details["fit_archs"]) & {str(a) for a in archs})
    return {
        "lut": str(table.path) if table.path else None, "device": device,
        "space": space.name, "samples": n, "seed": seed,
        "resolutions": sorted({a.r for a in archs}),
        "raw": fidelity(raw, meas),
        "calibrated": fidelity(calp, meas) if calp is not None else None,
        "calibration": cal.to_dict() if cal is not None else None,
        "calibration_overlap": overlap,
        "noisy_measurements": int(sum(s.noisy for s in stats)),
        "network_cache": cinfo, "archs": rows,
    }


def plot_scatter(report: dict[str, Any], path: str | Path) -> Path:
    """Predicted vs measured scatter (raw and calibrated), written atomically as PNG."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nagkit.io import atomic_write_bytes

    rows = report["archs"]
    meas = np.array([r["measured_ms"] for r in rows])
    fig, ax = plt.subplots(figsize=(5.5, 5.5), dpi=120)
    vals = [meas, np.array([r["raw_ms"] for r in rows])]
    if report.get("calibrated"):
        vals.append(np.array([r["calibrated_ms"] for r in rows]))
    lo, hi = min(float(v.min()) for v in vals) * 0.95, max(float(v.max()) for v in vals) * 1.05
    xs = np.linspace(lo, hi, 10)
    ax.plot(xs, xs, "k-", lw=1, label="y = x")
    ax.fill_between(xs, xs * 0.95, xs * 1.05, color="0.85", label="±5%")
    ax.scatter(meas, [r["raw_ms"] for r in rows], s=14, label=f"raw sum (MAPE {report['raw']['mape']:.1f}%)")
    if report.get("calibrated"):
        ax.scatter(meas, [r["calibrated_ms"] for r in rows], s=14, marker="x",
                   label=f"calibrated (MAPE {report['calibrated']['mape']:.1f}%)")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured latency (ms)")
    ax.set_ylabel("predicted latency (ms)")
    ax.set_title(f"{report['space']} on {report['device']} (n={len(rows)})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
