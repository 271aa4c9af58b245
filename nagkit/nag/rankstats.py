"""Kendall's tau-b for the training reports, without scipy.

``scipy.stats`` takes about a second to import on a 2-core CPU, which every ``nagkit train``
paid inside its training time for one report figure (docs/decisions.md 46). This is the same
statistic as ``scipy.stats.kendalltau``'s default (tau-b; NaN when an input has a NaN or is
constant), counted over all pairs in blocks (``tests/nag/test_optim.py`` compares them)."""

from __future__ import annotations

import math

import numpy as np

_BLOCK = 1024  # rows per block of the pair count: [1024, n] float64 at a time


def _ties(v: np.ndarray) -> int:
    _, counts = np.unique(v, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def kendall_tau(x, y) -> float:
    """Kendall's tau-b of two equally long 1-D sequences."""
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"kendall_tau: lengths {len(x)} and {len(y)} differ")
    n = len(x)
    if n < 2 or np.isnan(x).any() or np.isnan(y).any():
        return math.nan
    tot = n * (n - 1) // 2
    xtie, ytie = _ties(x), _ties(y)
    if xtie == tot or ytie == tot:
        return math.nan
    s = 0
    for i in range(0, n, _BLOCK):
        dx = np.sign(x[i:i + _BLOCK, None] - x[None, :])
        dy = np.sign(y[i:i + _BLOCK, None] - y[None, :])
        s += int((dx * dy).sum())
    s //= 2  # each unordered pair was counted twice
    tau = s / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(min(1.0, max(-1.0, tau)))
