"""Benchmark: a CUDA latency table for ofa-mbv3-w1.0 at r=224 and its end-to-end fidelity.

On the lent GPU machine (H100 or H200; the table and the result record which): profile every
unique block as a CUDA-graph replay (``device_profiles/cuda.yaml``), fit the calibration on
``--calib`` random networks (seed 1), then measure ``--samples`` other random networks (seed 0)
end to end and compare them with the raw block sum and the calibrated prediction. On a GPU the
plain sum misses the overlap of launches between layers; the calibration's offset is the fitted
per-network term, and both are reported.

    python benchmarks/latency/bench_cuda.py --out-dir $OUT
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=str(ROOT / "nagkit" / "resources" / "device_profiles" / "cuda.yaml"))
    ap.add_argument("--space", default="ofa-mbv3-w1.0")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--calib", type=int, default=None,
                    help="calibration networks (default: the count the default scheme needs, as "
                         "`nagkit profile --calibrate`; fewer than 10 is refused)")
    ap.add_argument("--out-dir", required=True, help="where the result JSON, plot and table go")
    args = ap.parse_args(argv)

    from bench_cpu import LoadSampler, machine_info

    from nagkit.devices.registry import get_device
    from nagkit.io import atomic_write_json
    from nagkit.latency.profiler import profile
    from nagkit.latency.table import LatencyTable, utc_now
    from nagkit.latency.validate import calibrate, plot_scatter, validate
    from nagkit.space import get_space

    space = get_space(args.space)
    res = [args.resolution]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with get_device(args.device) as dev:
        gpu = dev.info().get("gpu", "gpu")
        tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else gpu.replace(" ", "-").lower()
        name = f"cuda-{tag}-{space.name}"
        table_path = out / f"{name}.table.json"
        report = {"benchmark": "latency/bench_cuda.py", "space": space.name, "resolution": args.resolution,
                  "device_profile": "device_profiles/cuda.yaml", "gpu": gpu, "device_info": dev.info(),
                  "runtime": dev.runtime_info(), "machine": machine_info(), "updated": utc_now(),
                  "phases": {}}
        with LoadSampler() as load:
            t0 = time.perf_counter()
            r = profile(dev, space, res, table_path, force=True, progress=False,
                        command="benchmarks/latency/bench_cuda.py")
            report["phases"]["profile"] = {"wall_s": round(time.perf_counter() - t0, 2),
                                           "blocks": len(r.table.entries),
                                           "noisy_blocks": len(r.table.provenance.get("noisy_blocks", [])),
                                           "load": load.summary()}
        t0 = time.perf_counter()
        result = calibrate(r.table, dev, space, args.calib, seed=1, resolutions=res, progress=False)
        table, c = result.apply(r.table), result.candidate  # no calibration unless it beats the raw sum held out
        report["phases"]["calibrate"] = {"wall_s": round(time.perf_counter() - t0, 2), "n": result.plan.n, "seed": 1,
                                         "adopted": result.adopted, "scheme": result.record["scheme"],
                                         "held_out": result.record["held_out"], "noise": result.record["noise"],
                                         "scale": c.scale, "offset_ms": c.offset, "fit_mape": c.fit_error,
                                         "raw_mape_on_fit_set": c.details["raw_mape"]}
        prov = dict(table.provenance)
        prov.update({"device_profile": "device_profiles/cuda.yaml",
                     "benchmark_result": f"benchmarks/latency/results/{name}.json"})
        table = LatencyTable(**{**{f: getattr(table, f) for f in (
            "device", "runtime", "space_name", "space_spec", "resolutions", "entries", "stat", "created",
            "calibration")}, "provenance": prov})
        table.save(table_path)
        t0 = time.perf_counter()
        rep = validate(LatencyTable.load(table_path), dev, space, args.samples, seed=0, resolutions=res,
                       progress=False)
    plot = plot_scatter(rep, out / f"{name}.png")
    m = rep["calibrated"] or rep["raw"]
    report["phases"]["validate"] = {
        "wall_s": round(time.perf_counter() - t0, 2), "n": args.samples, "seed": 0, "raw": rep["raw"],
        "calibrated": rep["calibrated"], "calibration_overlap": rep["calibration_overlap"],
        "target": "≥95% of archs within ±5% (calibrated)", "meets_target": m["within_5pct"] >= 0.95,
        "noisy_measurements": rep["noisy_measurements"], "plot": f"benchmarks/latency/results/{plot.name}",
        "archs": rep["archs"]}
    atomic_write_json(out / f"{name}.json", report)
    cm = rep["calibrated"]
    print(f"{name}: raw MAPE {rep['raw']['mape']:.2f}% ±5% {rep['raw']['within_5pct']:.0%} | "
          + (f"calibrated MAPE {cm['mape']:.2f}% ±5% {cm['within_5pct']:.0%} ±10% {cm['within_10pct']:.0%} "
             f"rho {cm['spearman']:.3f}" if cm else "calibration not adopted (held-out error not below the raw "
                                                      "sum's)") + f"\n{result.summary()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
