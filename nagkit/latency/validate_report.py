"""What a validation found: the fidelity figures, the report of :func:`nagkit.latency.validate.validate`
and its text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nagkit.latency.table import LatencyTable
from nagkit.space.arch import Arch
from nagkit.space.space import SearchSpace


def fidelity(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """MAPE, fraction within ±5%/±10%, Spearman ρ, mean signed and max absolute error (%)."""
    from scipy.stats import spearmanr

    err = (pred - meas) / meas * 100.0
    rho = float(spearmanr(pred, meas).statistic) if len(pred) > 2 else math.nan
    return {"mape": float(np.mean(np.abs(err))), "within_5pct": float(np.mean(np.abs(err) <= 5)),
            "within_10pct": float(np.mean(np.abs(err) <= 10)), "spearman": rho,
            "mean_signed_error_pct": float(np.mean(err)), "max_abs_error_pct": float(np.max(np.abs(err)))}


def validation_report(table: LatencyTable, space: SearchSpace, archs: Sequence[Arch], stats: Sequence[Any], *,
                      device: str, seed: int | None = None, network_cache: dict | None = None,
                      level: dict | None = None, other_cpu: str | None = None) -> dict[str, Any]:
    """Compare measured ``stats`` (one LatencyStats per arch) with the table's predictions;
    ``verdict`` says whether ±5% holds for 95% of them, and whether the table's being another
    CPU's (``other_cpu``, :func:`other_cpu`), this machine's measurement noise
    (``network_cache["noise"]``, when measured) or a shift of its level since the table was made
    (``level``, :func:`level_shift`) lets it."""
    from nagkit.latency.calibration import verdict

    n = len(archs)
    cinfo = network_cache
    raw = table.predict_many(space, archs, calibrated=False)
    meas = np.array([s.median_ms for s in stats])
    cal = table.calibration
    calp = table.predict_many(space, archs, calibrated=True) if cal is not None else None
    if level is not None:  # a diagnosis, not the fidelity: the same networks had the machine been at the table's level
        at = fidelity(calp if calp is not None else raw, meas / (1 + level["median_pct"] / 100))
        level = {**level, "at_table_level": {"within_5pct": at["within_5pct"], "mape": at["mape"],
                                             "mean_signed_error_pct": at["mean_signed_error_pct"]}}
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
        "noise": (cinfo or {}).get("noise"),
        "level": level, "other_cpu": other_cpu,
        "verdict": verdict((fidelity(calp, meas) if calp is not None else fidelity(raw, meas))["within_5pct"],
                           (cinfo or {}).get("noise"), level, other_cpu, device),
        "network_cache": cinfo, "archs": rows,
        "profile_budget": table.provenance.get("time_budget"),  # what the profile said it reached
    }


def report_text(r: dict[str, Any]) -> str:
    """The human form of a :func:`validate` report: a row per network, the fidelity, the noise,
    the level and the verdict."""
    lines = [f"{'arch':<70} {'meas':>8} {'raw':>8} {'err%':>6}" + (f" {'cal':>8} {'err%':>6}" if r["calibrated"] else "")]
    for a in r["archs"]:
        s = f"{a['arch'][:70]:<70} {a['measured_ms']:8.3f} {a['raw_ms']:8.3f} {a['raw_error_pct']:6.1f}"
        if "calibrated_ms" in a:
            s += f" {a['calibrated_ms']:8.3f} {a['calibrated_error_pct']:6.1f}"
        lines.append(s)
    for name in ("raw", "calibrated"):
        m = r[name]
        if m:
            lines.append(f"{name:<10} MAPE {m['mape']:.2f}%  within ±5% {m['within_5pct']:.0%}  "
                         f"±10% {m['within_10pct']:.0%}  Spearman {m['spearman']:.3f}  "
                         f"bias {m['mean_signed_error_pct']:+.2f}%")
    nz = r.get("noise") or {}
    if nz.get("single_measurement_sd_pct") is not None:
        best = (f", the best of its passes by {nz['best_of_sd_pct']:.2f}%"
                if nz.get("best_of_sd_pct") is not None else "")
        lines.append(f"noise      one pass of a network varies by {nz['single_measurement_sd_pct']:.2f}% (sd) "
                     f"here{best}; {nz['remeasured']} network(s) measured again, {nz['still_noisy']} "
                     "stayed noisy")
    lv = r.get("level")
    if lv:
        lines.append(f"level      the table's own {lv['anchors']} calibration networks run {lv['median_pct']:+.2f}% "
                     f"(median; {lv['min_pct']:+.1f}% to {lv['max_pct']:+.1f}%) against when they were measured"
                     f" (limit ±{lv['limit_pct']}%)"
                     + (f"; at the table's level {lv['at_table_level']['within_5pct']:.0%} would be within ±5%"
                        if lv.get("at_table_level") else ""))
    if r.get("other_cpu"):
        lines.append(f"machine    {r['other_cpu']}")
    tb = r.get("time_budget")
    if tb:
        from nagkit.latency.budget_text import budget_lines

        asked = r.get("samples_asked", r["samples"])
        lines.append(f"time       {budget_lines(tb)[0]}" + (f"; {r['samples']} of {asked} networks validated"
                                                           if r["samples"] < asked else ""))
        if tb.get("more_time"):
            lines.append(f"more time  {tb['more_time']}")
    pb = r.get("profile_budget")
    if pb:  # the profile's own claim, beside what was measured now
        from nagkit.latency.budget_text import budget_lines

        fid = next((ln for ln in budget_lines(pb) if ln.startswith("reached")), None)
        lines.append(f"profiled   {budget_lines(pb)[0]}" + (f"; it {fid[len('reached    '):]}" if fid else ""))
    lines.append(("" if r["verdict"]["meets_5pct"] else "WARNING: ") + r["verdict"]["text"])
    if r.get("plot"):
        lines.append(f"plot -> {r['plot']}")
    return "\n".join(lines)
