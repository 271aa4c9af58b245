"""Adam and the one-cycle schedule for NAG's small networks, without ``torch.optim``.

``torch.optim.Optimizer.__init__`` imports ``torch._dynamo`` on its first call (about 2 s on a
2-core CPU, with sympy and torch.distributed behind it), which every ``nagkit train`` paid
inside its training time, for networks that train in seconds (docs/decisions.md 46). These
are the same updates, operation for operation, as ``torch.optim.Adam`` on CPU (its
single-tensor path, L2 weight decay, no amsgrad) and ``torch.optim.lr_scheduler.OneCycleLR``
with its defaults (cosine annealing, two phases, beta1 cycled between 0.95 and 0.85), so
training gives the same bits (``tests/nag/test_optim.py`` compares them step by step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class Adam:
    """Adam with L2 weight decay, the update of ``torch.optim.Adam`` (CPU, single tensor).

    ``lr`` and ``beta1`` may be changed between steps (:func:`one_cycle` does). A parameter
    whose gradient is None is skipped and its step count does not advance, as in torch."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0):
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        self.lr, (self.beta1, self.beta2), self.eps, self.weight_decay = float(lr), betas, eps, weight_decay
        self._state: dict[int, tuple[list[float], torch.Tensor, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        lr, beta1, beta2, eps, wd = self.lr, self.beta1, self.beta2, self.eps, self.weight_decay
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            st = self._state.get(i)
            if st is None:
                st = self._state[i] = ([0.0], torch.zeros_like(p, memory_format=torch.preserve_format),
                                       torch.zeros_like(p, memory_format=torch.preserve_format))
            count, exp_avg, exp_avg_sq = st
            count[0] += 1.0  # torch counts in a float32 tensor: exact far beyond our step counts
            step = count[0]
            grad = p.grad
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


def one_cycle(total_steps: int, max_lr: float, pct_start: float, div_factor: float = 25.0,
              final_div_factor: float = 1e4, base_momentum: float = 0.85,
              max_momentum: float = 0.95) -> list[tuple[float, float]]:
    """(lr, beta1) of each step 0 … ``total_steps`` - 1: ``OneCycleLR``'s two-phase cosine
    schedule with momentum cycling, computed as it computes them."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    initial = max_lr / div_factor
    low = initial / final_div_factor
    phases = [(float(pct_start * total_steps) - 1, initial, max_lr, max_momentum, base_momentum),
              (total_steps - 1, max_lr, low, base_momentum, max_momentum)]

    def cos(start: float, end: float, pct: float) -> float:
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    out = []
    for step_num in range(total_steps):
        start_step = 0.0
        for i, (end_step, lr0, lr1, m0, m1) in enumerate(phases):
            if step_num <= end_step or i == len(phases) - 1:
                pct = (step_num - start_step) / (end_step - start_step)
                out.append((cos(lr0, lr1, pct), cos(m0, m1, pct)))
                break
            start_step = end_step
    return out
