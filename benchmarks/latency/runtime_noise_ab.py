"""Diagnosis (issue 17, decisions 35; nothing here is a nagkit feature): are ONNX Runtime's
whole-network timings noisier than LiteRT's on this machine, measured in the same minutes?

In ``bench_cli_path.py`` runs the two runtimes were measured at different times of the day, so
their noise figures mix the runtime with the host's period. Here the same ``--networks``
networks (``bench_cli_path.py``'s validation networks, seed 17, r=224, from ``--offset`` on,
converted by nagkit into the validation caches the bench left) are timed by both runtimes, one network at
a time, the LiteRT file then the ONNX file (the order alternating round by round), for
``--rounds`` rounds. Each timing is one pass as the bench's plain timer makes it: a fresh
interpreter or session (1 thread), 3 warm-up runs, ``--runs`` timed runs (input set, run, output
read) and, with ``--pass-s``, for at least that long, their median. ONNX Runtime runs these
networks about 2.5 times faster than LiteRT here, so a fixed run count makes its passes shorter;
``--pass-s`` makes them equally long, as nagkit's own timer does (``min_time_s``).

Reported per runtime: the spread of a network's pass medians (sd in % of their mean; and each
pass's deviation from the network's best, p90), and how often a network's best pass has another
within 3% (nagkit's "confirmed"). The pass-to-pass changes of the two runtimes are correlated
(the host's level moves both; a runtime's own noise does not); each round's level and what is
left of a pass once its round's level is taken out are reported too.
``--summarise RESULT`` recomputes a stored result's summary from its pass medians.

    python benchmarks/latency/runtime_noise_ab.py \\
        --tflite-cache .cache/bench2/<litert run>/cache-validate --onnx-cache .cache/bench-ort/<ort run>/cache-validate
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def one_pass(runner_cls, path: Path, runs: int, pass_s: float = 0.0) -> float:
    r = runner_cls(path)
    for _ in range(3):
        r.run_io()
    t = []
    start = time.perf_counter()
    while len(t) < runs or time.perf_counter() - start < pass_s:
        t0 = time.perf_counter()
        r.run_io()
        t.append((time.perf_counter() - t0) * 1e3)
    del r
    return float(np.median(t))


def spread(passes: list[float]) -> dict:
    a = np.asarray(passes)
    best = a.min()
    dev = (a / best - 1) * 100
    return {"sd_pct": float(a.std(ddof=1) / a.mean() * 100), "dev_from_best_pct": dev.tolist(),
            "confirmed": bool(np.sum(dev <= 3.0) >= 2)}


def analyse(ms: dict[str, list[list[float]]]) -> tuple[dict, float]:
    """Per runtime, from each network's pass medians (one per round): the spread of a network's
    passes, its deviations from its best, how many bests are confirmed, each round's level (the
    median over networks of pass / best − 1, %), and the sd of what is left of a pass once its
    round's level is taken out (the runtime's own noise); and the correlation of the two
    runtimes' pass-to-pass changes (the host's level moves both)."""
    summary = {}
    for rt, nets in ms.items():
        a = np.asarray(nets, dtype=np.float64)  # networks x rounds
        rows = [spread(list(v)) for v in a]
        sds = [r["sd_pct"] for r in rows]
        devs = [d for r in rows for d in r["dev_from_best_pct"]]
        level = np.median(a / a.min(axis=1, keepdims=True), axis=0) - 1
        centred = np.log(a) - np.log(a).mean(axis=1, keepdims=True)
        resid = centred - np.median(centred, axis=0)
        summary[rt] = {"median_sd_pct": round(statistics.median(sds), 3), "max_sd_pct": round(max(sds), 3),
                       "p90_dev_from_best_pct": round(float(np.percentile(devs, 90)), 3),
                       "confirmed_share": sum(r["confirmed"] for r in rows) / len(rows),
                       "median_ms": round(float(np.median(a.min(axis=1))), 3),
                       "round_level_pct": [round(float(x) * 100, 2) for x in level],
                       "within_round_residual_sd_pct": round(float(resid.std()) * 100, 3)}
    chg = {rt: np.diff(np.log(np.asarray(nets, dtype=np.float64)), axis=1).ravel() for rt, nets in ms.items()}
    corr = float(np.corrcoef(chg["litert"], chg["onnxruntime"])[0, 1])
    return summary, corr


def summarise(path: Path) -> int:
    """Recompute a stored result's summary from its pass medians (``--summarise``) and rewrite it."""
    from nagkit.io import atomic_write_json

    d = json.loads(path.read_text())
    ms = {rt: [n[f"{rt}_pass_ms"] for n in d["networks"]] for rt in ("litert", "onnxruntime")}
    d["summary"], corr = analyse(ms)
    d["pass_change_correlation"] = round(corr, 3)
    atomic_write_json(path, d)
    _print(d["summary"], corr, path)
    return 0


def _print(summary: dict, corr: float, out: Path) -> None:
    for rt, s in summary.items():
        print(f"{rt}: pass sd median {s['median_sd_pct']:.2f}% (max {s['max_sd_pct']:.2f}%), deviation from "
              f"best p90 {s['p90_dev_from_best_pct']:.2f}%, best confirmed {100 * s['confirmed_share']:.0f}%, "
              f"within-round residual sd {s['within_round_residual_sd_pct']:.2f}%, round levels "
              f"{s['round_level_pct']}%")
    print(f"pass-to-pass changes correlated {corr:+.2f}; {out}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tflite-cache")
    ap.add_argument("--onnx-cache")
    ap.add_argument("--summarise", metavar="RESULT", help="recompute a stored result's summary, measure nothing")
    ap.add_argument("--space", default="ofa-mbv3-w1.0")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--networks", type=int, default=20)
    ap.add_argument("--offset", type=int, default=0,
                    help="skip this many of the validation networks first (another sample of the same 100)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=30, help="timed runs per pass, at least")
    ap.add_argument("--pass-s", type=float, default=0.0,
                    help="and at least this many seconds per pass (0: --runs alone, as the bench's plain timer; "
                         "a time makes both runtimes' passes equally long, as nagkit's own timer does)")
    ap.add_argument("--results-dir", default=str(ROOT / "benchmarks" / "latency" / "results"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if args.summarise:
        return summarise(Path(args.summarise))
    if not (args.tflite_cache and args.onnx_cache):
        ap.error("--tflite-cache and --onnx-cache are needed to measure")

    from bench_cli_path import PlainLiteRT, PlainORT
    from bench_cpu import LoadSampler, busy_processes, machine_info, result_path

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now
    from nagkit.latency.validate import NetworkCache, random_archs
    from nagkit.space import get_space

    space = get_space(args.space)
    archs = random_archs(space, args.offset + args.networks, seed=args.seed,
                         resolutions=[args.resolution])[args.offset:]
    files = {"litert": [NetworkCache("tflite", args.tflite_cache).path_for(space, a) for a in archs],
             "onnxruntime": [NetworkCache("onnx", args.onnx_cache).path_for(space, a) for a in archs]}
    missing = [str(p) for ps in files.values() for p in ps if not p.exists()]
    if missing:
        raise SystemExit(f"{len(missing)} network file(s) missing, e.g. {missing[0]}: run bench_cli_path.py "
                         "--phases prewarm for both runtimes first")
    runner = {"litert": PlainLiteRT, "onnxruntime": PlainORT}
    ms = {rt: [[] for _ in archs] for rt in files}
    busy = busy_processes()
    with LoadSampler() as load:
        for k in range(args.rounds):
            order = ("litert", "onnxruntime") if k % 2 == 0 else ("onnxruntime", "litert")
            for i in range(len(archs)):
                for rt in order:
                    ms[rt][i].append(one_pass(runner[rt], files[rt][i], args.runs, args.pass_s))
            print(f"round {k + 1} of {args.rounds} done", flush=True)
    summary, corr = analyse(ms)
    report = {"benchmark": "the same networks timed by LiteRT and ONNX Runtime in alternation (noise of each)",
              "space": space.name, "resolution": args.resolution, "seed": args.seed, "offset": args.offset,
              "machine": machine_info(),
              "argv": sys.argv[1:], "when": utc_now(), "busy_processes_at_start": busy, "load": load.summary(),
              "protocol": f"{args.rounds} rounds; per network per round one pass per runtime (fresh "
                          f"interpreter/session, 1 thread, 3 warm-up, then {args.runs} timed runs and at least "
                          f"{args.pass_s} s, median)",
              "summary": summary, "pass_change_correlation": round(corr, 3),
              "networks": [{"arch": str(a), "litert_pass_ms": ms["litert"][i], "onnxruntime_pass_ms": ms["onnxruntime"][i]}
                           for i, a in enumerate(archs)]}
    out = result_path(args.results_dir, f"runtime-noise-ab-{space.name}-r{args.resolution}", report["machine"],
                      args.tag)
    atomic_write_json(out, report)
    _print(summary, corr, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
