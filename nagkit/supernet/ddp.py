"""Data parallelism for supernet training and evaluation (torch.distributed).

Every rank samples the *same* subnet each step (the sampler's generator is seeded by the step
index, not by the rank), so gradients of one subnet are averaged. Progressive shrinking leaves
many parameters without a gradient in a step (inactive blocks, kernels, channels), so instead
of ``DistributedDataParallel(find_unused_parameters=True)`` the gradients that exist are
flattened and averaged with one ``all_reduce`` per step; since all ranks run the same subnet,
the set of parameters with gradients is the same on every rank.

Launch: ``torchrun --nproc-per-node N -m nagkit supernet train ...`` sets ``RANK``/``WORLD_SIZE``
(we initialise from the environment), or ``--gpus N`` spawns N local processes with
:func:`spawn` (one per GPU, NCCL; gloo on CPU).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from nagkit.errors import BadInputError, DeviceError


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def env_world() -> tuple[int, int, int] | None:
    """(rank, world_size, local_rank) when launched by torchrun, else None."""
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    return None


def init(rank: int, world_size: int, local_rank: int, device: str) -> DistEnv:
    """Initialise the process group (NCCL on CUDA, gloo on CPU) and pin this rank's GPU."""
    import torch.distributed as dist

    if device.startswith("cuda"):
        if torch.cuda.device_count() <= local_rank:
            raise DeviceError(f"rank {rank} needs GPU {local_rank} but only {torch.cuda.device_count()} are visible",
                              hint="lower --gpus or check CUDA_VISIBLE_DEVICES")
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        backend = "nccl"
    else:
        backend = "gloo"
    if world_size > 1 and not dist.is_initialized():
        kw: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world_size}
        if backend == "nccl":
            kw["device_id"] = torch.device(device)
        dist.init_process_group(**kw)
    return DistEnv(rank, world_size, local_rank, device)


def shutdown(env: DistEnv) -> None:
    import torch.distributed as dist

    if env.distributed and dist.is_initialized():
        dist.destroy_process_group()


def average_gradients(params: list[torch.nn.Parameter], env: DistEnv) -> None:
    """Average the existing gradients over ranks with one flattened all_reduce."""
    if not env.distributed:
        return
    import torch.distributed as dist

    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat.div_(env.world_size)
    off = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[off:off + n].view_as(g))
        off += n


def all_reduce_mean_(flat: torch.Tensor, env: DistEnv) -> None:
    """Average one flat buffer (e.g. every gradient as views of it) over ranks, in place."""
    if not env.distributed:
        return
    import torch.distributed as dist

    dist.all_reduce(flat)
    flat.div_(env.world_size)


def barrier(env: DistEnv) -> None:
    if env.distributed:
        import torch.distributed as dist

        if env.device.startswith("cuda"):
            dist.barrier(device_ids=[env.local_rank])
        else:
            dist.barrier()


def all_sum(values: list[float], env: DistEnv) -> list[float]:
    if not env.distributed:
        return list(values)
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=env.device)
    dist.all_reduce(t)
    return t.tolist()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(local_rank: int, world_size: int, device: str, fn: Callable, args: tuple) -> None:
    env = init(local_rank, world_size, local_rank, device)
    try:
        fn(env, *args)
    finally:
        shutdown(env)


def spawn(fn: Callable[..., Any], world_size: int, device: str, args: tuple = ()) -> None:
    """Run ``fn(env, *args)`` in ``world_size`` local processes (rank = local rank)."""
    if world_size < 1:
        raise BadInputError(f"--gpus must be >= 1, got {world_size}")
    if device.startswith("cuda") and torch.cuda.device_count() < world_size:
        raise BadInputError(f"--gpus {world_size} asks for more GPUs than the {torch.cuda.device_count()} visible",
                            hint=f"use --gpus {max(torch.cuda.device_count(), 1)}")
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(_entry, args=(world_size, device, fn, args), nprocs=world_size, join=True)
