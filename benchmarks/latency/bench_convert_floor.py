"""Benchmark (issue 17, decisions 35): how much faster can the calibration networks' TFLite
conversion get on this machine, without changing what is converted?

Two questions, each answered by running the converter, nothing modelled:

* **Cores.** Does one conversion use more than one core, and do two conversion processes at
  once (what ``nagkit profile`` runs on a 2-core CPU: ``jobs`` = usable cores) each keep the
  speed of one alone? A worker process (this script with ``--worker``) converts ``--networks``
  random networks the way the calibration does (``convert_module``, names ``image``/``logits``,
  BatchNorm folded) after one untimed warm-up conversion, and reports per network the wall time
  and the CPU time its process used (user + system). Run once alone, then twice at once, each of
  the two converting the same networks as the one alone; for each of ``--seeds``.
* **litert-torch's ``lightweight_conversion``** (its "faster conversion" switch): in one
  process, the same networks (other ones, per seed) converted with and without it, alternating
  which goes first; the two files compared with ``model_graph`` (operators, options, shapes,
  types, constants).

Every second of each conversion is counted. The load average and steal time are recorded.

    python benchmarks/latency/bench_convert_floor.py            # 3 seeds x 4 networks, r=224
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _setup(space_name: str):
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    from nagkit.space import get_space

    return get_space(space_name)


def _convert(space, arch, path: Path) -> None:
    import nagkit.runtimes.convert as convert
    from nagkit.supernet.static import StaticNet

    net = StaticNet.from_arch(space, arch, seed=0)
    convert.convert_module(net, (1, space.in_channels, arch.r, arch.r), "tflite", path, names=convert.IO_NAMES)


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def worker(args) -> int:
    """Convert ``--networks`` networks of ``--worker`` (a seed); print one JSON line."""
    from nagkit.latency.validate import random_archs

    space = _setup(args.space)
    archs = random_archs(space, args.networks + 1, seed=args.worker, resolutions=[args.resolution])
    rows = []
    with tempfile.TemporaryDirectory(prefix="nagkit-bench-floor-") as tmp:
        _convert(space, archs[0], Path(tmp) / "warm.tflite")  # imports and the first trace: not timed
        for i, arch in enumerate(archs[1:]):
            w0, c0 = time.perf_counter(), _cpu_s()
            _convert(space, arch, Path(tmp) / f"{i}.tflite")
            rows.append({"arch": str(arch), "wall_s": round(time.perf_counter() - w0, 3),
                         "cpu_s": round(_cpu_s() - c0, 3)})
    print(json.dumps({"seed": args.worker, "rows": rows}), flush=True)
    return 0


def _workers(args, seeds: list[int]) -> tuple[list[dict], float]:
    """Start one worker per entry of ``seeds`` at once; wait for all. Returns their reports and
    the wall time."""
    base = [sys.executable, __file__, "--space", args.space, "--resolution", str(args.resolution),
            "--networks", str(args.networks)]
    with tempfile.TemporaryDirectory(prefix="nagkit-bench-floor-") as tmp:
        # files, not pipes: the converters' chatter can be long
        outs = [Path(tmp) / f"{k}.out" for k in range(len(seeds))]
        errs = [Path(tmp) / f"{k}.err" for k in range(len(seeds))]
        t0 = time.perf_counter()
        procs = []
        for s, o, e in zip(seeds, outs, errs):
            with open(o, "w") as fo, open(e, "w") as fe:
                procs.append(subprocess.Popen(base + ["--worker", str(s)], stdout=fo, stderr=fe, text=True))
        for p in procs:
            p.wait()
        wall = time.perf_counter() - t0
        for p, s, e in zip(procs, seeds, errs):
            if p.returncode != 0:
                raise SystemExit(f"worker for seed {s} failed (exit {p.returncode}):\n{e.read_text()[-2000:]}")
        return [json.loads(o.read_text().strip().splitlines()[-1]) for o in outs], wall


def _per_net(reports: list[dict], key: str) -> float:
    return statistics.mean(r[key] for rep in reports for r in rep["rows"])


def lightweight(args, space, seed: int) -> list[dict]:
    import functools

    import litert_torch

    from nagkit.latency.validate import random_archs
    from nagkit.runtimes.graph import model_graph

    plain_convert = litert_torch.convert
    rows = []
    with tempfile.TemporaryDirectory(prefix="nagkit-bench-floor-") as tmp:
        _convert(space, random_archs(space, 1, seed=99, resolutions=[args.resolution])[0], Path(tmp) / "w.tflite")
        archs = random_archs(space, args.networks, seed=seed + 100, resolutions=[args.resolution])
        for i, arch in enumerate(archs):
            order = (False, True) if i % 2 == 0 else (True, False)
            t, g = {}, {}
            for lw in order:
                p = Path(tmp) / f"{i}-{int(lw)}.tflite"
                litert_torch.convert = functools.partial(plain_convert, lightweight_conversion=True) if lw \
                    else plain_convert
                try:
                    t0 = time.perf_counter()
                    _convert(space, arch, p)
                    t[lw] = time.perf_counter() - t0
                finally:
                    litert_torch.convert = plain_convert
                g[lw] = model_graph(p, constants=True)
            rows.append({"seed": seed, "arch": str(arch), "first": "lightweight" if order[0] else "default",
                         "default_s": round(t[False], 3), "lightweight_s": round(t[True], 3),
                         "ratio": round(t[True] / t[False], 4), "same_graph_and_constants": g[True] == g[False]})
            print(f"lightweight {i}: {t[True]:.2f} s, default {t[False]:.2f} s, same graph and constants "
                  f"{rows[-1]['same_graph_and_constants']}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", default="ofa-mbv3-w1.0")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--networks", type=int, default=4, help="timed networks per worker (and for lightweight)")
    ap.add_argument("--seeds", default="201,202,203",
                    help="per seed: the workers' networks (alone and at once: the same), and lightweight's")
    ap.add_argument("--results-dir", default=str(ROOT / "benchmarks" / "latency" / "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return worker(args)

    from bench_cpu import LoadSampler, busy_processes, machine_info, result_path

    from nagkit.io import atomic_write_json
    from nagkit.latency.table import utc_now

    seeds = [int(x) for x in args.seeds.split(",")]
    space = _setup(args.space)
    busy = busy_processes()
    per_seed, alone, both, lw = [], [], [], []
    with LoadSampler() as load:
        for seed in seeds:
            one, one_wall = _workers(args, [seed])
            two, two_wall = _workers(args, [seed, seed])
            light = lightweight(args, space, seed)
            a, b = _per_net(one, "wall_s"), _per_net(two, "wall_s")
            per_seed.append({"seed": seed, "alone_wall_s_per_network": round(a, 3),
                             "two_at_once_wall_s_per_network": round(b, 3),
                             "throughput_two_vs_one": round(2 * a / b, 3),
                             "lightweight_median_ratio": round(statistics.median(r["ratio"] for r in light), 4),
                             "alone_process_wall_s": round(one_wall, 1),
                             "two_at_once_process_wall_s": round(two_wall, 1)})
            alone += one
            both += two
            lw += light
            print(f"seed {seed}: alone {a:.2f} s per network, two at once {b:.2f} s each "
                  f"({2 * a / b:.2f}x); lightweight/default median {per_seed[-1]['lightweight_median_ratio']:.3f}",
                  flush=True)
    a, b = _per_net(alone, "wall_s"), _per_net(both, "wall_s")
    report = {
        "benchmark": "TFLite conversion of calibration networks: cores used, two processes at once, "
                     "litert-torch's lightweight_conversion",
        "space": space.name, "resolution": args.resolution, "machine": machine_info(), "argv": sys.argv[1:],
        "when": utc_now(), "busy_processes_at_start": busy, "load": load.summary(),
        "summary": {
            "seeds": seeds, "networks_per_worker": args.networks,
            "alone_wall_s_per_network": round(a, 3), "alone_cpu_s_per_network": round(_per_net(alone, "cpu_s"), 3),
            "two_at_once_wall_s_per_network": round(b, 3),
            "two_at_once_cpu_s_per_network": round(_per_net(both, "cpu_s"), 3),
            "throughput_two_vs_one": round(2 * a / b, 3),
            "throughput_two_vs_one_range": [min(r["throughput_two_vs_one"] for r in per_seed),
                                            max(r["throughput_two_vs_one"] for r in per_seed)],
            "lightweight_median_ratio": round(statistics.median(r["ratio"] for r in lw), 4),
            "lightweight_ratio_range": [min(r["ratio"] for r in lw), max(r["ratio"] for r in lw)],
            "lightweight_all_same": all(r["same_graph_and_constants"] for r in lw)},
        "per_seed": per_seed, "alone": alone, "two_at_once": both, "lightweight": lw}
    out = result_path(args.results_dir, f"convert-floor-{space.name}-r{args.resolution}", report["machine"], args.tag)
    atomic_write_json(out, report)
    s = report["summary"]
    print(f"two processes give {s['throughput_two_vs_one']:.2f}x one (per seed {s['throughput_two_vs_one_range']}); "
          f"lightweight/default median "
          f"{s['lightweight_median_ratio']:.3f} (same graph and constants: {s['lightweight_all_same']}); {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
