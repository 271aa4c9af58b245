"""`nagkit supernet train` (progressive shrinking, single process or data parallel) and
`nagkit supernet eval` (subnet accuracy with inherited weights + BN recalibration)."""

from __future__ import annotations

from pathlib import Path

import click

from nagkit.cli.options import (POSITIVE, BoundedInt, emit, json_option, log, seed_flag, verbosity_option,
                                workspace_option)
from nagkit.runtimes.threads import MAX_THREADS


@click.group()
def supernet() -> None:
    """Train or evaluate a supernet (Fashion-MNIST IDX data)."""


def _workspace(ref: str | None):
    from nagkit.app.workspace import load_workspace

    return load_workspace(ref if ref is not None else "fmnist")


def _device(name: str | None, gpus: int | None) -> tuple[str, int]:
    import torch

    from nagkit.errors import BadInputError

    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise BadInputError(f"unknown --device {name!r}; valid: cpu, cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInputError("--device cuda but torch sees no CUDA GPU", hint="use --device cpu")
    if gpus is None:
        gpus = 1
    if gpus < 1:
        raise BadInputError(f"--gpus must be >= 1, got {gpus}")
    return name, gpus


@supernet.command("train")
@workspace_option
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for train_state.pt, supernet.pt and train_log.jsonl (default: WORKSPACE/supernet; for a "
                   "shipped preset, your copy of it).")
@click.option("--data-dir", default=None, help="Folder with the Fashion-MNIST IDX files (.gz or raw).")
@click.option("--device", "device_name", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Default: cuda when available.")
@click.option("--gpus", type=int, default=None, help="Data-parallel processes (one per GPU; spawns them).")
@click.option("--resume", is_flag=True, help="Continue from OUT/train_state.pt (same settings).")
@click.option("--epochs", "epochs_spec", default=None,
              help="Epochs per phase, e.g. full=12,kernel=6,depth=4,expand=4.")
@click.option("--batch-size", type=int, default=256, show_default=True, help="Images per step per process.")
@click.option("--subnets", type=int, default=None, help="Subnets per step in depth/expand phases (OFA: 2-4).")
@seed_flag(default=None, help="Default: the workspace's seed")
@click.option("--n-val", type=int, default=5000, show_default=True, help="Validation images split off train.")
@click.option("--max-steps", type=int, default=None, help="Stop (resumably) after this many steps in total.")
@click.option("--max-minutes", type=POSITIVE, default=None, help="Stop (resumably) after this much wall time.")
@click.option("--ckpt-every", type=int, default=0, help="Also checkpoint every N steps (0: per epoch).")
@click.option("--limit-train", type=int, default=None, help="Use only the first N training images (smoke runs).")
@click.option("--threads", type=BoundedInt(1, MAX_THREADS), default=None, help="CPU threads per process.")
@click.option("--cuda-graphs/--no-cuda-graphs", default=None,
              help="Replay each training step as a CUDA graph (default: on with --device cuda; "
                   "docs/decisions.md 13).")
@click.option("--eval-every-epoch/--eval-per-phase", default=True, show_default=True,
              help="Validate the largest/smallest subnet after every epoch, or only at the end of each phase.")
@json_option
@verbosity_option
def train_cmd(workspace, out, data_dir, device_name, gpus, resume, epochs_spec, batch_size, subnets, seed, n_val,
              max_steps, max_minutes, ckpt_every, limit_train, threads, cuda_graphs, eval_every_epoch,
              as_json) -> None:
    """Progressive shrinking (full -> kernel -> depth -> expand) with distillation.

    With --gpus N > 1 this spawns N processes; under torchrun (RANK/WORLD_SIZE set) each
    process joins the group. Checkpoints every epoch; --resume continues exactly.
    """
    from dataclasses import replace

    from nagkit.supernet.launch import launch, make_opts
    from nagkit.supernet.train_config import FINAL_NAME, LOG_NAME, TrainConfig, default_phases, parse_epochs

    ws = _workspace(workspace)
    if out is None:  # the default --out is the workspace's own supernet/ folder
        from nagkit.app.workspace import writable_workspace

        ws = writable_workspace(ws, "nagkit supernet train")
    device, n = _device(device_name, gpus)
    if cuda_graphs and device != "cuda":
        from nagkit.errors import BadInputError

        raise BadInputError("--cuda-graphs needs --device cuda (this run is on the CPU)",
                            hint="drop --cuda-graphs, or train on a GPU with --device cuda")
    phases = default_phases(ws.space, parse_epochs(epochs_spec))
    if subnets is not None:
        phases = tuple(replace(p, subnets=subnets) if p.name[:5] in ("depth", "expan") else p for p in phases)
    cfg = TrainConfig(phases=phases, batch_size=batch_size, seed=ws.seed if seed is None else seed,
                      ckpt_every_steps=ckpt_every, eval_every_epoch=eval_every_epoch, cuda_graphs=cuda_graphs)
    out_dir = Path(out) if out else ws.root / "supernet"
    opts = make_opts(ws.space, cfg, data_dir=data_dir, out=str(out_dir), n_val=n_val, resume=resume,
                     max_steps=max_steps, max_minutes=max_minutes, limit_train=limit_train, threads=threads)
    status = launch(opts, device, n, log=log)
    if status["status"] == "rank":
        return
    result = {"status": status["status"], "global_step": status["global_step"], "out": str(out_dir),
              "checkpoint": str(out_dir / FINAL_NAME) if status["status"] == "done" else None,
              "log": str(out_dir / LOG_NAME) if status["status"] == "done" else None}
    if status["status"] == "done":
        from nagkit.supernet.train_config import read_train_meta

        meta = read_train_meta(out_dir / FINAL_NAME)
        result["phases"] = meta["phases"]
        result["final_val"] = meta["final_val"]
    emit(result, as_json, lambda r: (f"{r['status']}: {r['checkpoint'] or 'resume with --resume'} "
                                     f"(step {r['global_step']})"
                                     + (f"\nvalidation accuracy {r['final_val']}" if r.get("final_val") else "")))


@supernet.command("eval")
@workspace_option
@click.option("--ckpt", default=None, help="Supernet checkpoint (default: the workspace's supernet).")
@click.option("--arch", "archs", multiple=True, help="Arch (canonical string or OFA JSON); default: smallest and "
                                                     "largest.")
@click.option("--split", type=click.Choice(["val", "test"]), default="val", show_default=True)
@click.option("--data-dir", default=None, help="Folder with the Fashion-MNIST IDX files.")
@click.option("--calib-images", type=int, default=None, help="Images for BN recalibration (default: the "
                                                           "workspace's accuracy_options, else 2000).")
@click.option("--device", "device_name", type=click.Choice(["cpu", "cuda"]), default=None)
@json_option
@verbosity_option
def eval_cmd(workspace, ckpt, archs, split, data_dir, calib_images, device_name, as_json) -> None:
    """Accuracy of subnets with inherited weights and recalibrated BN."""
    from nagkit.data.supernet_acc import SupernetEvaluator

    ws = _workspace(workspace)
    device, _ = _device(device_name, 1)
    path = Path(ckpt) if ckpt else ws.supernet_path()
    if path is None:
        from nagkit.errors import BadInputError

        raise BadInputError(f"workspace {ws.name!r} names no supernet and --ckpt is not given",
                            hint=f"train one with `nagkit supernet train --workspace {ws.ref}`")
    opts = {k: v for k, v in ws.accuracy_options.items() if k not in ("cache", "device", "split")}
    opts.update({"data_dir": data_dir, "split": split, "device": device})
    if calib_images is not None:
        opts["calib_images"] = calib_images
    ev = SupernetEvaluator(path, ws.space, opts)
    arch_list = [ws.space.parse_arch(a) for a in archs] or [ws.space.smallest(), ws.space.largest()]
    acc = ev(arch_list)
    rows = [{"arch": str(a), "accuracy": float(x), "params": ws.space.params(a), "macs": ws.space.macs(a)}
            for a, x in zip(arch_list, acc)]
    result = {"checkpoint": str(path), "split": split, "results": rows, "provenance": ev.provenance()}
    emit(result, as_json, lambda r: "\n".join(f"{x['accuracy']:.4f}  {x['arch']}  ({x['params'] / 1e6:.2f}M params, "
                                              f"{x['macs'] / 1e6:.1f}M MACs)" for x in r["results"]))

