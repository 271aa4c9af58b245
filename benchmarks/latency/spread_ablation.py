"""Ablation for issue 17 (decisions 29; nothing here is a nagkit feature): what the block passes
spread over the profile bring, on one run's own data.

``nagkit profile --calibrate`` on a host CPU measures every block in the block part (3 passes and
up to 4 more for unconfirmed blocks), then once more after the calibration networks'
conversions and once after their passes. This script takes a ``bench_cli_path.py`` run (its
table, its profile journal, its result JSON) and rebuilds the block figures from subsets of the
journal's passes:

* ``block part``: the passes before the first spread pass (what the table recorded before
  decisions 29);
* ``block part + after conversions``: adds the first spread pass;
* ``all passes``: the table as written.

For each, each block's figure is its lowest pass (the rule of :func:`nagkit.latency.passes.best`),
and the calibration is fitted exactly as ``nagkit profile --calibrate`` fits it
(:func:`nagkit.latency.calibration.calibrate_measured` with the default plan, on the same 80
calibration networks and their measured times, which the table's calibration lists). The
calibrated table then predicts the run's 100 validation networks, scored against nagkit's timer
(``lut validate``) and the plain timer. No timing is done: the same measurements, three rules.

    python benchmarks/latency/spread_ablation.py --run-dir .cache/bench_cli_path/cli-path-litert-ofa-mbv3-w1.0-r224 \\
        --bench results/cli-path-....json --out results/spread-ablation-<tag>.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def passes_by_phase(journal: Path, spread: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """key -> [(phase, median_ms)]: phase k (1, 2) for a record journalled within the k-th spread
    pass (from its finish time back by its duration), 0 for the block part before them."""
    windows = [(_ts(s["finished"]) - float(s["elapsed_s"]) - 1.0, _ts(s["finished"]) + 1.0) for s in spread]
    out: dict[str, list[tuple[int, float]]] = {}
    for line in journal.read_text().splitlines()[1:]:
        if not line.strip():
            continue
        r = json.loads(line)
        t = _ts(r["t"])
        phase = next((i + 1 for i, (a, b) in enumerate(windows) if a <= t <= b), 0)
        if phase == 0 and t >= windows[0][0]:
            raise SystemExit(f"a journal record at {r['t']} is in no spread pass but after the first began")
        out.setdefault(r["key"], []).append((phase, float(r["stats"]["median_ms"])))
    counts = [sum(p == k for ps in out.values() for p, _ in ps) for k in range(1, len(spread) + 1)]
    if counts != [s["blocks"] for s in spread]:
        raise SystemExit(f"spread passes hold {counts} records, the table says {[s['blocks'] for s in spread]}")
    return out


def score(pred: np.ndarray, meas: np.ndarray) -> dict:
    e = pred / meas - 1
    return {"within_5pct": float(np.mean(np.abs(e) <= 0.05)), "within_10pct": float(np.mean(np.abs(e) <= 0.10)),
            "mape": float(100 * np.mean(np.abs(e))), "mean_signed_error_pct": float(100 * e.mean())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True, help="bench_cli_path's work folder of the run (table.json and journal)")
    ap.add_argument("--bench", required=True, help="that run's result JSON (validation and plain-timer figures)")
    ap.add_argument("--fit-networks", type=int, default=None,
                    help="fit on the first N calibration networks only (what `--calibrate N` would have drawn: "
                         "the archs are drawn one by one from the same seed); default: all")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    from nagkit.latency.calibration import DEFAULT_GROUP_BY, DEFAULT_SHRINKAGE, calibrate_measured, plan_calibration
    from nagkit.latency.table import LatencyTable
    from nagkit.space.arch import Arch

    run = Path(args.run_dir)
    table = LatencyTable.load(run / "table.json")
    space = table.space()
    res = list(table.resolutions)
    spread = table.provenance.get("spread_block_passes") or []
    if not spread:
        raise SystemExit("the table has no spread block passes (made before decisions 29?)")
    per = passes_by_phase(run / "table.json.journal.jsonl", spread)
    cal = table.calibration or None
    rec = cal.details if cal is not None else table.provenance["calibration_not_adopted"]["details"]
    fit_archs = [Arch.parse(a) if isinstance(a, str) else a for a in rec["fit_archs"]]
    fit_ms = np.asarray(rec["fit_measured_ms"], dtype=float)
    if args.fit_networks is not None:
        if not 10 <= args.fit_networks <= len(fit_archs):
            raise SystemExit(f"--fit-networks must be 10..{len(fit_archs)}")
        fit_archs, fit_ms = fit_archs[:args.fit_networks], fit_ms[:args.fit_networks]
    bench = json.loads(Path(args.bench).read_text())
    val = bench["phases"]["validate"]["archs"]
    plain = {r["arch"]: r["io_best_ms"] for r in bench["phases"]["plain"]["archs"]}
    val_archs = [Arch.parse(r["arch"]) for r in val]
    meas = np.array([r["measured_ms"] for r in val])
    plain_ms = np.array([plain[r["arch"]] for r in val])

    rules = {"block part": 0, "block part + after conversions": 1, "all passes": len(spread)}
    out = {"benchmark": "spread_ablation", "run_dir": str(run), "bench": str(args.bench),
           "fit_networks": len(fit_archs), "rules": {}}
    for name, upto in rules.items():
        entries = {k: {**e, "median_ms": min(m for p, m in per[k] if p <= upto)} for k, e in table.entries.items()}
        t = replace(table, entries=entries, calibration=None, _cache={})
        plan = plan_calibration(t, space, len(fit_archs), DEFAULT_GROUP_BY, res)
        result = calibrate_measured(t, space, fit_archs, fit_ms, plan=plan, shrinkage=DEFAULT_SHRINKAGE,
                                    resolutions=res)
        applied = result.apply(t)
        pred = np.array(applied.predict_many(space, val_archs))
        raw = np.array(t.predict_many(space, val_archs, calibrated=False))
        ho = result.record["held_out"]
        out["rules"][name] = {
            "passes_per_block_median": float(np.median([sum(p <= upto for p, _ in per[k]) for k in table.entries])),
            "calibration": {"scheme": result.record["scheme"], "adopted": result.adopted,
                            "held_out_within_5pct": ho["calibrated_within_5pct"] if result.adopted else ho["raw_within_5pct"],
                            "raw_mean_signed_error_pct": ho["raw_mean_signed_error_pct"]},
            "validate_nagkit_timer": score(pred, meas), "validate_plain_timer": score(pred, plain_ms),
            "raw_vs_nagkit_timer": score(raw, meas)}
        v, p = out["rules"][name]["validate_nagkit_timer"], out["rules"][name]["validate_plain_timer"]
        print(f"{name:32s} validate {v['within_5pct']:.0%} within ±5% (MAPE {v['mape']:.2f}%), plain timer "
              f"{p['within_5pct']:.0%} (MAPE {p['mape']:.2f}%); calibration {result.record['scheme']}, held out "
              f"{out['rules'][name]['calibration']['held_out_within_5pct']:.0%}")
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("->", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
