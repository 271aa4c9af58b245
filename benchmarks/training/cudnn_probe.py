"""Probe: cost of a progressive-shrinking training step on CUDA, three ways.

Each new convolution shape (kernel x expand x resolution x block) costs cuDNN a one-time plan
set-up. ``cudnn`` slices the active subnet (a new shape per new subnet), ``fixed`` runs it at
the largest shapes with masks (nagkit's default on CUDA), ``native`` turns cuDNN off (PyTorch's
own CUDA convolutions: no set-up, but slow kernels), ``graphs`` is ``fixed`` with every step
replayed as a CUDA graph (tensor-controlled supernet; docs/decisions.md 13). This runs ``--steps`` steps of the
``expand2`` phase (every kernel, expand, depth and resolution choice; 2 subnets per step, KD
from the full network) with the same seeds in both modes and reports the step times of the
first and the last third, so set-up cost and steady state show separately.

    PYTHONPATH=. python3 benchmarks/training/cudnn_probe.py --data-dir .fmnist --out probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def run_mode(mode: str, a, sp) -> dict:
    import numpy as np
    import torch

    from nagkit.space import get_space
    from nagkit.supernet.train import TrainConfig, TrainData, Trainer, default_phases

    torch.backends.cudnn.enabled = mode != "native"
    space = get_space(a.space)
    cfg = TrainConfig(phases=default_phases(space), batch_size=a.batch_size, seed=a.seed,
                      fixed_shape=mode in ("fixed", "graphs"), cuda_graphs=mode == "graphs")
    data = TrainData.from_numpy(sp.train_x, sp.train_y, sp.val_x[:500], sp.val_y[:500], "cuda")
    tr = Trainer(space, cfg, data, f"out/probe-{mode}", progress=lambda m: None)
    pi = len(cfg.phases) - 1
    tr.teacher = tr._frozen_copy()
    tr._make_optimizer(cfg.phases[pi])
    g = torch.Generator().manual_seed(a.seed)
    times, losses = [], []
    steps = a.steps if mode in ("fixed", "graphs") else a.sliced_steps
    for s in range(steps):
        idx = torch.randint(0, len(sp.train_x), (a.batch_size,), generator=g).to("cuda")
        tr.state.step = s
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss = tr.train_step(pi, idx)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        losses.append(round(float(loss), 5))
    k = max(steps // 3, 1)
    first, last = np.array(times[:k]), np.array(times[-k:])
    return {"mode": mode, "steps": steps, "phase": cfg.phases[pi].name,
            "first_third_ms_median": round(float(np.median(first)) * 1e3, 2),
            "last_third_ms_median": round(float(np.median(last)) * 1e3, 2),
            "total_s": round(float(sum(times)), 2),
            "images_per_s_last_third": round(a.batch_size / float(np.median(last)), 1),
            "losses": losses}


def main() -> int:
    import torch

    from nagkit.images.fmnist import load_splits

    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--space", default="fmnist-mbv3-w0.5")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sliced-steps", type=int, default=15)
    ap.add_argument("--modes", default="fixed,cudnn",
                    help="fixed: cuDNN, fixed-shape masked subnets; graphs: fixed + CUDA-graph replay; cudnn: cuDNN, "
                         "sliced subnets; native: no cuDNN")
    a = ap.parse_args()
    sp = load_splits(a.data_dir, with_test=False)
    rows = []
    for m in a.modes.split(","):
        rows.append(run_mode(m, a, sp))
        print(json.dumps(rows[-1]), flush=True)
    res = {"probe": "progressive-shrinking step time, cuDNN vs native CUDA convolutions",
           "machine": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
                       "cpu_count": os.cpu_count()}, "rows": rows}
    by = {r["mode"]: r for r in rows}
    if "fixed" in by and "graphs" in by:  # same seeds and batches: the losses must agree (bf16 rounding)
        n = min(len(by["fixed"]["losses"]), len(by["graphs"]["losses"]))
        d = [abs(x - y) for x, y in zip(by["fixed"]["losses"][:n], by["graphs"]["losses"][:n])]
        res["graphs_vs_fixed"] = {"loss_max_abs_diff_first_10": max(d[:10]), "loss_max_abs_diff": max(d),
                                  "speedup_last_third": round(by["fixed"]["last_third_ms_median"]
                                                              / by["graphs"]["last_third_ms_median"], 2),
                                  "speedup_total": round(by["fixed"]["total_s"] / by["graphs"]["total_s"], 2)}
        print(json.dumps(res["graphs_vs_fixed"]), flush=True)
    with open(a.out, "w") as f:
        f.write(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
