"""Launch supernet training: one process, N spawned processes, or one rank under torchrun.

Click-free, so GPU machines with only torch/torchvision can run it:
``python -m nagkit.supernet.launch --space fmnist-mbv3-w0.5 --out DIR --gpus 2 ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from nagkit.supernet import ddp


def train_worker(env: ddp.DistEnv, opts: dict[str, Any]) -> None:
    """One training process (rank ``env.rank``); also the single-process path."""
    import torch

    threads = int(opts["threads"]) if env.device == "cpu" and opts.get("threads") else None
    before = torch.get_num_threads()
    if threads:  # restored below: the single-process path runs in the caller's process
        torch.set_num_threads(threads)
    try:
        _train(env, opts)
    finally:
        if threads:
            torch.set_num_threads(before)


def _train(env: ddp.DistEnv, opts: dict[str, Any]) -> None:
    import torch

    from nagkit.images.fmnist import load_splits
    from nagkit.space import SearchSpace
    from nagkit.supernet.train import TrainConfig, TrainData, Trainer

    if env.device.startswith("cuda") and os.environ.get("NAGKIT_CUDNN") == "0":
        # A/B switch for the per-conv-shape set-up cost seen on H200 (docs/decisions.md, 2).
        torch.backends.cudnn.enabled = False
    space = SearchSpace.from_dict(opts["space"])
    cfg = TrainConfig.from_dict(opts["config"])
    sp = load_splits(opts["data_dir"], n_val=opts["n_val"], seed=opts["val_seed"], with_test=False)
    if opts.get("limit_train"):
        n = int(opts["limit_train"])
        sp = type(sp)(sp.train_x[:n], sp.train_y[:n], sp.val_x, sp.val_y, sp.test_x, sp.test_y,
                      {**sp.provenance, "n_train": min(n, len(sp.train_x))})
    data = TrainData.from_numpy(sp.train_x, sp.train_y, sp.val_x, sp.val_y, env.device, sp.provenance)
    progress = (lambda m: print(m, file=sys.stderr, flush=True)) if env.is_main else (lambda m: None)
    trainer = Trainer(space, cfg, data, opts["out"], env=env, progress=progress)
    status = trainer.run(resume=opts["resume"], max_steps=opts.get("max_steps"), max_seconds=opts.get("max_seconds"))
    if env.is_main:
        Path(opts["out"], "status.json").write_text(json.dumps({"status": status, "global_step":
                                                                trainer.state.global_step}) + "\n")


def launch(opts: dict[str, Any], device: str, gpus: int, log=lambda m: None) -> dict[str, Any]:
    """Run training as configured; returns ``{"status", "global_step"}`` (rank 0's view)."""
    world = ddp.env_world()
    if world is not None:  # launched by torchrun
        env = ddp.init(*world, device)
        try:
            train_worker(env, opts)
        finally:
            ddp.shutdown(env)
        if world[0] != 0:
            return {"status": "rank", "global_step": -1}
    elif gpus > 1:
        log(f"spawning {gpus} data-parallel processes on {device}")
        ddp.spawn(train_worker, gpus, device, (opts,))
    else:
        train_worker(ddp.init(0, 1, 0, device), opts)
    return json.loads((Path(opts["out"]) / "status.json").read_text())


def make_opts(space, cfg, *, data_dir: str | None, out: str, n_val: int = 5000, resume: bool = False,
              max_steps: int | None = None, max_minutes: float | None = None, limit_train: int | None = None,
              threads: int | None = None) -> dict[str, Any]:
    from nagkit.images.fmnist import data_dir as find_dir

    return {"space": space.to_dict(), "config": cfg.to_dict(), "data_dir": str(find_dir(data_dir)), "n_val": n_val,
            "val_seed": cfg.seed, "out": str(out), "resume": resume, "max_steps": max_steps,
            "max_seconds": None if max_minutes is None else max_minutes * 60, "limit_train": limit_train,
            "threads": threads}


def main(argv: list[str] | None = None) -> int:
    from dataclasses import replace

    import torch

    from nagkit.space import get_space
    from nagkit.supernet.train_config import TrainConfig, default_phases, parse_epochs

    ap = argparse.ArgumentParser(prog="python -m nagkit.supernet.launch")
    ap.add_argument("--space", default="fmnist-mbv3-w0.5")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--epochs", default=None)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--subnets", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-val", type=int, default=5000)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--max-minutes", type=float, default=None)
    ap.add_argument("--limit-train", type=int, default=None)
    ap.add_argument("--no-eval-every-epoch", action="store_true")
    ap.add_argument("--no-cuda-graphs", action="store_true", help="eager steps on CUDA (default: CUDA-graph replay)")
    a = ap.parse_args(argv)
    space = get_space(a.space)
    phases = default_phases(space, parse_epochs(a.epochs))
    if a.subnets is not None:
        phases = tuple(replace(p, subnets=a.subnets) if p.name[:5] in ("depth", "expan") else p for p in phases)
    cfg = TrainConfig(phases=phases, batch_size=a.batch_size, seed=a.seed, eval_every_epoch=not a.no_eval_every_epoch,
                      cuda_graphs=False if a.no_cuda_graphs else None)
    opts = make_opts(space, cfg, data_dir=a.data_dir, out=a.out, n_val=a.n_val, resume=a.resume,
                     max_steps=a.max_steps, max_minutes=a.max_minutes, limit_train=a.limit_train)
    res = launch(opts, a.device, a.gpus, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
