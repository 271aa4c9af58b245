"""`nagkit compare`: NAG against the baselines across budgets, with plots.

Per budget and method it reports the returned arch's accuracy *from the workspace's accuracy
source* (never the evaluator's score), its table latency, the feasibility rate of 1,000 of the
method's samples (NAG: raw generator samples; baselines: their final proposal distribution
before rejection), wall time and accuracy-source queries. Per method: the hypervolume of its
(latency, accuracy) points, with one reference point shared by all methods.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nagkit.errors import BadInputError

BASELINES = ("evolution", "random", "mnasnet", "tunas", "nsga2")
N_FEAS = 1000


def hypervolume(points: Sequence[tuple[float, float]], ref_lat: float, ref_acc: float) -> float:
    """Area dominated by (latency, accuracy) points (minimise latency, maximise accuracy) up to
    the reference point; accuracy in percentage points x ms."""
    pts = sorted((float(l), float(a)) for l, a in points if l <= ref_lat and a > ref_acc and math.isfinite(a))
    if not pts:
        return 0.0
    area, best = 0.0, ref_acc
    for i, (lat, acc) in enumerate(pts):
        best = max(best, acc)
        nxt = pts[i + 1][0] if i + 1 < len(pts) else ref_lat
        area += (nxt - lat) * (best - ref_acc)
    return area


def _nag_rows(ws, budgets: list[float], source, search_queries: int | None, log) -> tuple[list, dict, Any]:
    """(rows, latency samples per budget, training queries) of the workspace's generator:
    zero-query generation unless ``search_queries`` > 0."""
    import json

    model = ws.nag_model(with_source=False)
    model.source = source
    gen_meta = json.loads(ws.artifact_path("generator").with_suffix(".json").read_text())
    training_queries = gen_meta.get("provenance", {}).get("accuracy_queries")
    q0 = source.queries
    t0 = time.perf_counter()
    results = model.generate(budgets, top=1, search_queries=search_queries or 0)
    wall = time.perf_counter() - t0
    rows, samples = [], {}
    for b, r in zip(budgets, results):
        _, lat = model.sample(r.effective_budget_ms, N_FEAS, seed=12345)
        samples[b] = lat.tolist()
        rows.append({"method": "nag", "budget_ms": b, "arch": str(r.best.arch), "accuracy": r.best.accuracy,
                     "latency_ms": r.best.latency_ms, "feasible_rate": float((lat <= b).mean()),
                     "seconds": r.seconds, "accuracy_queries": r.selection_queries,
                     "display_queries": r.display_queries, "seeds": 1,
                     "settings": {"samples": model.inference.samples, "search_queries": search_queries or 0}})
    log(f"nag: {len(budgets)} budgets in {wall:.2f} s, {source.queries - q0} accuracy queries "
        "(to display the chosen archs' accuracy)")
    return rows, samples, training_queries


def _baseline_rows(ws, method: str, budgets: list[float], source, *, seeds: int, queries: int | None,
                   log) -> tuple[list, dict]:
    """(rows, latency samples of the method's proposals per budget) of one baseline search."""
    from nagkit.search.base import SearchProblem, run_search
    from nagkit.search.factory import make_method
    from nagkit.search.methods import default_stop

    sp, table = ws.space, ws.latency_table
    rows, samples = [], {}
    for b in budgets:
        runs = []
        for s in range(seeds):
            meth = make_method(method, SearchProblem(sp, table, source, b), seed=s)
            res = run_search(meth, default_stop(method, queries))
            runs.append((res, table.predict_many(sp, meth.proposals(N_FEAS))))
        best = max(runs, key=lambda x: -math.inf if x[0].arch is None else x[0].accuracy)[0]
        accs = [r.accuracy for r, _ in runs if r.arch is not None]
        plat = runs[0][1]
        samples[b] = plat.tolist()
        rows.append({"method": method, "budget_ms": b, "arch": str(best.arch) if best.arch else None,
                     "accuracy": float(np.mean(accs)) if accs else math.nan,
                     "accuracy_best_seed": best.accuracy, "accuracy_seeds": accs,
                     "arch_seeds": [str(r.arch) if r.arch is not None else None for r, _ in runs],
                     "latency_ms": best.latency_ms,
                     "feasible_rate": float((plat <= b).mean()),
                     "seconds": float(np.mean([r.seconds for r, _ in runs])),
                     "accuracy_queries": int(np.mean([r.queries for r, _ in runs])), "seeds": seeds,
                     "settings": best.settings})
        log(f"{method} @ {b:g} ms: {rows[-1]['accuracy'] * 100:.2f}% in {rows[-1]['seconds']:.2f} s, "
            f"{rows[-1]['accuracy_queries']} queries")
    return rows, samples


def _summary(rows: list[dict], methods: Sequence[str], budgets: list[float]) -> tuple[dict, float, float]:
    """(per-method hypervolume, time, queries, budget check; reference latency; reference accuracy)."""
    accs_all = [r["accuracy"] for r in rows if r["accuracy"] is not None and math.isfinite(r["accuracy"])]
    ref_acc = (min(accs_all) * 100 - 1.0) if accs_all else 0.0
    ref_lat = max(budgets)
    summary = {}
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        pts = [(r["latency_ms"], r["accuracy"] * 100) for r in mine if r["accuracy"] is not None]
        summary[m] = {"hypervolume": hypervolume(pts, ref_lat, ref_acc),
                      "total_seconds": float(sum(r["seconds"] for r in mine)),
                      "total_queries": int(sum(r["accuracy_queries"] for r in mine)),
                      "all_within_budget": all(r["latency_ms"] <= r["budget_ms"] for r in mine if r["arch"])}
    return summary, ref_lat, ref_acc


def run_compare(ws, budgets: Sequence[float], methods: Sequence[str], *, queries: int | None = None,
                seeds: int = 1, search_queries: int | None = None, plot_dir: str | Path | None = None,
                hist_budget: float | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """NAG and the baselines at every budget, with the same accuracy source: one row per method
    and budget, a summary per method (hypervolume, time, queries) and optional plots."""
    from nagkit.search.factory import method_names

    known = ("nag",) + tuple(method_names())
    for m in methods:
        if m not in known:
            from nagkit.errors import UnknownNameError

            raise UnknownNameError("method", m, known, hint="e.g. --methods nag,evolution,random")
    if seeds < 1:
        raise BadInputError(f"--seeds must be >= 1, got {seeds}")
    log = log or (lambda s: None)
    source = ws.open_accuracy_source()
    budgets = [float(b) for b in budgets]
    rows: list[dict[str, Any]] = []
    lat_samples: dict[str, dict[float, list[float]]] = {}
    nag_training_queries = None
    if "nag" in methods:
        rows, lat_samples["nag"], nag_training_queries = _nag_rows(ws, budgets, source, search_queries, log)
    for m in methods:
        if m != "nag":
            m_rows, lat_samples[m] = _baseline_rows(ws, m, budgets, source, seeds=seeds, queries=queries, log=log)
            rows += m_rows
    summary, ref_lat, ref_acc = _summary(rows, methods, budgets)
    if "nag" in methods:  # paid once for every budget: the dataset and refinement queries
        summary["nag"]["training_queries"] = nag_training_queries
    report = {"workspace": ws.name, "space": ws.space.name, "accuracy_source": source.provenance(),
              "latency_table": ws.latency_table_spec, "budgets_ms": budgets, "methods": list(methods),
              "queries_per_budget": queries, "seeds": seeds, "rows": rows, "summary": summary,
              "hypervolume_reference": {"latency_ms": ref_lat, "accuracy_pct": ref_acc}}
    if plot_dir:
        hb = hist_budget if hist_budget is not None else budgets[len(budgets) // 2]
        report["plots"] = write_plots(Path(plot_dir), rows, lat_samples, budgets, methods, hb)
    return report


def write_plots(out: Path, rows, lat_samples, budgets, methods, hist_budget: float) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for m in methods:
        mine = sorted((r for r in rows if r["method"] == m and r["arch"]), key=lambda r: r["budget_ms"])
        ax.plot([r["latency_ms"] for r in mine], [r["accuracy"] * 100 for r in mine], marker="o", label=m)
    for b in budgets:
        ax.axvline(b, color="0.85", lw=0.8, zorder=0)
    ax.set_xlabel("latency (ms, latency table)")
    ax.set_ylabel("accuracy (%, accuracy source)")
    ax.set_title("Pareto frontier per method")
    ax.legend()
    fig.tight_layout()
    p = out / "pareto.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    paths.append(str(p))
    allv = [v for per in lat_samples.values() for vals in per.values() for v in vals] + list(budgets)
    bins = np.linspace(min(allv), max(allv), 90)  # shared bins: collapsed policies show as spikes
    if "nag" in lat_samples:  # paper Fig. 4: generated latencies per budget
        fig, ax = plt.subplots(figsize=(6.5, 4.0))
        for b in budgets:
            ax.hist(lat_samples["nag"][b], bins=bins, alpha=0.55, label=f"B = {b:g} ms")
            ax.axvline(b, color="k", lw=0.8, ls="--")
        ax.set_xlabel("latency of 1,000 generated architectures (ms)")
        ax.set_ylabel("count")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out / "latency_hist_nag.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(str(p))
    hb = min(budgets, key=lambda b: abs(b - hist_budget))
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for m in methods:
        if hb in lat_samples.get(m, {}):
            ax.hist(lat_samples[m][hb], bins=bins, alpha=0.5, label=m)
    ax.axvline(hb, color="k", lw=0.8, ls="--")
    ax.set_xlabel(f"latency of 1,000 samples at B = {hb:g} ms")
    ax.set_ylabel("count")
    ax.legend(fontsize=7)
    fig.tight_layout()
    p = out / f"latency_hist_{hb:g}ms.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    paths.append(str(p))
    return paths


def format_report(rep: dict[str, Any]) -> str:
    lines = [f"workspace {rep['workspace']}  accuracy from {rep['accuracy_source'].get('name')}  "
             f"latency from {rep['latency_table']}",
             f"{'budget':>7} {'method':<10} {'acc %':>7} {'lat ms':>7} {'feasible':>8} {'time s':>8} {'queries':>8}"]
    for r in sorted(rep["rows"], key=lambda r: (r["budget_ms"], rep["methods"].index(r["method"]))):
        acc = f"{r['accuracy'] * 100:.2f}" if r["accuracy"] is not None and math.isfinite(r["accuracy"]) else "-"
        lines.append(f"{r['budget_ms']:>7g} {r['method']:<10} {acc:>7} {r['latency_ms']:>7.2f} "
                     f"{r['feasible_rate'] * 100:>7.1f}% {r['seconds']:>8.3f} {r['accuracy_queries']:>8d}")
    lines.append("hypervolume (acc-points x ms, ref "
                 f"{rep['hypervolume_reference']['accuracy_pct']:.2f}% / {rep['hypervolume_reference']['latency_ms']:g} ms):")
    for m, s in rep["summary"].items():
        lines.append(f"  {m:<10} {s['hypervolume']:10.2f}   total {s['total_seconds']:.2f} s, {s['total_queries']} queries")
    for p in rep.get("plots", []):
        lines.append(f"plot {p}")
    return "\n".join(lines)
