"""Diagnostic for issue 17 (nothing here is a nagkit feature): is a CLI-path table's error in its
blocks or in its networks?

After ``bench_cli_path.py --phases profile,validate,plain`` has run, this script takes that run's
table, its profile journal (every pass of every block) and its block files (the profile's
conversion cache), and:

1. re-times the same block files with a plain LiteRT interpreter (1 thread), each interpreter
   opened once and kept, ``--passes`` interleaved passes over the list, each block a fixed
   ``--window`` of invokes after a 0.05-s warm-up; a pass's figure is its median;
2. sums each network's blocks under several per-block statistics (the table's; the journal's
   lowest pass; the re-timing's lowest pass, of all passes and of the first 3) and sets the sums
   against the networks that were measured whole: the table's 80 calibration networks (nagkit's
   timer) and the 100 validation networks (nagkit's timer and the plain timer of the benchmark);
   ``--passes 0``: no re-timing, the journal's statistics only (e.g. the table's rule against
   another rule on the same passes);
3. for each statistic, fits the simplest calibration (scale and offset, relative least squares)
   on the 80 calibration networks and scores it on the 100 validation networks: how much of the
   table's miss the block figures alone explain;
4. counts, for 7x7 blocks and the others, the share of passes within 5% of the block's fastest
   figure (how often a pass lands in the host's fast state).

    python benchmarks/latency/block_retime.py --run-dir .cache/bench_cli_path/cli-path-litert-ofa-mbv3-w1.0-r224 \\
        --bench results/cli-path-litert-ofa-mbv3-w1.0-r224-amd-epyc-2026-11-27.json --out results/block-retime-<tag>.json

``--retimed FILE`` analyses a re-timing made earlier with the same protocol instead of timing.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def open_plain(path: Path):
    """A plain LiteRT interpreter (1 thread) on ``path``, seeded input set, 5 invokes done."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.random.default_rng(0).standard_normal(d["shape"]).astype(np.float32))
    for _ in range(5):
        it.invoke()
    return it


def fixed_window(it, window_s: float) -> float:
    """0.05 s of warm-up invokes, then ``window_s`` of timed ones (at least 10): their median, ms."""
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < 0.05:
        it.invoke()
    ts: list[float] = []
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < window_s or len(ts) < 10:
        a = time.perf_counter()
        it.invoke()
        ts.append(time.perf_counter() - a)
    return float(np.median(ts)) * 1e3


def retime(files: dict[str, Path], passes: int, window_s: float) -> dict[str, list[float]]:
    """Pass medians (ms) per block: interpreters opened once, interleaved passes, fixed windows."""
    its = {k: open_plain(p) for k, p in files.items()}
    per: dict[str, list[float]] = {k: [] for k in files}
    for p in range(passes):
        t0 = time.perf_counter()
        for k, it in its.items():
            per[k].append(fixed_window(it, window_s))
        print(f"pass {p + 1} of {passes}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return per


def journal_passes(path: Path) -> dict[str, list[float]]:
    per: dict[str, list[float]] = collections.defaultdict(list)
    with open(path) as f:
        for i, line in enumerate(f):
            if i:
                r = json.loads(line)
                per[r["key"]].append(r["stats"]["median_ms"])
    return dict(per)


def fit_global(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Scale and offset minimising the relative error of ``scale*x + offset`` against ``y``."""
    a = np.c_[x, np.ones(len(x))] / y[:, None]
    s, o = np.linalg.lstsq(a, np.ones(len(x)), rcond=None)[0]
    return float(s), float(o)


def score(pred: np.ndarray, meas: np.ndarray) -> dict:
    e = pred / meas - 1
    return {"within_5pct": float(np.mean(np.abs(e) <= 0.05)), "mape": float(100 * np.mean(np.abs(e))),
            "mean_signed_error_pct": float(100 * e.mean()), "sd_pct": float(100 * e.std())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True, help="bench_cli_path's work folder of the run (table.json, cache/)")
    ap.add_argument("--bench", required=True, help="that run's result JSON (validation and plain-timer figures)")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--window", type=float, default=0.5, help="seconds of invokes per block per pass")
    ap.add_argument("--retimed", default=None,
                    help="analyse an earlier re-timing (its JSON: {'per': {block: [pass medians]}}) instead of timing")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    from bench_cpu import LoadSampler, machine_info

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import LatencyTable, utc_now

    run = Path(args.run_dir)
    table = LatencyTable.load(run / "table.json")
    space = table.space()
    journal = journal_passes(run / "table.json.journal.jsonl")
    blocks = sorted(table.entries)
    caches = [d for d in (run / "cache").iterdir() if d.is_dir() and d.name.startswith("tflite-")]
    if len(caches) != 1:
        raise SystemExit(f"expected one tflite block cache under {run / 'cache'}, found {caches}")
    files = {k: caches[0] / f"{k}.tflite" for k in blocks}
    started = utc_now()
    with LoadSampler() as load:
        t0 = time.perf_counter()
        if args.retimed:  # the same protocol, run earlier (its file says when and how)
            earlier = json.loads(Path(args.retimed).read_text())
            per = {k: earlier["per"][k] for k in blocks}
            args.passes, args.window = earlier["passes"], earlier["window_s"]
        else:
            per = retime(files, args.passes, args.window) if args.passes else {}
        wall = time.perf_counter() - t0

    bench = json.loads(Path(args.bench).read_text())
    cal = table.to_dict()["calibration"]
    v, p = bench["phases"]["validate"]["archs"], bench["phases"]["plain"]["archs"]
    assert [a["arch"] for a in v] == [a["arch"] for a in p]
    sets = {"calibration_80_nagkit": (cal["fit_archs"], np.array(cal["fit_measured_ms"])),
            "validation_100_nagkit": ([a["arch"] for a in v], np.array([a["measured_ms"] for a in v])),
            "validation_100_plain_io_best": ([a["arch"] for a in p], np.array([a["io_best_ms"] for a in p]))}
    breakdown = {a: [k for k, _ in table.breakdown(space, space.parse_arch(a))]
                 for archs, _ in sets.values() for a in archs}
    from nagkit.latency.passes import pick

    statistics = {
        f"table ({table.provenance['block_passes']['statistic']})": {k: table.entries[k]["median_ms"] for k in blocks},
        "journal, lowest pass": {k: min(journal[k]) for k in blocks},
        "journal, lowest confirmed pass (passes.pick)": {k: journal[k][pick(journal[k])] for k in blocks},
    }
    if per:
        statistics.update({
            f"re-timed, lowest of {args.passes} passes": {k: min(per[k]) for k in blocks},
            "re-timed, lowest of the first 3 passes": {k: min(per[k][:3]) for k in blocks},
            f"re-timed, median of {args.passes} passes": {k: float(np.median(per[k])) for k in blocks}})
    results = {}
    for name, st in statistics.items():
        sums = {s: np.array([sum(st[k] for k in breakdown[a]) for a in archs]) for s, (archs, _) in sets.items()}
        raw = {s: score(sums[s], sets[s][1]) for s in sets}
        scale, offset = fit_global(sums["calibration_80_nagkit"], sets["calibration_80_nagkit"][1])
        fitted = {s: score(scale * sums[s] + offset, sets[s][1]) for s in sets if s != "calibration_80_nagkit"}
        results[name] = {"raw_sum": raw, "global_fit_on_calibration": {"scale": scale, "offset_ms": offset, **fitted}}
        f = fitted["validation_100_nagkit"]
        print(f"{name:42s} raw bias {raw['validation_100_nagkit']['mean_signed_error_pct']:+6.2f}% | fitted: "
              f"{f['within_5pct']:.0%} within ±5%, MAPE {f['mape']:.2f}%", file=sys.stderr)

    fast: dict = {}
    ratio = np.array([min(journal[k]) / min(per[k]) for k in blocks]) if per else None
    for label, sel in (("k7", lambda k: "-k7-" in k), ("other", lambda k: "-k7-" not in k)) if per else ():
        js, rs = [], []
        for k in blocks:
            if sel(k):
                m = min(min(journal[k]), min(per[k]))
                js += [x <= 1.05 * m for x in journal[k]]
                rs += [x <= 1.05 * m for x in per[k]]
        fast[label] = {"journal": float(np.mean(js)), "re-timed": float(np.mean(rs)), "journal_passes": len(js),
                       "re-timed_passes": len(rs)}
    report = {"benchmark": "latency/block_retime.py", "machine": machine_info(), "run_dir": str(run),
              "retimed_from": args.retimed,
              "bench": str(args.bench), "started": started, "wall_s": round(wall, 1), "load": load.summary(),
              "protocol": f"plain LiteRT interpreter, 1 thread, opened once per block; {args.passes} interleaved passes; "
                          f"0.05 s warm-up + {args.window} s of invokes per block per pass; pass figure = median",
              "blocks": len(blocks), "statistics": results,
              "share_of_passes_in_fast_state": fast,
              "journal_lowest_over_retimed_lowest": None if ratio is None else {
                  "median": float(np.median(ratio)), "p10": float(np.percentile(ratio, 10)),
                  "p90": float(np.percentile(ratio, 90))},
              "retimed_pass_medians_ms": per, "journal_pass_medians_ms": journal}
    atomic_write_json(Path(args.out), report)
    print(f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
