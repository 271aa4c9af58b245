#!/usr/bin/env python3
"""CUDA device smoke benchmark: torchvision MobileNetV3-Large, batch 1, eager vs CUDA graph.

Runs on the GPU machine with only torch + torchvision + numpy (no LiteRT, no adb-shell, no
installed nagkit; the repository root is put on sys.path)::

    PYTHONUNBUFFERED=1 python3 benchmarks/devices/cuda_smoke.py --out benchmarks/devices/cuda_smoke.json

It measures, side by side on one GPU:

* nagkit's CudaDevice in ``eager`` and ``graph`` mode (the numbers nagkit's tables use);
* a plain-torch baseline of each (a fixed number of CUDA-event-timed iterations, no nagkit),
  so the nagkit numbers can be checked against an independent loop;
* one small block (the first inverted residual), where launch overhead dominates eager timing.

Expected on an H200: about 3.1 ms eager and 0.52 ms as a graph for the whole network.
Writes JSON with the machine facts (GPU, driver, torch, CUDA, cuDNN) and all the numbers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def plain_torch(module, x, mode: str, iters: int) -> float:
    """Baseline without nagkit: mean ms per forward over ``iters`` (eager calls or graph replays)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(5):
            module(x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        if mode == "graph":
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                module(x)
            for _ in range(20):
                g.replay()
            torch.cuda.synchronize()
            start.record()
            for _ in range(iters):
                g.replay()
            end.record()
        else:
            for _ in range(20):
                module(x)
            torch.cuda.synchronize()
            times = []
            for _ in range(iters):  # one event pair per call, as nagkit's eager mode does
                start.record()
                module(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            return float(times[len(times) // 2])
    end.synchronize()
    return float(start.elapsed_time(end) / iters)


def graph_matches_eager(module, x) -> float:
    """Max abs difference between a graph replay's output and an eager call's output."""
    import torch

    with torch.no_grad():
        ref = module(x).clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            module(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = module(x)
        g.replay()
        torch.cuda.synchronize()
        return float((out - ref).abs().max())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/devices/cuda_smoke.json"))
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--iters", type=int, default=500, help="iterations of the plain-torch baseline")
    args = ap.parse_args()

    import torch
    import torchvision

    from nagkit.devices.base import MeasureConfig
    from nagkit.devices.registry import get_device
    from nagkit.io import atomic_write_json

    torch.manual_seed(0)
    net = torchvision.models.mobilenet_v3_large(weights=None).eval()
    block = net.features[1]  # first inverted residual, 16 channels at 112x112
    cases = [("mobilenet_v3_large", net, (1, 3, 224, 224)), ("mbv3l.features[1]", block, (1, 16, 112, 112))]
    cfg = MeasureConfig(warmup_runs=20, warmup_s=0.5, min_runs=50, min_time_s=1.0, max_runs=5000,
                        max_time_s=10.0, target_rel_iqr=0.02)

    results = []
    info = runtime = None
    for name, module, shape in cases:
        row = {"model": name, "input_shape": list(shape)}
        for mode in ("eager", "graph"):
            with get_device(f"cuda:{args.index},mode={mode}") as dev:
                info, runtime = dev.info(), dev.runtime_info()
                st = dev.measure(module, shape, cfg)
                row[f"nagkit_{mode}"] = {**st.to_dict(), "rel_iqr": st.rel_iqr,
                                         "replays_per_window": dev.last_replays if mode == "graph" else None}
            gpu_module = module.to(f"cuda:{args.index}")
            x = torch.randn(shape, device=f"cuda:{args.index}")
            with torch.cuda.device(args.index):
                row[f"plain_torch_{mode}_ms"] = plain_torch(gpu_module, x, mode, args.iters)
            module.to("cpu")
            print(f"{name:22s} {mode:5s} nagkit median {st.median_ms:.4f} ms (n={st.n}, noisy={st.noisy}) "
                  f"plain torch {row[f'plain_torch_{mode}_ms']:.4f} ms", file=sys.stderr)
        row["eager_over_graph"] = row["nagkit_eager"]["median_ms"] / row["nagkit_graph"]["median_ms"]
        row["nagkit_vs_plain"] = {m: row[f"nagkit_{m}"]["median_ms"] / row[f"plain_torch_{m}_ms"] for m in ("eager", "graph")}
        with torch.cuda.device(args.index):
            row["graph_vs_eager_max_abs_diff"] = graph_matches_eager(module.to(f"cuda:{args.index}"),
                                                                     torch.randn(shape, device=f"cuda:{args.index}"))
        module.to("cpu")
        results.append(row)

    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except OSError:
        commit = None
    out = {
        "benchmark": "cuda_smoke",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"device": info, "runtime": runtime, "torchvision": torchvision.__version__,
                    "host": platform.node(), "python": platform.python_version()},
        "measure_config": cfg.to_dict(),
        "git_commit": commit,
        "results": results,
        "expected_h200": {"mobilenet_v3_large_eager_ms": 3.1, "mobilenet_v3_large_graph_ms": 0.52},
    }
    atomic_write_json(args.out, out)
    if os.environ.get("OUT"):  # the lent GPU machine returns files written under $OUT
        atomic_write_json(Path(os.environ["OUT"]) / Path(args.out).name, out)
    print(json.dumps({r["model"]: {"eager_ms": r["nagkit_eager"]["median_ms"], "graph_ms": r["nagkit_graph"]["median_ms"],
                                   "eager_over_graph": round(r["eager_over_graph"], 2)} for r in results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
