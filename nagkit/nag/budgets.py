"""Latency budgets: the checks every command applies, K grid budgets and the interpolated
budget embedding g(B).

A budget must be a finite number > 0 and at least the fastest network of the space on the
table (:func:`check_budget`); above the slowest network every network fits, and generation
uses the slowest network's latency as the budget (saying so).

K budgets B_1 < ... < B_K are evenly spaced over the space's latency range on the table. Each
has a learned embedding g(B_k); a budget between two grid budgets B1 < B < B2 uses
``g(B) = xi * g(B1) + (1 - xi) * g(B2)`` with ``xi = (B2 - B) / (B2 - B1)`` (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import math
from typing import Any

from nagkit.errors import BadInputError, CheckFailedError


class BudgetBelowRangeError(CheckFailedError):
    """A budget below the fastest network of the space on the table (exit 1)."""


def check_budget(budget: Any, fastest: float, slowest: float) -> tuple[float, str | None]:
    """(budget to generate for, note) for a requested budget; raises on a bad one."""
    try:
        b = float(budget)
    except (TypeError, ValueError):
        raise BadInputError(f"budget {str(budget)[:40]!r} is not a number of milliseconds") from None
    if not math.isfinite(b) or b <= 0:
        raise BadInputError(f"budget {b:g} ms must be a finite number > 0",
                            hint=f"pass a budget in {fastest:.4g}..{slowest:.4g} ms")
    if b < fastest:
        raise BudgetBelowRangeError(
            f"budget {b:g} ms is below the fastest network of this space on this table ({fastest:.4g} ms)",
            hint=f"pass a budget >= {fastest:.4g} ms (the space's range on this table is "
                 f"{fastest:.4g}..{slowest:.4g} ms)")
    if b > slowest:
        return slowest, (f"budget {b:g} ms is above the slowest network of the space ({slowest:.4g} ms): every "
                         "network fits, so this is the most accurate one the generator finds")
    return b, None


@dataclass(frozen=True)
class BudgetGrid:
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        v = tuple(float(x) for x in self.values)
        if len(v) < 2 or any(b <= a for a, b in zip(v, v[1:])):
            raise BadInputError(f"a budget grid needs >= 2 increasing budgets, got {v}")
        object.__setattr__(self, "values", v)

    @classmethod
    def evenly(cls, lo: float, hi: float, k: int) -> BudgetGrid:
        if k < 2:
            raise BadInputError(f"budgets.k must be >= 2, got {k}")
        if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
            raise BadInputError(f"budget range must satisfy min < max, got [{lo}, {hi}] ms")
        return cls(tuple(np.linspace(lo, hi, k).tolist()))

    @property
    def k(self) -> int:
        return len(self.values)

    @property
    def lo(self) -> float:
        return self.values[0]

    @property
    def hi(self) -> float:
        return self.values[-1]

    def stratified(self, n: int, rng: np.random.Generator, start: float = 0.0) -> np.ndarray:
        """``n`` budgets, one uniformly drawn in each of ``n`` equal slices of the range (of its
        part from ``start``, a fraction of the way up, to the top)."""
        edges = np.linspace(self.lo + start * (self.hi - self.lo), self.hi, n + 1)
        return edges[:-1] + rng.random(n) * (edges[1:] - edges[:-1])

    def to_dict(self) -> dict:
        return {"values": list(self.values)}


def make_embedding(grid: BudgetGrid, dim: int):
    """A torch module mapping budgets (ms, float tensor) to interpolated embeddings."""
    import torch
    from torch import nn

    class BudgetEmbedding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("grid", torch.tensor(grid.values, dtype=torch.float32))
            # Initialised with smooth features of the grid position (a ramp and low-frequency
            # cosines) plus noise, so neighbouring budgets start close; all entries are learned.
            pos = torch.linspace(0, 1, grid.k).unsqueeze(1)
            freq = torch.arange(dim, dtype=torch.float32).unsqueeze(0)
            init = torch.cos(torch.pi * pos * freq / 2)
            init[:, 0] = 2 * pos[:, 0] - 1
            self.table = nn.Parameter(init + 0.05 * torch.randn(grid.k, dim))

        def forward(self, budgets: torch.Tensor) -> torch.Tensor:
            b = budgets.to(torch.float32).clamp(self.grid[0], self.grid[-1])
            i2 = torch.searchsorted(self.grid, b.contiguous(), right=False).clamp(1, grid.k - 1)
            i1 = i2 - 1
            g1, g2 = self.grid[i1], self.grid[i2]
            xi = ((g2 - b) / (g2 - g1)).unsqueeze(-1)
            return xi * self.table[i1] + (1 - xi) * self.table[i2]

    return BudgetEmbedding()
