"""Latency budgets: K grid budgets and the interpolated budget embedding g(B).

K budgets B_1 < ... < B_K are evenly spaced over the dataset's latency range. Each has a
learned embedding g(B_k); a budget between two grid budgets B1 < B < B2 uses
``g(B) = xi * g(B1) + (1 - xi) * g(B2)`` with ``xi = (B2 - B) / (B2 - B1)`` (DESIGN.md).
A budget outside [B_1, B_K] is an error naming the feasible range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nagkit.errors import BadInputError


class BudgetOutOfRangeError(BadInputError):
    """A budget outside the grid's range (exit 2)."""


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

    def check(self, budgets: float | Sequence[float]) -> np.ndarray:
        """The budgets as an array; raises :class:`BudgetOutOfRangeError` naming the range."""
        b = np.atleast_1d(np.asarray(budgets, dtype=np.float64))
        bad = ~np.isfinite(b) | (b < self.lo - 1e-9) | (b > self.hi + 1e-9)
        if bad.any():
            x = float(b[np.flatnonzero(bad)[0]])
            raise BudgetOutOfRangeError(
                f"budget {x:g} ms is outside the feasible range {self.lo:.2f}..{self.hi:.2f} ms of this "
                "generator (the latency range of its training data)",
                hint=f"pass a budget in {self.lo:.2f}..{self.hi:.2f} ms, or widen [budgets] min_ms/max_ms "
                     "in the workspace and retrain with `nagkit train`")
        return np.clip(b, self.lo, self.hi)

    def interpolation(self, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index of B1, index of B2, xi) for each budget (checked)."""
        b = self.check(budgets)
        grid = np.asarray(self.values)
        i2 = np.clip(np.searchsorted(grid, b, side="left"), 1, self.k - 1)
        i1 = i2 - 1
        xi = (grid[i2] - b) / (grid[i2] - grid[i1])
        return i1, i2, xi

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
