"""The predicted-against-measured scatter of a :func:`nagkit.latency.validate.validate` report
(``nagkit lut validate --plot``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


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
