"""Benchmark (issue 17, decisions 34): TFLite conversion time with BatchNorm folded in PyTorch
first, against the converter alone, on the same networks in the same run.

For each seed, ``--networks`` random networks of ``--space`` at ``--resolution`` are converted
the way ``nagkit export`` and the calibration convert them (``convert_module``, names
``image``/``logits``) twice: as nagkit does now (``folded``: ``nagkit.runtimes.fold`` first)
and with the fold switched off (``plain``: the converter alone, what nagkit did before). The
two alternate which goes first, network by network. Each pair's files are compared with
``model_graph``: operators, options, shapes and types (``same_graph``), and float constants
element by element (how many differ, and by how many units in the last place at most: these
networks' BatchNorms are untrained, where the converter's own fold rounds a few weights
differently; decisions 34).
One process, one conversion at a time, after one untimed warm-up conversion (imports, first
trace); every second of both conversions is counted (the fold is inside ``to_tflite``). The load average and steal time are recorded.

    python benchmarks/latency/bench_fold.py                       # 3 seeds x 4 networks, r=224
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", default="ofa-mbv3-w1.0")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--seeds", default="101,102,103")
    ap.add_argument("--networks", type=int, default=4, help="networks per seed")
    ap.add_argument("--results-dir", default=str(ROOT / "benchmarks" / "latency" / "results"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)

    import logging

    from bench_cpu import LoadSampler, busy_processes, machine_info, result_path

    import nagkit.runtimes.convert as convert
    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now
    from nagkit.latency.validate import random_archs
    from nagkit.runtimes.graph import model_graph, tflite_float_constants
    from nagkit.space import get_space
    from nagkit.supernet.static import StaticNet

    logging.getLogger().setLevel(logging.ERROR)
    space = get_space(args.space)
    folding = convert.folded_for_conversion

    def convert_one(arch, path: Path, fold: bool) -> float:
        convert.folded_for_conversion = folding if fold else (lambda m: m)
        try:
            net = StaticNet.from_arch(space, arch, seed=0)
            t0 = time.perf_counter()
            convert.convert_module(net, (1, space.in_channels, arch.r, arch.r), "tflite", path, names=convert.IO_NAMES)
            return time.perf_counter() - t0
        finally:
            convert.folded_for_conversion = folding

    rows = []
    busy = busy_processes()
    with tempfile.TemporaryDirectory(prefix="nagkit-bench-fold-") as tmp, LoadSampler() as load:
        convert_one(random_archs(space, 1, seed=99, resolutions=[args.resolution])[0], Path(tmp) / "w.tflite", True)
        i = 0
        for seed in [int(s) for s in args.seeds.split(",")]:
            for arch in random_archs(space, args.networks, seed=seed, resolutions=[args.resolution]):
                order = (True, False) if i % 2 == 0 else (False, True)
                t, g, c = {}, {}, {}
                for fold in order:
                    p = Path(tmp) / f"{i}-{'folded' if fold else 'plain'}.tflite"
                    t[fold] = convert_one(arch, p, fold)
                    g[fold], c[fold] = model_graph(p), tflite_float_constants(p)
                ulps = [np.abs(x.view(np.int32).astype(np.int64) - y.view(np.int32).astype(np.int64))
                        for x, y in zip(c[True], c[False])]
                rows.append({"seed": seed, "arch": str(arch), "first": "folded" if order[0] else "plain",
                             "folded_s": round(t[True], 3), "plain_s": round(t[False], 3),
                             "ratio": round(t[True] / t[False], 4), "same_graph": g[True] == g[False],
                             "ops": len(g[True]["ops"]), "float_constants": sum(x.size for x in c[False]),
                             "constants_differing": sum(int((u > 0).sum()) for u in ulps),
                             "max_ulps": max((int(u.max()) for u in ulps), default=0)})
                r = rows[-1]
                print(f"{i:2d} seed {seed} folded {t[True]:5.2f} s plain {t[False]:5.2f} s "
                      f"ratio {t[True] / t[False]:.3f} same graph {r['same_graph']}, constants differing "
                      f"{r['constants_differing']} of {r['float_constants']} (max {r['max_ulps']} ulp)", flush=True)
                i += 1
    ratios = [r["ratio"] for r in rows]
    per_seed = {}
    for r in rows:
        per_seed.setdefault(r["seed"], []).append(r["ratio"])
    report = {
        "benchmark": "TFLite conversion: BatchNorm folded first (nagkit) vs the converter alone",
        "space": space.name, "resolution": args.resolution, "machine": machine_info(), "argv": sys.argv[1:],
        "when": utc_now(), "busy_processes_at_start": busy, "load": load.summary(),
        "summary": {
            "networks": len(rows), "all_same_graph": all(r["same_graph"] for r in rows),
            "constants_differing_share": sum(r["constants_differing"] for r in rows) / sum(r["float_constants"]
                                                                                         for r in rows),
            "max_ulps": max(r["max_ulps"] for r in rows),
            "median_ratio": round(statistics.median(ratios), 4),
            "ratio_range": [min(ratios), max(ratios)],
            "median_ratio_per_seed": {str(k): round(statistics.median(v), 4) for k, v in per_seed.items()},
            "folded_total_s": round(sum(r["folded_s"] for r in rows), 1),
            "plain_total_s": round(sum(r["plain_s"] for r in rows), 1)},
        "rows": rows}
    out = result_path(args.results_dir, f"fold-conversion-{space.name}-r{args.resolution}", report["machine"], args.tag)
    atomic_write_json(out, report)
    sm = report["summary"]
    print(f"median folded/plain {sm['median_ratio']:.3f}; same graph: {sm['all_same_graph']}; constants "
          f"differing {100 * sm['constants_differing_share']:.4f}% (max {sm['max_ulps']} ulp); {out}")
    return 0 if sm["all_same_graph"] and sm["max_ulps"] <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
