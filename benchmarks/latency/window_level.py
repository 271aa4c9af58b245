"""Offline (nothing measured): was the machine in the same state while the calibration networks
were timed as when the blocks recorded their best? (issue 17, decisions 33)

``nagkit profile --calibrate`` on a CPU records each block at its best pass over the whole profile
(decisions 28, 29) and times the calibration networks in a window of a few minutes, between two
block passes spread around them (one after the networks' conversions, one after their passes).
Those two passes measure the machine's state in the window. For each calibration network, the
sum of its blocks in a pass over their sum in the table is that pass's level for the network;
the median over the networks is the pass's level.

A single pass reads above a best-of even in a steady state (the best is a minimum over passes),
so the block part's own first passes are scored the same way, as the reference for a steady
state.

Then the calibration is fitted again (``calibrate_measured``, the ``auto`` plan, as the profile
fits it) on the networks' times divided by a level, for several estimates of it, and scored on
the run's own validation networks (``lut validate``'s rows in the bench result). This is an
in-sample look at one run's data, not a method: the estimators are compared, nothing is chosen
here. ``lut validate``'s anchors (decisions 32) give the networks' own level against the record.

    python benchmarks/latency/window_level.py --result results/cli-path-…-run1-….json \\
        --table T.json --journal T.json.journal.jsonl[.gz] --out results/window-level-….json
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _t(s: str) -> datetime:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")


def _read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--result", required=True, help="bench_cli_path.py result JSON (validation rows, anchors)")
    ap.add_argument("--table", required=True, help="the profile's calibrated table")
    ap.add_argument("--journal", required=True, help="the profile's journal (.jsonl or .jsonl.gz)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from nagkit.io import atomic_write_json
    from nagkit.latency.calibration import calibrate_measured
    from nagkit.latency.calibration_plan import plan_calibration
    from nagkit.latency.table import LatencyTable
    from nagkit.space.arch import Arch

    calibrated = LatencyTable.load(args.table)
    sp = calibrated.space()
    base = calibrated.with_calibration(None)
    det = calibrated.calibration.details
    archs = [Arch.from_string(a) for a in det["fit_archs"]]
    meas = np.asarray(det["fit_measured_ms"], dtype=float)
    res = sorted({a.r for a in archs})
    best = base.predict_many(sp, archs, calibrated=False)

    rows = [r for r in _read_jsonl(Path(args.journal)) if r.get("type") == "block"]
    spread = calibrated.provenance.get("spread_block_passes") or []
    if len(spread) != 2:
        raise SystemExit(f"expected the two spread block passes of `profile --calibrate`, found {len(spread)}")
    windows = [(_t(s["finished"]) - timedelta(seconds=float(s["elapsed_s"]) + 1), _t(s["finished"])) for s in spread]
    block_part_end = windows[0][0]

    def level_of(values: dict[str, float]) -> np.ndarray:
        """Per calibration network: its blocks' sum in ``values`` over their sum in the table."""
        ents = {k: {**v, base.stat: values[k]} for k, v in base.entries.items()}
        for e in ents.values():  # keep the entry consistent for the table's checks
            e["p10_ms"] = min(e.get("p10_ms", e[base.stat]), e[base.stat])
            e["p90_ms"] = max(e.get("p90_ms", e[base.stat]), e[base.stat])
        t = LatencyTable.create(sp, ents, device=base.device, runtime=base.runtime, resolutions=base.resolutions)
        return t.predict_many(sp, archs, calibrated=False) / best

    by_pass: dict[int, dict[str, float]] = collections.defaultdict(dict)  # block part: pass -> key -> ms
    brackets: list[dict[str, float]] = [{}, {}]
    for r in rows:
        t, ms = _t(r["t"]), r["stats"][base.stat]
        for i, (lo, hi) in enumerate(windows):
            if lo <= t <= hi:
                brackets[i][r["key"]] = ms
                break
        else:
            if t < block_part_end:
                by_pass[int(r.get("pass", 1))][r["key"]] = ms
    full = [p for p, v in sorted(by_pass.items()) if set(v) >= set(base.entries)]
    steady = {p: float(np.median(level_of(by_pass[p]))) for p in full}
    lv = [level_of(b) for b in brackets]
    g = [float(np.median(x)) for x in lv]
    window_best = level_of({k: min(brackets[0][k], brackets[1][k]) for k in base.entries})
    ref = float(np.median(list(steady.values())))

    run = json.loads(Path(args.result).read_text())
    val = run["phases"]["validate"]
    vals = [Arch.from_string(r["arch"]) for r in val["archs"]]
    vmeas = np.asarray([r["measured_ms"] for r in val["archs"]], dtype=float)
    plan = plan_calibration(base, sp, len(archs), resolutions=res)

    def score(level) -> dict:
        fit = calibrate_measured(base, sp, archs, meas / level, plan=plan, resolutions=res)
        pred = fit.apply(base).predict_many(sp, vals, calibrated=True)
        err = (pred - vmeas) / vmeas * 100
        return {"scheme": fit.record["scheme"], "held_out_within_5pct": fit.record["held_out"]["calibrated_within_5pct"],
                "validate_within_5pct": float(np.mean(np.abs(err) <= 5)), "validate_mape": float(np.abs(err).mean()),
                "validate_bias_pct": float(err.mean())}

    estimators = {
        "as timed (what the profile fits)": 1.0,
        "mean of the two bracket passes": (g[0] + g[1]) / 2,
        "the bracket pass after the networks' passes": g[1],
        "mean of the brackets over a steady single pass": (g[0] + g[1]) / 2 / ref,
        "each block's best of the two brackets (median over networks)": float(np.median(window_best)),
        "each block's best of the two brackets (per network)": window_best,
    }
    out = {
        "script": "benchmarks/latency/window_level.py", "result": Path(args.result).name,
        "what": "offline re-fit of one run's calibration with its networks' times divided by estimates of the "
                "machine's level in their window; in-sample, nothing measured",
        "block_part_single_pass_level_pct": {str(p): (v - 1) * 100 for p, v in steady.items()},
        "bracket_level_pct": {"after the networks' conversions": (g[0] - 1) * 100,
                              "after the networks' passes": (g[1] - 1) * 100},
        "window_best_of_two_level_pct": (float(np.median(window_best)) - 1) * 100,
        "anchors_now_vs_recorded_pct": (val.get("level") or {}).get("median_pct"),
        "recorded_validate": {"within_5pct": val["calibrated"]["within_5pct"],
                              "bias_pct": val["calibrated"]["mean_signed_error_pct"]},
        "refits": {name: {"level_pct": float((np.median(level) if np.ndim(level) else level) - 1) * 100, **score(level)}
                   for name, level in estimators.items()},
    }
    atomic_write_json(args.out, out)
    print(json.dumps({k: v for k, v in out.items() if k != "refits"}, indent=1))
    for name, r in out["refits"].items():
        print(f"{name:62s} level {r['level_pct']:+5.2f}%  validate {r['validate_within_5pct']:.0%} "
              f"(bias {r['validate_bias_pct']:+.2f}%, MAPE {r['validate_mape']:.2f}%)")


if __name__ == "__main__":
    main()
