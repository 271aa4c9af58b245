"""`nagkit generate --sweep N`: the accuracy frontier over latency with other limits held fixed.

N budgets evenly spaced from the fastest network the limits admit to the slowest network of the
space; for each, the generator's best arch within the budget and every limit (zero accuracy
queries to choose it), beside the same sweep with the latency budget alone over the space's
whole range: where the two curves part, a limit binds. Accuracy is the workspace source's,
shown only (free for a predictor, a cached value for a supernet; ``None`` otherwise), with the
evaluator's score beside it. ``plot_sweep`` draws both curves.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError

MAX_SWEEP = 100


def sweep(workspace, n: int, limits, *, samples: int | None = None, seed: int = 0, display: bool = True) -> dict[str, Any]:
    """Both curves (``latency only`` and ``with limits``) as rows of budget, arch, latency,
    accuracy (or None), evaluator score, params, MACs, peak kB and the binding limit."""
    from nagkit.app.workspace import load_workspace

    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_SWEEP:
        raise BadInputError(f"--sweep {n!r}: give a number of budgets in 2..{MAX_SWEEP}")
    if not limits.active:
        raise BadInputError("--sweep compares the frontier with and without a limit; give one of --max-params, "
                            "--max-size-mb, --max-macs or --max-peak-kb", hint="e.g. nagkit generate --sweep 8 "
                                                                                "--max-params 700K")
    ws = load_workspace(workspace)
    model = ws.nag_model(with_source=display)
    precision = ws.latency_table.precision
    lo_all, hi = model.range_ms
    lo = model.constraints(limits, precision=precision).fastest_ms()  # none admitted: exit 1, naming the limits
    curves = {}
    for name, start, lim in (("latency only", lo_all, None), ("with limits", lo, limits)):
        budgets = [float(b) for b in np.linspace(start, hi, n)]
        results = model.generate(budgets, samples=samples, seed=seed, top=1, display=display, limits=lim,
                                 precision=precision)
        curves[name] = [_row(model.space, r, precision) for r in results]
    return {"workspace": ws.name, "space": ws.space.name, "limits": limits.to_dict(), "precision": precision,
            "range_ms": [lo_all, hi], "curves": curves}


def _row(space, r, precision: str) -> dict[str, Any]:
    from nagkit.space.resources import ACTIVATION_BYTES

    b, c = r.best, r.extra.get("constraints")
    peak = None if precision == "int8" else space.peak_activation(b.arch) * ACTIVATION_BYTES[precision] / 1000
    return {"budget_ms": r.budget_ms, "arch": str(b.arch), "latency_ms": b.latency_ms, "accuracy": b.accuracy,
            "evaluator_score": b.evaluator_score, "params": space.params(b.arch), "macs": space.macs(b.arch),
            "peak_kb": peak, "binding": c["binding"] if c else "latency_ms"}


def plot_sweep(result: dict[str, Any], path: str | os.PathLike) -> Path:
    """The evaluator's score (an accuracy estimate) of the chosen arch against its table latency,
    one curve per sweep, with the source's accuracy as circles where known; written atomically
    as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (name, rows), color in zip(result["curves"].items(), ("0.45", "C3")):
        rows = sorted(rows, key=lambda r: r["latency_ms"])
        lat = [r["latency_ms"] for r in rows]
        ax.plot(lat, [r["evaluator_score"] for r in rows], color=color, lw=1.2, marker=".", label=f"{name} (evaluator)")
        known = [(r["latency_ms"], 100 * r["accuracy"]) for r in rows if r["accuracy"] is not None]
        if known:
            ax.scatter(*zip(*known), color=color, marker="o", facecolors="none", zorder=3, label=f"{name} (source)")
    lim = ", ".join(f"{k} {v:g}" for k, v in result["limits"].items() if v is not None)
    ax.set_title(f"{result['workspace']}: best arch per budget ({lim})", fontsize=10)
    ax.set_xlabel("latency (ms, latency table)")
    ax.set_ylabel("accuracy (%): evaluator's estimate; circles: the source's")
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
