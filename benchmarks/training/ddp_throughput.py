"""2-GPU data-parallel vs 1-GPU supernet training throughput (same code, same data, same GPU type).

Runs ``python -m nagkit.supernet.launch`` twice on the first ``--train-images`` Fashion-MNIST
training images, every progressive-shrinking phase for ``--epochs-per-phase`` epochs each: once on one GPU
(CUDA_VISIBLE_DEVICES=0) and once with ``--gpus 2`` (per-GPU batch fixed, so the global batch
doubles: weak scaling). Images/s per phase come from the trainers' own logs (timed between
CUDA synchronisations, evaluation excluded). Writes a JSON with the machine, both runs and
the ratios.

    python benchmarks/training/ddp_throughput.py --data-dir .fmnist --out ddp_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path


def run(gpus: int, a, workdir: Path) -> dict:
    out = workdir / f"gpus{gpus}"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if gpus == 1:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    cmd = [sys.executable, "-m", "nagkit.supernet.launch", "--space", a.space, "--out", str(out), "--gpus", str(gpus),
           "--data-dir", a.data_dir, "--limit-train", str(a.train_images), "--batch-size", str(a.batch_size),
           "--epochs", ",".join(f"{k}={a.epochs_per_phase}" for k in ("full", "kernel", "depth", "expand")),
           "--no-eval-every-epoch", "--n-val", "1000"]
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True)
    wall = time.perf_counter() - t
    rows = [json.loads(l) for l in (out / "train_log.jsonl").read_text().splitlines()]
    phases = {r["phase"]: r for r in rows if r.get("done")}
    return {"gpus": gpus, "wall_s": round(wall, 2), "phases": {k: {"images_per_s": v["images_per_s"],
            "images": v["images"], "seconds": v["seconds"], "subnets_per_step": v["subnets_per_step"],
            "last_epoch_images_per_s": last_epoch_rate(rows, k, v)}
            for k, v in phases.items()}}


def last_epoch_rate(rows: list[dict], phase: str, done: dict) -> float | None:
    """Images/s of the phase's last epoch alone (no warm-up), from the cumulative per-epoch rates
    the trainer logs: epoch k ends at seconds_k = k * images_per_epoch / rate_k."""
    ep = [r for r in rows if r.get("phase") == phase and "epoch" in r]
    if len(ep) < 2:
        return None
    per_epoch = done["images"] / done["epochs"]
    t_last = ep[-1]["epoch"] * per_epoch / ep[-1]["images_per_s"]
    t_prev = ep[-2]["epoch"] * per_epoch / ep[-2]["images_per_s"]
    return round(per_epoch / (t_last - t_prev), 1) if t_last > t_prev else None


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--space", default="fmnist-mbv3-w0.5")
    ap.add_argument("--train-images", type=int, default=51200)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workdir", default="out/ddp_bench")
    ap.add_argument("--epochs-per-phase", type=int, default=2,
                    help=">= 2 also reports each phase's last epoch alone (steady state, no warm-up)")
    a = ap.parse_args()
    wd = Path(a.workdir)
    one, two = run(1, a, wd), run(2, a, wd)
    steady = [p for p in one["phases"] if p != "full"]  # "full" includes CUDA/cuDNN warm-up

    def agg(r):
        return sum(r["phases"][p]["images"] for p in steady) / sum(r["phases"][p]["seconds"] for p in steady)

    res = {
        "benchmark": "supernet training throughput, 2-GPU DDP vs 1 GPU",
        "machine": {"gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                    "cpu_count": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version()},
        "setup": {"space": a.space, "train_images": a.train_images, "batch_per_gpu": a.batch_size,
                  "phases": f"{a.epochs_per_phase} epoch(s) each of full, kernel, depth1, depth2, expand1, expand2",
                  "amp": "bf16 autocast, channels_last, fixed-shape (masked) subnets, CUDA-graph replay of each step", "grad_sync": "one all_reduce per step of the flat gradient buffer (NCCL)"},
        "one_gpu": one, "two_gpus": two,
        "ratio_per_phase": {p: round(two["phases"][p]["images_per_s"] / one["phases"][p]["images_per_s"], 3)
                            for p in one["phases"]},
        "ratio_steady": round(agg(two) / agg(one), 3),
        "ratio_wall": round(one["wall_s"] / two["wall_s"], 3),  # the whole run, start-up and `full` included
        "ratio_last_epoch_per_phase": {p: round(two["phases"][p]["last_epoch_images_per_s"]
                                                / one["phases"][p]["last_epoch_images_per_s"], 3)
                                       for p in one["phases"] if one["phases"][p]["last_epoch_images_per_s"]
                                       and two["phases"][p]["last_epoch_images_per_s"]},
        "images_per_s_steady": {"one_gpu": round(agg(one), 1), "two_gpus": round(agg(two), 1)},
        "goal": ">= 1.8x",
    }
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: res[k] for k in ("ratio_per_phase", "ratio_steady", "ratio_last_epoch_per_phase",
                                          "images_per_s_steady")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
