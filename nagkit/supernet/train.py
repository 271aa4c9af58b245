"""Progressive shrinking (OFA) for an elastic MobileNetV3 supernet, resumable and data parallel.

Phases (OFA's order): ``full`` (the largest network, elastic resolution) -> ``kernel`` (elastic
kernel) -> ``depth1``, ``depth2``... (depth choices widened one at a time) -> ``expand1``,
``expand2``... (expand ratios widened one at a time; the middle channels are sorted by
importance with :meth:`OFAMobileNetV3.sort_channels` at the start of each expand phase).
From ``kernel`` on, a frozen copy of the trained full network is the teacher: loss =
label-smoothed CE + ``kd_ratio`` x soft CE against the teacher's distribution (OFA's
``kd_type='ce'``). Each step samples ``subnets`` archs and accumulates their gradients (OFA's
``dynamic_batch_size``). Each phase gets a fresh SGD (Nesterov) optimizer with cosine decay.

Determinism: the subnet, resolution, augmentation and dropout of step ``s`` of epoch ``e`` of
phase ``p`` come from generators seeded by ``(seed, p, e, s)`` (dropout also by the rank), so
all ranks train the same subnet and a resumed run is bitwise identical to an uninterrupted
one (on CPU). The training state (model, teacher, optimizer, scheduler, RNG states, phase,
epoch, step, log) is written atomically to ``train_state.pt`` after every epoch, every
``ckpt_every_steps`` steps and when a step/time limit stops the run. The final checkpoint
``supernet.pt`` holds only tensors and JSON-able metadata (``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import json
import logging
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nagkit.errors import BadInputError, CheckpointError
from nagkit.io import atomic_torch_save, atomic_write_text
from nagkit.space import Arch, SearchSpace
from nagkit.space.sampling import sample
from nagkit.supernet.ddp import DistEnv, all_reduce_mean_, all_sum, average_gradients, barrier
from nagkit.supernet.network import OFAMobileNetV3
from nagkit.supernet.train_config import (FINAL_NAME, FORMAT, LOG_NAME, STATE_NAME, PhaseConfig, TrainConfig,
                                          default_phases, parse_epochs, phase_space, read_train_meta, seed_of)

__all__ = ["FINAL_NAME", "FORMAT", "LOG_NAME", "STATE_NAME", "PhaseConfig", "TrainConfig", "TrainData", "TrainState",
           "Trainer", "default_phases", "parse_epochs", "phase_space", "read_train_meta", "seed_of"]

log = logging.getLogger(__name__)

@dataclass
class TrainData:
    """uint8 images ``[N, 1, 28, 28]`` and int64 labels, as tensors on the training device."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_numpy(cls, train_x, train_y, val_x, val_y, device: str, provenance=None) -> TrainData:
        def t(a, img):
            a = torch.as_tensor(np.ascontiguousarray(a))
            return (a.unsqueeze(1) if img and a.ndim == 3 else a).to(device)

        return cls(t(train_x, True), t(train_y, False), t(val_x, True), t(val_y, False), dict(provenance or {}))


@dataclass
class TrainState:
    phase: int = 0
    epoch: int = 0        # within the phase
    step: int = 0         # within the epoch
    global_step: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    phase_images: float = 0.0
    phase_seconds: float = 0.0


class Trainer:
    def __init__(self, space: SearchSpace, cfg: TrainConfig, data: TrainData, out_dir: str | Path,
                 env: DistEnv | None = None, progress: Callable[[str], None] | None = None):
        self.space, self.cfg, self.data = space, cfg, data
        self.out = Path(out_dir)
        self.env = env or DistEnv(device=str(data.train_x.device))
        self.device = torch.device(self.env.device)
        self.cuda = self.device.type == "cuda"
        self.progress = progress or (lambda m: None)
        if cfg.batch_size * self.env.world_size > len(data.train_x):
            raise BadInputError(f"batch size {cfg.batch_size} x {self.env.world_size} processes exceeds the "
                                f"{len(data.train_x)} training images", hint="lower --batch-size")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.net = OFAMobileNetV3(space).to(self.device)
        if self.cuda:
            self.net = self.net.to(memory_format=torch.channels_last)
        fixed = self.cuda if cfg.fixed_shape is None else cfg.fixed_shape
        graphs = (self.cuda and fixed) if cfg.cuda_graphs is None else cfg.cuda_graphs
        if graphs and not (self.cuda and fixed):
            raise BadInputError("CUDA-graph training steps need a CUDA device and fixed-shape execution "
                                f"(device {self.device}, fixed_shape {fixed})",
                                hint="train on a GPU, or leave cuda_graphs unset")
        self.net.set_fixed_shape(fixed)
        self.graphs = None
        if graphs:
            from nagkit.supernet.graphs import GraphedSteps

            self.graphs = GraphedSteps(self.net, label_smoothing=cfg.label_smoothing, kd_ratio=cfg.kd_ratio,
                                       max_subnets=max(p.subnets for p in cfg.phases))
        self.teacher: OFAMobileNetV3 | None = None
        self.state = TrainState()
        self.opt: torch.optim.Optimizer | None = None
        self.sched: torch.optim.lr_scheduler.LambdaLR | None = None
        g = torch.Generator().manual_seed(seed_of(cfg.seed, 7919))
        n_cal = min(cfg.calib_images, len(data.train_x))
        self.calib_idx = torch.randperm(len(data.train_x), generator=g)[:n_cal].to(self.device)

    # -- optimizer per phase -------------------------------------------------------------------
    def steps_per_epoch(self) -> int:
        return (len(self.data.train_x) // self.env.world_size) // self.cfg.batch_size

    def _make_optimizer(self, phase: PhaseConfig) -> None:
        decay, no_decay = [], []
        for n, p in self.net.named_parameters():
            (no_decay if p.ndim <= 1 or n.endswith("_matrix") else decay).append(p)
        groups = [{"params": decay, "weight_decay": self.cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        self.opt = torch.optim.SGD(groups, lr=phase.lr, momentum=self.cfg.momentum, nesterov=True)
        total = max(phase.epochs * self.steps_per_epoch(), 1)
        warm = int(self.cfg.warmup_epochs * self.steps_per_epoch()) if phase.name == "full" else 0

        def factor(s: int) -> float:
            if s < warm:
                return (s + 1) / warm
            return 0.5 * (1 + math.cos(math.pi * min(s - warm, total - warm) / max(total - warm, 1)))

        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, factor)

    # -- checkpoints -----------------------------------------------------------------------------
    def save_state(self) -> None:
        if not self.env.is_main:
            return
        st = self.state
        obj = {
            "format": FORMAT + "-train-state",
            "space": self.space.to_dict(),
            "config": json.dumps(self.cfg.to_dict()),
            "model": _cpu_sd(self.net),
            "teacher": _cpu_sd(self.teacher) if self.teacher is not None else {},
            "optimizer": self.opt.state_dict() if self.opt is not None else {},
            "scheduler": json.dumps(self.sched.state_dict()) if self.sched is not None else "",
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state() if self.cuda else torch.zeros(0, dtype=torch.uint8),
            "progress": json.dumps({"phase": st.phase, "epoch": st.epoch, "step": st.step,
                                    "global_step": st.global_step, "phase_images": st.phase_images,
                                    "phase_seconds": st.phase_seconds}),
            "log": json.dumps(st.log),
        }
        atomic_torch_save(self.out / STATE_NAME, obj)

    def load_state(self) -> None:
        p = self.out / STATE_NAME
        from nagkit.supernet.checkpoint import read_checkpoint

        obj = read_checkpoint(p)
        if obj.get("format") != FORMAT + "-train-state":
            raise CheckpointError(f"{str(p)!r} is not a nagkit training state (format {obj.get('format')!r})")
        if SearchSpace.from_dict(obj["space"]) != self.space:
            raise CheckpointError(f"{str(p)!r} was written for space {obj['space'].get('name')!r}, not "
                                  f"{self.space.name!r}", hint="train in a fresh folder, or drop --resume")
        saved = json.loads(obj["config"])
        mine = self.cfg.to_dict()
        diff = sorted(k for k in mine if saved.get(k) != mine[k])
        if diff:
            raise BadInputError(f"cannot resume {str(p)!r}: the training settings changed ({', '.join(diff)}); "
                                f"saved: {', '.join(f'{k}={saved.get(k)!r}' for k in diff)}",
                                hint="resume with the same settings, or train in a fresh folder without --resume")
        prog = json.loads(obj["progress"])
        self.state = TrainState(prog["phase"], prog["epoch"], prog["step"], prog["global_step"],
                                json.loads(obj["log"]), prog["phase_images"], prog["phase_seconds"])
        self.net.load_state_dict(obj["model"])
        if obj["teacher"]:
            self.teacher = self._frozen_copy()
            self.teacher.load_state_dict(obj["teacher"])
        if self.state.phase < len(self.cfg.phases):
            self._make_optimizer(self.cfg.phases[self.state.phase])
            if obj["optimizer"]:
                self.opt.load_state_dict(obj["optimizer"])
            if obj["scheduler"]:
                self.sched.load_state_dict(json.loads(obj["scheduler"]))
        torch.set_rng_state(obj["rng_cpu"])
        if self.cuda and obj["rng_cuda"].numel():
            torch.cuda.set_rng_state(obj["rng_cuda"])

    def _frozen_copy(self) -> OFAMobileNetV3:
        """A frozen copy of the network at its largest arch (the distillation teacher), in the
        network's execution mode but without tensor control (its arch never changes)."""
        with torch.random.fork_rng(devices=[]):
            t = OFAMobileNetV3(self.space)
        t.load_state_dict(self.net.state_dict())
        t = t.to(self.device)
        if self.cuda:
            t = t.to(memory_format=torch.channels_last)
        t.set_fixed_shape(self.net.blocks[1].conv.fixed_shape).set_max().eval()
        for p in t.parameters():
            p.requires_grad_(False)
        return t

    # -- one step --------------------------------------------------------------------------------
    def _batch(self, idx: torch.Tensor, gen: torch.Generator, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        from nagkit.images.fmnist import augment, preprocess

        x = self.data.train_x.index_select(0, idx)
        if self.cfg.augment:
            x = augment(x, gen)
        x = preprocess(x, r, self.space.mean, self.space.std)
        if self.cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, self.data.train_y.index_select(0, idx)

    def train_step(self, phase_i: int, idx: torch.Tensor) -> torch.Tensor:
        """One optimisation step; returns the mean loss of its subnets as a device tensor (no
        host synchronisation)."""
        st, cfg = self.state, self.cfg
        phase = cfg.phases[phase_i]
        sub_space, _ = phase_space(self.space, phase.name)
        rng = np.random.default_rng([cfg.seed, phase_i, st.epoch, st.step])
        r = int(rng.choice(self.space.resolutions))
        archs = [Arch(r, sample(sub_space, rng).stages) for _ in range(phase.subnets)]
        seed = seed_of(cfg.seed, phase_i, st.epoch, st.step)
        gen = torch.Generator(device=self.device).manual_seed(seed)
        x, y = self._batch(idx, gen, r)
        kd = self.teacher is not None and phase.name != "full" and cfg.kd_ratio > 0
        # Dropout draws from the global generators: seed them for this step and rank inside a
        # fork, so training leaves the caller's RNG state as it found it.
        with torch.random.fork_rng(devices=[self.device] if self.cuda else []):
            torch.manual_seed(seed_of(seed, self.env.rank))
            return self._optimise(x, y, archs, kd)

    def _optimise(self, x: torch.Tensor, y: torch.Tensor, archs: list[Arch], kd: bool) -> torch.Tensor:
        """Forward/backward every subnet of the step, average gradients over ranks, update."""
        cfg = self.cfg
        if self.graphs is not None:
            loss = self.graphs.step(x, y, archs, self.teacher if kd else None)
            all_reduce_mean_(self.graphs.flat, self.env)
            self.opt.step()
            self.sched.step()
            return loss
        amp = dict(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.cuda)
        soft = None
        if kd:
            with torch.no_grad(), torch.autocast(**amp):
                soft = F.softmax(self.teacher(x).float(), dim=1)
        self.net.train()
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for a in archs:
            self.net.set_active(a)
            with torch.autocast(**amp):
                out = self.net(x)
            out = out.float()
            loss = F.cross_entropy(out, y, label_smoothing=cfg.label_smoothing)
            if soft is not None:
                loss = loss + cfg.kd_ratio * torch.mean(torch.sum(-soft * F.log_softmax(out, dim=1), dim=1))
            loss.backward()
            total = total + loss.detach()
        average_gradients(list(self.net.parameters()), self.env)
        self.opt.step()
        self.sched.step()
        return total / len(archs)

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self, archs: dict[str, Any]) -> dict[str, float]:
        from nagkit.supernet.evaluate import subnet_accuracy

        cal = self.data.train_x.index_select(0, self.calib_idx)
        out = {name: round(subnet_accuracy(self.net, a, cal, self.data.val_x, self.data.val_y, amp=self.cuda,
                                           channels_last=self.cuda), 5) for name, a in archs.items()}
        self.net.set_max()
        return out

    def _eval_archs(self, phase_name: str) -> dict[str, Any]:
        sub, _ = phase_space(self.space, phase_name)
        r = max(self.space.resolutions)
        return {"largest": self.space.largest(r), "smallest": sub.smallest(min(self.space.resolutions))}

    # -- the loop --------------------------------------------------------------------------------
    def run(self, *, resume: bool = False, max_steps: int | None = None, max_seconds: float | None = None) -> str:
        """Train to the end (returns ``"done"``) or until ``max_steps`` (global) / ``max_seconds``
        (returns ``"stopped"``, state saved for ``resume=True``)."""
        self.out.mkdir(parents=True, exist_ok=True)
        if resume and (self.out / STATE_NAME).is_file():
            self.load_state()
            self.progress(f"resumed at phase {self.state.phase} epoch {self.state.epoch} step {self.state.step}")
        elif resume:
            self.progress(f"nothing to resume in {self.out} (no {STATE_NAME}); starting fresh")
        t_start = time.monotonic()

        def limit_reached() -> bool:
            return (max_steps is not None and self.state.global_step >= max_steps) or (
                max_seconds is not None and time.monotonic() - t_start >= max_seconds)

        cfg, st = self.cfg, self.state
        while st.phase < len(cfg.phases):
            phase = cfg.phases[st.phase]
            self._start_phase(phase)
            while st.epoch < phase.epochs:
                losses = self._train_epoch(limit_reached)
                if losses is None:
                    return "stopped"
                last = self._end_epoch(phase, losses)
                if limit_reached() and st.phase < len(cfg.phases):
                    if self.env.is_main:
                        self.write_final(complete=False)
                    return "stopped"
                if last:
                    break
        if self.env.is_main:
            self.write_final()
        barrier(self.env)
        return "done"

    def _start_phase(self, phase: PhaseConfig) -> None:
        """A fresh phase: the teacher (from ``kernel`` on), channel sorting, a new optimizer.
        A phase resumed mid-way only needs its optimizer back."""
        st = self.state
        if st.epoch == 0 and st.step == 0:
            if phase.name != "full" and self.teacher is None and self.cfg.kd_ratio > 0:
                self.teacher = self._frozen_copy()
            _, sort_stage = phase_space(self.space, phase.name)
            if sort_stage is not None:
                self.net.sort_channels(sort_stage)
            self._make_optimizer(phase)
            st.phase_images, st.phase_seconds = 0.0, 0.0
        elif self.opt is None:
            self._make_optimizer(phase)

    def _epoch_order(self) -> torch.Tensor:
        """This rank's image indices for the epoch, one row per step."""
        from torch.utils.data.distributed import DistributedSampler

        st, spe, bs = self.state, self.steps_per_epoch(), self.cfg.batch_size
        sampler = DistributedSampler(range(len(self.data.train_x)), num_replicas=self.env.world_size,
                                     rank=self.env.rank, shuffle=True, seed=self.cfg.seed, drop_last=True)
        sampler.set_epoch(seed_of(st.phase, st.epoch) % (1 << 31))
        return torch.tensor(list(sampler), dtype=torch.long)[: spe * bs].view(spe, bs).to(self.device)

    def _train_epoch(self, limit_reached: Callable[[], bool]) -> list[torch.Tensor] | None:
        """The rest of the current epoch's steps; their losses, or None when a limit stopped the
        run mid-epoch (state and an incomplete final checkpoint saved)."""
        st, cfg, spe = self.state, self.cfg, self.steps_per_epoch()
        order = self._epoch_order()
        losses: list[torch.Tensor] = []
        t0, n0 = time.perf_counter(), st.step
        while st.step < spe:
            losses.append(self.train_step(st.phase, order[st.step]))
            st.step += 1
            st.global_step += 1
            stop = limit_reached()
            ckpt = cfg.ckpt_every_steps and st.global_step % cfg.ckpt_every_steps == 0
            if stop or ckpt or st.step == spe:
                if self.cuda:
                    torch.cuda.synchronize()
                st.phase_images += (st.step - n0) * cfg.batch_size * self.env.world_size
                st.phase_seconds += time.perf_counter() - t0
                t0, n0 = time.perf_counter(), st.step
            if stop and st.step < spe:
                self.save_state()
                if self.env.is_main:
                    self.write_final(complete=False)
                barrier(self.env)
                return None
            if ckpt and st.step < spe:
                self.save_state()
        return losses

    def _end_epoch(self, phase: PhaseConfig, losses: list[torch.Tensor]) -> bool:
        """Log the epoch (validating on the main rank), close the phase after its last epoch,
        save the state. Returns whether that was the phase's last epoch."""
        st, cfg, bs = self.state, self.cfg, self.cfg.batch_size
        loss = all_sum([float(torch.stack(losses).sum()) if losses else 0.0, len(losses)], self.env)
        row: dict[str, Any] = {"phase": phase.name, "epoch": st.epoch + 1, "of": phase.epochs,
                               "global_step": st.global_step,
                               "loss": round(loss[0] / max(loss[1], 1), 5),
                               "lr": round(self.opt.param_groups[0]["lr"], 6),
                               "images_per_s": round(st.phase_images / max(st.phase_seconds, 1e-9), 1)}
        st.epoch += 1
        st.step = 0
        last = st.epoch == phase.epochs
        if self.env.is_main and (cfg.eval_every_epoch or last):
            row["val"] = self.evaluate(self._eval_archs(phase.name))
        st.log.append(row)
        self.progress(json.dumps(row))
        if last:
            st.log.append({"phase": phase.name, "done": True, "epochs": phase.epochs,
                           "images": int(st.phase_images), "seconds": round(st.phase_seconds, 3),
                           "images_per_s": round(st.phase_images / max(st.phase_seconds, 1e-9), 1),
                           "world_size": self.env.world_size, "batch_per_process": bs,
                           "subnets_per_step": phase.subnets})
            st.phase += 1
            st.epoch = 0
            self.opt, self.sched = None, None
        self.save_state()
        barrier(self.env)
        return last

    # -- final artifact --------------------------------------------------------------------------
    def write_final(self, complete: bool = True) -> Path:
        metrics = [r for r in self.state.log if r.get("done")]
        final_val = next((r.get("val") for r in reversed(self.state.log) if "val" in r), None)
        meta = {
            "format": FORMAT,
            "space": self.space.to_dict(),
            "state_dict": {k: v.float() if v.is_floating_point() else v for k, v in _cpu_sd(self.net).items()},
            "train": json.dumps({"complete": complete, "progress": {"phase": self.state.phase, "epoch": self.state.epoch,
                                                                    "step": self.state.step},
                                 "config": self.cfg.to_dict(), "phases": metrics, "final_val": final_val,
                                 "data": self.data.provenance, "world_size": self.env.world_size,
                                 "device": _device_name(self.device), "torch": torch.__version__,
                                 "python": platform.python_version()}),
        }
        path = atomic_torch_save(self.out / FINAL_NAME, meta)
        atomic_write_text(self.out / LOG_NAME, "".join(json.dumps(r) + "\n" for r in self.state.log))
        return path


def _cpu_sd(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in net.state_dict().items()}


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return platform.processor() or platform.machine()
