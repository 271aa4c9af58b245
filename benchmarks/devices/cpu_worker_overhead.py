#!/usr/bin/env python3
"""What the persistent CPU worker saves: N tiny models measured through one worker vs a new
worker (new device) per model, side by side on the same machine.

    .venv/bin/python benchmarks/devices/cpu_worker_overhead.py --runtime onnxruntime --n 20

The measurement itself is kept minimal (1 warm-up run, 1 timed run) so the numbers are the
per-model overhead: pipe round trip + model load for the persistent worker, plus process
start and runtime import for a fresh one. Writes JSON with machine info.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=["litert", "onnxruntime"], default="onnxruntime")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch

    from nagkit.devices.base import MeasureConfig
    from nagkit.devices.registry import get_device
    from nagkit.runtimes.convert import to_onnx, to_tflite
    from nagkit.io import atomic_write_json

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    tmp = Path(tempfile.mkdtemp(prefix="nagkit-bench-"))
    model = (to_onnx if args.runtime == "onnxruntime" else to_tflite)(
        net, x, tmp / ("m.onnx" if args.runtime == "onnxruntime" else "m.tflite"))
    cfg = MeasureConfig(warmup_runs=1, warmup_s=0.0, min_runs=1, min_time_s=0.0, max_runs=1, max_time_s=1.0,
                        target_rel_iqr=10.0)
    spec = f"cpu:runtime={args.runtime},threads=1"

    t0 = time.perf_counter()
    with get_device(spec) as dev:
        dev.measure_many([(model, None)] * args.n, cfg)
        info, runtime = dev.info(), dev.runtime_info()
    persistent = time.perf_counter() - t0

    t0 = time.perf_counter()
    for _ in range(args.n):
        with get_device(spec) as dev:
            dev.measure(model, None, cfg)
    fresh = time.perf_counter() - t0

    out = {
        "benchmark": "cpu_worker_overhead",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"device": info, "runtime": runtime},
        "note": "shared 2-core machine with other engineers' jobs running: absolute times are noisy, the ratio is the point",
        "n_models": args.n,
        "persistent_worker_s": persistent,
        "fresh_worker_per_model_s": fresh,
        "per_model_ms": {"persistent": 1e3 * persistent / args.n, "fresh": 1e3 * fresh / args.n},
        "speedup": fresh / persistent,
    }
    path = args.out or str(ROOT / f"benchmarks/devices/cpu_worker_overhead_{args.runtime}.json")
    atomic_write_json(path, out)
    print(f"{args.runtime}: {args.n} models, persistent {persistent:.2f} s vs fresh {fresh:.2f} s "
          f"({out['speedup']:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
