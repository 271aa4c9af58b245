"""The accuracy surrogate: what NAG v3 learns from every paid-for accuracy (docs/decisions.md 37).

An MLP over the arch's one-hot encoding (:func:`nagkit.nag.features.onehot`: each active slot's
kernel and expand, each stage's depth, the resolution) regresses 100 x accuracy. It is fitted on
every queried arch and refitted, warm, after each round of queries. It has two jobs:

- **screening** in the frontier search (:mod:`nagkit.nag.frontier`): candidates evolve on the
  surrogate alone, and only its best new ones per budget are queried;
- **the evaluator** R(alpha | B) of zero-query generation (``[evaluator] kind = "surrogate"``):
  R is *computed*, not learned: 100 x accuracy for an arch within B (the exact accuracy when the
  arch was queried: the surrogate keeps a memory of every queried arch, and a paid-for value is
  never replaced by an estimate; the estimate otherwise), and for an arch over B a value below
  every accuracy that falls with its latency: the Pareto dominance order of the paper (the same
  target the v2 evaluator regressed onto, :func:`nagkit.nag.evaluator.dominance_target`).

The interface is the v2 :class:`~nagkit.nag.evaluator.Evaluator`'s (``features``, ``score``,
``grid``, ``config_dict``), so inference, the REINFORCE rewards and the artifacts serve both.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from nagkit.nag.budgets import BudgetGrid
from nagkit.nag.config import SurrogateConfig, torch_threads
from nagkit.nag.evaluator import INFEASIBLE_GAP
from nagkit.nag.features import onehot, onehot_dim
from nagkit.nag.optim import Adam
from nagkit.nag.rankstats import kendall_tau
from nagkit.space.decisions import Decisions, packed_keys
from nagkit.space.space import SearchSpace


class Surrogate(nn.Module):
    """Accuracy estimate (percent) plus the exact memory of queried archs; see the module doc."""

    def __init__(self, space: SearchSpace, grid: BudgetGrid, cfg: SurrogateConfig):
        super().__init__()
        self.space, self.grid, self.cfg = space, grid, cfg
        self._encode = onehot
        self.in_dim = onehot_dim(space)
        dims = [self.in_dim] + [cfg.hidden] * cfg.layers
        layers: list[nn.Module] = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers, nn.Linear(dims[-1], 1))
        self.register_buffer("offset", torch.zeros(()))  # mean of the fitted targets
        self.register_buffer("floor", torch.zeros(()))  # the lowest accuracy seen (percent)
        # the memory: packed arch keys [m, w] (int64 view of uint64) and their accuracies (percent)
        self.register_buffer("memory_keys", torch.zeros((0, 1), dtype=torch.int64))
        self.register_buffer("memory_acc", torch.zeros(0, dtype=torch.float64))
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None
        self._opt: Adam | None = None

    # -- the estimate -----------------------------------------------------------------------
    def estimate(self, x: torch.Tensor) -> torch.Tensor:
        """Surrogate accuracy (percent) of one-hot rows ``x`` [n, onehot_dim]."""
        return self.mlp(x).squeeze(-1) + self.offset

    def predict(self, dec: Decisions, recall: bool = True) -> np.ndarray:
        """Accuracy (percent) of decision rows: exact where queried (unless not ``recall``),
        estimated otherwise."""
        with torch.no_grad():
            est = self.estimate(self._encode(self.space, dec)).double().numpy()
        if not recall:
            return est
        known = self.recall(dec)
        return np.where(np.isnan(known), est, known)

    def recall(self, dec: Decisions) -> np.ndarray:
        """The queried accuracy (percent) of each row, NaN where the arch was never queried
        (vectorised: the rows' packed keys, hashed to one integer each, are looked up in the
        sorted memory, and every hit is confirmed on the whole key)."""
        out = np.full(len(dec), np.nan)
        if len(self.memory_acc) == 0 or len(dec) == 0:
            return out
        if self._lookup is None:
            mem = np.ascontiguousarray(self.memory_keys.numpy())
            h = _hash(mem)
            order = np.argsort(h, kind="stable")
            self._lookup = (h[order], mem[order], self.memory_acc.numpy()[order])
        hs, mk, acc = self._lookup
        keys = _keys(self.space, dec, self.memory_keys.shape[1]).view(np.int64)
        hq = _hash(keys)
        pos = np.minimum(np.searchsorted(hs, hq), len(hs) - 1)
        same_hash = hs[pos] == hq
        hit = same_hash & (mk[pos] == keys).all(axis=1)
        out[hit] = acc[pos[hit]]
        clash = np.flatnonzero(same_hash & ~hit)  # two memory keys share a hash: look those rows up whole
        if len(clash):
            out[clash] = self._recall_whole(keys[clash])
        return out

    def _recall_whole(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`recall` on whole keys (rows of int64), by a sorted structured search."""
        mem = self.memory_keys.numpy()
        order = np.lexsort(mem.T[::-1])
        dt = _row_dtype(mem.shape[1])
        sorted_keys = np.ascontiguousarray(mem[order]).view(dt).reshape(-1)
        q = np.ascontiguousarray(keys).view(dt).reshape(-1)
        pos = np.minimum(np.searchsorted(sorted_keys, q), len(sorted_keys) - 1)
        hit = sorted_keys[pos] == q
        out = np.full(len(keys), np.nan)
        out[hit] = self.memory_acc.numpy()[order][pos[hit]]
        return out

    def remember(self, dec: Decisions, acc_pct: np.ndarray) -> None:
        """Set the memory to these queried archs and accuracies (percent); none forgets all."""
        if len(dec) == 0:
            self.memory_keys = torch.zeros((0, self.memory_keys.shape[1]), dtype=torch.int64)
            self.memory_acc = torch.zeros(0, dtype=torch.float64)
            self._lookup = None
            return
        keys = packed_keys(self.space, dec)
        self.memory_keys = torch.from_numpy(np.ascontiguousarray(keys).view(np.int64).copy())
        self.memory_acc = torch.as_tensor(np.asarray(acc_pct, dtype=np.float64))
        self._lookup = None

    # -- the evaluator's interface ----------------------------------------------------------
    def features(self, dec: Decisions, lat_ms: np.ndarray | torch.Tensor) -> torch.Tensor:
        """[one-hot, latency / grid top, remembered accuracy or NaN] per row."""
        lat = torch.as_tensor(np.asarray(lat_ms), dtype=torch.float32).reshape(-1, 1)
        known = torch.from_numpy(self.recall(dec)).float().reshape(-1, 1)
        return torch.cat([self._encode(self.space, dec), lat / self.grid.hi, known], dim=1)

    def score(self, x: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
        """R(alpha_i | B_i) for paired rows [n]: accuracy within B, the dominance order over it."""
        known = x[:, -1]
        acc = torch.where(torch.isnan(known), self.estimate(x[:, :-2]), known)
        lat = x[:, -2] * self.grid.hi
        b = budgets.to(torch.float32)
        over = (lat / b - 1.0).clamp(min=0.0)
        infeasible = self.floor - INFEASIBLE_GAP - 20.0 * over
        return torch.where(lat <= b * (1 + 1e-6), acc, infeasible.to(acc.dtype))

    def config_dict(self) -> dict[str, Any]:
        return {"surrogate": asdict(self.cfg), "grid": self.grid.to_dict(), "space": self.space.to_dict()}

    # -- fitting ----------------------------------------------------------------------------
    def fit(self, dec: Decisions, acc: np.ndarray, steps: int, rng: np.random.Generator,
            focus: int = 0) -> dict[str, Any]:
        """``steps`` Adam steps of minibatch MSE on (dec, 100 x ``acc``; ``acc`` as fractions, as the
        sources give it), warm: the model and its optimizer go on from where the last call left
        them. Also remembers every row."""
        t0 = time.perf_counter()
        pct = 100.0 * np.asarray(acc, dtype=np.float64)
        y = torch.as_tensor(pct).float()
        self.remember(dec, pct)
        if len(y) == 0:
            return {"steps": 0, "rows": 0, "seconds": 0.0}
        self.floor.fill_(float(y.min()))
        first = self._opt is None
        if first:
            self.offset.fill_(float(y.mean()))
            self._opt = Adam(self.mlp.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        x = self._encode(self.space, dec)
        bs = min(self.cfg.batch_size, len(y))
        loss_v = float("nan")
        n_new = min(int(focus), bs // 2, len(y))
        with torch_threads():
            self.train()
            for _ in range(steps):
                idx = rng.integers(0, len(y), size=bs)
                if n_new:  # the newest rows in every batch: where the surrogate was just found wrong
                    idx[:n_new] = np.arange(len(y) - n_new, len(y))
                idx = torch.from_numpy(idx)
                loss = (self.estimate(x[idx]) - y[idx]).pow(2).mean()
                self._opt.zero_grad()
                loss.backward()
                self._opt.step()
                loss_v = float(loss.detach())
            self.eval()
        return {"steps": steps, "rows": len(y), "final_mse": loss_v, "seconds": time.perf_counter() - t0}


def _row_dtype(width: int) -> np.dtype:
    """A structured dtype of ``width`` int64 fields: rows of keys that sort and compare whole
    (lexicographically), for :func:`numpy.searchsorted`."""
    return np.dtype([(f"f{i}", "<i8") for i in range(width)])


def _hash(keys: np.ndarray) -> np.ndarray:
    """One uint64 per row of int64 keys (FNV-1a style over the columns, wrapping); equal rows
    hash alike, and :meth:`Surrogate.recall` confirms every match on the whole row."""
    h = np.full(len(keys), 0xCBF29CE484222325, dtype=np.uint64)
    for j in range(keys.shape[1]):
        h = (h ^ keys[:, j].astype(np.uint64)) * np.uint64(0x100000001B3)
    return h


def _keys(space: SearchSpace, dec: Decisions, width: int) -> np.ndarray:
    k = packed_keys(space, dec)
    if k.shape[1] != width:  # cannot happen for one space (the packing depends on the space only)
        raise ValueError(f"arch keys of width {k.shape[1]}, memory has {width}")
    return np.ascontiguousarray(k)


def make_surrogate(space: SearchSpace, grid: BudgetGrid, cfg: SurrogateConfig) -> Surrogate:
    """A fresh surrogate, its weights from ``cfg.seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return Surrogate(space, grid, cfg)


def holdout_error(model: Surrogate, dec: Decisions, acc: np.ndarray) -> dict[str, float]:
    """Mean absolute error (points) and Kendall tau of the *estimate* (memory ignored) on rows it
    was not fitted on (``acc`` as fractions)."""
    acc_pct = 100.0 * np.asarray(acc, dtype=np.float64)
    with torch.no_grad():
        est = model.estimate(model._encode(model.space, dec)).double().numpy()
    return {"mae_points": float(np.mean(np.abs(est - acc_pct))),
            "kendall_tau": kendall_tau(est, acc_pct) if len(est) > 2 else float("nan")}
