"""CUDA-graph replay of the progressive-shrinking training step (docs/decisions.md 13).

At Fashion-MNIST sizes a training step is a few milliseconds of GPU work behind some
thousand kernel launches (20 elastic blocks x masks, kernel transforms, BN, SE, autocast
casts, forward and backward, for each subnet and the teacher), so an eager step is bound by
the CPU launching kernels. With the supernet under tensor control
(:meth:`OFAMobileNetV3.set_tensor_control`) the work of a step no longer depends on the
sampled arch, only on the resolution, the number of subnets and whether a teacher
distils. :class:`GraphedSteps` captures that work once per ``(resolution, subnets, kd)`` and
replays it: each step writes the batch and the subnets' control vectors into static tensors
(one pinned host-to-device copy for the archs) and launches one graph.

Gradients live in one flat buffer (every trainable parameter's ``.grad`` is a view of it,
with the parameter's strides), zeroed inside the graph and accumulated over the step's
subnets, so data-parallel averaging is one ``all_reduce`` of that buffer and the optimizer
runs eagerly on it. Parameters outside the sampled subnets get zero gradients (not none), as
under OFA's original ``zero_grad``; SGD then applies momentum and weight decay to them too.

Each key's first :attr:`GraphedSteps.WARMUP` steps run eagerly on a side stream (real
training steps, same arithmetic), as CUDA graph capture requires; the next one is captured
and every later one replayed. All graphs share one memory pool (they never run concurrently).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from nagkit.space import Arch
from nagkit.supernet.network import OFAMobileNetV3


@dataclass
class _Entry:
    x: torch.Tensor
    y: torch.Tensor
    runs: int = 0
    graph: torch.cuda.CUDAGraph | None = None
    loss: torch.Tensor | None = None


class GraphedSteps:
    WARMUP = 2

    def __init__(self, net: OFAMobileNetV3, *, label_smoothing: float, kd_ratio: float, max_subnets: int = 4):
        dev = net.first_conv.conv.weight.device
        if dev.type != "cuda":
            raise ValueError("CUDA graphs need the network on a CUDA device")
        self.net = net.set_tensor_control(True)
        self.label_smoothing, self.kd_ratio = label_smoothing, kd_ratio
        self.params = [p for p in net.parameters() if p.requires_grad]
        self.flat = torch.zeros(sum(p.numel() for p in self.params), dtype=torch.float32, device=dev)
        off = 0
        for p in self.params:
            if p.dtype != torch.float32:
                raise ValueError(f"CUDA-graph steps expect float32 parameters, got {p.dtype}")
            p.grad = torch.as_strided(self.flat, p.shape, p.stride(), off)
            off += p.numel()
        self.slots = torch.zeros(max_subnets, net.control_length(), dtype=torch.float32, device=dev)
        self.entries: dict[tuple[int, int, bool], _Entry] = {}
        self.pool = torch.cuda.graph_pool_handle()
        self.side = torch.cuda.Stream(device=dev)
        self.captures = 0

    def _body(self, e: _Entry, n_sub: int, teacher: torch.nn.Module | None) -> torch.Tensor:
        """Zero the gradients, then teacher forward and ``n_sub`` subnet forward/backward passes."""
        self.flat.zero_()
        amp = dict(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False)
        soft = None
        if teacher is not None:
            with torch.no_grad(), torch.autocast(**amp):
                soft = F.softmax(teacher(e.x).float(), dim=1)
        total = None
        ctl = self.net.control
        for j in range(n_sub):
            ctl.copy_(self.slots[j])
            with torch.autocast(**amp):
                out = self.net(e.x)
            out = out.float()
            loss = F.cross_entropy(out, e.y, label_smoothing=self.label_smoothing)
            if soft is not None:
                loss = loss + self.kd_ratio * torch.mean(torch.sum(-soft * F.log_softmax(out, dim=1), dim=1))
            loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        return total / n_sub

    def step(self, x: torch.Tensor, y: torch.Tensor, archs: list[Arch], teacher: torch.nn.Module | None) -> torch.Tensor:
        """Forward/backward of ``archs`` on the batch ``(x, y)``; gradients land in :attr:`flat`.
        Returns the mean loss (a fresh device tensor; no host sync)."""
        n = len(archs)
        if n > len(self.slots):
            raise ValueError(f"{n} subnets per step; at most {len(self.slots)}")
        vec = np.stack([self.net.control_vector(a) for a in archs])
        self.slots[:n].copy_(torch.from_numpy(vec).pin_memory(), non_blocking=True)
        key = (int(x.shape[-1]), n, teacher is not None)
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = _Entry(torch.empty_like(x), torch.empty_like(y))
        e.x.copy_(x)
        e.y.copy_(y)
        self.net.train()
        if e.graph is None and e.runs < self.WARMUP:
            main = torch.cuda.current_stream()
            self.side.wait_stream(main)
            with torch.cuda.stream(self.side):
                loss = self._body(e, n, teacher)
            main.wait_stream(self.side)
            loss.record_stream(main)
            e.runs += 1
            return loss
        if e.graph is None:
            g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            with torch.cuda.graph(g, pool=self.pool):
                e.loss = self._body(e, n, teacher)
            e.graph = g
            self.captures += 1
        e.graph.replay()
        e.runs += 1
        return e.loss.clone()
